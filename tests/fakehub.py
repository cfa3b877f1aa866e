"""A real HTTP server on 127.0.0.1 that answers the Hub routes huggingface_hub 2.4.0 uses.

Routes (read from huggingface_hub's hf_api.py, file_download.py and utils/_http.py):

* GET  /api/models/{repo} and /api/models/{repo}/revision/{rev}: model info JSON (`id`,
  `sha`, `siblings`, `gated`); errors carry the Hub's `X-Error-Code` (RepoNotFound,
  RevisionNotFound) that `hf_raise_for_status` turns into typed errors.
* HEAD/GET /{repo}/resolve/{rev}/{file}: the file, with `X-Repo-Commit`, `ETag` and
  `Content-Length` (hf_hub_download refuses a response without the first two), HTTP Range
  (206 + Content-Range) for safetensors headers; gated repos answer 401/403 `GatedRepo`,
  missing files 404 `EntryNotFound`.

Files may be "virtual": a real prefix (a safetensors header) and a claimed total size, the
rest read as zeros, so a 13 GB checkpoint's headers can be served from memory. The server
stops itself after `lifetime_s` even if a test forgets to.

A repo can also misbehave, as a hostile mirror named by HF_ENDPOINT could (`Misbehave`):
answer any revision at all, name its commit or ETag with a path, send a gzip body that
expands far beyond its size, or drip its answer a byte at a time.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


@dataclass
class Blob:
    prefix: bytes
    size: int  # >= len(prefix); bytes past the prefix are zeros

    @classmethod
    def of(cls, data: bytes) -> Blob:
        return cls(data, len(data))

    def read(self, start: int, end: int) -> bytes:  # end exclusive
        head = self.prefix[start:end]
        return head + bytes(max(0, end - max(start, len(self.prefix))))


@dataclass
class Misbehave:
    any_revision: bool = False       # every revision resolves (even `../../x`)
    api_sha: str | None = None       # the model info's `sha`
    commit_header: str | None = None  # X-Repo-Commit of file answers
    etag: str | None = None          # ETag of file answers (sent as given)
    gzip: dict[str, bytes] = field(default_factory=dict)  # file -> gzip body sent as is
    drip_s: float = 0.0              # seconds between each byte of every answer
    stall: bool = False              # take each request and never answer (until stopped)


@dataclass
class Repo:
    repo_id: str
    files: dict[str, Blob]
    sha: str
    refs: dict[str, str] = field(default_factory=dict)
    gated: bool = False
    allowed_token: str | None = None
    drop_mid_body: set[str] = field(default_factory=set)  # files whose GET dies half-way
    misbehave: Misbehave = field(default_factory=Misbehave)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case


_RESOLVE = re.compile(r"^/(?P<repo>.+?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_API = re.compile(r"^/api/models/(?P<repo>.+?)(?:/revision/(?P<rev>[^/]+))?$")
_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class FakeHub:
    def __init__(self, lifetime_s: float = 600.0) -> None:
        # lifetime_s: a safety net for a test that forgets stop(), never a test's clock (a
        # loaded CI machine may take minutes over a test that takes seconds here)
        self.repos: dict[str, Repo] = {}
        self.seen: list[Seen] = []
        self.stopped = threading.Event()  # set by stop(): a stalled handler lets go
        self.lifetime_s = lifetime_s
        self._server: ThreadingHTTPServer | None = None
        self._timer: threading.Timer | None = None

    def add(self, repo_id: str, files: dict[str, bytes | Blob], *, tags: tuple[str, ...] = (),
            gated: bool = False, allowed_token: str | None = None,
            drop_mid_body: set[str] | None = None,
            misbehave: Misbehave | None = None) -> Repo:
        sha = hashlib.sha1(repo_id.encode()).hexdigest()
        repo = Repo(repo_id, {k: v if isinstance(v, Blob) else Blob.of(v)
                              for k, v in files.items()}, sha,
                    refs={"main": sha, **{t: sha for t in tags}}, gated=gated,
                    allowed_token=allowed_token, drop_mid_body=drop_mid_body or set(),
                    misbehave=misbehave or Misbehave())
        self.repos[repo_id] = repo
        return repo

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # a client that hangs up mid-answer (what kvplan does to a misbehaving server) is
        # not an error worth a traceback on the test's stderr
        self._server.handle_error = lambda request, client_address: None  # type: ignore
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        self._timer = threading.Timer(self.lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        self.stopped.set()
        if self._timer is not None:
            self._timer.cancel()
        if server is not None:
            server.shutdown()
            server.server_close()

    def paths(self, method: str | None = None) -> list[str]:
        return [s.path for s in self.seen if method is None or s.method == method]


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    this: Seen
    drip_s = 0.0
    timeout = 5  # a stuck client cannot hold a handler thread for long
    protocol_version = "HTTP/1.0"  # one request per connection: a stopped server is gone

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(body=False)

    # --- routing ---------------------------------------------------------------------
    def _answer(self, body: bool) -> None:
        path = urlsplit(self.path).path
        self.this = Seen(self.command, path, {k.lower(): v for k, v in self.headers.items()})
        self.fake.seen.append(self.this)
        if m := _API.match(path):
            return self._model_info(unquote(m["repo"]), m["rev"] and unquote(m["rev"]), body)
        if m := _RESOLVE.match(path):
            return self._resolve(unquote(m["repo"]), unquote(m["rev"]), unquote(m["file"]),
                                 body)
        self._error(404, body, None, "Not found")

    def _model_info(self, repo_id: str, rev: str | None, body: bool) -> None:
        repo = self.fake.repos.get(repo_id)
        if repo is None:
            return self._error(404, body, "RepoNotFound", "Repository not found")
        self.drip_s = repo.misbehave.drip_s
        if repo.misbehave.stall:
            return self._stall()
        if repo.misbehave.any_revision and rev is not None:
            repo.refs.setdefault(rev, repo.sha)
        if rev is not None and rev not in repo.refs and rev != repo.sha:
            return self._error(404, body, "RevisionNotFound", f"Invalid rev id: {rev}")
        info = {"_id": repo.sha[:24], "id": repo_id, "modelId": repo_id, "sha": repo.sha,
                "private": False, "gated": "manual" if repo.gated else False,
                "disabled": False, "tags": [], "lastModified": "2024-07-23T00:00:00.000Z",
                "siblings": [{"rfilename": name} for name in sorted(repo.files)]}
        if repo.misbehave.api_sha is not None:
            info["sha"] = repo.misbehave.api_sha
        self._send(200, json.dumps(info).encode(), body, {"Content-Type": "application/json"})

    def _resolve(self, repo_id: str, rev: str, filename: str, body: bool) -> None:
        repo = self.fake.repos.get(repo_id)
        if repo is None:
            return self._error(404, body, "RepoNotFound", "Repository not found")
        bad = repo.misbehave
        self.drip_s = bad.drip_s
        if bad.stall:
            return self._stall()
        if bad.any_revision:
            repo.refs.setdefault(rev, repo.sha)
        if repo.gated:
            auth = self.headers.get("Authorization")
            if auth is None:
                return self._error(401, body, "GatedRepo",
                                   f"Access to model {repo_id} is restricted. You must have "
                                   "access to it and be authenticated to access it. Please "
                                   "log in.")
            if auth != f"Bearer {repo.allowed_token}":
                return self._error(403, body, "GatedRepo",
                                   f"Access to model {repo_id} is restricted and you are not "
                                   "in the authorized list.")
        commit = repo.refs.get(rev, rev if rev == repo.sha else None)
        if commit is None:
            return self._error(404, body, "RevisionNotFound", f"Invalid rev id: {rev}")
        blob = repo.files.get(filename)
        if blob is None:
            return self._error(404, body, "EntryNotFound", f"{filename} does not exist",
                               {"X-Repo-Commit": commit})
        headers = {"X-Repo-Commit": bad.commit_header or commit, "Accept-Ranges": "bytes",
                   "ETag": bad.etag or f'"{hashlib.sha256(blob.prefix).hexdigest()}"',
                   "Content-Type": "application/octet-stream"}
        if filename in bad.gzip:
            headers["Content-Encoding"] = "gzip"
            return self._send(200, bad.gzip[filename], body, headers)
        if filename in repo.drop_mid_body and body:
            return self._drop(blob, headers)
        start, end = 0, blob.size
        status = 200
        if (rng := self.headers.get("Range")) and (m := _RANGE.match(rng.strip())):
            start = int(m[1])
            end = min(blob.size, int(m[2]) + 1) if m[2] else blob.size
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{blob.size}"
        if not body:
            return self._send(status, b"", False, headers, length=end - start)
        self._send(status, blob.read(start, end), True, headers)

    # --- replies ---------------------------------------------------------------------
    def _send(self, status: int, data: bytes, body: bool, headers: dict[str, str],
              length: int | None = None) -> None:
        if self.drip_s:
            return self._drip(status, data if body else b"", headers)
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data) if length is None else length))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _error(self, status: int, body: bool, code: str | None, message: str,
               extra: dict[str, str] | None = None) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message,
                   **(extra or {})}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, json.dumps({"error": message}).encode(), body, headers)

    def _drip(self, status: int, data: bytes, headers: dict[str, str]) -> None:
        """The whole answer, status line first, one byte every drip_s seconds."""
        lines = [f"HTTP/1.0 {status} OK", *(f"{k}: {v}" for k, v in headers.items()),
                 f"Content-Length: {len(data)}", "", ""]
        raw = "\r\n".join(lines).encode() + data
        try:
            for i in range(len(raw)):
                self.wfile.write(raw[i:i + 1])
                self.wfile.flush()
                time.sleep(self.drip_s)
        except OSError:  # the client gave up: what a test wants to see
            pass
        self.close_connection = True

    def _stall(self) -> None:
        """Read the request, answer nothing until the hub is stopped, then hang up."""
        self.fake.stopped.wait()
        self.close_connection = True

    def _drop(self, blob: Blob, headers: dict[str, str]) -> None:
        """The network fails mid-download: the first GET promises the whole file and sends
        half of it; every later GET (the client's resume with a Range) is cut before any
        response. Then the connection is closed."""
        # this request's own record is skipped by identity: handler threads append to `seen`
        # in whatever order they run, so it need not be the last one
        first = not any(s.method == "GET" and s.headers.get("range") is None
                        for s in list(self.fake.seen) if s is not self.this
                        and "/resolve/" in s.path)
        if first and self.headers.get("Range") is None:
            self.send_response(200)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(blob.size))
            self.end_headers()
            self.wfile.write(blob.read(0, blob.size // 2))
            self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
