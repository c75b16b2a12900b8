"""/metrics in the Prometheus text format, parsed by prometheus_client's own parser,
and the per-call access log."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from runtime_client import GrpcSandboxFactory, NotFound
from sandboxd.cli import _JsonFormatter
from sandboxd.daemon.assembly import Daemon
from sandboxd.observability import metrics
from tests.http.conftest import base_url, make_settings

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(client: httpx.AsyncClient) -> Samples:
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_counters_move_with_calls_on_both_transports(
    server: Daemon, client: httpx.AsyncClient
) -> None:
    before = await scrape(client)
    await client.post("/v1/sandboxes", json={"instance_id": "m-1"})
    await client.post("/v1/sandboxes/m-1/tools/read", json={"arguments": {"file_path": "nope"}})
    await client.post("/v1/sandboxes/m-1/tools/glob", json={"arguments": {"pattern": "*"}})
    await client.get("/v1/sandboxes/ghost")
    async with GrpcSandboxFactory(f"unix://{server.settings.socket}") as factory:
        sandbox = await factory.create_sandbox("m-2")
        await sandbox.call_tool("write", {"file_path": "a", "content": "x"})
        with pytest.raises(NotFound):
            await factory.transport.get_sandbox("ghost")
    after = await scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    calls = "sandboxd_calls_total"
    assert moved(calls, transport="http", method="CreateSandbox", tool="", code="OK") == 1
    assert moved(calls, transport="http", method="CallTool", tool="read", code="OK") == 1
    assert moved(calls, transport="http", method="CallTool", tool="glob", code="OK") == 1
    assert moved(calls, transport="http", method="GetSandbox", tool="", code="NOT_FOUND") == 1
    assert moved(calls, transport="grpc", method="CreateSandbox", tool="", code="OK") == 1
    assert moved(calls, transport="grpc", method="CallTool", tool="write", code="OK") == 1
    assert moved(calls, transport="grpc", method="GetSandbox", tool="", code="NOT_FOUND") == 1
    # Errors by cause, and tool results the model saw as errors.
    assert (
        moved("sandboxd_errors_total", transport="http", method="GetSandbox", cause="not_found")
        == 1
    )
    assert (
        moved("sandboxd_errors_total", transport="grpc", method="GetSandbox", cause="not_found")
        == 1
    )
    assert moved("sandboxd_tool_errors_total", tool="read") == 1
    # Latency histograms per method and tool.
    hist = "sandboxd_call_duration_seconds_count"
    assert moved(hist, transport="http", method="CallTool", tool="read") == 1
    assert moved(hist, transport="grpc", method="CallTool", tool="write") == 1
    assert value(after, "sandboxd_call_duration_seconds_bucket",
                 transport="http", method="CallTool", tool="read", le="+Inf") >= 1  # fmt: skip
    # Gauges read at scrape time.
    assert value(after, "sandboxd_instances", state="running") == 2
    assert value(after, "sandboxd_pool_size") == 0  # the local backend has no pool
    assert value(after, "sandboxd_pool_ready") == 0
    assert ("sandboxd_container_starts_total", ()) in after


async def test_instance_gauge_follows_deletes(client: httpx.AsyncClient) -> None:
    await client.post("/v1/sandboxes", json={"instance_id": "g-1"})
    assert value(await scrape(client), "sandboxd_instances", state="running") == 1
    await client.delete("/v1/sandboxes/g-1")
    assert value(await scrape(client), "sandboxd_instances", state="running") == 0


async def test_unknown_tool_names_do_not_become_label_values(client: httpx.AsyncClient) -> None:
    await client.post("/v1/sandboxes", json={"instance_id": "l-1"})
    await client.post("/v1/sandboxes/l-1/tools/made-up-name", json={})
    samples = await scrape(client)
    tools = {dict(labels).get("tool") for name, labels in samples if name == "sandboxd_calls_total"}
    assert "made-up-name" not in tools
    assert "other" in tools


async def test_probes_and_metrics_are_not_counted_as_calls(client: httpx.AsyncClient) -> None:
    await client.get("/healthz")
    samples = await scrape(client)
    methods = {
        dict(labels).get("method") for name, labels in samples if name == "sandboxd_calls_total"
    }
    assert not methods & {"healthz", "readyz", "prometheus_metrics"}


def test_container_start_hook_counts() -> None:
    before = metrics.CONTAINER_STARTS._value.get()
    metrics.container_started()
    assert metrics.CONTAINER_STARTS._value.get() == before + 1


async def test_access_log_line_per_call(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server = Daemon(make_settings(tmp_path, access_log=True))
    await server.start()
    try:
        async with httpx.AsyncClient(
            base_url=base_url(server),
            headers={"Authorization": "Bearer admin-token-0123456789abcdef"},
        ) as client:
            caplog.set_level(logging.INFO, logger="sandboxd.access")
            await client.post("/v1/sandboxes", json={"instance_id": "log-1"})
            await client.post(
                "/v1/sandboxes/log-1/tools/bash",
                json={"arguments": {"command": "true"}, "tool_call_id": "call-7"},
            )
    finally:
        await server.stop()
    lines = [r for r in caplog.records if r.name == "sandboxd.access"]
    assert [r.levelno for r in lines] == [logging.INFO, logging.INFO]
    assert json.loads(_JsonFormatter().format(lines[0]))["instance_id"] == "log-1"
    entry = json.loads(_JsonFormatter().format(lines[1]))
    assert entry["level"] == "info"
    assert entry["method"] == "CallTool"
    assert entry["instance_id"] == "log-1"
    assert entry["tool"] == "bash"
    assert entry["tool_call_id"] == "call-7"
    assert entry["status"] == "OK"
    assert entry["transport"] == "http"
    assert isinstance(entry["duration_ms"], float)


async def test_access_log_is_debug_by_default(
    server: Daemon, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="sandboxd.access")
    await client.get("/v1/sandboxes/ghost")
    async with GrpcSandboxFactory(f"unix://{server.settings.socket}") as factory:
        with pytest.raises(NotFound):
            await factory.transport.get_sandbox("ghost")
    lines = [r for r in caplog.records if r.name == "sandboxd.access"]
    assert [r.levelno for r in lines] == [logging.DEBUG, logging.DEBUG]
    assert [vars(r)["fields"]["transport"] for r in lines] == ["http", "grpc"]
    assert all(vars(r)["fields"]["status"] == "NOT_FOUND" for r in lines)


def test_log_lines_during_a_call_carry_its_ids() -> None:
    from sandboxd.observability.calls import observe

    record = logging.LogRecord("sandboxd.x", logging.INFO, __file__, 1, "restarting", None, None)
    with observe("grpc", "CallTool", instance_id="box", tool="bash", tool_call_id="c-1"):
        entry = json.loads(_JsonFormatter().format(record))
    assert entry["instance_id"] == "box"
    assert entry["tool_call_id"] == "c-1"
    outside = json.loads(_JsonFormatter().format(record))
    assert "instance_id" not in outside
