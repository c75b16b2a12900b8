"""The daemon's secrets per sandbox, in memory (issue 25, item 4).

Standard library only: the service keeps the book (service/secrets.py) in
every install, the gateway's interceptor (egress/intercept.py, server extra)
reads it per connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from sandboxd.contract.secrets import Secret, host_matches, placeholder


class SecretBook:
    """The daemon's secrets per sandbox, in memory only (never on disk, never in labels)."""

    def __init__(self, prepare: Callable[[], object] | None = None) -> None:
        self._by_instance: dict[str, tuple[Secret, ...]] = {}
        self._lock = threading.Lock()
        #: What serving secrets needs first (the interceptor's CA); raises if it cannot.
        self._prepare = prepare

    def ready(self) -> None:
        """Before a sandbox gets secrets: make what serving them needs, or raise why not."""
        if self._prepare is not None:
            self._prepare()

    def set(self, instance_id: str, secrets: Sequence[Secret]) -> None:
        with self._lock:
            if secrets:
                self._by_instance[instance_id] = tuple(secrets)
            else:
                self._by_instance.pop(instance_id, None)

    def drop(self, instance_id: str) -> None:
        with self._lock:
            self._by_instance.pop(instance_id, None)

    def names(self, instance_id: str) -> tuple[str, ...]:
        with self._lock:
            return tuple(s.name for s in self._by_instance.get(instance_id, ()))

    def for_host(self, instance_id: str, host: str) -> dict[bytes, bytes]:
        """placeholder -> value of each secret of the sandbox that may go to ``host``."""
        with self._lock:
            secrets = self._by_instance.get(instance_id, ())
        return {
            placeholder(instance_id, s.name).encode(): s.value.reveal().encode()
            for s in secrets
            if any(host_matches(pattern, host) for pattern in s.hosts)
        }
