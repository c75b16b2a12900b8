"""Tables for people; ``--json`` gives programs the same facts."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rich.table import Table

from sandboxd.contract.models import NetworkDecision, SandboxInfo, ServerStatus


def when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms else "-"


def info_json(info: SandboxInfo) -> dict[str, Any]:
    return {
        "instance_id": info.instance_id,
        "state": info.state,
        "container_id": info.container_id,
        "volume": info.volume,
        "created_at_ms": info.created_at_ms,
        "expires_at_ms": info.expires_at_ms,
        "termination_reason": info.termination_reason,
        "options": info.options.to_json(),
        "warnings": list(info.warnings),
    }


def decisions_table(entries: Sequence[NetworkDecision]) -> Table:
    table = Table("TIME", "VERDICT", "VIA", "HOST", "PORT", "ADDRESS", "RULE", "REASON", box=None)
    for entry in entries:
        table.add_row(
            when(entry.at_ms),
            "allowed" if entry.allowed else "denied",
            entry.via or "-",
            entry.host or "-",
            str(entry.port),
            entry.address or "-",
            entry.rule or "-",
            entry.reason,
        )
    return table


def sandboxes_table(infos: Sequence[SandboxInfo]) -> Table:
    table = Table("INSTANCE", "STATE", "IMAGE", "NETWORK", "CREATED", box=None)
    for info in sorted(infos, key=lambda i: i.instance_id):
        table.add_row(
            info.instance_id,
            info.state,
            info.options.image or "-",
            info.options.network.mode if info.options.network else "none",
            when(info.created_at_ms),
        )
    return table


def status_json(status: ServerStatus, health: dict[str, str]) -> dict[str, Any]:
    pool = status.pool
    return {
        "version": status.version,
        "backend": status.backend,
        "namespace": status.namespace,
        "pool": {
            "size": pool.size,
            "ready": pool.ready,
            "served": pool.served,
            "started": pool.started,
        },
        "runtimes": [
            {
                "name": r.name,
                "version": r.version,
                "platform": r.platform,
                "available": r.available,
            }
            for r in status.runtimes
        ],
        "disk": {
            "enforced": status.disk.enforced,
            "bytes": status.disk.bytes,
            "reason": status.disk.reason,
        },
        "tenants": {
            t.tenant: {q.name: {"used": q.used, "limit": q.limit} for q in t.quotas}
            for t in status.tenants
        },
        "health": health,
    }


def _amount(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def status_table(status: ServerStatus, health: dict[str, str], target: str) -> Table:
    table = Table(show_header=False, box=None)
    table.add_row("target", target)
    table.add_row("version", status.version)
    table.add_row("backend", status.backend)
    table.add_row("namespace", status.namespace)
    pool = status.pool
    table.add_row(
        "pool",
        f"size {pool.size}, ready {pool.ready}, served {pool.served}, started {pool.started}",
    )
    for runtime in status.runtimes:
        if runtime.available:
            platform = f", platform {runtime.platform}" if runtime.platform else ""
            table.add_row(f"runtime {runtime.name}", f"{runtime.version or '?'}{platform}")
        else:
            table.add_row(f"runtime {runtime.name}", "[red]not registered[/red]")
    if status.disk.enforced:
        table.add_row("disk limit", f"{status.disk.bytes >> 20} MiB per workspace")
    else:
        table.add_row("disk limit", f"[red]not enforced[/red]: {status.disk.reason}")
    for tenant in status.tenants:
        uses = ", ".join(
            f"{q.name} {_amount(q.used)}/{_amount(q.limit) if q.limit else '-'}"
            for q in tenant.quotas
        )
        table.add_row(f"tenant {tenant.tenant}", uses)
    for service, state in health.items():
        style = "green" if state == "SERVING" else "red"
        table.add_row(f"health {service or '(server)'}", f"[{style}]{state}[/{style}]")
    return table
