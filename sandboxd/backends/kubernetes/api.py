"""The API server, spoken directly: REST calls and the WebSocket upgrade, on aiohttp.

Why not the ``kubernetes`` package: it is synchronous (every call a thread
hop, every stream a thread) and its exec stream has known trouble with large
stdin writes; ``kubernetes_asyncio`` negotiates ``v4.channel.k8s.io``, which
cannot close stdin. sandboxd needs a handful of endpoints (Pods, claims,
exec, attach) and one event loop, so this module reads a kubeconfig (or the
in-cluster service account) and speaks JSON and WebSocket itself.

Errors become the one error tree here, in ``KubeError.domain``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import ssl
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from sandboxd.contract.errors import (
    AlreadyExists,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    SandboxdError,
    SandboxUnavailable,
)

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: A REST call that takes longer than this means the API server is unwell.
REQUEST_TIMEOUT_S = 30.0
#: The WebSocket subprotocol with stdin half-close; nothing older is spoken.
V5 = "v5.channel.k8s.io"
#: A channel message read from the API server is at most this long.
MAX_MESSAGE = 16 << 20


@dataclass(frozen=True)
class Access:
    """How to reach one API server: its address, TLS, credentials, namespace."""

    server: str
    ssl: ssl.SSLContext | bool
    token: str = ""
    token_file: str = ""
    namespace: str = "default"

    def headers(self) -> dict[str, str]:
        token = self.token
        if self.token_file:
            # Bound service-account tokens rotate: read at every use (cheap).
            token = Path(self.token_file).read_text().strip()
        return {"Authorization": f"Bearer {token}"} if token else {}


def load_access(kubeconfig: str = "") -> Access:
    """From ``kubeconfig`` (or $KUBECONFIG), else the in-cluster service account."""
    path = kubeconfig or os.environ.get("KUBECONFIG", "")
    if path:
        return _from_kubeconfig(Path(path.split(os.pathsep)[0]))
    if (SERVICE_ACCOUNT / "token").is_file() and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return _in_cluster()
    raise SandboxUnavailable(
        "the kubernetes backend found no cluster: set SANDBOXD_KUBECONFIG (or KUBECONFIG), "
        "or run sandboxd in a Pod with a service account"
    )


def _in_cluster() -> Access:
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    host = f"[{host}]" if ":" in host else host
    context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))
    namespace_file = SERVICE_ACCOUNT / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else "default"
    return Access(
        server=f"https://{host}:{port}",
        ssl=context,
        token_file=str(SERVICE_ACCOUNT / "token"),
        namespace=namespace,
    )


def _named(entries: Sequence[Mapping[str, Any]], name: str, kind: str) -> Mapping[str, Any]:
    for entry in entries or ():
        if entry.get("name") == name:
            return entry.get(kind) or {}
    raise SandboxUnavailable(f"kubeconfig: no {kind} named {name!r}")


def _from_kubeconfig(path: Path) -> Access:
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SandboxUnavailable(f"cannot read kubeconfig {path}: {exc}") from exc
    context = _named(config.get("contexts", []), config.get("current-context", ""), "context")
    cluster = _named(config.get("clusters", []), context.get("cluster", ""), "cluster")
    user = _named(config.get("users", []), context.get("user", ""), "user")
    if "exec" in user or "auth-provider" in user:
        raise SandboxUnavailable(
            f"kubeconfig {path}: credential plugins are not supported; use a client "
            "certificate or a token"
        )
    server = str(cluster.get("server", "")).rstrip("/")
    if server.startswith("http://"):
        tls: ssl.SSLContext | bool = False
    else:
        tls = _tls(path.parent, cluster, user)
    return Access(
        server=server,
        ssl=tls,
        token=str(user.get("token", "")),
        token_file=str(user.get("tokenFile", "")),
        namespace=str(context.get("namespace") or "default"),
    )


def _material(base: Path, entry: Mapping[str, Any], key: str) -> bytes | None:
    data = entry.get(f"{key}-data")
    if data:
        return base64.b64decode(data)
    name = entry.get(key)
    if name:
        return (base / str(name)).read_bytes()
    return None


def _tls(base: Path, cluster: Mapping[str, Any], user: Mapping[str, Any]) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if cluster.get("insecure-skip-tls-verify"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    authority = _material(base, cluster, "certificate-authority")
    if authority:
        context.load_verify_locations(cadata=authority.decode())
    certificate = _material(base, user, "client-certificate")
    key = _material(base, user, "client-key")
    if certificate and key:
        # ssl loads a key pair from files only: a private folder, gone at once.
        with tempfile.TemporaryDirectory(prefix="sandboxd-kube-") as folder:
            cert_path, key_path = Path(folder, "cert"), Path(folder, "key")
            cert_path.write_bytes(certificate)
            key_path.touch(mode=0o600)
            key_path.write_bytes(key)
            context.load_cert_chain(cert_path, key_path)
    return context


class KubeError(Exception):
    """An API server answer other than success."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    def domain(self, doing: str) -> SandboxdError:
        """The error a caller of sandboxd sees for it."""
        text = f"{doing}: the Kubernetes API server answered {self.reason or self.status}: "
        text += self.message
        if self.status == 403:
            return PermissionDenied(
                text + " (sandboxd's service account needs this permission; see "
                "deploy/kubernetes/role.yaml)"
            )
        if self.status == 404:
            return NotFound(text)
        if self.status == 409:
            return AlreadyExists(text)
        if self.status == 422:
            return InvalidArgument(text)
        if self.status == 429:
            return ResourceExhausted(text)
        return SandboxUnavailable(text)


class KubeApi:
    """REST and WebSocket calls to one API server, in one namespace."""

    def __init__(self, access: Access, namespace: str = "") -> None:
        self.access = access
        self.namespace = namespace or access.namespace
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self.access.ssl, limit=256),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            )
        return self._session

    def path(self, kind: str, name: str = "", subresource: str = "") -> str:
        path = f"/api/v1/namespaces/{self.namespace}/{kind}"
        if name:
            path += f"/{name}"
        if subresource:
            path += f"/{subresource}"
        return path

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = REQUEST_TIMEOUT_S,
    ) -> dict[str, Any]:
        headers = {"Accept": "application/json", **self.access.headers()}
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        try:
            async with self.session.request(
                method,
                self.access.server + path,
                params=params,
                data=data,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                text = await response.text()
                status = response.status
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise SandboxUnavailable(
                f"the Kubernetes API server at {self.access.server} is unreachable: {exc!r}"
            ) from exc
        try:
            answer = json.loads(text) if text else {}
        except ValueError:
            answer = {"message": text[:500]}
        if status >= 300:
            raise KubeError(status, str(answer.get("reason", "")), str(answer.get("message", "")))
        return answer if isinstance(answer, dict) else {}

    async def websocket(
        self, path: str, params: Sequence[tuple[str, str]]
    ) -> aiohttp.ClientWebSocketResponse:
        """Upgrade to a ``v5.channel.k8s.io`` stream (exec or attach)."""
        try:
            socket = await self.session.ws_connect(
                self.access.server + path,
                params=list(params),
                protocols=(V5,),
                headers=self.access.headers(),
                max_msg_size=MAX_MESSAGE,
                autoping=True,
                heartbeat=None,
                compress=0,
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5),
            )
        except aiohttp.WSServerHandshakeError as exc:
            raise KubeError(exc.status, "", exc.message or "upgrade refused") from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise SandboxUnavailable(
                f"the Kubernetes API server at {self.access.server} is unreachable: {exc!r}"
            ) from exc
        if socket.protocol != V5:
            await socket.close()
            # v4 cannot close stdin and older ones differ in framing:
            # refused rather than risk a corrupted channel.
            raise SandboxUnavailable(
                f"the API server streams {socket.protocol or 'no subprotocol'}, not {V5}; "
                "the kubernetes backend needs Kubernetes 1.30 or newer"
            )
        return socket

    async def close(self) -> None:
        if self._session is not None:
            with contextlib.suppress(Exception):
                await self._session.close()
            self._session = None
