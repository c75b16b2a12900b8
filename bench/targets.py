"""The performance targets (issue 13), evaluated as ratios of numbers from the same run."""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.stats import Summary


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    value: float
    limit: float
    unit: str
    higher_is_better: bool = False

    @property
    def passed(self) -> bool:
        return self.value >= self.limit if self.higher_is_better else self.value <= self.limit

    def line(self) -> str:
        op = ">=" if self.higher_is_better else "<="
        verdict = "PASS" if self.passed else "MISS"
        return f"{verdict}  {self.name}: {self.value:.4g} {op} {self.limit:.4g} {self.unit}"

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "passed": self.passed}


def evaluate(results: dict[str, Any]) -> list[Target]:
    ops: dict[str, dict[str, Summary]] = results["ops"]
    targets: list[Target] = []

    def p50(op: str, subject: str) -> float:
        return ops[op][subject].p50

    tool_ops = [op for op in ops if "sandboxd" in ops[op]]
    for op in tool_ops:
        if "swe-rex execute" in ops[op]:
            targets.append(
                Target(
                    f"{op}: sandboxd tools p50 <= 0.6 x SWE-ReX execute",
                    p50(op, "sandboxd"),
                    0.6 * p50(op, "swe-rex execute"),
                    "ms",
                )
            )
    for op in ("read 1 KiB", "write 1 KiB", "edit 1 line", "bash true"):
        targets.append(
            Target(f"{op}: sandboxd tools p50 <= floor + 1 ms", p50(op, "sandboxd"),
                   p50(op, "floor") + 1.0, "ms")
        )  # fmt: skip
    for op in ("grep 1k files", "glob 1k files"):
        targets.append(
            Target(f"{op}: sandboxd tools p50 <= 1.2 x floor", p50(op, "sandboxd"),
                   1.2 * p50(op, "floor"), "ms")
        )  # fmt: skip
    k8s = results.get("kubernetes") or {}
    if "warm_create" in k8s:
        targets.append(
            Target("kubernetes: warm-pool create -> first command p50 <= 100 ms",
                   k8s["warm_create"].p50, 100.0, "ms")
        )  # fmt: skip
    for op in ("read 1 KiB", "write 1 KiB", "bash true", "grep 1k files"):
        if "sandboxd kubernetes" in ops.get(op, {}):
            targets.append(
                Target(f"{op}: kubernetes p50 <= 2 x docker", p50(op, "sandboxd kubernetes"),
                       2 * p50(op, "sandboxd"), "ms")
            )  # fmt: skip
    if results.get("ports"):
        from bench import ports

        targets += ports.evaluate(results["ports"])
    if results.get("egress"):
        from bench import egress

        targets += egress.evaluate(results["egress"])
    life = results.get("lifecycle")
    if life:
        targets.append(
            Target("create from warm pool p50 <= 30 ms", life["warm_create"].p50, 30, "ms")
        )
        for key, what in (("burst_first", "first after idle"), ("burst_later", "later bursts")):
            if key in life:
                targets.append(
                    Target(f"burst of 5 creates ({what}) p95 <= 100 ms", life[key].p95, 100,
                           "ms")
                )  # fmt: skip
        targets.append(
            Target(
                "cold create p50 <= 1.5 x bare docker run",
                life["cold_create"].p50,
                1.5 * life["docker_run"].p50,
                "ms",
            )
        )
    tp = results.get("throughput")
    if tp:
        targets.append(
            Target("8 sandboxes: file-tool calls/s >= 3000", tp["file"]["calls_per_s"], 3000,
                   "calls/s", higher_is_better=True)
        )  # fmt: skip
        targets.append(
            Target("8 sandboxes: bash calls/s >= 1000", tp["bash"]["calls_per_s"], 1000,
                   "calls/s", higher_is_better=True)
        )  # fmt: skip
    if "big_file_first_page" in results:
        targets.append(
            Target("first page of a 1 GiB file p50 <= 20 ms",
                   results["big_file_first_page"].p50, 20, "ms")
        )  # fmt: skip
    grep = results.get("grep_10k")
    if grep:
        targets.append(
            Target(
                "grep 10k files p50 <= 1.5 x rg in the container",
                grep["sandboxd_grep"].p50,
                1.5 * grep["rg_in_container"].p50,
                "ms",
            )
        )
    memory = results.get("memory")
    if memory:
        targets.append(
            Target("daemon RSS growth per idle instance <= 2 MiB",
                   memory["daemon_rss_growth_per_instance_mib"], 2, "MiB")
        )  # fmt: skip
    if results.get("transfer"):
        from bench import transfer

        for name, value, limit, unit, higher in transfer.targets(results["transfer"]):
            targets.append(Target(name, value, limit, unit, higher_is_better=higher))
    return targets
