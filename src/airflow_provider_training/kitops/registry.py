"""OCI distribution client for ModelKits: Basic and Bearer-token auth (§4.4), HEAD-skip of existing
blobs, monolithic uploads below the chunk threshold and resumable chunked PATCH uploads at and above
it, retries with back-off on connection errors and 5xx, range-resumed downloads with digest checks.

Written on ``httpx`` rather than the ``oras`` package: oras-py reads a monolithic blob into memory
(``fd.read()``), re-serializes manifests (which changes their digest), cannot resume an interrupted
upload or download, and offers no progress hook.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import queue
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urljoin

import httpx

from airflow_provider_training import __version__
from airflow_provider_training.kitops import mediatypes
from airflow_provider_training.kitops.credentials import Credential

log = logging.getLogger(__name__)

MIB = 1 << 20
DEFAULT_CHUNK = 100 * MIB
MAX_MANIFEST = 4 * MIB  # what the OCI distribution spec asks registries to accept at least
USER_AGENT = f"airflow-provider-training/{__version__}"
# registries kit always sends monolithically (they reject or mishandle chunked uploads)
_MONOLITHIC_HOSTS = re.compile(r"(^ghcr\.io$|\.pkg\.dev$|gcr\.io$|amazonaws\.com(\.cn)?$)")
ProgressFn = Callable[[int], None]
T = TypeVar("T")


class RegistryError(RuntimeError):
    """A registry operation failed; the message names the registry and what to check."""


class AuthenticationError(RegistryError):
    pass


class UnreachableError(RegistryError):
    pass


class NotFoundError(RegistryError, LookupError):
    pass


class DigestMismatchError(RegistryError):
    pass


@dataclass
class RegistryOptions:
    plain_http: bool = False
    tls_verify: bool = True
    ca_cert: str | None = None  # path to a PEM bundle, or PEM text
    timeout: float = 60.0
    retries: int = 6
    backoff: float = 0.5  # first wait; doubles up to backoff_max
    backoff_max: float = 8.0
    chunk_size: int = DEFAULT_CHUNK
    monolithic_below: int = DEFAULT_CHUNK

    @classmethod
    def single_attempt(cls, timeout: float = 10.0) -> RegistryOptions:
        """One try, a short timeout: for reads whose answer is only shown (a dead registry costs
        ``timeout`` at most, not the ~23 s of the default back-off)."""
        return cls(timeout=timeout, retries=0)


def _verify(options: RegistryOptions) -> bool | ssl.SSLContext:
    if not options.tls_verify:
        return False
    if options.ca_cert:
        ctx = ssl.create_default_context()
        if "-----BEGIN" in options.ca_cert:
            ctx.load_verify_locations(cadata=options.ca_cert)
        else:
            ctx.load_verify_locations(cafile=options.ca_cert)
        return ctx
    return True


def _parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    scheme, _, rest = header.strip().partition(" ")
    params = dict(re.findall(r'(\w+)="([^"]*)"', rest))
    return scheme.lower(), params


def _read_range(path: Path, start: int, end: int, progress: ProgressFn | None) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        fh.seek(start)
        remaining = end - start
        while remaining > 0:
            data = fh.read(min(MIB, remaining))
            if not data:
                raise RegistryError(f"{path} is shorter than expected")
            remaining -= len(data)
            if progress:
                progress(len(data))
            yield data


class RegistryClient:
    """One registry host. Use as a context manager or call :meth:`close`."""

    def __init__(
        self, registry: str, credential: Credential | None = None, options: RegistryOptions | None = None
    ) -> None:
        self.registry = registry
        self.options = options or RegistryOptions()
        self.credential = credential if credential and not credential.empty else None
        host = "registry-1.docker.io" if registry == "docker.io" else registry
        self.base = f"{'http' if self.options.plain_http else 'https'}://{host}"
        self._http = httpx.Client(
            verify=_verify(self.options),
            timeout=httpx.Timeout(self.options.timeout, connect=min(10.0, self.options.timeout)),
            headers={"User-Agent": USER_AGENT},
            follow_redirects=True,
        )
        self._tokens: dict[str, str] = {}  # scope -> Authorization header value
        self._basic = False

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- auth ----------------------------------------------------------------------------------
    def _auth_header(self, scope: str) -> str | None:
        if scope in self._tokens:
            return self._tokens[scope]
        if self._basic and self.credential:
            return httpx.BasicAuth(self.credential.username, self.credential.password)._auth_header
        return None

    def _authenticate(self, challenge: str, scope: str) -> None:
        scheme, params = _parse_challenge(challenge)
        if scheme == "basic":
            if not self.credential:
                raise AuthenticationError(
                    f"registry {self.registry} requires a username and password; log in with "
                    f"'airflow-training kit login {self.registry} -u USER --password-stdin' or set them "
                    "on the registry connection"
                )
            self._basic = True
            return
        if scheme != "bearer" or "realm" not in params:
            raise AuthenticationError(f"registry {self.registry} sent an unsupported auth challenge ({scheme})")
        query = {"service": params.get("service", "")}
        wanted = scope or params.get("scope", "")
        if wanted:
            query["scope"] = wanted
        try:
            if self.credential and self.credential.identity_token:
                resp = self._http.post(
                    params["realm"],
                    data={
                        "grant_type": "refresh_token",
                        "refresh_token": self.credential.identity_token,
                        "client_id": "airflow-provider-training",
                        **query,
                    },
                )
            else:
                auth = httpx.BasicAuth(self.credential.username, self.credential.password) if self.credential else None
                resp = self._http.get(params["realm"], params=query, auth=auth)
        except httpx.TransportError as exc:
            raise RegistryError(
                f"cannot reach the token service of {self.registry} ({params['realm']}): {type(exc).__name__}"
            ) from None
        if resp.status_code in (401, 403):
            raise AuthenticationError(
                f"authentication to {self.registry} failed: the token service rejected the credentials "
                f"(HTTP {resp.status_code}); check the username and password or token"
            )
        if resp.status_code != 200:
            raise AuthenticationError(f"token service of {self.registry} answered HTTP {resp.status_code}")
        body = resp.json()
        token = body.get("token") or body.get("access_token")
        if not token:
            raise AuthenticationError(f"token service of {self.registry} returned no token")
        self._tokens[scope] = f"Bearer {token}"

    # -- requests ------------------------------------------------------------------------------
    def _sleep(self, attempt: int) -> None:
        time.sleep(min(self.options.backoff * (2**attempt), self.options.backoff_max))

    def request(
        self,
        method: str,
        url: str,
        *,
        scope: str = "",
        headers: dict[str, str] | None = None,
        content: Callable[[], Any] | None = None,
        params: dict[str, str] | None = None,
        stream: bool = False,
        retry: bool = True,
    ) -> httpx.Response:
        """Send with auth, answering one 401 challenge, and retrying connection errors/5xx."""
        url = urljoin(self.base + "/", url) if not url.startswith("http") else url
        attempt = 0
        answered = False
        while True:
            hdrs = dict(headers or {})
            auth = self._auth_header(scope)
            if auth:
                hdrs["Authorization"] = auth
            try:
                req = self._http.build_request(
                    method, url, headers=hdrs, params=params, content=content() if content else None
                )
                resp = self._http.send(req, stream=stream)
            except httpx.TransportError as exc:
                if not retry or attempt >= self.options.retries:
                    raise UnreachableError(
                        f"cannot reach registry {self.registry} ({method} {httpx.URL(url).path}): "
                        f"{type(exc).__name__}: {exc}; check the host, port and plain-http/TLS settings"
                    ) from None
                log.warning(
                    "registry %s: %s, retrying (%d/%d)",
                    self.registry,
                    type(exc).__name__,
                    attempt + 1,
                    self.options.retries,
                )
                self._sleep(attempt)
                attempt += 1
                continue
            if resp.status_code == 401 and not answered:
                challenge = resp.headers.get("WWW-Authenticate", "")
                resp.close()
                self._authenticate(challenge, scope)
                answered = True
                continue
            if resp.status_code == 401:
                resp.close()
                raise AuthenticationError(
                    f"authentication to {self.registry} failed (HTTP 401 with credentials); check the "
                    "username and password or token"
                )
            if (resp.status_code >= 500 or resp.status_code == 429) and retry and attempt < self.options.retries:
                resp.close()
                log.warning("registry %s answered HTTP %d, retrying", self.registry, resp.status_code)
                self._sleep(attempt)
                attempt += 1
                continue
            return resp

    def _fail(self, resp: httpx.Response, what: str) -> RegistryError:
        try:
            resp.read()
            errors = resp.json().get("errors") or []
            detail = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors)
        except (ValueError, AttributeError, httpx.HTTPError):
            detail = ""
        msg = f"{what} on {self.registry} failed: HTTP {resp.status_code}" + (f" ({detail})" if detail else "")
        if resp.status_code == 403:
            return AuthenticationError(msg + "; the account lacks permission for this repository")
        if resp.status_code == 404:
            return NotFoundError(msg)
        return RegistryError(msg)

    # -- API -----------------------------------------------------------------------------------
    def ping(self) -> None:
        """``GET /v2/`` with credentials: verifies reachability and, when given, the credentials."""
        resp = self.request("GET", "/v2/")
        if resp.status_code != 200:
            raise self._fail(resp, "ping")
        if self.credential and not self._basic and not self._tokens:
            # the registry never challenged us; nothing more to verify
            return

    def blob_exists(self, repo: str, digest: str) -> bool:
        resp = self.request("HEAD", f"/v2/{repo}/blobs/{digest}", scope=_scope(repo, push=False))
        if resp.status_code == 200:
            return True
        if resp.status_code == 404:
            return False
        raise self._fail(resp, f"HEAD blob {digest}")

    def push_blob(self, repo: str, digest: str, size: int, path: Path, progress: ProgressFn | None = None) -> int:
        """Upload ``path`` unless the registry already has it; returns the bytes uploaded."""
        if self.blob_exists(repo, digest):
            return 0
        scope = _scope(repo, push=True)
        host = self.registry.split(":")[0]
        chunked = size >= self.options.monolithic_below and not _MONOLITHIC_HOSTS.search(host)
        for attempt in range(self.options.retries + 1):
            location = self._start_upload(repo, scope)
            try:
                if chunked:
                    self._upload_chunked(repo, location, digest, size, path, scope, progress)
                else:
                    self._upload_monolithic(location, digest, size, path, scope, progress)
                return size
            except _RestartUpload as exc:
                if attempt >= self.options.retries:
                    raise RegistryError(f"upload of {digest} to {self.registry}/{repo} kept failing: {exc}") from None
                log.warning("registry %s: restarting upload of %s (%s)", self.registry, digest[:19], exc)
                self._sleep(attempt)
        raise AssertionError("unreachable")

    def push_bytes(self, repo: str, data: bytes) -> str:
        """Upload a small blob (config, signature payload) held in memory; returns its digest.
        One request where the registry takes a monolithic ``POST ?digest=`` (distribution does),
        else POST then PUT; re-uploading an existing blob is harmless, so there is no HEAD first."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        scope = _scope(repo, push=True)
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(len(data))}
        resp = self.request(
            "POST",
            _with_digest(urljoin(self.base + "/", f"/v2/{repo}/blobs/uploads/"), digest),
            scope=scope,
            headers=headers,
            content=lambda: data,
        )
        if resp.status_code == 201:
            return digest
        if resp.status_code != 202 or "Location" not in resp.headers:
            raise self._fail(resp, f"upload of {digest}")
        location = urljoin(self.base + "/", resp.headers["Location"])
        resp = self.request("PUT", _with_digest(location, digest), scope=scope, headers=headers, content=lambda: data)
        if resp.status_code != 201:
            raise self._fail(resp, f"upload of {digest}")
        return digest

    def push_stream(self, repo: str, produce: Callable[[Any], T]) -> tuple[T, int]:
        """Upload a blob whose digest is known only at its end (``kit pack --push``): ``produce``
        writes the bytes into the file-like object it is given and returns a result with a
        ``digest`` attribute; the bytes stream through a bounded queue into one PATCH and are never
        stored. On a failed attempt the blob is produced again from the start."""
        scope = _scope(repo, push=True)
        for attempt in range(self.options.retries + 1):
            location = self._start_upload(repo, scope)
            pipe = _Pipe()
            outcome: dict[str, Any] = {}

            def run(pipe: _Pipe = pipe, outcome: dict[str, Any] = outcome) -> None:
                try:
                    outcome["result"] = produce(pipe)
                    pipe.close()
                except BaseException as exc:  # reported to the uploading thread
                    outcome["error"] = exc
                    pipe.fail(exc)

            worker = threading.Thread(target=run, name="kit-pack-push", daemon=True)
            worker.start()
            try:
                resp = self.request(
                    "PATCH",
                    location,
                    scope=scope,
                    retry=False,
                    headers={"Content-Type": "application/octet-stream"},
                    content=pipe.chunks,
                )
            except _Aborted:
                pipe.abort()
                worker.join()
                raise outcome["error"] from None
            except UnreachableError as exc:
                pipe.abort()
                worker.join()
                if "error" in outcome:
                    raise outcome["error"] from None
                if attempt >= self.options.retries:
                    raise
                log.warning("registry %s: restarting a streamed upload (%s)", self.registry, exc)
                self._sleep(attempt)
                continue
            finally:
                pipe.abort()
            worker.join()
            if "error" in outcome:
                raise outcome["error"]
            if resp.status_code >= 500 and attempt < self.options.retries:
                self._sleep(attempt)
                continue
            if resp.status_code != 202:
                raise self._fail(resp, "streamed upload")
            location = urljoin(self.base + "/", resp.headers.get("Location", location))
            result = outcome["result"]
            digest = str(result.digest)
            done = self.request("PUT", _with_digest(location, digest), scope=scope, headers={"Content-Length": "0"})
            if done.status_code != 201:
                raise self._fail(done, f"completing the streamed upload of {digest}")
            return result, pipe.sent
        raise RegistryError(f"streamed upload to {self.registry}/{repo} kept failing")

    def _start_upload(self, repo: str, scope: str) -> str:
        resp = self.request("POST", f"/v2/{repo}/blobs/uploads/", scope=scope, headers={"Content-Length": "0"})
        if resp.status_code != 202 or "Location" not in resp.headers:
            raise self._fail(resp, f"starting an upload to {repo}")
        return urljoin(self.base + "/", resp.headers["Location"])

    def _upload_monolithic(
        self, location: str, digest: str, size: int, path: Path, scope: str, progress: ProgressFn | None
    ) -> None:
        try:
            resp = self.request(
                "PUT",
                _with_digest(location, digest),
                scope=scope,
                retry=False,
                headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)},
                content=lambda: _read_range(path, 0, size, progress),
            )
        except RegistryError as exc:
            raise _RestartUpload(str(exc)) from None
        if resp.status_code >= 500:
            raise _RestartUpload(f"HTTP {resp.status_code}")
        if resp.status_code != 201:
            raise self._fail(resp, f"upload of {digest}")

    def _upload_status(self, location: str, scope: str) -> tuple[str, int]:
        """Where an interrupted upload stands: (location, next offset)."""
        resp = self.request("GET", location, scope=scope)
        if resp.status_code == 204:
            rng = resp.headers.get("Range", "")
            m = re.match(r"^(?:bytes=)?0-(\d+)$", rng)
            offset = int(m[1]) + 1 if m else 0
            return urljoin(self.base + "/", resp.headers.get("Location", location)), offset
        raise _RestartUpload(f"upload session lost (HTTP {resp.status_code})")

    def _upload_chunked(
        self,
        repo: str,
        location: str,
        digest: str,
        size: int,
        path: Path,
        scope: str,
        progress: ProgressFn | None,
    ) -> None:
        offset = 0
        failures = 0
        while offset < size:
            end = min(offset + self.options.chunk_size, size)
            start = offset
            try:
                resp = self.request(
                    "PATCH",
                    location,
                    scope=scope,
                    retry=False,
                    headers={
                        "Content-Type": "application/octet-stream",
                        "Content-Length": str(end - start),
                        "Content-Range": f"{start}-{end - 1}",
                    },
                    content=lambda s=start, e=end: _read_range(path, s, e, progress),  # type: ignore[misc]
                )
            except UnreachableError:
                resp = None
            if resp is not None and resp.status_code == 202:
                location = urljoin(self.base + "/", resp.headers.get("Location", location))
                m = re.match(r"^(?:bytes=)?0-(\d+)$", resp.headers.get("Range", ""))
                offset = int(m[1]) + 1 if m else end
                failures = 0
                continue
            if resp is not None and resp.status_code in (404,):
                raise _RestartUpload("upload session unknown to the registry")
            if resp is not None and resp.status_code < 500 and resp.status_code != 416:
                raise self._fail(resp, f"chunk upload of {digest}")
            # connection lost, 5xx or range mismatch: ask the registry where it stands and resume
            if failures >= self.options.retries:
                raise _RestartUpload("chunk upload kept failing")
            self._sleep(failures)
            failures += 1
            location, offset = self._resume_point(location, scope, failures)
            log.info("registry %s: resuming upload of %s at byte %d", self.registry, digest[:19], offset)
        resp = self.request("PUT", _with_digest(location, digest), scope=scope, headers={"Content-Length": "0"})
        if resp.status_code != 201:
            raise self._fail(resp, f"completing the upload of {digest}")

    def _resume_point(self, location: str, scope: str, failures: int) -> tuple[str, int]:
        while True:
            try:
                return self._upload_status(location, scope)
            except RegistryError:
                if failures >= self.options.retries:
                    raise _RestartUpload("registry unreachable while resuming") from None
                self._sleep(failures)
                failures += 1

    def put_manifest(
        self, repo: str, tag_or_digest: str, manifest: bytes, media_type: str = mediatypes.MANIFEST
    ) -> str:
        resp = self.request(
            "PUT",
            f"/v2/{repo}/manifests/{tag_or_digest}",
            scope=_scope(repo, push=True),
            headers={"Content-Type": media_type},
            content=lambda: manifest,
        )
        if resp.status_code not in (200, 201):
            raise self._fail(resp, f"pushing manifest {repo}:{tag_or_digest}")
        return resp.headers.get("Docker-Content-Digest") or "sha256:" + hashlib.sha256(manifest).hexdigest()

    def get_manifest(
        self, repo: str, target: str, limit: int = MAX_MANIFEST, accept: str | None = None
    ) -> tuple[bytes, str]:
        """Manifest (or index) bytes and their digest (checked against ``target`` when it is a
        digest); more than ``limit`` bytes is refused unread (a hostile registry cannot exhaust memory).
        ``accept``: the media types asked for (default: OCI manifests and indexes)."""
        resp = self.request(
            "GET",
            f"/v2/{repo}/manifests/{target}",
            scope=_scope(repo, push=False),
            headers={"Accept": accept or f"{mediatypes.MANIFEST}, {mediatypes.INDEX}"},
            stream=True,
        )
        try:
            if resp.status_code != 200:
                raise self._fail(resp, f"fetching manifest {repo}:{target}")
            too_big = RegistryError(
                f"manifest {repo}:{target} on {self.registry} is larger than {limit} bytes; refusing to read it"
            )
            if int(resp.headers.get("Content-Length") or 0) > limit:
                raise too_big
            data = bytearray()
            for chunk in resp.iter_bytes(MIB):
                data += chunk
                if len(data) > limit:
                    raise too_big
        finally:
            resp.close()
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if target.startswith("sha256:") and digest != target:
            raise DigestMismatchError(f"manifest {repo}@{target} from {self.registry} has digest {digest}")
        return bytes(data), digest

    def manifest_exists(self, repo: str, digest: str) -> bool:
        resp = self.request(
            "HEAD",
            f"/v2/{repo}/manifests/{digest}",
            scope=_scope(repo, push=False),
            headers={"Accept": f"{mediatypes.MANIFEST}, {mediatypes.INDEX}"},
        )
        if resp.status_code == 200:
            return True
        if resp.status_code == 404:
            return False
        raise self._fail(resp, f"HEAD manifest {digest}")

    def get_blob_bytes(self, repo: str, digest: str, limit: int = 16 * MIB) -> bytes:
        resp = self.request("GET", f"/v2/{repo}/blobs/{digest}", scope=_scope(repo, push=False))
        if resp.status_code != 200:
            raise self._fail(resp, f"fetching blob {digest}")
        data = resp.content[: limit + 1]
        if len(data) > limit:
            raise RegistryError(f"blob {digest} is larger than {limit} bytes")
        if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            raise DigestMismatchError(f"blob {digest} from {self.registry}/{repo} is corrupted (digest mismatch)")
        return data

    @contextlib.contextmanager
    def open_blob_stream(self, repo: str, digest: str) -> Iterator[_StreamReader]:
        """A blob as a read-only stream (nothing stored); used by ``diff`` to list a layer's files."""
        resp = self.request("GET", f"/v2/{repo}/blobs/{digest}", scope=_scope(repo, push=False), stream=True)
        try:
            if resp.status_code != 200:
                raise self._fail(resp, f"fetching blob {digest}")
            yield _StreamReader(resp.iter_bytes(MIB))
        finally:
            resp.close()

    def fetch_blob(self, repo: str, digest: str, size: int, partial: Path, progress: ProgressFn | None = None) -> None:
        """Download into ``partial`` (resuming from its length) and verify the digest."""
        scope = _scope(repo, push=False)
        for attempt in range(self.options.retries + 1):
            have = partial.stat().st_size if partial.exists() else 0
            if have > size:
                partial.unlink()
                have = 0
            headers = {"Range": f"bytes={have}-"} if 0 < have < size else {}
            if have < size or size == 0:
                try:
                    resp = self.request(
                        "GET",
                        f"/v2/{repo}/blobs/{digest}",
                        scope=scope,
                        headers=headers,
                        stream=True,
                        retry=attempt < self.options.retries,
                    )
                    try:
                        if resp.status_code == 200 and have:
                            have = 0  # the registry ignored the range
                        elif resp.status_code not in (200, 206):
                            raise self._fail(resp, f"fetching blob {digest}")
                        with open(partial, "r+b" if have else "wb") as fh:
                            fh.seek(have)
                            fh.truncate()
                            for chunk in resp.iter_bytes(MIB):
                                fh.write(chunk)
                                if progress:
                                    progress(len(chunk))
                    finally:
                        resp.close()
                except (httpx.TransportError, UnreachableError):
                    if attempt >= self.options.retries:
                        raise RegistryError(f"download of {digest} from {self.registry} kept failing") from None
                    self._sleep(attempt)
                    continue
            if _sha256_file(partial) != digest:
                partial.unlink(missing_ok=True)
                raise DigestMismatchError(
                    f"blob {digest} downloaded from {self.registry}/{repo} does not match its digest "
                    "(corrupted in the registry or in transit); nothing was stored"
                )
            return


class _RestartUpload(Exception):
    pass


class _StreamReader:
    """``read(n)`` over an iterator of byte chunks."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buf = b""

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._buf) < n:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buf += chunk
        if n < 0:
            data, self._buf = self._buf, b""
        else:
            data, self._buf = self._buf[:n], self._buf[n:]
        return data


class _Aborted(Exception):
    pass


class _Pipe:
    """A file-like sink for one producer thread whose bytes an HTTP body generator drains: chunks of
    up to 1 MiB, at most four in flight, so memory stays bounded whatever the blob size."""

    def __init__(self, chunk: int = MIB, depth: int = 4) -> None:
        self._queue: queue.Queue[bytes | BaseException | None] = queue.Queue(depth)
        self._buf = bytearray()
        self._chunk = chunk
        self._aborted = threading.Event()
        self.sent = 0

    def write(self, data: bytes | memoryview) -> int:
        if self._aborted.is_set():
            raise _Aborted("upload aborted")
        self._buf += data
        if len(self._buf) >= self._chunk:
            self._put(bytes(self._buf))
            self._buf.clear()
        return len(data)

    def _put(self, item: bytes | BaseException | None) -> None:
        while not self._aborted.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        raise _Aborted("upload aborted")

    def close(self) -> None:
        if self._buf:
            self._put(bytes(self._buf))
            self._buf.clear()
        self._put(None)

    def fail(self, exc: BaseException) -> None:
        with contextlib.suppress(_Aborted):
            self._put(exc)

    def abort(self) -> None:
        self._aborted.set()

    def chunks(self) -> Iterator[bytes]:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise _Aborted("the blob could not be produced") from item
            self.sent += len(item)
            yield item


def _with_digest(location: str, digest: str) -> str:
    # httpx's params= would replace the upload URL's own query (_state), so append by hand
    return location + ("&" if "?" in location else "?") + "digest=" + digest.replace(":", "%3A")


def _scope(repo: str, push: bool) -> str:
    return f"repository:{repo}:{'pull,push' if push else 'pull'}"


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(MIB):
            h.update(chunk)
    return "sha256:" + h.hexdigest()
