"""Host side of the SWE-ReX peer: build what it needs, run it, read its numbers."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

from bench import tools
from bench.resources import IMAGE, ROOT, RUN_LABEL, Resources
from bench.stats import Summary

NOTE = (
    "SWE-ReX 'docker run -p' deployment of the workspace image + swe-rex, same "
    "limits but bridge network (its API needs a published port); 'swe-rex session': "
    "bash/edit/grep/glob in its persistent pexpect bash session (which waits 0.1 s per "
    "command), 'swe-rex execute': a fresh subprocess per command via its execute endpoint; "
    "read/write are its HTTP file endpoints in both"
)


def run(res: Resources, fast: tuple[int, int], slow: tuple[int, int]) -> dict[str, Any]:
    started = time.monotonic()
    try:
        python = tools.venv_python()
        image = tools.swerex_image(res.docker, IMAGE)
    except Exception as exc:  # a peer that cannot be set up is skipped, not fatal
        return {"skipped": f"could not set up SWE-ReX: {exc}"}
    setup_s = time.monotonic() - started
    volume = res.docker.volumes.create(
        name=f"sandboxd-bench-swerex-{res.run_id}", labels=res.labels
    )
    config = {
        "image": image,
        "volume": volume.name,
        "label": RUN_LABEL,
        "run_id": res.run_id,
        "fast": list(fast),
        "slow": list(slow),
    }
    proc = subprocess.run(
        [str(python), "-m", "bench.swerex_peer", json.dumps(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        return {"skipped": f"SWE-ReX peer failed: {proc.stderr.strip()[-600:]}"}
    raw = json.loads(proc.stdout.strip().splitlines()[-1])
    ops = {name: Summary(**summary) for name, summary in raw["ops"].items()}
    ops_execute = {name: Summary(**summary) for name, summary in raw["ops_execute"].items()}
    return {
        "ops": ops,
        "ops_execute": ops_execute,
        "start_ms": raw["start_ms"],
        "setup_s": round(setup_s, 1),
        "execute_true": Summary(**raw["execute_true"]),
        "note": f"{NOTE}. Deployment start {raw['start_ms']:.0f} ms; its subprocess "
        f"endpoint (execute ['true']) p50 {raw['execute_true']['p50']:.1f} ms",
    }
