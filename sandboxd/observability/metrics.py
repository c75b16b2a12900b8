"""The Prometheus metrics of sandboxd, on the default registry.

Module-level on purpose: a call site deep in a backend (a container start)
records with one function call and needs no handle passed down to it. Labels
never carry instance ids or tool call ids, which would grow without bound;
those go to the access log instead.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from sandboxd.contract.models import PoolStatus
from sandboxd.contract.tools import TOOL_NAMES

__all__ = [
    "CONTENT_TYPE_LATEST",
    "container_started",
    "record_call",
    "render",
    "set_instances",
    "set_pool",
]

CALLS = Counter(
    "sandboxd_calls",
    "Calls served, by transport, method, tool and status code",
    ["transport", "method", "tool", "code"],
)
LATENCY = Histogram(
    "sandboxd_call_duration_seconds",
    "Time to serve a call, by transport, method and tool",
    ["transport", "method", "tool"],
    # Tool calls span a cached read (~1 ms) to a long bash run (minutes).
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
ERRORS = Counter(
    "sandboxd_errors",
    "Failed calls by cause: the error kind (not_found, unavailable, ...) or `unexpected` for a bug",
    ["transport", "method", "cause"],
)
TOOL_ERRORS = Counter(
    "sandboxd_tool_errors",
    "Tool results the model sees as errors (is_error: bad arguments, command failed, ...)",
    ["tool"],
)
CONTAINER_STARTS = Counter(
    "sandboxd_container_starts", "Workspace containers started (created, restarted or woken)"
)
EXECUTOR_CHANNELS = Counter(
    "sandboxd_executor_channels",
    "Executor channels opened, by kind (direct: the executor's unix socket; "
    "attach: Docker's attach stream, where direct is off or not possible)",
    ["kind"],
)
EGRESS_DECISIONS = Counter(
    "sandboxd_egress_decisions",
    "Egress connections the gateway decided on, by verdict (allowed, denied); "
    "each sandbox's recent ones: GetNetworkLog, sandboxctl net log",
    ["verdict"],
)
INSTANCES = Gauge("sandboxd_instances", "Sandboxes this daemon has, by state", ["state"])
TENANT_USE = Gauge(
    "sandboxd_tenant_use", "A tenant's use of each quota (service/quotas.py)", ["tenant", "quota"]
)
TENANT_QUOTA = Gauge(
    "sandboxd_tenant_quota", "A tenant's limit of each quota (0: none)", ["tenant", "quota"]
)
POOL_SIZE = Gauge("sandboxd_pool_size", "Warm workspaces the pool aims to keep ready")
POOL_READY = Gauge("sandboxd_pool_ready", "Warm workspaces ready to be claimed now")
POOL_SERVED = Gauge("sandboxd_pool_served", "Creates served from the warm pool since start")
POOL_STARTED = Gauge("sandboxd_pool_started", "Warm workspaces started since start")

_known_states: set[str] = set()


def record_call(
    transport: str,
    method: str,
    tool: str,
    code: str,
    seconds: float,
    *,
    cause: str = "",
    tool_error: bool = False,
) -> None:
    # A caller names the tool: only the real ones may become label values.
    tool = tool if not tool or tool in TOOL_NAMES else "other"
    CALLS.labels(transport, method, tool, code).inc()
    LATENCY.labels(transport, method, tool).observe(seconds)
    if cause:
        ERRORS.labels(transport, method, cause).inc()
    if tool_error:
        TOOL_ERRORS.labels(tool).inc()


def container_started() -> None:
    CONTAINER_STARTS.inc()


def executor_channel(kind: str) -> None:
    EXECUTOR_CHANNELS.labels(kind).inc()


def set_pool(pool: PoolStatus) -> None:
    POOL_SIZE.set(pool.size)
    POOL_READY.set(pool.ready)
    POOL_SERVED.set(pool.served)
    POOL_STARTED.set(pool.started)


def set_instances(states: Iterable[str]) -> None:
    counts = Tally(states)
    # A state seen before and absent now must read 0, not keep its last value.
    _known_states.update(counts)
    for state in _known_states:
        INSTANCES.labels(state).set(counts.get(state, 0))


def render() -> bytes:
    return generate_latest(REGISTRY)
