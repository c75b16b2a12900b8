"""The targets of issue 5, evaluated as ratios of numbers from the same run."""

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

    for op in ("read 1 KiB", "write 1 KiB", "edit 1 line", "glob small dir"):
        limit = p50(op, "raw exec") / 40
        targets.append(
            Target(f"{op} p50 <= raw docker exec / 40", p50(op, "sandboxd"), limit, "ms")
        )
    targets.append(
        Target(
            "bash true p50 <= raw docker exec / 20",
            p50("bash true", "sandboxd"),
            p50("bash true", "raw exec") / 20,
            "ms",
        )
    )
    targets.append(
        Target(
            "grep 1k files p50 <= 1.3 x floor",
            p50("grep 1k files", "sandboxd"),
            1.3 * p50("grep 1k files", "floor"),
            "ms",
        )
    )
    life = results.get("lifecycle")
    if life:
        targets.append(
            Target("create from warm pool p50 <= 50 ms", life["warm_create"].p50, 50, "ms")
        )
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
    return targets
