"""bench/README.md's benchmark block is the rendering of the results file it names."""

from __future__ import annotations

import json
from pathlib import Path

from bench import markdown

ROOT = Path(__file__).resolve().parents[2]


def test_readme_quotes_one_committed_run_exactly() -> None:
    found = markdown.block_in((ROOT / "bench" / "README.md").read_text())
    assert found is not None, "bench/README.md has no generated bench block"
    path, written = found
    results = json.loads((ROOT / path).read_text())
    assert written == markdown.render(results, path), (
        f"bench/README.md's bench block differs from {path}; regenerate it with "
        f"python -m bench.markdown {path}"
    )


def test_the_readmes_summary_is_the_same_run() -> None:
    full = markdown.block_in((ROOT / "bench" / "README.md").read_text())
    found = markdown.block_in(
        (ROOT / "README.md").read_text(), markdown.SUMMARY_BEGIN, markdown.SUMMARY_END
    )
    assert full is not None and found is not None, "README.md has no generated bench summary"
    path, written = found
    assert path == full[0], "README.md and bench/README.md quote different runs"
    assert written == markdown.summary(json.loads((ROOT / path).read_text()), path), (
        f"README's bench summary differs from {path}; regenerate it with "
        f"python -m bench.markdown {path} --write"
    )


def test_block_marks_every_missed_target() -> None:
    results = {
        "meta": {"started": "t", "host": "h"},
        "ops": {"read 1 KiB": {"sandboxd": {"p50": 2.0}, "swe-rex execute": {"p50": 4.0}}},
        "targets": [
            {"name": "a", "value": 2.0, "limit": 1.0, "unit": "ms", "higher_is_better": False,
             "passed": False},
            {"name": "b", "value": 5000.0, "limit": 3000.0, "unit": "calls/s",
             "higher_is_better": True, "passed": True},
        ],
    }  # fmt: skip
    text = markdown.render(results, "x.json")
    assert "- **MISS** a: 2 ≤ 1 ms" in text
    assert "- PASS b: 5,000 ≥ 3,000 calls/s" in text
    assert "| read 1 KiB | 2.00 | 4.00 | 0.50x | - |" in text
    assert markdown.block_in("intro\n" + text + "\nrest") == ("x.json", text)


def test_throughput_rows_say_their_share_of_the_floor() -> None:
    def row(calls_per_s: float) -> dict[str, object]:
        return {"calls_per_s": calls_per_s, "sandboxes": 8, "callers_per_sandbox": 2, "calls": 1}

    throughput = {"bash": row(400.0), "bash_floor": row(800.0), "file": row(2000.0)}
    assert markdown.floor_share(throughput, "bash") == "0.50x"
    assert markdown.floor_share(throughput, "bash_floor") == "-"
    assert markdown.floor_share(throughput, "file") == "-"  # no floor measured
    results = {"meta": {"started": "t", "host": "h"}, "ops": {}, "throughput": throughput}
    text = markdown.render(results, "x")
    assert "| bash `true` | 400 | 0.50x | 8 x 2 |" in text
    assert "| floor: bash `true`, in-process | 800 | - | 8 x 2 |" in text
