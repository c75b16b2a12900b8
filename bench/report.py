"""The printed table and the JSON file."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from bench.markdown import THROUGHPUT_ROWS, floor_share
from bench.stats import Summary
from bench.targets import Target

SUBJECTS = (
    "sandboxd",
    "sandboxd unary",
    "sandboxd verbs",
    "sandboxd runsc",
    "sandboxd kubernetes",
    "raw exec",
    "floor",
    "swe-rex session",
    "swe-rex execute",
)


def _ms(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _triple(summary: Summary | None) -> str:
    if summary is None:
        return "-"
    return f"{_ms(summary.p50)} / {_ms(summary.p95)} / {_ms(summary.p99)}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.1f}x"


def ops_table(ops: dict[str, dict[str, Summary]]) -> str:
    present = [s for s in SUBJECTS if any(s in row for row in ops.values())]
    headers = ["op (ms p50 / p95 / p99)", *present, "raw/sandboxd", "sandboxd/floor"]
    gvisor = "sandboxd runsc" in present
    if gvisor:
        headers.append("runsc/runc")
    kube = "sandboxd kubernetes" in present
    if kube:
        headers.append("k8s/docker")
    rows = []
    for op, by_subject in ops.items():
        sbx = by_subject.get("sandboxd")
        raw = by_subject.get("raw exec")
        floor = by_subject.get("floor")
        runsc = by_subject.get("sandboxd runsc")
        on_kube = by_subject.get("sandboxd kubernetes")
        rows.append(
            [
                op,
                *(_triple(by_subject.get(s)) for s in present),
                _ratio(raw.p50 if raw else None, sbx.p50 if sbx else None),
                _ratio(sbx.p50 if sbx else None, floor.p50 if floor else None),
                *(
                    [_ratio(runsc.p50 if runsc else None, sbx.p50 if sbx else None)]
                    if gvisor
                    else []
                ),
                *(
                    [_ratio(on_kube.p50 if on_kube else None, sbx.p50 if sbx else None)]
                    if kube
                    else []
                ),
            ]
        )
    return _grid(headers, rows)


def _grid(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)), line]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def render(results: dict[str, Any], targets: list[Target]) -> str:
    meta = results["meta"]
    load = " / ".join(
        f"{meta[k][0]:.1f}" for k in ("loadavg_at_start", "loadavg_at_end") if k in meta
    )
    parts = [f"sandboxd bench — {meta['started']} — {meta['host']} — load {load}", ""]
    parts += ["Per-operation latency (one caller, after warm-up)", ops_table(results["ops"]), ""]
    life = results.get("lifecycle")
    if life:
        rows = [
            [name, _triple(life[key]), str(life[key].n)]
            for name, key in [
                ("bare docker run --rm IMAGE true", "docker_run"),
                ("sandboxd cold create -> first bash", "cold_create"),
                ("sandboxd warm-pool create -> first bash", "warm_create"),
                ("burst of 5 creates, first after idle", "burst_first"),
                ("burst of 5 creates, later bursts", "burst_later"),
                ("sandboxd delete", "delete"),
                ("sandboxd runsc cold create -> first bash", "cold_create_runsc"),
            ]
            if key in life
        ]
        parts += ["Lifecycle (ms p50 / p95 / p99)", _grid(["what", "ms", "n"], rows), ""]
    tp = results.get("throughput")
    if tp:
        rows = [
            [
                name,
                f"{v['calls_per_s']:.0f}",
                floor_share(tp, key),
                str(v["calls"]),
                f"{v['sandboxes']} x {v['callers_per_sandbox']}",
            ]
            for name, key in THROUGHPUT_ROWS
            if (v := tp.get(key))
        ]
        headers = ["calls", "calls/s", "of floor", "n", "sandboxes x callers"]
        parts += ["Aggregate throughput", _grid(headers, rows), ""]
    extra = []
    if "big_file_first_page" in results:
        extra.append(["first page of a 1 GiB file (read)", _triple(results["big_file_first_page"])])
    grep = results.get("grep_10k")
    if grep:
        extra.append(["grep 10k files: sandboxd grep", _triple(grep["sandboxd_grep"])])
        extra.append(["grep 10k files: rg inside the container", _triple(grep["rg_in_container"])])
    if extra:
        parts += ["Big inputs (ms p50 / p95 / p99)", _grid(["what", "ms"], extra), ""]
    memory = results.get("memory")
    if memory:
        rows = [[k, str(v)] for k, v in memory.items()]
        parts += ["Idle memory", _grid(["what", "value"], rows), ""]
    swerex = results.get("swerex")
    if swerex and "skipped" in swerex:
        parts += [f"SWE-ReX: skipped ({swerex['skipped']})", ""]
    elif swerex:
        parts += [f"SWE-ReX: {swerex.get('note', '')}", ""]
    if results.get("kubernetes"):
        from bench import kubernetes

        docker_side = {**(life or {}), "throughput": tp or {}}
        parts += [kubernetes.render(results["kubernetes"], docker_side), ""]
    if results.get("ports"):
        from bench import ports

        parts += [ports.render(results["ports"]), ""]
    if results.get("egress"):
        from bench import egress

        parts += [egress.render(results["egress"]), ""]
    if results.get("transfer"):
        from bench import transfer

        parts += [transfer.render(results["transfer"]), ""]
    parts += ["Targets", *(t.line() for t in targets)]
    return "\n".join(parts)


def _default(value: Any) -> Any:
    if isinstance(value, Summary):
        return value.to_json()
    if isinstance(value, Target):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"cannot encode {type(value).__name__}")


def write_json(results: dict[str, Any], targets: list[Target], folder: Path, stamp: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stamp}.json"
    payload = {**results, "targets": targets}
    path.write_text(json.dumps(payload, indent=2, default=_default) + "\n")
    return path
