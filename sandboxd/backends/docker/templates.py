"""Templates: images built from a Dockerfile and its context by the engine.

What a build may do is decided before it starts, from the Dockerfile:

- The engine's API build (what docker-py speaks) is the classic builder: it
  has no ``RUN --mount`` (so no bind of a host path, no secret, no ssh
  agent), and its build containers get no mount of anything but the layers.
  A Dockerfile asking for BuildKit's flags is refused by name, rather than
  failing half-way.
- Nothing is pulled: every ``FROM`` and ``COPY --from`` names an earlier
  stage or an image already in the engine (sandboxd never pulls).
- The build's containers have no network (``network_mode=none``) unless the
  operator allows it (``SANDBOXD_TEMPLATE_BUILD_NETWORK``); then too, an
  ``ADD`` of a URL (fetched by the engine itself, outside any container) is
  refused without it.

A build runs within the operator's time limit
(``SANDBOXD_TEMPLATE_BUILD_TIMEOUT_S``); one that makes no template (over
the limit, failed, or its caller gone) is stopped and the images it
committed are removed (``Build``).

The tag is the content's digest (the Dockerfile's path, the context's
bytes, the network setting, each base image's id), so the same build twice
finds its image and runs nothing. The result is checked for what the
executor needs (its python, 3.9 or later, and bash) and removed if it lacks
them, with the reason.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import io
import json
import re
import socket
import tarfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import docker
import docker.errors

from sandboxd.contract.errors import InvalidArgument
from sandboxd.executor.identity import SANDBOX_GID, SANDBOX_UID

#: The repository every template is tagged in; the tag is ``<namespace>-<digest>``.
REPOSITORY = "sandboxd-template"
#: Label on a template image: the digest it was built from.
TEMPLATE_LABEL = "sandboxd.template"
MAX_DOCKERFILE_BYTES = 1 << 20
#: A build log line longer than this is cut (the log is the caller's to read, bounded).
MAX_LINE = 4096
_RUN_FLAGS = re.compile(r"^--(mount|network|security)\b", re.IGNORECASE)
_URL = re.compile(r"^(https?|git|ssh)://|^git@", re.IGNORECASE)
#: What the executor needs of an image: exit 3 for an old python, 4 for no bash.
_NEEDS = (
    "import os, sys; "
    "sys.exit(3 if sys.version_info < (3, 9) else 0 if os.access('/bin/bash', os.X_OK) else 4)"
)


def dockerfile_of(context: Path, dockerfile: str) -> str:
    """The Dockerfile's text, read from the context's tar."""
    name = dockerfile.lstrip("./") or "Dockerfile"
    try:
        with tarfile.open(context, mode="r:") as archive:
            for member in archive:
                if member.name.lstrip("./") == name and member.isfile():
                    if member.size > MAX_DOCKERFILE_BYTES:
                        raise InvalidArgument(f"{dockerfile} is over {MAX_DOCKERFILE_BYTES} bytes")
                    handle = archive.extractfile(member)
                    assert handle is not None
                    return handle.read().decode("utf-8", errors="replace")
    except tarfile.TarError as exc:
        raise InvalidArgument(f"the build context is not a tar stream: {exc}") from exc
    raise InvalidArgument(f"the build context has no {dockerfile!r} (a file at its top)")


def _instructions(text: str) -> list[tuple[str, list[str]]]:
    """(INSTRUCTION, its words) per instruction: continuations joined, comments dropped."""
    found: list[tuple[str, list[str]]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        words = (pending + line).split()
        pending = ""
        if words:
            found.append((words[0].upper(), words[1:]))
    if pending.split():
        words = pending.split()
        found.append((words[0].upper(), words[1:]))
    return found


def check(text: str, *, network: bool, local: Callable[[str], bool]) -> list[str]:
    """Refuse what a build may not do (module docstring); the base images.

    ``local(image)``: whether the engine has the image."""
    stages: set[str] = set()
    bases: list[str] = []

    def base(image: str, where: str) -> None:
        if image in stages or image.isdigit():
            return
        if "$" in image:
            raise InvalidArgument(
                f"{where}: {image!r} is not resolved from build arguments here; name the image"
            )
        if image.lower() != "scratch" and not local(image):
            raise InvalidArgument(
                f"{where}: image {image!r} is not in the local Docker engine (sandboxd never "
                "pulls); build FROM the workspace image or another local image"
            )
        bases.append(image)

    for number, (instruction, words) in enumerate(_instructions(text), start=1):
        where = f"Dockerfile instruction {number} ({instruction})"
        flags = [w for w in words if w.startswith("--")]
        args = [w for w in words if not w.startswith("--")]
        if instruction == "FROM":
            if not args:
                raise InvalidArgument(f"{where}: FROM names no image")
            base(args[0], where)
            if len(args) >= 3 and args[1].upper() == "AS":
                stages.add(args[2])
        elif instruction == "RUN":
            for flag in flags:
                if _RUN_FLAGS.match(flag):
                    raise InvalidArgument(
                        f"{where}: {flag.split('=')[0]} is refused: a template build mounts "
                        "nothing of the host (no bind, secret, ssh or cache mounts) and its "
                        "network is the operator's to allow"
                    )
        elif instruction in ("COPY", "ADD"):
            for flag in flags:
                if flag.lower().startswith("--from="):
                    base(flag.split("=", 1)[1], where)
            if instruction == "ADD" and not network and any(_URL.match(a) for a in args[:-1]):
                raise InvalidArgument(
                    f"{where}: ADD of a URL fetches from the network, which this daemon's "
                    "template builds do not have (SANDBOXD_TEMPLATE_BUILD_NETWORK); put the "
                    "file in the context"
                )
    if not bases and not stages:
        raise InvalidArgument("the Dockerfile has no FROM")
    return bases


def digest(context: Path, dockerfile: str, network: bool, base_ids: list[str]) -> str:
    """What the template is made of, as one sha256."""
    hasher = hashlib.sha256()
    hasher.update(f"sandboxd-template-1\0{dockerfile}\0{network}\0".encode())
    for base_id in base_ids:
        hasher.update(base_id.encode() + b"\0")
    with context.open("rb") as handle:
        for piece in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(piece)
    return hasher.hexdigest()


class Build:
    """One engine build, which another thread may stop (``stop``), and what
    it made, read from its log, so a build that made no template can take
    its intermediate images away again (``remove_leftovers``)."""

    #: The classic builder's own lines: a step's container, then the image it committed.
    _RUNNING = re.compile(r"^ ---> Running in ([0-9a-f]{12,64})$")
    _COMMITTED = re.compile(r"^ ---> ([0-9a-f]{12,64})$")

    def __init__(self, client: docker.DockerClient) -> None:
        self._client = client
        self._started = time.time()
        self._lock = threading.Lock()
        self._response: Any = None
        self._stopped = False
        self._stepping = False  # a container ran in this step: its image is new
        #: Images this build committed (not cached ones), oldest first.
        self.committed: list[str] = []
        #: The containers its steps ran in.
        self.containers: list[str] = []

    def run(
        self,
        context: Path,
        *,
        dockerfile: str,
        tag: str,
        labels: Mapping[str, str],
        network: bool,
        memory_bytes: int,
        emit: Callable[[str], None],
    ) -> None:
        """Run the build, each log line to ``emit``; a failed build is the
        caller's Dockerfile's: InvalidArgument with the engine's words."""
        api = self._client.api
        # docker-py's build(), by its parts: the response is kept, so that
        # stop() can break its connection (the engine then ends the build).
        params = {
            "t": tag,
            "dockerfile": dockerfile,
            "labels": json.dumps(dict(labels)),
            "networkmode": "bridge" if network else "none",
            "pull": False,
            "rm": True,
            "forcerm": True,
            "memory": memory_bytes,
            "memswap": memory_bytes,
        }
        with context.open("rb") as handle:
            response = api._post(
                api._url("/build"),
                data=handle,
                params=params,
                headers={"Content-Type": "application/tar"},
                stream=True,
                timeout=None,
            )
            with self._lock:
                self._response = response
                stopped = self._stopped
            if stopped:
                self._shut()
            api._raise_for_status(response)
            for event in api._stream_helper(response, decode=True):
                if "error" in event:
                    raise InvalidArgument(
                        f"the template build failed: {str(event['error'])[:2000]}"
                    )
                text = event.get("stream")
                if isinstance(text, str):
                    for line in text.splitlines():
                        if line.strip():
                            self._note(line)
                            emit(line[:MAX_LINE])

    def _note(self, line: str) -> None:
        if line.startswith("Step "):
            self._stepping = False
        elif found := self._RUNNING.match(line):
            self.containers.append(found.group(1))
            self._stepping = True
        elif self._stepping and (found := self._COMMITTED.match(line)):
            self.committed.append(found.group(1))
            self._stepping = False

    def stop(self) -> None:
        """End the build: its connection broken, the engine removes the
        step's container (the classic builder does so when its caller goes)."""
        with self._lock:
            self._stopped = True
            if self._response is None:
                return
        self._shut()

    def _shut(self) -> None:
        try:
            raw = self._client.api._get_raw_response_socket(self._response)
            getattr(raw, "_sock", raw).shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError, docker.errors.APIError):
            with contextlib.suppress(Exception):
                self._response.close()

    def remove_leftovers(self, tag: str) -> list[str]:
        """Remove what a build that made no template left: its tag (a build
        that ended as it was stopped: never checked, so never a cache hit)
        and the images it committed. Only untagged images made since it
        started are removed, none forced: the log is the workload's to
        write as well, and an image with children is another build's cache.
        Returns the ids removed."""
        self._wait_for_step_containers()
        with contextlib.suppress(docker.errors.APIError):
            self._client.images.remove(tag, noprune=True)
        removed = []
        for image_id in reversed(self.committed):
            try:
                image = self._client.images.get(image_id)
            except docker.errors.APIError:
                continue
            if image.tags or _created(image.attrs) < self._started - 2:
                continue
            with contextlib.suppress(docker.errors.APIError):
                self._client.images.remove(image.id, noprune=True)
                removed.append(image_id)
        return removed

    def _wait_for_step_containers(self, timeout: float = 10.0) -> None:
        # The engine removes a stopped build's container once it sees the
        # connection gone, a moment after: waited for (never removed here:
        # an id from the log may be the workload's own words).
        deadline = time.monotonic() + timeout
        for container in self.containers[-1:]:
            while time.monotonic() < deadline:
                try:
                    self._client.containers.get(container)
                except docker.errors.NotFound:
                    break
                except docker.errors.APIError:
                    return
                time.sleep(0.1)


def _created(attrs: Mapping[str, Any]) -> float:
    """An image's creation time (seconds since the epoch); 0 if unreadable."""
    text = str(attrs.get("Created") or "")
    try:
        # Docker's RFC 3339 with nanoseconds: fromisoformat takes microseconds.
        stamp = re.sub(r"(\.\d{6})\d+", r"\1", text).replace("Z", "+00:00")
        return datetime.datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return 0.0


def check_needs(client: docker.DockerClient, tag: str, python: str) -> None:
    """Refuse (and remove) an image the executor cannot run in."""
    reason = ""
    try:
        client.containers.run(
            tag,
            ["-I", "-c", _NEEDS],
            entrypoint=[python],
            network_mode="none",
            user="0:0",
            remove=True,
            stdout=False,
            stderr=True,
        )
    except docker.errors.ContainerError as exc:
        reason = {
            3: f"its {python} is older than 3.9",
            4: "it has no /bin/bash (the bash tool runs it)",
        }.get(exc.exit_status, f"{python} failed: {_said(exc.stderr)}")
    except docker.errors.APIError as exc:
        reason = f"it has no {python} ({exc.explanation or exc})"
    if reason:
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(tag, force=True)
        raise InvalidArgument(
            f"the template cannot run sandboxes: {reason}; the executor needs python3 (3.9+, "
            f"at {python}, SANDBOXD_EXECUTOR_PYTHON) and bash: build FROM the workspace "
            "image, or install them"
        )


def _said(stderr: object) -> str:
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else str(stderr or "")
    return text.strip()[-300:]


def snapshot_context(out: Path, files: str, base: str) -> None:
    """A build context that puts a snapshot's ``files`` in /workspace of ``base``:
    a volume made empty for a new sandbox of the result is filled from the
    image's /workspace by the engine, so the sandbox starts with them."""
    dockerfile = (
        f"FROM {base}\nCOPY --chown={SANDBOX_UID}:{SANDBOX_GID} workspace/ /workspace/\n"
    ).encode()
    with tarfile.open(out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        archive.addfile(info, io.BytesIO(dockerfile))
        archive.add(files, arcname="workspace")  # recursive, names sorted
