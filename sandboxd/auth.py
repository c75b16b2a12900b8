"""Who may call: bearer tokens on TCP, each optionally scoped to an id prefix.

The unix socket is protected by its 0600 mode, so its peers get full scope.
A TCP call must carry ``authorization: Bearer <token>``; the token is compared
in constant time against every configured token (so neither its value nor
its position leaks through timing) and is never logged. A scoped token only
reaches instances whose id starts with its prefix: anything else is
PERMISSION_DENIED and listing shows only its own instances.

Token file format, one token a line (``#`` starts a comment)::

    s3cr3t-admin-token
    s3cr3t-team-a-token   team-a-
"""

from __future__ import annotations

import contextvars
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sandboxd.errors import InvalidArgument, PermissionDenied, Unauthenticated

MIN_TOKEN_LENGTH = 16


@dataclass(frozen=True)
class Scope:
    """The instance ids a caller may touch: those starting with ``prefix``."""

    prefix: str = ""

    def allows(self, instance_id: str) -> bool:
        return instance_id.startswith(self.prefix)

    def check(self, instance_id: str) -> None:
        if not self.allows(instance_id):
            raise PermissionDenied(
                f"this token may only use instance ids starting with {self.prefix!r}"
            )


FULL_SCOPE = Scope("")

_current: contextvars.ContextVar[Scope] = contextvars.ContextVar(
    "sandboxd_scope", default=FULL_SCOPE
)


def current_scope() -> Scope:
    """The scope of the call being served (full scope outside any call)."""
    return _current.get()


def enter_scope(scope: Scope) -> contextvars.Token[Scope]:
    return _current.set(scope)


def leave_scope(token: contextvars.Token[Scope]) -> None:
    _current.reset(token)


@dataclass(frozen=True)
class _Token:
    secret: bytes
    scope: Scope


class Authenticator:
    def __init__(self, tokens: Sequence[tuple[str, str]]) -> None:
        self._tokens = tuple(_Token(secret.encode(), Scope(prefix)) for secret, prefix in tokens)

    @property
    def enabled(self) -> bool:
        return bool(self._tokens)

    def scope_for(self, peer: str, metadata: Iterable[tuple[str, str | bytes]]) -> Scope:
        if peer.startswith("unix:"):
            return FULL_SCOPE
        header = next((str(v) for k, v in metadata if k.lower() == "authorization"), "")
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not presented:
            raise Unauthenticated("this listener needs an `authorization: Bearer <token>` header")
        candidate = presented.strip().encode()
        match: Scope | None = None
        for token in self._tokens:
            # Compare against every token so timing does not tell which matched.
            if hmac.compare_digest(candidate, token.secret) and match is None:
                match = token.scope
        if match is None:
            raise Unauthenticated("the bearer token is not valid")
        return match


def load_tokens(path: Path | None, single: str | None) -> list[tuple[str, str]]:
    """Tokens from a file (``token [prefix]`` lines) and/or one full-scope token."""
    tokens: list[tuple[str, str]] = []
    if single:
        tokens.append((single, ""))
    if path is not None:
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise InvalidArgument(f"cannot read tokens file {path}: {exc.strerror}") from None
        for number, line in enumerate(lines, 1):
            parts = line.split("#", 1)[0].split()
            if not parts:
                continue
            if len(parts) > 2:
                raise InvalidArgument(f"{path}:{number}: expected `token [instance-prefix]`")
            tokens.append((parts[0], parts[1] if len(parts) == 2 else ""))
    for secret, _ in tokens:
        if len(secret) < MIN_TOKEN_LENGTH:
            raise InvalidArgument(f"tokens must be at least {MIN_TOKEN_LENGTH} characters long")
    return tokens
