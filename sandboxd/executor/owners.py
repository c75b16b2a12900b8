"""Which daemon channel owns what a sandbox has only one of.

Several daemons (replicas of one Deployment, or a daemon and its successor)
may each hold a channel to the same executor at once, and every call is
answered on the channel it came on. Most of what a channel sets up is its
own: its calls, their streams, its transfers. Two things are the sandbox's
and have one owner: the egress gateway's listeners (the fixed proxy ports
of ``executor.pipes.Pipes.listen``) and the trusted egress CA with the rest
of what ``hello`` puts in force (``dispatch._apply_hello``).

The rule: the owner is the channel whose hello is the newest among the
channels still open. A daemon that connects takes the sandbox over (its
hello is newest); when the owner's channel closes (its daemon died or let
go) the next newest takes over again, and its hello's settings (its CA) are
put back in force. Nobody takes ownership back by force: an earlier owner
whose listen was taken over stands by until it is the owner again or the
address is free (executor.pipes), so two live daemons never ping-pong.

The attach stream (stdin/stdout) is where a Docker daemon
says its first hello before it moves to its own direct connection; it never
closes while the container lives and every attached daemon shares it, so it
owns only while no direct connection that said hello is open (``fallback``).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from typing import Any


class Owners:
    def __init__(self) -> None:
        #: The attach stream's channel, once the executor has one (executor.main).
        self.fallback: object = None
        self._lock = threading.Lock()
        #: channel -> (order of its latest hello, that hello's arguments)
        self._hellos: dict[object, tuple[int, dict[str, Any]]] = {}
        self._order = itertools.count()

    def hello(self, channel: object, args: Mapping[str, Any]) -> None:
        """``channel`` said hello: it owns the sandbox now."""
        with self._lock:
            self._hellos[channel] = (next(self._order), dict(args))

    def closed(self, channel: object) -> Mapping[str, Any] | None:
        """``channel`` is gone. The hello of the channel that owns in its
        place, if ownership changed hands (its settings go back in force)."""
        with self._lock:
            before = self._owner()
            if self._hellos.pop(channel, None) is None:
                return None
            after = self._owner()
            if after is before or after not in self._hellos:
                return None
            return self._hellos[after][1]

    def owner(self) -> object:
        with self._lock:
            return self._owner()

    def owns(self, channel: object) -> bool:
        """Whether ``channel`` owns the sandbox (everyone does before any hello)."""
        with self._lock:
            owner = self._owner()
        return owner is None or owner is channel

    def _owner(self) -> object:
        direct = [(order, c) for c, (order, _) in self._hellos.items() if c is not self.fallback]
        if direct:
            return max(direct, key=lambda entry: entry[0])[1]
        return self.fallback if self.fallback in self._hellos else None
