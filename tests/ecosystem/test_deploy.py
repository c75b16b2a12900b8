"""deploy/: the compose and Kubernetes examples say what the README says they do."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT

pytestmark = pytest.mark.unit

SOCKET_DIR = "/run/sandboxd"
TARGET = "unix:///run/sandboxd/sandboxd.sock"


def _load(relative: str) -> Any:
    return yaml.safe_load((ROOT / relative).read_text())


def test_compose_shares_only_the_socket_with_the_agent() -> None:
    services = _load("deploy/compose.yaml")["services"]
    sandboxd, agent = services["sandboxd"], services["agent"]
    assert sandboxd["command"] == ["serve", "--socket", f"{SOCKET_DIR}/sandboxd.sock"]
    assert "/var/run/docker.sock:/var/run/docker.sock" in sandboxd["volumes"]
    assert f"sandboxd-socket:{SOCKET_DIR}" in sandboxd["volumes"]
    assert sandboxd["healthcheck"]["test"] == ["CMD", "sandboxctl", "health"]
    # The agent: the socket volume and nothing else, no network, started once healthy.
    assert agent["volumes"] == [f"sandboxd-socket:{SOCKET_DIR}"]
    assert agent["network_mode"] == "none"
    assert agent["entrypoint"] == ["python3", "/opt/sandboxd/examples/scripted_agent.py"]
    assert agent["command"] == ["--target", TARGET]
    assert agent["depends_on"]["sandboxd"]["condition"] == "service_healthy"
    assert (ROOT / "examples" / "scripted_agent.py").is_file()


def test_compose_file_is_accepted_by_docker_compose() -> None:
    tool = shutil.which("docker-compose")
    if tool is None:
        # `make test` installs it (scripts/ensure-host-tools.sh); under CI a skip would hide that.
        if os.environ.get("CI") == "true":
            pytest.fail("docker-compose is not installed; run scripts/ensure-host-tools.sh")
        pytest.skip("docker-compose is not installed (apt-get install docker-compose)")
    subprocess.run(
        [tool, "-p", "sandboxd-example", "-f", str(ROOT / "deploy/compose.yaml"), "config", "-q"],
        check=True,
        timeout=60,
    )


def _mounts(container: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in container["volumeMounts"]}


def test_pod_is_the_sidecar_pattern() -> None:
    pod = _load("deploy/k8s/pod.yaml")
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    spec = pod["spec"]
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    assert volumes["sandboxd-socket"]["emptyDir"] == {}
    assert volumes["docker-socket"]["hostPath"] == {
        "path": "/var/run/docker.sock",
        "type": "Socket",
    }

    [sidecar] = spec["initContainers"]
    assert sidecar["restartPolicy"] == "Always"  # a native sidecar: up before the agent
    assert sidecar["args"] == ["serve", "--socket", f"{SOCKET_DIR}/sandboxd.sock"]
    assert sidecar["startupProbe"]["exec"]["command"] == ["sandboxctl", "health"]
    assert _mounts(sidecar) == {
        "sandboxd-socket": SOCKET_DIR,
        "docker-socket": "/var/run/docker.sock",
    }

    [agent] = spec["containers"]
    assert _mounts(agent) == {"sandboxd-socket": SOCKET_DIR}
    assert agent["args"] == ["--target", TARGET]
