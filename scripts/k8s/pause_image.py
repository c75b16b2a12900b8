"""Write a one-file container image as a `docker save` archive.

Usage: pause_image.py BINARY IMAGE_NAME OUT_TAR

The image holds BINARY as /pause, run as nobody (65535, as the upstream
pause image), and nothing else: FROM scratch. Every timestamp is zero, so the
same binary always gives the same image ID.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tarfile


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def main(binary: str, image: str, out: str) -> None:
    with open(binary, "rb") as f:
        payload = f.read()
    layer_buf = io.BytesIO()
    with tarfile.open(fileobj=layer_buf, mode="w", format=tarfile.PAX_FORMAT) as layer:
        _add(layer, "pause", payload, 0o755)
    layer_bytes = layer_buf.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": ["/pause"], "User": "65535:65535", "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "scripts/k8s/pause-image.sh: pause.c, gcc -static"}],
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    layer_name = diff_id.removeprefix("sha256:") + "/layer.tar"
    manifest = [{"Config": config_name, "RepoTags": [image], "Layers": [layer_name]}]
    with tarfile.open(out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, config_name, config_bytes)
        _add(tar, layer_name, layer_bytes)
        _add(tar, "manifest.json", json.dumps(manifest).encode())


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3])
