"""The daemon's bearer tokens: loaded from settings, handed to the transports.

Token file format, one token a line (``#`` starts a comment)::

    s3cr3t-admin-token
    s3cr3t-team-a-token   team-a-*
    s3cr3t-acme-token     tenant=acme
    s3cr3t-acme-ci-token  tenant=acme  scope=ci-*,release

After the token come optional fields: ``tenant=NAME`` (the token sees and
touches only that tenant's sandboxes, and creates its sandboxes in it) and
``scope=RULES`` (comma-separated: an exact instance id, or a prefix ending
with a separator and ``*``); a field without ``=`` is ``scope=`` (the earlier
``token [instance-prefix]`` lines read as before, as long as the prefix ends
with a separator). A token with neither is the operator's: every sandbox
(``sandboxd.service.scope``). How a call presents its token is the
transports' (``sandboxd.transports.auth``).
"""

from __future__ import annotations

import re
from pathlib import Path

from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.network import MODES, NetworkMode
from sandboxd.daemon.settings import Settings
from sandboxd.service.scope import FULL_SCOPE, IdRule, Scope
from sandboxd.transports.auth import Authenticator

MIN_TOKEN_LENGTH = 16
TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")


def parse_scope(fields: list[str]) -> Scope:
    """A token line's fields after the token: ``tenant=NAME``, ``scope=RULES`` or bare RULES."""
    tenant: str | None = None
    rules: list[IdRule] = []
    widest: NetworkMode | None = None
    for field in fields:
        key, equals, value = field.partition("=")
        if not equals:
            key, value = "scope", field
        if key == "tenant":
            if tenant is not None or not TENANT_NAME.fullmatch(value):
                raise InvalidArgument(
                    f"tenant={value!r}: one tenant a token, 1-63 characters from [a-z0-9_.-]"
                )
            tenant = value
        elif key == "scope":
            rules += [IdRule.parse(rule) for rule in value.split(",") if rule != "*"]
        elif key == "network":
            if value not in MODES:
                raise InvalidArgument(f"network={value!r}: use one of {', '.join(MODES)}")
            widest = value
        else:
            raise InvalidArgument(
                f"unknown field {key!r}: expected tenant=NAME, scope=RULES or network=MODE"
            )
    if widest is None:
        # The operator's token (no fence) may set any mode; a fenced one up to
        # allow rules: the bridge (full) only when its line says network=full.
        widest = "allow" if rules or tenant is not None else "full"
    return Scope(tuple(rules), tenant, widest)


def load_tokens(path: Path | None, single: str | None) -> list[tuple[str, Scope]]:
    """Tokens from a file (``token [scope] [tenant=NAME]`` lines) and/or one full-scope token."""
    tokens: list[tuple[str, Scope]] = []
    if single:
        tokens.append((single, FULL_SCOPE))
    if path is not None:
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise InvalidArgument(f"cannot read tokens file {path}: {exc.strerror}") from None
        for number, line in enumerate(lines, 1):
            parts = line.split("#", 1)[0].split()
            if not parts:
                continue
            try:
                tokens.append((parts[0], parse_scope(parts[1:])))
            except InvalidArgument as exc:
                raise InvalidArgument(
                    f"{path}:{number}: {exc} "
                    "(lines are `token [scope=RULES] [tenant=NAME] [network=MODE]`)"
                ) from None
    for secret, _ in tokens:
        if len(secret) < MIN_TOKEN_LENGTH:
            raise InvalidArgument(f"tokens must be at least {MIN_TOKEN_LENGTH} characters long")
    return tokens


def make_authenticator(settings: Settings) -> Authenticator:
    secret = settings.token.get_secret_value() if settings.token else None
    authenticator = Authenticator(load_tokens(settings.tokens_file, secret))
    if (settings.tcp or settings.http) and not authenticator.enabled:
        listener = "a TCP" if settings.tcp else "an HTTP"
        raise InvalidArgument(
            f"{listener} listener needs bearer tokens: set SANDBOXD_TOKEN or SANDBOXD_TOKENS_FILE"
        )
    return authenticator
