"""The network policy over HTTP: set at create, read back with its warning,
changed by PUT .../network, refused when bad; the decision log."""

from __future__ import annotations

import httpx
import pytest

from sandboxd.contract.models import NetworkDecision
from sandboxd.contract.network import FULL_WARNING
from sandboxd.daemon.assembly import Daemon

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]


async def test_policy_and_log_over_http(server: Daemon, client: httpx.AsyncClient) -> None:
    policy = {"mode": "allow", "allow": ["pypi.org", "*.pythonhosted.org:443"], "deny": []}
    created = await client.post(
        "/v1/sandboxes", json={"instance_id": "n1", "options": {"network": policy}}
    )
    assert created.status_code == 201, created.text
    assert created.json()["sandbox"]["options"]["network"] == policy
    assert created.json()["sandbox"]["warnings"] == []
    full = await client.post(
        "/v1/sandboxes", json={"instance_id": "n2", "options": {"network": True}}
    )
    assert full.json()["sandbox"]["options"]["network"]["mode"] == "full"
    assert (await client.get("/v1/sandboxes/n2")).json()["warnings"] == [FULL_WARNING]

    changed = await client.put("/v1/sandboxes/n1/network", json={"policy": {"mode": "none"}})
    assert changed.status_code == 200, changed.text
    assert changed.json()["options"]["network"] == {"mode": "none", "allow": [], "deny": []}
    bad = await client.put(
        "/v1/sandboxes/n1/network", json={"policy": {"mode": "allow", "allow": ["a\tb"]}}
    )
    assert bad.status_code == 400
    assert "network.allow: rule 'a\\tb'" in bad.json()["error"]["message"]
    typo = await client.put("/v1/sandboxes/n1/network", json={"policy": {"mode": "opn"}})
    assert typo.status_code in (400, 422)
    to_full = await client.put("/v1/sandboxes/n1/network", json={"policy": {"mode": "full"}})
    assert to_full.status_code == 400
    assert (await client.get("/v1/sandboxes/n1")).json()["options"]["network"]["mode"] == "none"

    entry = NetworkDecision(5, "example.com", 443, "192.0.2.7", False, "", "not allowed", "socks")
    server.service.network.record("n1", entry)
    log = await client.get("/v1/sandboxes/n1/network/log", params={"limit": 10})
    assert log.status_code == 200
    assert log.json() == {"entries": [entry.to_json()]}
    assert (await client.get("/v1/sandboxes/nope/network/log")).status_code == 404
