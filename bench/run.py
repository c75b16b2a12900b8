"""``python -m bench.run``: every measurement of issue 5 in one run, then the table.

    python -m bench.run             # full run (~5 min on 2 cores)
    python -m bench.run --quick     # fewer samples, for a smoke test
    python -m bench.run --profile   # also py-spy the daemon during read and bash loops

Results go to ``bench/results/<timestamp>.json``. Everything the run
creates (daemon, containers, volumes, scratch folder) is removed at the end,
on failure, on Ctrl-C and on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from bench import fixtures as fx
from bench import floor_throughput, scenarios, subjects
from bench import kubernetes as kube
from bench.report import render, write_json
from bench.resources import IMAGE, Resources, interrupt_on_sigterm
from bench.stats import Op, Summary, summarize, time_interleaved
from bench.targets import evaluate
from runtime_client import GrpcSandboxFactory, Sandbox
from sandboxd.backends.shared import labels

RESULTS = Path(__file__).resolve().parent / "results"


@dataclasses.dataclass(frozen=True)
class Plan:
    fast: tuple[int, int] = (20, 200)  # (warm-up, measured) for in-daemon / in-process ops
    slow: tuple[int, int] = (5, 50)  # grep/glob over a tree, and every raw docker exec
    lifecycle: int = 8
    throughput_s: float = 5.0
    idle_instances: int = 10
    big: int = 20
    grep10k: int = 10
    bursts: int = 4  # bursts of 5 back-to-back creates

    @classmethod
    def quick(cls) -> Plan:
        # Even warm-ups: subjects sharing the "ops" sandbox each flip the edit file.
        return cls((4, 20), (2, 8), 2, 1.0, 3, 3, 2, 2)


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _counts(plan: Plan, subject: str, op: str) -> tuple[int, int]:
    slow_op = op.startswith(("grep", "glob 1k")) or op in fx.PAUSE_S
    return plan.slow if subject == "raw exec" or slow_op else plan.fast


async def per_op(
    plan: Plan, subject_ops: dict[str, dict[str, Op]]
) -> dict[str, dict[str, Summary]]:
    table: dict[str, dict[str, Summary]] = {}
    for op in subjects.TOOL_OPS:
        plan_op = {s: (ops[op], *_counts(plan, s, op)) for s, ops in subject_ops.items()}
        row = table[op] = await time_interleaved(plan_op, pause=fx.PAUSE_S.get(op, 0.0))
        log(f"  {op:<15} " + "  ".join(f"{s} p50 {v.p50:.3f} ms" for s, v in row.items()))
    return table


async def bench(res: Resources, plan: Plan, args: argparse.Namespace, stamp: str) -> dict[str, Any]:
    results: dict[str, Any] = {
        "meta": {
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpu, "
            f"python {platform.python_version()}",
            "docker": res.docker.version().get("Version"),
            "plan": dataclasses.asdict(plan),
            "namespace": res.namespace,
            "loadavg_at_start": os.getloadavg(),
        }
    }
    log(f"starting sandboxd (namespace {res.namespace}, default warm pool)")
    daemon = res.start_daemon()
    target = daemon.target
    # The kubernetes column (issue 24), when the test cluster is up: started
    # now so its warm pool fills while the Docker fixtures are laid out.
    kube_daemon = kube.start(res) if args.kubernetes else None
    if kube_daemon is None:
        results["kubernetes"] = {
            "skipped": "--no-kubernetes" if not args.kubernetes else "no test cluster is up"
        }

    raw = subjects.RawExecSubject(res.docker, res.labels, f"sandboxd-bench-raw-{res.run_id}")
    raw.start()
    floor = subjects.FloorSubject(res.tmp / "floor")
    async with GrpcSandboxFactory(target) as factory, GrpcSandboxFactory(target) as unary:
        runsc = await _runsc_available(factory, results)
        sandbox = await factory.create_sandbox("ops")
        sbx = subjects.SandboxdSubject(sandbox)
        # The same sandbox with one unary CallTool RPC per call (the path before
        # ToolCalls): the difference is what the shared stream saves.
        unary.transport._tool_stream_supported = False
        sbx_unary = subjects.SandboxdSubject(await unary.create_sandbox("ops"))
        gvisor: subjects.SandboxdSubject | None = None
        if runsc:
            gvisor = subjects.SandboxdSubject(await _runsc_sandbox(factory, "ops-runsc"))
        on_kube: subjects.SandboxdSubject | None = None
        if kube_daemon is not None:
            kube_factory = GrpcSandboxFactory(kube_daemon.target)
            on_kube = subjects.SandboxdSubject(await kube_factory.create_sandbox("ops"))
        log("laying out the fixtures (1 KiB files, a 1,000-file tree) in every subject")
        await asyncio.gather(
            sbx.setup(),
            asyncio.to_thread(_sync, raw.setup),
            floor.setup(),
            *([gvisor.setup()] if gvisor else []),
            *([on_kube.setup()] if on_kube else []),
        )

        log("per-operation latency")
        verbs = subjects.SandboxdVerbsSubject(sandbox)
        subject_ops = {
            "sandboxd": sbx.ops(),
            "sandboxd unary": sbx_unary.ops(),
            "sandboxd verbs": verbs.ops(),
            "raw exec": raw.ops(),
            "floor": floor.ops(),
        }
        if gvisor:
            subject_ops["sandboxd runsc"] = gvisor.ops()
        if on_kube:
            subject_ops["sandboxd kubernetes"] = on_kube.ops()
        results["ops"] = await per_op(plan, subject_ops)
        if on_kube:
            await on_kube.sandbox.delete()
            await kube_factory.aclose()
        floor.close()
        if gvisor:
            await gvisor.sandbox.delete()

        if args.profile:
            from bench import profile

            log("profiling the daemon and executor during read and bash loops (py-spy)")
            results["profile"] = await profile.run(
                target,
                daemon.pid,
                sandbox,
                res.docker,
                labels.resource_name(res.namespace, "ops"),
                res.tmp,
                RESULTS / f"profile-{stamp}",
            )

        log("grep over 10,000 files vs rg in the container")
        results["grep_10k"] = await scenarios.grep_10k(sandbox, plan.grep10k)
        # Last in this sandbox: each read of a huge file leaves a background
        # hash of it running in the executor (the read-state guard).
        log("first page of a 1 GiB file")
        results["big_file_first_page"] = await scenarios.first_page_of_1gib(sandbox, plan.big)
        await sandbox.delete()

    log("lifecycle: bare docker run, cold create, warm-pool create, delete")
    docker_run = await asyncio.to_thread(
        scenarios.bare_docker_run, res.docker, res.labels, plan.lifecycle
    )
    cold, cold_deletes = await scenarios.create_to_first_command(
        target, cold=True, n=plan.lifecycle, prefix="cold"
    )
    warm, warm_deletes = await scenarios.create_to_first_command(
        target, cold=False, n=plan.lifecycle, prefix="warm"
    )
    first_burst, later_bursts, burst_deletes = await scenarios.create_bursts(
        target, bursts=plan.bursts, size=5, prefix="burst"
    )
    deletes = cold_deletes + warm_deletes + burst_deletes
    cold_runsc = None
    if runsc:
        cold_runsc, _ = await scenarios.create_to_first_command(
            target, cold=True, n=plan.lifecycle, prefix="cold-runsc", options=scenarios.RUNSC
        )

    count = fx.THROUGHPUT_SANDBOXES
    log(f"throughput: {count} sandboxes, {plan.throughput_s:.0f} s per kind")
    results["throughput"] = {}
    async with GrpcSandboxFactory(target) as factory:
        boxes = [await factory.create_sandbox(f"tp-{i}") for i in range(count)]
        for box in boxes:
            await box.write_file(fx.READ_FILE, fx.KIB_TEXT)
        # The eight creates raised the pool's aim: let it refill first, so the
        # calls are measured, not the container starts behind them.
        await scenarios.wait_pool_full(factory)
        for kind, (tool, tool_args, callers) in fx.THROUGHPUT_KINDS.items():
            results["throughput"][kind] = await scenarios.throughput(
                boxes, tool=tool, args=tool_args, callers=callers, seconds=plan.throughput_s
            )
        for box in boxes:
            await box.delete()
        if runsc:
            log(f"throughput under runsc: {count} sandboxes, {plan.throughput_s:.0f} s per kind")
            boxes = [await _runsc_sandbox(factory, f"tp-runsc-{i}") for i in range(count)]
            for box in boxes:
                await box.write_file(fx.READ_FILE, fx.KIB_TEXT)
            for kind, (tool, tool_args, callers) in fx.THROUGHPUT_KINDS.items():
                results["throughput"][f"{kind}_runsc"] = await scenarios.throughput(
                    boxes, tool=tool, args=tool_args, callers=callers, seconds=plan.throughput_s
                )
            for box in boxes:
                await box.delete()
    log(f"throughput's floor: the same loops on the in-process tool code, {count} processes")
    for kind, (tool, tool_args, callers) in fx.THROUGHPUT_KINDS.items():
        results["throughput"][f"{kind}_floor"] = await floor_throughput.throughput(
            tool=tool, args=tool_args, sandboxes=count, callers=callers, seconds=plan.throughput_s
        )

    if kube_daemon is not None:
        log("kubernetes: create -> first command, throughput, 1 GiB upload")
        results["kubernetes"] = await kube.measure(
            kube_daemon.target, plan.lifecycle, plan.throughput_s
        )
        kube_daemon.stop()  # its warm Pods go before the rest is measured

    log(f"idle memory: a fresh daemon (no pool), {plan.idle_instances} idle instances")
    fresh = res.start_daemon("--pool-size", "0", suffix="-mem")
    memory, idle_deletes = await scenarios.idle_memory(
        fresh.target, fresh, res.docker, fresh.namespace, count=plan.idle_instances
    )
    fresh.stop()
    results["memory"] = memory
    deletes += idle_deletes
    results["lifecycle"] = {
        "docker_run": docker_run,
        "cold_create": cold,
        "warm_create": warm,
        "burst_first": first_burst,
        "burst_later": later_bursts,
        "delete": summarize(deletes),
    }
    if cold_runsc is not None:
        results["lifecycle"]["cold_create_runsc"] = cold_runsc

    if args.transfer:
        from bench import transfer

        log("moving files in and out: trees vs docker cp, fork, 1 GiB upload")
        results["transfer"] = await transfer.measure(
            target, res.docker, dict(res.labels), IMAGE, res.tmp
        )

    if args.ports:
        from bench import ports

        log("ports: a GET through a forwarded port and the preview vs inside; 100 MiB bodies")
        results["ports"] = await ports.measure(res, plan.fast[1], 1 if plan.fast[1] < 100 else 3)

    if args.egress:
        from bench import egress

        log("egress: 100 MB through the proxy vs from the host, CONNECT set-up, 8 downloads")
        results["egress"] = await asyncio.to_thread(egress.run, plan.fast[1] < 100)

    if args.swerex:
        from bench import swerex

        log("SWE-ReX peer")
        results["swerex"] = await asyncio.to_thread(swerex.run, res, plan.fast, plan.slow)
        for key, column in (("ops", "swe-rex session"), ("ops_execute", "swe-rex execute")):
            for op, summary in results["swerex"].pop(key, {}).items():
                results["ops"].setdefault(op, {})[column] = summary
    return results


async def _runsc_available(factory: GrpcSandboxFactory, results: dict[str, Any]) -> bool:
    """Record the runtimes GetStatus reports; the runsc column runs if runsc is there."""
    status = await factory.transport.get_status()
    results["meta"]["runtimes"] = [dataclasses.asdict(r) for r in status.runtimes]
    available = any(r.name == "runsc" and r.available for r in status.runtimes)
    if not available:
        log("runsc is not registered with the engine (make engine): no gVisor column")
    return available


async def _runsc_sandbox(factory: GrpcSandboxFactory, instance_id: str) -> Sandbox:
    await factory.transport.create_sandbox(instance_id, scenarios.RUNSC)
    return await factory.create_sandbox(instance_id)


def _sync(func: Any) -> Any:
    return asyncio.run(func())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few samples (smoke test)")
    parser.add_argument("--profile", action="store_true", help="py-spy the daemon's hot path")
    parser.add_argument(
        "--no-swerex", dest="swerex", action="store_false", help="skip the SWE-ReX peer"
    )
    parser.add_argument(
        "--no-transfer", dest="transfer", action="store_false", help="skip bench.transfer"
    )
    parser.add_argument("--no-ports", dest="ports", action="store_false", help="skip bench.ports")
    parser.add_argument(
        "--no-egress", dest="egress", action="store_false", help="skip bench.egress (needs root)"
    )
    parser.add_argument(
        "--no-kubernetes",
        dest="kubernetes",
        action="store_false",
        help="skip the kubernetes column (it runs when the test cluster is up)",
    )
    args = parser.parse_args(argv)
    plan = Plan.quick() if args.quick else Plan()
    interrupt_on_sigterm()
    stamp = time.strftime("%Y%m%dT%H%M%S")
    started = time.monotonic()
    res = Resources()
    try:
        results = asyncio.run(bench(res, plan, args, stamp))
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        return 130
    finally:
        res.close()
    results["meta"]["seconds"] = round(time.monotonic() - started, 1)
    results["meta"]["loadavg_at_end"] = os.getloadavg()
    targets = evaluate(results)
    print(render(results, targets))
    if "profile" in results:
        from bench import profile

        print("\n" + profile.render(results["profile"]))
    path = write_json(results, targets, RESULTS, stamp)
    print(f"\nresults: {path}  ({results['meta']['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
