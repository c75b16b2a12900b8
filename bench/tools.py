"""The bench's own tools venv (SWE-ReX, aiohttp, py-spy) and the SWE-ReX image.

Kept apart from the project's venv so the peer's dependencies can never
change what sandboxd runs on. Everything lives under ``bench/.cache`` and
is made once; later runs reuse it.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import docker
import docker.errors

CACHE = Path(__file__).resolve().parent / ".cache"
VENV = CACHE / "venv"
WHEELS = CACHE / "swerex-image" / "wheels"
SWEREX_IMAGE = "sandboxd-bench-swerex:latest"
PACKAGES = ("swe-rex", "aiohttp", "py-spy")

_DOCKERFILE = """\
FROM {base}
USER root
COPY wheels /tmp/wheels
RUN python3 /tmp/wheels/{pip_wheel}/pip install --no-index --find-links /tmp/wheels \\
        --break-system-packages --no-cache-dir swe-rex && rm -rf /tmp/wheels
USER 1000:1000
LABEL sandboxd.managed=true sandboxd.image=bench-swerex sandboxd.image.hash={digest}
"""


def _pip(*args: str) -> None:
    proc = subprocess.run(
        [str(VENV / "bin" / "python"), "-m", "pip", "-q", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args)} failed:\n{proc.stderr[-2000:]}")


def venv_python() -> Path:
    """The tools venv's python, made (with SWE-ReX, aiohttp and py-spy) on first use."""
    python = VENV / "bin" / "python"
    if not (VENV / "bin" / "py-spy").exists() or not (VENV / "bin" / "swerex-remote").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        _pip("install", *PACKAGES)
    return python


def py_spy() -> Path:
    venv_python()
    return VENV / "bin" / "py-spy"


def swerex_image(client: docker.DockerClient, base: str) -> str:
    """An image FROM the workspace image with swe-rex installed offline from wheels."""
    if not any(WHEELS.glob("swe_rex-*.whl")) or not any(WHEELS.glob("pip-*.whl")):
        shutil.rmtree(WHEELS, ignore_errors=True)
        WHEELS.mkdir(parents=True)
        _pip("download", "-d", str(WHEELS), "swe-rex", "pip")
    pip_wheel = sorted(WHEELS.glob("pip-*.whl"))[-1].name
    base_id = client.images.get(base).id
    names = "\n".join(sorted(p.name for p in WHEELS.iterdir()))
    digest = hashlib.sha256(f"{base_id}\n{names}".encode()).hexdigest()[:16]
    try:
        image = client.images.get(SWEREX_IMAGE)
        if image.labels.get("sandboxd.image.hash") == digest:
            return SWEREX_IMAGE
    except docker.errors.ImageNotFound:
        pass
    context = WHEELS.parent
    (context / "Dockerfile").write_text(
        _DOCKERFILE.format(base=base, pip_wheel=pip_wheel, digest=digest)
    )
    client.images.build(path=str(context), tag=SWEREX_IMAGE, rm=True, pull=False)
    return SWEREX_IMAGE
