"""The operator's maximum of every resource a request may ask for: one table.

A request may ask for more or less than the daemon's default (memory, CPUs,
pids, idle time, an exec's timeout), never for more than the operator allows:
otherwise any token, however narrowly scoped, could lift the limits the
operator meant (a fork asking for 1 TiB of memory was accepted; issue 23
item 9). Each row names the request field, the setting that holds its
maximum and the setting that holds its default; the option rules
(``options.py``), the exec check (``service/exec.py``), the settings' own
check that no default exceeds its maximum, and the README's settings table
all follow these rows (``tests/unit/test_bounds.py`` holds them together).

A new resource option gets a row here and a ``max_*`` setting; the unit test
fails for a numeric option without one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sandboxd.contract.errors import InvalidArgument


@dataclass(frozen=True)
class Bound:
    #: The request's field: a ``SandboxOptions`` field, or ``ExecRequest.timeout_ms``.
    field: str
    #: The settings attribute holding the operator's maximum.
    maximum: str
    #: The settings attribute holding the default a request gets when it sets none.
    default: str


#: Bounds of ``SandboxOptions`` (create, fork, the warm pool).
OPTION_BOUNDS: tuple[Bound, ...] = (
    Bound("memory_bytes", "max_memory_bytes", "memory_bytes"),
    Bound("cpus", "max_cpus", "cpus"),
    Bound("pids_limit", "max_pids_limit", "pids_limit"),
    Bound("idle_ttl_seconds", "max_idle_ttl_seconds", "idle_ttl_seconds"),
    Bound("max_lifetime_seconds", "max_lifetime_ceiling_seconds", "max_lifetime_seconds"),
    Bound("disk_bytes", "max_disk_bytes", "disk_bytes"),
    Bound(
        "delete_after_stopped_seconds",
        "max_delete_after_stopped_seconds",
        "delete_after_stopped_seconds",
    ),
)
#: Bounds of a single call's request.
EXEC_TIMEOUT = Bound("timeout_ms", "max_exec_timeout_ms", "exec_timeout_ms")

BOUNDS: tuple[Bound, ...] = (*OPTION_BOUNDS, EXEC_TIMEOUT)


def setting_name(attribute: str) -> str:
    """The environment variable (and, lower-cased with dashes, the flag) of a setting."""
    return f"SANDBOXD_{attribute.upper()}"


def check(bound: Bound, value: float, settings: Any) -> None:
    """Refuse ``value`` over the operator's maximum, naming the maximum and its setting."""
    maximum = getattr(settings, bound.maximum)
    if value > maximum:
        raise InvalidArgument(
            f"{bound.field} {_show(value)} is over this daemon's maximum of {_show(maximum)} "
            f"({setting_name(bound.maximum)})"
        )


def defaults_within_maxima(settings: Any) -> None:
    """Settings whose default already exceeds its maximum are a configuration
    error, said at start rather than by every create that takes the default."""
    for bound in BOUNDS:
        if not (hasattr(settings, bound.default) and hasattr(settings, bound.maximum)):
            continue  # a settings class of another layer
        default, maximum = getattr(settings, bound.default), getattr(settings, bound.maximum)
        if default > maximum:
            raise ValueError(
                f"{bound.default}={_show(default)} is over {bound.maximum}={_show(maximum)}: "
                "raise the maximum or lower the default"
            )


def _show(value: float) -> str:
    # 1 TiB as 1099511627776, not 1.09951e+12; 1.5 CPUs as 1.5.
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
