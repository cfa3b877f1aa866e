"""Models from the Hugging Face Hub: `hf:org/name[@revision]` -> config.json -> ModelSpec.

Everything goes through the real `huggingface_hub` client and its cache, so HF_TOKEN,
HF_ENDPOINT, HF_HUB_OFFLINE and HF_HOME mean what they mean to every other Hub tool.
`huggingface_hub` is imported only inside the functions that talk to the Hub: a library model,
a local file and `kvplan --help` never load it (tests/test_hub.py proves it).

When the Hub cannot be reached, one line on stderr says so and the cached config.json is used;
with nothing cached, UnavailableError (exit 3). Each answer the Hub can give (gated repo, no
such repo, no such revision, no config.json) has its own message.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
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

CONFIG_FILE = "config.json"
DEFAULT_REVISION = "main"  # the client's default branch (huggingface_hub.constants)
_COMMIT = re.compile(r"[0-9a-f]{40}")
# Hub repo ids: `name` or `org/name`, letters, digits, `-`, `_`, `.`; no `--` or `..`.
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*(?:/[A-Za-z0-9][\w.-]*)?")


@record
class HubRef:
    """A model repo on the Hub and the revision asked for (None: the default branch)."""

    repo: str
    revision: str | None = None

    @property
    def rev(self) -> str:
        return self.revision or DEFAULT_REVISION

    @property
    def name(self) -> str:
        """The spec name: the repo's last part, lower case (`Llama-3.1-8B` -> `llama-3.1-8b`)."""
        return self.repo.rsplit("/", 1)[-1].lower()

    def __str__(self) -> str:
        return f"hf:{self.repo}@{self.rev}"


@record
class HubConfig:
    """A config.json as fetched (or found in the cache): its bytes and where they came from."""

    ref: HubRef
    commit: str | None  # the commit sha the file belongs to
    data: bytes
    offline: bool  # True when the Hub could not be asked (HF_HUB_OFFLINE, or unreachable)

    @property
    def sha256(self) -> str:
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


def parse_hub_ref(model: str) -> HubRef:
    """`hf:org/name@rev`, `hf:name`, `org/name@rev`, `org/name` -> HubRef, or BadInputError."""
    ref = _hub_ref(model)
    if ref is None:
        raise BadInputError(f"{model!r} is not a Hugging Face Hub model id",
                            "write hf:org/name, optionally with @branch, @tag or "
                            "@commit-sha, e.g. hf:meta-llama/Llama-3.1-8B@main")
    return ref


def bare_hub_ref(model: str) -> HubRef | None:
    """An unprefixed `org/name[@rev]` -> HubRef; None for anything else (a bare `gpt2` is a
    library name, `./x/y` a path)."""
    return None if model.startswith("hf:") else _hub_ref(model)


def _hub_ref(model: str) -> HubRef | None:
    prefixed = model.startswith("hf:")
    body = model[3:] if prefixed else model
    repo, at, revision = body.partition("@")
    valid = (_REPO_ID.fullmatch(repo) is not None and "--" not in repo and ".." not in repo
             and not repo.endswith(".git") and (prefixed or "/" in repo)
             and (not at or (revision != "" and not revision.isspace())))
    return HubRef(repo, revision or None) if valid else None


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
    repo at that revision (one API call: it tells a missing repo from a missing revision, and
    fails fast when the Hub is unreachable, where the download call would retry for
    about 25 s),
    then the file is downloaded into the cache. Offline or unreachable: the cached copy."""
    hf = _client()
    endpoint = hf.constants.ENDPOINT
    if _COMMIT.fullmatch(ref.rev):
        cached = hf.try_to_load_from_cache(ref.repo, CONFIG_FILE, revision=ref.rev)
        if isinstance(cached, str):
            return _read_cached(ref, Path(cached), offline=False)
    if hf.constants.is_offline_mode():
        return _from_cache(hf, ref, "offline mode is on (HF_HUB_OFFLINE)")
    try:
        with progress(f"Fetching {CONFIG_FILE} of {ref} from {endpoint}"):
            info = hf.HfApi().model_info(ref.repo, revision=ref.rev,
                                         timeout=hf.constants.HF_HUB_ETAG_TIMEOUT)
    except Exception as exc:
        if _is_unreachable(hf, exc):
            return _from_cache(hf, ref, f"cannot reach the Hugging Face Hub at {endpoint} "
                                        f"({_reason(exc)})")
        raise hub_error(hf, exc, ref, CONFIG_FILE) from exc
    siblings = [s.rfilename for s in (info.siblings or [])]
    if info.siblings is not None and CONFIG_FILE not in siblings:
        raise _no_config(ref, siblings)
    try:
        with progress(f"Downloading {CONFIG_FILE} of {ref}"):
            path = hf.hf_hub_download(ref.repo, CONFIG_FILE, revision=ref.rev)
    except Exception as exc:
        if _is_unreachable(hf, exc) or isinstance(exc, hf.LocalEntryNotFoundError):
            raise UnavailableError(
                f"lost the connection to the Hugging Face Hub at {endpoint} while downloading "
                f"{CONFIG_FILE} of {ref} ({_reason(exc)}); nothing was written to the cache",
                "try again; the download starts from scratch") from None
        raise hub_error(hf, exc, ref, CONFIG_FILE) from exc
    fetched = _read_cached(ref, Path(path), offline=False)
    return fetched if fetched.commit else HubConfig(ref, info.sha, fetched.data, False)


def safetensors_tensors(fetched: HubConfig) -> dict[str, list[TensorEntry]] | None:
    """The tensors of each safetensors file of the repo at the config's commit, read from the
    file headers with HTTP range requests (the client's `get_safetensors_metadata`; sharded
    repos through model.safetensors.index.json). None when the repo has no safetensors
    weights or the Hub cannot be reached (the caller then estimates)."""
    hf = _client()
    revision = fetched.commit or fetched.ref.rev
    try:
        with progress(f"Reading safetensors headers of {fetched.ref}"):
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
    import json

    from kvplan.sources.weights import INDEX_FILE

    hf = _client()
    revision = fetched.commit or fetched.ref.rev
    try:
        path = hf.hf_hub_download(fetched.ref.repo, INDEX_FILE, revision=revision)
        data = json.loads(Path(path).read_bytes())
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
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UnavailableError(f"cannot read the cached {CONFIG_FILE} of {ref} at {path}: "
                               f"{exc.strerror or exc}") from None
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
