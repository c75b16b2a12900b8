"""``python -m bench.image_ab``: the workspace image before and after a change, in one run.

    python -m bench.image_ab                  # old: images/workspace at main; new: this checkout's
    python -m bench.image_ab --old-ref REF    # the old image from another commit
    python -m bench.image_ab --quick          # few samples, a smoke test

Both images are built by ``scripts/build-image.sh`` under scratch tags (the
old one from ``git archive REF images/workspace``), so the shared
``sandboxd-workspace:latest`` is never touched; both tags are removed at the
end (their layers stay while another tag uses them). One ``sandboxd serve``
per image (warm pool of 1..2), measured in alternating slices so that load
from elsewhere on the machine hits both alike:

- bare ``docker run --rm IMAGE true`` (the engine's own cost of the image);
- cold create -> first command answered (options the pool cannot serve);
- warm-pool create -> first command answered;
- idle memory: sandboxes created and left idle, each container's cgroup
  ``memory.usage`` and what ``docker stats`` shows (usage minus inactive
  file cache), medians;
- image size.

Each ratio is new / old; the lines marked with a bound (create times and idle
memory, ``BOUND``) say PASS or MISS. JSON to
``bench/results/image-ab-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from bench import scenarios
from bench.resources import ROOT, Daemon, Resources, interrupt_on_sigterm
from runtime_client import GrpcSandboxFactory, Sandbox
from sandboxd.backends.shared import labels

RESULTS = Path(__file__).resolve().parent / "results"
CONTEXT = "images/workspace"
KINDS = ("old", "new")
#: Most a create time or the idle memory may grow with the new image (issue 25).
BOUND = 1.10
MIB = 1 << 20


@dataclasses.dataclass(frozen=True)
class Plan:
    slices: int = 6
    per_slice: int = 3  # measured creates per image and slice (after one warm-up)
    docker_run: int = 8
    idle: int = 6  # idle sandboxes per image

    @classmethod
    def quick(cls) -> Plan:
        return cls(slices=2, per_slice=2, docker_run=2, idle=2)


def log(message: str) -> None:
    print(f"[image-ab {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- images


def _git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True).stdout


def old_context(ref: str, into: Path) -> str:
    """``images/workspace`` as it was at ``ref``, unpacked into ``into``; its commit."""
    commit = _git("rev-parse", "--verify", f"{ref}^{{commit}}").decode().strip()
    archive = _git("archive", "--format=tar", commit, CONTEXT)
    into.mkdir(parents=True)
    prefix = CONTEXT + "/"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = []
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith(prefix):
                member.name = member.name[len(prefix) :]
                members.append(member)
        tar.extractall(into, members=members, filter="data")
    return commit


def new_context() -> tuple[Path, str]:
    """This checkout's ``images/workspace`` and what it is (HEAD, "+dirty" with changes)."""
    head = _git("rev-parse", "HEAD").decode().strip()
    dirty = _git("status", "--porcelain", "--", CONTEXT).strip()
    return ROOT / CONTEXT, head + ("+dirty" if dirty else "")


def build(res: Resources, tag: str, context: Path) -> None:
    """``scripts/build-image.sh TAG CONTEXT``; the tag is removed by ``res.close``."""
    res.images.append(tag)
    build_log = res.tmp / f"build-{tag.replace(':', '-')}.log"
    with build_log.open("wb") as out:
        done = subprocess.run(
            [str(ROOT / "scripts" / "build-image.sh"), tag, str(context)],
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if done.returncode != 0:
        tail = "\n".join(build_log.read_text(errors="replace").splitlines()[-30:])
        raise RuntimeError(f"building {tag} failed:\n{tail}")


def describe(res: Resources, tag: str) -> dict[str, Any]:
    image = res.docker.images.get(tag)
    return {
        "tag": tag,
        "id": image.id,
        "hash": image.labels.get("sandboxd.image.hash", ""),
        "size_bytes": int(image.attrs["Size"]),
    }


# ---------------------------------------------------------------- measurements


async def wait_pools(daemons: dict[str, Daemon]) -> None:
    """Both pools full, so no refill of either runs under a measurement."""
    for daemon in daemons.values():
        async with GrpcSandboxFactory(daemon.target) as control:
            await scenarios.wait_pool_full(control)


async def creates(daemons: dict[str, Daemon], plan: Plan, *, cold: bool) -> dict[str, list[float]]:
    """Create -> first command (seconds), in slices alternating which image goes first."""
    samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
    what = "cold" if cold else "warm"
    for i in range(plan.slices):
        for kind in _order(i):
            await wait_pools(daemons)
            made, _ = await scenarios.create_to_first_command_samples(
                daemons[kind].target, cold=cold, n=plan.per_slice, prefix=f"{what}{i}"
            )
            samples[kind] += made
        log(f"{what} create, slice {i + 1}/{plan.slices}: " + _so_far(samples))
    return samples


def _order(i: int) -> tuple[str, ...]:
    return KINDS if i % 2 == 0 else tuple(reversed(KINDS))


def _so_far(samples: dict[str, list[float]]) -> str:
    return ", ".join(f"{k} p50 {statistics.median(v) * 1000:.1f} ms" for k, v in samples.items())


async def docker_runs(res: Resources, tags: dict[str, str], plan: Plan) -> dict[str, list[float]]:
    """Bare ``docker run --rm IMAGE true``, p50 per slice (seconds), alternating."""
    samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for i in range(plan.slices):
        for kind in _order(i):
            summary = await asyncio.to_thread(
                scenarios.bare_docker_run, res.docker, res.labels, plan.docker_run, tags[kind]
            )
            samples[kind].append(summary.p50 / 1000)
    return samples


async def idle_memory(
    res: Resources, daemons: dict[str, Daemon], count: int
) -> dict[str, dict[str, list[int]]]:
    """``count`` idle sandboxes per image, created alternately after one warm-up
    each; every container's (usage, usage minus inactive file) after 3 s idle."""
    await wait_pools(daemons)
    boxes: dict[str, list[Sandbox]] = {kind: [] for kind in KINDS}
    async with contextlib.AsyncExitStack() as stack:
        factories = {
            kind: await stack.enter_async_context(
                GrpcSandboxFactory(daemon.target, options=scenarios.COLD)
            )
            for kind, daemon in daemons.items()
        }
        try:
            for kind in KINDS:
                warm = await factories[kind].create_sandbox("idle-warmup")
                await warm.bash("true")
                await warm.delete()
            for i in range(count):
                for kind in _order(i):
                    box = await factories[kind].create_sandbox(f"idle-{i}")
                    if (await box.bash("true")).is_error:
                        raise RuntimeError(f"the first command failed in {kind}'s idle-{i}")
                    boxes[kind].append(box)
            await asyncio.sleep(3.0)
            found: dict[str, dict[str, list[int]]] = {}
            for kind, daemon in daemons.items():
                usage: list[int] = []
                shown: list[int] = []
                for box in boxes[kind]:
                    name = labels.resource_name(daemon.namespace, box.instance_id)
                    container = await asyncio.to_thread(res.docker.containers.get, name)
                    used, stats = await asyncio.to_thread(scenarios.container_memory, container)
                    usage.append(used)
                    shown.append(stats)
                found[kind] = {"usage_bytes": usage, "docker_stats_bytes": shown}
            return found
        finally:
            for made in boxes.values():
                for box in made:
                    await box.delete()


# ---------------------------------------------------------------- the run


async def measure(res: Resources, tags: dict[str, str], plan: Plan) -> dict[str, Any]:
    daemons = {
        kind: res.start_daemon(
            "--image", tag, "--pool-size", "1", "--pool-max", "2", suffix=f"-{kind}"
        )
        for kind, tag in tags.items()
    }
    log("bare docker run")
    runs = await docker_runs(res, tags, plan)
    log("cold create -> first command")
    cold = await creates(daemons, plan, cold=True)
    log("warm-pool create -> first command")
    warm = await creates(daemons, plan, cold=False)
    log(f"idle memory: {plan.idle} sandboxes per image")
    memory = await idle_memory(res, daemons, plan.idle)
    return {"docker_run_s": runs, "cold_create_s": cold, "warm_create_s": warm, "memory": memory}


#: (row, key in the measurements, unit, bounded by BOUND)
ROWS = (
    ("bare docker run, p50 ms", "docker_run_s", "ms", False),
    ("cold create -> first command, p50 ms", "cold_create_s", "ms", True),
    ("warm-pool create -> first command, p50 ms", "warm_create_s", "ms", True),
    ("idle container memory.usage, median MiB", "usage_bytes", "MiB", True),
    (
        "idle container, docker stats (usage - inactive), median MiB",
        "docker_stats_bytes",
        "MiB",
        False,
    ),
    ("image size, MB", "size_bytes", "MB", False),
)


def table(raw: dict[str, Any], images: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for name, key, unit, bounded in ROWS:
        values: dict[str, float] = {}
        for kind in KINDS:
            if key == "size_bytes":
                values[kind] = images[kind]["size_bytes"] / 1e6
            elif unit == "MiB":
                values[kind] = statistics.median(raw["memory"][kind][key]) / MIB
            else:
                values[kind] = statistics.median(raw[key][kind]) * 1000
        ratio = values["new"] / values["old"]
        row: dict[str, Any] = {"row": name, **values, "ratio": round(ratio, 3)}
        if bounded:
            row["verdict"] = "PASS" if ratio <= BOUND else "MISS"
        rows.append(row)
    return rows


def render(rows: list[dict[str, Any]], images: dict[str, dict[str, Any]]) -> str:
    lines = [
        f"old: {images['old']['ref']} ({images['old']['id'][7:19]})",
        f"new: {images['new']['ref']} ({images['new']['id'][7:19]})",
        "",
        f"| measurement | old | new | new / old | bound {BOUND:.2f}x |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['row']} | {row['old']:.1f} | {row['new']:.1f} | {row['ratio']:.2f}x"
            f" | {row.get('verdict', '-')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.image_ab", description=__doc__)
    parser.add_argument("--old-ref", default="main", help="commit of the old images/workspace")
    parser.add_argument("--quick", action="store_true", help="few samples (smoke test)")
    args = parser.parse_args(argv)
    plan = Plan.quick() if args.quick else Plan()
    interrupt_on_sigterm()
    stamp = time.strftime("%Y%m%dT%H%M%S")
    started = time.monotonic()
    loadavg_at_start = os.getloadavg()
    res = Resources()
    try:
        tags = {kind: f"sandboxd-workspace-ab:{res.run_id}-{kind}" for kind in KINDS}
        old_commit = old_context(args.old_ref, res.tmp / "old-context")
        context, new_ref = new_context()
        log(f"building the old image ({args.old_ref} {old_commit[:12]}), the new ({new_ref[:12]})")
        build(res, tags["old"], res.tmp / "old-context")
        build(res, tags["new"], context)
        images = {kind: describe(res, tag) for kind, tag in tags.items()}
        images["old"]["ref"] = f"{args.old_ref} {old_commit}"
        images["new"]["ref"] = f"checkout {new_ref}"
        raw = asyncio.run(measure(res, tags, plan))
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        return 130
    finally:
        res.close()
    rows = table(raw, images)
    seconds = round(time.monotonic() - started, 1)
    results = {
        "meta": {
            "started": stamp,
            "seconds": seconds,
            "plan": dataclasses.asdict(plan),
            "bound": BOUND,
            "loadavg_at_start": loadavg_at_start,
            "loadavg_at_end": os.getloadavg(),
        },
        "images": images,
        "table": rows,
        "samples": raw,
    }
    print(render(rows, images))
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"image-ab-{stamp}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nresults: {path}  ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
