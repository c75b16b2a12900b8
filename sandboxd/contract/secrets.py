"""Secrets a sandbox may use without holding them (issue 25, item 4).

A ``Secret`` is a name, a value, the hosts the value may be sent to, and where
the sandbox finds its placeholder: an environment variable (``env``) or a file
(``file``), the caller's choice. The sandbox only ever sees the placeholder;
the daemon's egress gateway puts the value in place of it in the request
headers of connections to those hosts (sandboxd/egress/intercept.py).

The value is a ``SecretValue``: its ``repr`` and ``str`` are a mask, it is
left out of ``to_json`` (so of labels, GetSandbox, logs, replay records), and
only ``reveal()`` gives it. Standard library only: the client and the
executor's bundle load this module's neighbours.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sandboxd.contract.errors import InvalidArgument

MASK = "**********"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_HOST = re.compile(
    r"(\*\.)?[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*"
)
MAX_SECRETS = 32
MAX_VALUE_BYTES = 8192
MAX_HOSTS = 16
MAX_FILE_PATH = 1024


class SecretValue:
    """A secret's value: masked in ``repr``/``str``, compared by value, given by ``reveal``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"SecretValue('{MASK}')" if self._value else "SecretValue('')"

    def __str__(self) -> str:
        return MASK if self._value else ""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SecretValue) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> tuple[object, ...]:
        # Pickling a value out of the daemon is no more allowed than printing it.
        raise TypeError("a SecretValue cannot be pickled")


@dataclass(frozen=True)
class Secret:
    """One named secret of a sandbox. Exactly one of ``env`` and ``file`` is set."""

    name: str
    value: SecretValue
    hosts: tuple[str, ...]
    #: the environment variable of the workload that holds the placeholder
    env: str = ""
    #: or an absolute path in the sandbox where a file holds the placeholder
    file: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.value, str):  # callers may pass a plain str
            object.__setattr__(self, "value", SecretValue(self.value))
        object.__setattr__(self, "hosts", tuple(self.hosts))

    def to_json(self) -> dict[str, object]:
        """Everything but the value."""
        return {"name": self.name, "hosts": list(self.hosts), "env": self.env, "file": self.file}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Secret:
        hosts = data.get("hosts")
        return cls(
            name=str(data.get("name", "")),
            value=SecretValue(str(data.get("value", ""))),
            hosts=tuple(str(h) for h in hosts) if isinstance(hosts, list | tuple) else (),
            env=str(data.get("env", "") or ""),
            file=str(data.get("file", "") or ""),
        )


def placeholder(instance_id: str, name: str) -> str:
    """What the sandbox sees instead of secret ``name``'s value.

    A function of the sandbox and the name only, so it is the same after a
    daemon restart (the container keeps its environment) and cannot be
    mistaken for ordinary text; it says nothing about the value.
    """
    digest = hashlib.sha256(f"{instance_id}\0{name}".encode()).hexdigest()[:20]
    return f"sandboxd-secret-{name}-{digest}"


def normal_host(host: str) -> str:
    """A host as secrets compare it: lower case, no trailing dot, no brackets."""
    return host.strip().rstrip(".").lower().strip("[]")


def host_matches(pattern: str, host: str) -> bool:
    """``pattern`` (``api.example.com`` or ``*.example.com``: subdomains only) covers ``host``."""
    host = normal_host(host)
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    return host == pattern


def validate(secrets: Sequence[Secret]) -> tuple[Secret, ...]:
    """Refuse what the gateway could not use safely; messages never carry a value."""
    if len(secrets) > MAX_SECRETS:
        raise InvalidArgument(f"at most {MAX_SECRETS} secrets per sandbox, got {len(secrets)}")
    seen: set[str] = set()
    places: set[str] = set()
    out: list[Secret] = []
    for secret in secrets:
        name = secret.name
        if not _NAME.fullmatch(name):
            raise InvalidArgument(
                f"secret name {name[:64]!r} must be letters, digits and _ (not starting "
                "with a digit), at most 64"
            )
        if name in seen:
            raise InvalidArgument(f"secret {name!r} is given twice")
        seen.add(name)
        value = secret.value.reveal()
        if not value:
            raise InvalidArgument(f"secret {name!r} has no value")
        if len(value.encode()) > MAX_VALUE_BYTES:
            raise InvalidArgument(f"secret {name!r}: the value is longer than {MAX_VALUE_BYTES}")
        # It goes into a header line: CR, LF or NUL would split it into more.
        if any(c in value for c in "\r\n\0") or not value.isprintable():
            raise InvalidArgument(
                f"secret {name!r}: the value must be printable text without line breaks"
            )
        hosts = tuple(normal_host(h) for h in secret.hosts)
        if not hosts or len(hosts) > MAX_HOSTS:
            raise InvalidArgument(f"secret {name!r} needs 1 to {MAX_HOSTS} hosts it may go to")
        for host in hosts:
            if not _HOST.fullmatch(host):
                raise InvalidArgument(
                    f"secret {name!r}: host {host[:256]!r} is not a host name "
                    "(example.com or *.example.com)"
                )
        if bool(secret.env) == bool(secret.file):
            raise InvalidArgument(
                f"secret {name!r}: give exactly one of env (a variable name) or file (a path)"
            )
        if secret.env and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,255}", secret.env):
            raise InvalidArgument(
                f"secret {name!r}: env {secret.env[:64]!r} is not a variable name"
            )
        if secret.file and (
            not secret.file.startswith("/")
            or len(secret.file) > MAX_FILE_PATH
            or "\0" in secret.file
            or ".." in secret.file.split("/")
        ):
            raise InvalidArgument(
                f"secret {name!r}: file must be an absolute path without '..' "
                f"(at most {MAX_FILE_PATH} characters)"
            )
        place = secret.env or secret.file
        if place in places:
            raise InvalidArgument(f"secret {name!r}: {place!r} is used by another secret")
        places.add(place)
        out.append(Secret(name, secret.value, hosts, secret.env, secret.file))
    return tuple(out)
