"""A sandbox's own ``env`` is the workload's, never the executor's (issue 23, item 2).

The attack: ``SandboxOptions.env.PATH`` starting at a workspace folder, as
``/workspace/.venv/bin`` would, became the container's environment. At the
next container start the engine ran a planted ``python3`` from that folder
as the container's command (root, with the executor's capabilities), and
the executor ran a planted ``setpriv`` with a real uid of 0; ``LD_DEBUG``
(like ``LD_PRELOAD``) reached the loader of the root bootstrap. Each planted
program records who ran it in ``/run/sandboxd`` (root's: only a process
acting as root can write there) and then does its real job, so the sandbox
keeps working either way.
"""

from __future__ import annotations

import docker
import pytest

from runtime_client import Sandbox
from sandboxd.backends.shared import labels
from tests.hostile.support import recover

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(240)]

PLANTED = "/workspace/.venv/bin"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ENV = {
    "PATH": f"{PLANTED}:{SYSTEM_PATH}",
    "LD_LIBRARY_PATH": "/workspace/.venv/lib",
    "SANDBOXD_PROBE": "set",
}
#: The hostile suite's ``box`` fixture (runc and runsc) with this env.
BOX_OPTIONS = {"env": ENV}

# Each records its real and effective uid where only root can write, becomes
# root if it can (a real uid of 0 allows it), then runs the real program.
_RECORD = (
    "import os, sys\n"
    "name = os.path.basename(sys.argv[0])\n"
    "ids = os.getresuid()\n"
    "try:\n"
    "    os.setresuid(0, 0, 0)\n"
    "    open('/run/sandboxd/planted-' + name, 'w').write(repr(ids))\n"
    "except OSError:\n"
    "    pass\n"
)
_PLANT = (
    f"mkdir -p {PLANTED} && cd {PLANTED} && "
    f"printf '#!/usr/bin/python3\\n%s' \"$REC\" > python3 && "
    'printf \'os.execv("/usr/bin/python3", ["python3", *sys.argv[1:]])\\n\' >> python3 && '
    f"printf '#!/usr/bin/python3\\n%s' \"$REC\" > setpriv && "
    'printf \'os.execv("/usr/bin/setpriv", ["setpriv", *sys.argv[1:]])\\n\' >> setpriv && '
    "chmod 755 python3 setpriv && echo planted"
)


async def test_planted_programs_on_the_sandbox_path_never_run_as_root(
    box: Sandbox, docker_client: docker.DockerClient, namespace: str
) -> None:
    planted = await box.exec(["bash", "-c", _PLANT], env={"REC": _RECORD})
    assert planted.stdout == b"planted\n", planted
    # The next container start (a crash, an OOM kill, an idle stop) ...
    name = labels.resource_name(namespace, box.instance_id)
    docker_client.containers.get(name).kill()
    await recover(box)
    # ... and a call that starts a process (setpriv) after it.
    result = await box.bash("echo $SANDBOXD_PROBE; id -u; ls /run/sandboxd")
    lines = result.text.split("\n")
    assert lines[:2] == ["set", "1000"], result.text
    assert not [line for line in lines if line.startswith("planted-")], result.text
    # The sandbox's PATH is still the workload's: its own python3 runs there, as the user.
    mine = await box.exec(["python3", "-c", "import os; print(os.getresuid())"])
    assert mine.stdout == b"(1000, 1000, 1000)\n", mine
    assert await _root_records(box) == []
    # The container's environment (the executor's) holds none of the sandbox's env.
    container_env = docker_client.containers.get(name).attrs["Config"]["Env"]
    assert not {f"{k}={v}" for k, v in ENV.items()} & set(container_env), container_env


async def _root_records(box: Sandbox) -> list[str]:
    """What a planted program managed to write as root."""
    listing = await box.list_dir("/run/sandboxd")
    return [entry.name for entry in listing if entry.name.startswith("planted-")]
