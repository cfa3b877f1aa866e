"""Models from the Hugging Face Hub: `hf:org/name[@revision]` -> config.json -> ModelSpec.

Everything goes through the real `huggingface_hub` client and its cache, so HF_TOKEN,
HF_ENDPOINT, HF_HUB_OFFLINE and HF_HOME mean what they mean to every other Hub tool.
`huggingface_hub` is imported only inside the functions that talk to the Hub (a library model,
a local file and `kvplan --help` never load it; tests/sources/test_hub.py proves it).
Unreachable Hub: one line on stderr and the cached config.json, else UnavailableError (exit 3);
each answer the Hub can give (gated repo, no such repo or revision, no config.json) has its
own message.
kvplan decides every path it writes and bounds everything it reads, whatever the server answers
(`hubref._REVISION`, `_download`, `_guard_client`, MAX_FILE_BYTES, MAX_ANSWER_BYTES,
HUB_TIME_LIMIT_S); each check and why: docs/architecture.md, "Notes on single modules".
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kvplan.core.errors import (
    BadInputError,
    KvplanError,
    SpecError,
    UnavailableError,
    UnknownModelError,
)
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec, Source

# the reference alone, read without this module (kvplan.sources.hubref); re-exported
from kvplan.sources.hubref import DEFAULT_REVISION as DEFAULT_REVISION
from kvplan.sources.hubref import HubRef as HubRef
from kvplan.sources.hubref import bare_hub_ref as bare_hub_ref
from kvplan.sources.hubref import check_revision as check_revision
from kvplan.sources.hubref import parse_hub_ref as parse_hub_ref

CONFIG_FILE = "config.json"
_COMMIT = re.compile(r"[0-9a-f]{40}")
# What the client turns into file names (ETag -> blobs/<etag>, X-Repo-Commit ->
# snapshots/<sha>): a hash-like token, never a path.
_SERVER_NAME = re.compile(r'(?:W/)?"?([A-Za-z0-9_-]{1,128})"?')
HUB_TIME_LIMIT_S = 60.0         # one Hub operation (a config, the safetensors headers)
MAX_ANSWER_BYTES = 32 * 2**20   # one answer's body, decoded (safetensors headers: <= 25 MB)


@record
class HubConfig:
    """A config.json as fetched (or found in the cache): its bytes and where they came from."""

    ref: HubRef
    commit: str | None  # the commit sha the file belongs to
    data: bytes
    offline: bool  # True when the Hub could not be asked (HF_HUB_OFFLINE, or unreachable)

    @property
    def sha256(self) -> str:
        import hashlib  # here: a repo id read from a launch line or log needs no hashing

        return hashlib.sha256(self.data).hexdigest()

    @property
    def label(self) -> str:
        """How error messages name the file."""
        return f"{self.ref} {CONFIG_FILE}"

    def source(self) -> Source:
        return Source(repo=self.ref.repo, revision=self.commit or self.ref.rev,
                      file=CONFIG_FILE, sha256=self.sha256)


@record
class TensorEntry:
    """One tensor of a safetensors header, as the Hub's metadata API reports it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    data_offsets: tuple[int, int]


def load_hub_spec(ref: HubRef, assume_standard_attention: bool = False) -> ModelSpec:
    """Fetch the repo's config.json (or use the cached copy) and read it into a ModelSpec."""
    return spec_from_hub_config(fetch_config(ref), assume_standard_attention)


def spec_from_hub_config(fetched: HubConfig, assume_standard_attention: bool = False
                         ) -> ModelSpec:
    from kvplan.sources.hfconfig import parse_json, spec_from_config

    raw = parse_json(fetched.data, fetched.label)
    return spec_from_config(raw, fetched.label, name=fetched.ref.name,
                            source_info=fetched.source(),
                            assume_standard_attention=assume_standard_attention)


def fetch_config(ref: HubRef) -> HubConfig:
    """config.json of `ref`, through the client's cache.

    A commit sha already in the cache needs no network. Otherwise the Hub is asked for the
    repo at that revision (one API call: it tells a missing repo from a missing revision,
    names the commit, and fails fast when the Hub is unreachable), then kvplan downloads the
    file at that commit into the cache (`_download`). Offline or unreachable: the cached
    copy."""
    hf = _client()
    endpoint = hf.constants.ENDPOINT
    if _COMMIT.fullmatch(ref.rev):
        cached = hf.try_to_load_from_cache(ref.repo, CONFIG_FILE, revision=ref.rev)
        if isinstance(cached, str):
            return _read_cached(ref, Path(cached), offline=False)
    if hf.constants.is_offline_mode():
        return _from_cache(hf, ref, "offline mode is on (HF_HUB_OFFLINE)")
    with time_limit(f"{CONFIG_FILE} of {ref}"):
        try:
            with progress(f"Fetching {CONFIG_FILE} of {ref} from {endpoint}"):
                info = hf.HfApi().model_info(ref.repo, revision=ref.rev,
                                             timeout=hf.constants.HF_HUB_ETAG_TIMEOUT)
        except Exception as exc:
            if _is_unreachable(hf, exc):
                return _from_cache(hf, ref, f"cannot reach the Hugging Face Hub at "
                                            f"{endpoint} ({_reason(exc)})")
            raise hub_error(hf, exc, ref, CONFIG_FILE) from exc
        commit = info.sha
        if not isinstance(commit, str) or not _COMMIT.fullmatch(commit):
            raise BadInputError(f"the Hugging Face Hub at {endpoint} named the commit of {ref} "
                                f"{_shown(commit)}, which is not a 40-digit commit sha",
                                "check HF_ENDPOINT: it should be a Hub or a faithful mirror")
        siblings = [s.rfilename for s in (info.siblings or [])]
        if info.siblings is not None and CONFIG_FILE not in siblings:
            raise _no_config(ref, siblings)
        with progress(f"Downloading {CONFIG_FILE} of {ref}"):
            data = _download(hf, ref, CONFIG_FILE, commit)
    _store(hf, ref, commit, CONFIG_FILE, data)
    return HubConfig(ref, commit, data, False)


def _download(hf: _Client, ref: HubRef, filename: str, commit: str,
              max_bytes: int | None = None) -> bytes:
    """One file of the repo at `commit`, into memory: at most max_bytes (MAX_FILE_BYTES),
    checked against Content-Length before and while the body arrives (decoded). Nothing is
    written here; the caller stores it under names kvplan chooses."""
    from kvplan.sources.reader import MAX_FILE_BYTES

    limit = MAX_FILE_BYTES if max_bytes is None else max_bytes
    endpoint = hf.constants.ENDPOINT
    url = hf.hf_hub_url(ref.repo, filename, revision=commit)
    too_large = BadInputError(
        f"{filename} of {ref} from {endpoint} is larger than {limit // 2**20} MiB, too large "
        f"to be one", "check HF_ENDPOINT: it should be a Hub or a faithful mirror")
    try:
        with hf.get_session().stream("GET", url, headers=hf.build_hf_headers(),
                                     follow_redirects=True) as response:
            hf.hf_raise_for_status(response)
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and len(declared) < 20 and int(declared) > limit:
                raise too_large
            chunks: list[bytes] = []
            got = 0
            for chunk in response.iter_bytes():
                got += len(chunk)
                if got > limit:
                    raise too_large
                chunks.append(chunk)
    except KvplanError:
        raise
    except Exception as exc:
        if _is_unreachable(hf, exc):
            raise UnavailableError(
                f"lost the connection to the Hugging Face Hub at {endpoint} while downloading "
                f"{filename} of {ref} ({_reason(exc)}); nothing was written to the cache",
                "try again; the download starts from scratch") from None
        raise hub_error(hf, exc, ref, filename) from exc
    return b"".join(chunks)


def _store(hf: _Client, ref: HubRef, commit: str, filename: str, data: bytes) -> None:
    """Put a downloaded file where the client's cache keeps it (so HF_HUB_OFFLINE and
    try_to_load_from_cache find it): `models--org--name/snapshots/<commit>/<filename>` and
    `refs/<revision>` holding the commit. Every part of each path is kvplan's: the repo id
    and revision were checked (kvplan.sources.hubref), the commit is 40 hex digits, the
    file name a constant. A cache that cannot be written is not an error: the answer is
    already in hand."""
    root = Path(hf.constants.HF_HUB_CACHE) / ("models--" + ref.repo.replace("/", "--"))
    try:
        _write_file(root / "snapshots" / commit / filename, data)
        if ref.rev != commit:
            _write_file(root / "refs" / ref.rev, commit.encode())
    except OSError as exc:
        notice(f"could not keep {filename} of {ref} in the cache {root}: "
               f"{exc.strerror or exc}")


def _write_file(path: Path, data: bytes) -> None:
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".incomplete", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def safetensors_tensors(fetched: HubConfig) -> dict[str, list[TensorEntry]] | None:
    """The tensors of each safetensors file of the repo at the config's commit, read from the
    file headers with HTTP range requests (the client's `get_safetensors_metadata`; sharded
    repos through model.safetensors.index.json). None when the repo has no safetensors
    weights or the Hub cannot be reached (the caller then estimates)."""
    hf = _client()
    revision = fetched.commit or fetched.ref.rev
    try:
        with time_limit(f"the safetensors headers of {fetched.ref}"), \
                progress(f"Reading safetensors headers of {fetched.ref}"):
            meta = hf.HfApi().get_safetensors_metadata(fetched.ref.repo, revision=revision)
    except hf.NotASafetensorsRepoError:
        return None
    except hf.SafetensorsParsingError as exc:
        # "Failed to parse safetensors header for 'F' (repo ..., revision ...): WHY. Please ..."
        text = _first_line(exc)
        m = re.search(r"for '([^']+)' \(.*?\): (.+?)\.(?: |$)", text)
        where, why = (m[1], m[2]) if m else ("safetensors", text)
        raise SpecError(f"{fetched.ref} {where}", None, f"has a corrupt safetensors header: "
                        f"{why}", "the repo's weight files are damaged; try another revision"
                        ) from None
    except Exception as exc:
        if _is_unreachable(hf, exc):
            notice(f"could not read the safetensors headers of {fetched.ref} "
                   f"({_reason(exc)}); weights are estimated from {CONFIG_FILE}")
            return None
        raise hub_error(hf, exc, fetched.ref, "safetensors weights") from exc
    return {
        filename: [TensorEntry(name, str(t.dtype), tuple(t.shape),
                               (t.data_offsets[0], t.data_offsets[1]))
                   for name, t in file_meta.tensors.items()]
        for filename, file_meta in sorted(meta.files_metadata.items())
    }


def safetensors_index_total(fetched: HubConfig) -> int | None:
    """`metadata.total_size` of the repo's model.safetensors.index.json at the config's
    commit (the bytes of every tensor in its shards, as the checkpoint's writer summed them):
    what is left to record when the shard headers themselves cannot be read. None when the
    repo has no index, it cannot be fetched, or it states no whole-number total."""
    from kvplan.sources.reader import parse_json
    from kvplan.sources.weights import INDEX_FILE

    hf = _client()
    if fetched.commit is None:  # offline, from a cache without its commit: nothing to add
        return None
    try:
        with time_limit(f"{INDEX_FILE} of {fetched.ref}"):
            raw = _download(hf, fetched.ref, INDEX_FILE, fetched.commit)
        data = parse_json(raw, f"{fetched.ref} {INDEX_FILE}")
    except Exception:  # no index, the Hub unreachable, a damaged file: nothing to add
        return None
    meta = data.get("metadata") if isinstance(data, dict) else None
    total = meta.get("total_size") if isinstance(meta, dict) else None
    if isinstance(total, bool) or not isinstance(total, int) or total <= 0:
        return None
    return total


# --- the client, its errors, and what we tell the user -------------------------------------

class _Client:
    """The parts of huggingface_hub kvplan uses, imported on first use."""

    def __init__(self) -> None:
        try:
            import huggingface_hub as hf
        except ImportError:
            raise BadInputError(
                "models from the Hugging Face Hub need the huggingface_hub package, a "
                "dependency of kvplan that is missing here",
                "pip install huggingface_hub (or reinstall kvplan; or pass a local "
                "config.json)") from None
        from huggingface_hub import constants, errors

        self.constants = constants
        self.HfApi = hf.HfApi
        self.hf_hub_download = hf.hf_hub_download
        self.hf_hub_url = hf.hf_hub_url
        self.get_session = hf.get_session
        from huggingface_hub.utils import build_hf_headers, hf_raise_for_status

        self.build_hf_headers = build_hf_headers
        self.hf_raise_for_status = hf_raise_for_status
        self.try_to_load_from_cache = hf.try_to_load_from_cache
        self.get_token = hf.get_token
        self.HfHubHTTPError = errors.HfHubHTTPError
        self.GatedRepoError = errors.GatedRepoError
        self.RepositoryNotFoundError = errors.RepositoryNotFoundError
        self.RevisionNotFoundError = errors.RevisionNotFoundError
        self.EntryNotFoundError = getattr(errors, "RemoteEntryNotFoundError",
                                          getattr(errors, "EntryNotFoundError", LookupError))
        self.LocalEntryNotFoundError = errors.LocalEntryNotFoundError
        self.OfflineModeIsEnabled = errors.OfflineModeIsEnabled
        self.NotASafetensorsRepoError = errors.NotASafetensorsRepoError
        self.SafetensorsParsingError = errors.SafetensorsParsingError
        # The HTTP library the client runs on (httpx in 1.x, httpx2 in 2.x) is already loaded.
        self.transport_errors: tuple[type[BaseException], ...] = tuple(
            sys.modules[name].TransportError for name in ("httpx2", "httpx")
            if name in sys.modules and hasattr(sys.modules[name], "TransportError"))
        # The client's own progress bars would duplicate ours, and its retry warnings would
        # bury the one message kvplan prints; the user's HF_HUB_* settings win.
        if self.constants.HF_HUB_DISABLE_PROGRESS_BARS is None:
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
        if not os.environ.get("HF_HUB_VERBOSITY"):
            from huggingface_hub.utils import logging as hf_logging

            hf_logging.set_verbosity_error()
        _install_guard()


def _client() -> _Client:
    return _Client()


def _is_unreachable(hf: _Client, exc: BaseException) -> bool:
    """The Hub did not answer (no network, refused, timed out, offline mode), or answered
    that it is down (5xx): cases where a cached copy is as good as it gets."""
    if isinstance(exc, hf.HfHubHTTPError):
        response = getattr(exc, "response", None)
        return response is not None and response.status_code >= 500
    return isinstance(exc, (ConnectionError, TimeoutError, *hf.transport_errors))


def hub_error(hf: _Client, exc: BaseException, ref: HubRef, what: str) -> KvplanError:
    """The Hub's answer -> one clear KvplanError (the caller chains the original)."""
    endpoint = hf.constants.ENDPOINT
    page = f"{endpoint}/{ref.repo}"
    if isinstance(exc, hf.GatedRepoError):
        who = ("the Hugging Face token in use has not been granted access" if hf.get_token()
               else "no Hugging Face token is set")
        return BadInputError(f"{ref.repo} is a gated repo and {who}, so its {what} cannot be read",
                             f"accept the model's terms at {page}, then set HF_TOKEN to a read "
                             "token of that account (or run `hf auth login`)")
    if isinstance(exc, hf.RevisionNotFoundError):
        return UnknownModelError(f"{ref.repo} has no revision {ref.rev!r} on {endpoint}",
                                 f"use a branch, a tag or a full commit sha that exists, e.g. "
                                 f"hf:{ref.repo}@main; see {page}/tree/main")
    if isinstance(exc, hf.RepositoryNotFoundError):
        private = ("" if hf.get_token() else "; if it is private, set HF_TOKEN to a token "
                   "that can read it")
        return UnknownModelError(f"no model repo {ref.repo!r} on {endpoint}",
                                 f"check the spelling (org/name){private}; `kvplan models` lists "
                                 "the models that work offline")
    if isinstance(exc, hf.EntryNotFoundError):
        return _no_config(ref, []) if what == CONFIG_FILE else UnknownModelError(
            f"{ref} has no {what}")
    if isinstance(exc, hf.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", "?")
        if status == 401:
            return BadInputError(f"the Hugging Face Hub rejected the token (HTTP 401) for {ref}",
                                 "check HF_TOKEN, or unset it for public repos")
        return UnavailableError(f"the Hugging Face Hub answered HTTP {status} for the {what} "
                                f"of {ref}: {_first_line(exc)}")
    if isinstance(exc, KvplanError):
        return exc
    return UnavailableError(f"reading the {what} of {ref} from {endpoint} failed: "
                            f"{_reason(exc)}")


def _no_config(ref: HubRef, files: list[str]) -> KvplanError:
    listing = (", ".join(files[:6]) + (", ..." if len(files) > 6 else "")) if files else ""
    return UnknownModelError(
        f"{ref} has no {CONFIG_FILE}" + (f" (its files: {listing})" if listing else ""),
        "kvplan reads transformers-style repos; for GGUF-only or adapter repos, pass the base "
        "model, or write a YAML spec (docs/model-schema.md)")


def _from_cache(hf: _Client, ref: HubRef, why: str) -> HubConfig:
    try:
        path = hf.hf_hub_download(ref.repo, CONFIG_FILE, revision=ref.rev, local_files_only=True)
    except (hf.LocalEntryNotFoundError, hf.EntryNotFoundError, OSError, ValueError):
        raise UnavailableError(
            f"{why}, and there is no cached {CONFIG_FILE} of {ref} in "
            f"{hf.constants.HF_HUB_CACHE}",
            "connect to the network (or set HF_ENDPOINT to a reachable mirror) and run it once "
            "to fill the cache; library models and local config.json files work offline") from None
    fetched = _read_cached(ref, Path(path), offline=True)
    commit = f" (commit {fetched.commit[:12]})" if fetched.commit else ""
    notice(f"{why}; using the cached {CONFIG_FILE} of {ref}{commit}")
    return fetched


def _read_cached(ref: HubRef, path: Path, offline: bool) -> HubConfig:
    from kvplan.sources.reader import read_bytes

    data = read_bytes(str(path), f"the cached {CONFIG_FILE} of {ref}")
    # The client's cache keeps each commit's files under snapshots/<commit sha>/.
    commit = path.parent.name if _COMMIT.fullmatch(path.parent.name) else None
    return HubConfig(ref, commit, data, offline)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)


def _reason(exc: BaseException) -> str:
    text = _first_line(exc)
    text = re.sub(r"^\[Errno -?\d+\]\s*", "", text)
    return (text[:117] + "...") if len(text) > 120 else text


def notice(message: str) -> None:
    """One line on stderr for something the user should know but that is not an error."""
    print(f"kvplan: notice: {message}", file=sys.stderr)


@contextlib.contextmanager
def progress(message: str) -> Iterator[None]:
    """A spinner on stderr while the Hub is asked, only when stderr is a terminal."""
    stream: Any = sys.stderr
    if not (hasattr(stream, "isatty") and stream.isatty()):
        yield
        return
    from rich.console import Console

    with Console(file=stream, highlight=False).status(message):
        yield


# --- the guard between the client and the network -------------------------------------------

class _Deadline:
    """The time limit of the Hub operation under way: when it passes, every socket opened
    for it is shut, so a server that drips its answer (headers included, where the client's
    per-read timeouts never fire) cannot hold kvplan."""

    def __init__(self, what: str, seconds: float) -> None:
        self.what = what
        self.seconds = seconds
        self.ends = time.monotonic() + seconds
        self.expired = False
        self._sockets: list[Any] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def left(self) -> float:
        return self.ends - time.monotonic()

    def watch(self, sock: Any) -> None:
        with self._lock:
            self._sockets.append(sock)
            expired = self.expired
        if expired:
            _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shut(sock)

    def error(self) -> UnavailableError:
        return UnavailableError(
            f"the Hugging Face Hub did not finish answering for {self.what} within "
            f"{self.seconds:g} s; nothing was written to the cache",
            "try again; check HF_ENDPOINT and the network")

    def check(self) -> None:
        if self.expired or self.left() <= 0:
            self.expired = True
            raise self.error()


def _passed(deadline: _Deadline | None, exc: BaseException, capped: bool) -> bool:
    """Whether `exc`, raised while a request was under way, means the deadline passed: the
    timer shut the sockets (expired), or the client's own timeout fired where it was the
    deadline's time left (capped). The second does not wait for the timer's thread, which a
    loaded machine may run late: the same slow server always gets the same message."""
    if deadline is None:
        return False
    if deadline.expired:
        return True
    import httpx2 as httpx

    if capped and isinstance(exc, httpx.TimeoutException):
        deadline.expired = True
        return True
    return False


def _shut(sock: Any) -> None:
    import socket

    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


_DEADLINE: _Deadline | None = None  # process-wide: the client fetches shards in threads


@contextlib.contextmanager
def time_limit(what: str) -> Iterator[None]:
    """Bound one Hub operation to HUB_TIME_LIMIT_S (the outermost one counts)."""
    global _DEADLINE
    if _DEADLINE is not None:
        yield
        return
    deadline = _Deadline(what, HUB_TIME_LIMIT_S)
    _DEADLINE = deadline
    deadline._timer.start()
    try:
        yield
    finally:
        deadline._timer.cancel()
        _DEADLINE = None


def _install_guard() -> None:
    """Route every request the client makes through `_guard_client` (once per process; the
    user's own client factory, if any, is wrapped, not replaced)."""
    from huggingface_hub.utils import _http

    current = getattr(_http, "_GLOBAL_CLIENT_FACTORY", None)
    if current is None or getattr(current, "kvplan_guard", False):
        return

    def factory() -> Any:
        return _guard_client(current())

    factory.kvplan_guard = True  # type: ignore[attr-defined]
    _http.set_client_factory(factory)


def _guard_client(client: Any) -> Any:
    """The client's httpx client with each transport wrapped in the guard."""
    guard = _guard_class()
    client._transport = guard(client._transport)
    for pattern, transport in list(client._mounts.items()):
        if transport is not None:
            client._mounts[pattern] = guard(transport)
    return client


def _guard_class() -> Any:
    import httpx2 as httpx  # the client's HTTP library (huggingface_hub 2.x)

    class GuardedStream(httpx.SyncByteStream):
        """A body read with the decoded-size limit and the deadline checked per chunk."""

        def __init__(self, raw: Any, decoder: Any, where: str, capped: bool) -> None:
            self.raw = raw
            self.decoder = decoder
            self.where = where
            self.capped = capped  # its timeouts are the deadline's: see _passed

        def __iter__(self) -> Iterator[bytes]:
            got = 0
            deadline = _DEADLINE
            try:
                for chunk in self.raw:
                    if deadline is not None:
                        deadline.check()
                    parts = [self._decode(chunk)] if self.decoder is not None else [chunk]
                    for data in parts:
                        got += len(data)
                        if got > MAX_ANSWER_BYTES:
                            raise _too_large(self.where)
                        if data:
                            yield data
                if self.decoder is not None:
                    tail = self.decoder.flush()
                    if got + len(tail) > MAX_ANSWER_BYTES:
                        raise _too_large(self.where)
                    if tail:
                        yield tail
            except KvplanError:
                raise
            except Exception as exc:
                if _passed(deadline, exc, self.capped):
                    raise deadline.error() from None  # type: ignore[union-attr]
                raise

        def _decode(self, chunk: bytes) -> bytes:
            import zlib

            try:  # never more than the limit + 1 out of one chunk, however well it packs
                out = self.decoder.decompress(chunk, MAX_ANSWER_BYTES + 1)
            except zlib.error as exc:
                raise BadInputError(f"{self.where}: the answer's compressed body is damaged "
                                    f"({exc})") from None
            if self.decoder.unconsumed_tail:
                raise _too_large(self.where)
            return bytes(out)

        def close(self) -> None:
            self.raw.close()

    class Guard(httpx.BaseTransport):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def handle_request(self, request: Any) -> Any:
            deadline = _DEADLINE
            where = f"{request.method} {request.url.copy_with(query=None)}"
            request.headers["Accept-Encoding"] = "gzip, deflate"  # what the guard decodes
            capped = False
            if deadline is not None:
                deadline.check()
                left = max(deadline.left(), 0.001)
                timeouts = {"connect": None, "read": None, "write": None, "pool": None,
                            **dict(request.extensions.get("timeout") or {})}
                capped = any(not isinstance(v, (int, float)) or v >= left
                             for v in timeouts.values())
                request.extensions["timeout"] = {
                    k: min(v, left) if isinstance(v, (int, float)) else left
                    for k, v in timeouts.items()}
                request.extensions["kvplan_capped"] = capped
                outer = request.extensions.get("trace")

                def trace(name: str, info: dict[str, Any]) -> None:
                    if name.endswith("connect_tcp.complete") or name.endswith("start_tls."
                                                                               "complete"):
                        stream = info.get("return_value")
                        sock = stream.get_extra_info("socket") if stream is not None else None
                        if sock is not None:
                            deadline.watch(sock)
                    if outer is not None:
                        outer(name, info)

                request.extensions["trace"] = trace
            try:
                response = self.inner.handle_request(request)
            except Exception as exc:
                if _passed(deadline, exc, capped):
                    raise deadline.error() from None  # type: ignore[union-attr]
                raise
            try:
                return self._checked(request, response, where)
            except BaseException:
                response.close()
                raise

        def _checked(self, request: Any, response: Any, where: str) -> Any:
            import zlib

            headers = response.headers
            for name in ("ETag", "X-Linked-Etag", "X-Repo-Commit"):
                value = headers.get(name)
                if value is not None and not _SERVER_NAME.fullmatch(value.strip()):
                    raise BadInputError(
                        f"{where}: the server's {name} {_shown(value)} is not a plain hash; "
                        "kvplan does not let a server name files in its cache",
                        "check HF_ENDPOINT: it should be a Hub or a faithful mirror")
            encoding = headers.get("Content-Encoding", "identity").strip().lower()
            length = headers.get("Content-Length", "")
            if (request.method != "HEAD" and length.isdigit()
                    and (len(length) > 15 or int(length) > MAX_ANSWER_BYTES)):
                raise _too_large(where)
            if encoding in ("", "identity"):
                decoder = None
            elif encoding in ("gzip", "x-gzip", "deflate"):
                decoder = zlib.decompressobj(16 + zlib.MAX_WBITS if "gzip" in encoding
                                             else zlib.MAX_WBITS)
            else:
                raise BadInputError(f"{where}: the server answered in the {encoding!r} "
                                    "encoding, which kvplan does not read",
                                    "check HF_ENDPOINT: it should be a Hub or a faithful "
                                    "mirror")
            if decoder is not None:
                raw = [(k, v) for k, v in headers.raw
                       if k.lower() not in (b"content-encoding", b"content-length")]
            else:
                raw = headers.raw
            return httpx.Response(response.status_code, headers=raw,
                                  stream=GuardedStream(response.stream, decoder, where,
                                                       bool(request.extensions.get(
                                                           "kvplan_capped"))),
                                  extensions=response.extensions, request=request)

        def close(self) -> None:
            self.inner.close()

    return Guard


def _too_large(where: str) -> BadInputError:
    return BadInputError(f"{where}: the answer is larger than {MAX_ANSWER_BYTES // 2**20} MiB, "
                         "more than any file kvplan reads from the Hub",
                         "check HF_ENDPOINT: it should be a Hub or a faithful mirror")
