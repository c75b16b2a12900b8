"""The local backend: workspaces are folders on this host. NO isolation.

Commands run as the daemon's user with the daemon's environment. It exists
for development, for tests of tool behaviour, and for agents that already
run inside their own sandbox; it shares every operation with the Docker
backend by calling the same ``Executor`` in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from sandboxd.backends.local.settings import LocalSettings
from sandboxd.backends.shared import clone
from sandboxd.backends.shared import snapshots as shared_snapshots
from sandboxd.backends.shared.errors import unknown_instance, unsupported
from sandboxd.backends.shared.options import DEFAULT_WORKDIR, check_same, effective, overridden
from sandboxd.backends.shared.pipes import PipeEndpoints
from sandboxd.contract.errors import AlreadyExists
from sandboxd.contract.models import (
    DiskLimit,
    ForkResult,
    PoolStatus,
    RuntimeInfo,
    SandboxInfo,
    SandboxOptions,
    SnapshotInfo,
    TemplateInfo,
)
from sandboxd.executor import files
from sandboxd.executor.credits import Credits, window
from sandboxd.executor.dispatch import Executor

_META = ".sandboxd"


class LocalWorkspace(PipeEndpoints):
    def __init__(self, instance_id: str, executor: Executor) -> None:
        self._instance_id = instance_id
        self.executor = executor
        # A fork closes the gate and waits for the calls in flight: the copy
        # sees no half-applied sandboxd write.
        self._open = asyncio.Event()
        self._open.set()
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @contextlib.asynccontextmanager
    async def _call_slot(self) -> AsyncIterator[None]:
        await self._open.wait()
        self._in_flight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """No new call starts, and the ones in flight have ended (background
        jobs and processes keep running: this backend cannot freeze them)."""
        self._open.clear()
        try:
            await self._idle.wait()
            yield
        finally:
            self._open.set()

    @property
    def instance_id(self) -> str:
        return self._instance_id

    async def call(self, op: str, args: Mapping[str, Any]) -> dict[str, Any]:
        cancel = threading.Event()
        async with self._call_slot():
            try:
                result: dict[str, Any] = await anyio.to_thread.run_sync(
                    self.executor.handle, op, dict(args), cancel, None, abandon_on_cancel=True
                )
            except anyio.get_cancelled_exc_class():
                cancel.set()
                raise
        return result

    async def stream(self, op: str, args: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        cancel = threading.Event()
        # The same flow control as over the executor channel: the producer
        # runs ahead of the consumer by one window at most.
        credits = Credits(window(op))

        def emit(event: dict[str, Any]) -> None:
            if credits.take(cancel):
                loop.call_soon_threadsafe(queue.put_nowait, ("ev", event))

        def work() -> None:
            try:
                result = self.executor.handle(op, dict(args), cancel, emit)
                loop.call_soon_threadsafe(queue.put_nowait, ("ok", result))
            except BaseException as exc:
                loop.call_soon_threadsafe(queue.put_nowait, ("err", exc))

        worker = loop.run_in_executor(None, work)
        try:
            while True:
                kind, value = await queue.get()
                if kind == "ev":
                    yield value
                    credits.grant(1)
                elif kind == "ok":
                    yield {"result": value}
                    return
                else:
                    raise value
        finally:
            cancel.set()
            await asyncio.shield(worker)


class LocalBackend:
    name = "local"

    def __init__(self, settings: LocalSettings, root: Path | None = None) -> None:
        self.settings = settings
        self.root = (root or settings.local_root).resolve()
        self._workspaces: dict[str, LocalWorkspace] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def start(self) -> None:
        (self.root / _META).mkdir(parents=True, exist_ok=True)

    async def close(self) -> None:
        for workspace in self._workspaces.values():
            workspace.executor.close()
        self._workspaces.clear()

    def _meta(self, instance_id: str) -> Path:
        return self.root / _META / f"{instance_id}.json"

    def _workdir(self, instance_id: str, options: SandboxOptions) -> Path:
        # The option names a folder under /workspace; here /workspace is the instance folder.
        inner = (options.workdir or DEFAULT_WORKDIR)[len(DEFAULT_WORKDIR) :].lstrip("/")
        return self.root / instance_id / inner

    def _read_meta(self, instance_id: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self._meta(instance_id).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _info(self, instance_id: str, meta: Mapping[str, Any]) -> SandboxInfo:
        return SandboxInfo(
            instance_id=instance_id,
            state="running",
            container_id="",
            volume=str(self.root / instance_id),
            options=SandboxOptions.from_json(meta.get("options", {})),
            created_at_ms=int(meta.get("created_at_ms", 0)),
        )

    async def create(
        self, instance_id: str, requested: SandboxOptions, wanted: SandboxOptions
    ) -> tuple[SandboxInfo, bool]:
        async with self._locks.setdefault(instance_id, asyncio.Lock()):
            meta = self._read_meta(instance_id)
            if meta is not None:
                check_same(
                    instance_id, requested, SandboxOptions.from_json(meta.get("options", {}))
                )
                return self._info(instance_id, meta), False
            meta = {"options": wanted.to_json(), "created_at_ms": int(time.time() * 1000)}
            self._workdir(instance_id, wanted).mkdir(parents=True, exist_ok=True)
            self._meta(instance_id).write_text(json.dumps(meta))
            return self._info(instance_id, meta), True

    def pool_status(self) -> PoolStatus:
        return PoolStatus()  # folders are created instantly; nothing to pool

    async def runtimes(self) -> list[RuntimeInfo]:
        return []  # plain host processes: no container runtime

    def disk_limit(self) -> DiskLimit:
        return DiskLimit(reason="the local backend's workspaces are host folders (no disk limit)")

    async def get(self, instance_id: str) -> SandboxInfo:
        meta = self._read_meta(instance_id)
        if meta is None:
            raise unknown_instance(instance_id)
        return self._info(instance_id, meta)

    async def list(self, label_selector: Mapping[str, str]) -> list[SandboxInfo]:
        found = []
        for path in sorted((self.root / _META).glob("*.json")):
            meta = self._read_meta(path.stem)
            if meta is None:
                continue
            info = self._info(path.stem, meta)
            if all(info.options.labels.get(k) == v for k, v in label_selector.items()):
                found.append(info)
        return found

    def _marks_file(self, instance_id: str) -> Path:
        return self.root / _META / "marks" / f"{instance_id}.json"

    async def read_marks(self, instance_id: str | None = None) -> dict[str, dict[str, str]]:
        folder = self.root / _META / "marks"
        paths = [self._marks_file(instance_id)] if instance_id else sorted(folder.glob("*.json"))
        found = {}
        for path in paths:
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                found[path.stem] = {str(k): str(v) for k, v in data.items()}
        return found

    async def write_marks(self, instance_id: str, marks: Mapping[str, str]) -> None:
        path = self._marks_file(instance_id)
        if not marks:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps(dict(marks)))
        partial.replace(path)  # a reader never sees half a file

    async def delete(self, instance_id: str) -> None:
        async with self._locks.setdefault(instance_id, asyncio.Lock()):
            if self._read_meta(instance_id) is None:
                raise unknown_instance(instance_id)
            workspace = self._workspaces.pop(instance_id, None)
            if workspace is not None:
                workspace.executor.close()
            await anyio.to_thread.run_sync(self._remove_files, instance_id)

    async def restart(self, instance_id: str) -> SandboxInfo:
        async with self._locks.setdefault(instance_id, asyncio.Lock()):
            info = await self.get(instance_id)
            workspace = self._workspaces.pop(instance_id, None)
            if workspace is not None:
                # Stops background jobs; a fresh executor starts on the next call.
                await anyio.to_thread.run_sync(workspace.executor.close)
            state = self.root / _META / "state" / instance_id
            await anyio.to_thread.run_sync(_remove_quietly, state)
            return info

    async def fork(self, source_id: str, new_id: str, override: SandboxOptions) -> ForkResult:
        started = time.monotonic()
        first, second = sorted((source_id, new_id))
        async with (
            self._locks.setdefault(first, asyncio.Lock()),
            self._locks.setdefault(second, asyncio.Lock()),
        ):
            meta = self._read_meta(source_id)
            if meta is None:
                raise unknown_instance(source_id)
            if self._read_meta(new_id) is not None or (self.root / new_id).exists():
                raise AlreadyExists(f"sandbox {new_id!r} already exists; fork onto a new id")
            source_options = SandboxOptions.from_json(meta.get("options", {}))
            wanted = effective(overridden(source_options, override), self.settings)
            target = self.root / new_id
            target.mkdir()
            workspace = await self.workspace(source_id)
            try:
                async with workspace.paused():
                    method = await anyio.to_thread.run_sync(
                        clone.copy_tree, str(self.root / source_id), str(target)
                    )
            except BaseException:
                await anyio.to_thread.run_sync(_remove_quietly, target)
                raise
            self._workdir(new_id, wanted).mkdir(parents=True, exist_ok=True)
            new_meta = {"options": wanted.to_json(), "created_at_ms": int(time.time() * 1000)}
            self._meta(new_id).write_text(json.dumps(new_meta))
            return ForkResult(
                sandbox=self._info(new_id, new_meta),
                method=method,
                duration_ms=int((time.monotonic() - started) * 1000),
            )

    # ------------------------------------------------------------ snapshots

    def _snapshot_folder(self, tenant: str, name: str | None = None) -> Path:
        # A tenant's name may hold any character: its folder is named by a digest.
        owner = hashlib.sha256(tenant.encode()).hexdigest()[:16] if tenant else "operator"
        folder = self.root / _META / "snapshots" / owner
        return folder if name is None else folder / name

    async def snapshot(self, instance_id: str, name: str, tenant: str) -> SnapshotInfo:
        started = time.monotonic()
        folder = self._snapshot_folder(tenant, name)
        async with self._locks.setdefault(instance_id, asyncio.Lock()):
            meta = self._read_meta(instance_id)
            if meta is None:
                raise unknown_instance(instance_id)
            try:
                folder.mkdir(parents=True)
            except FileExistsError:
                raise AlreadyExists(
                    f"snapshot {name!r} already exists; delete it or choose another"
                ) from None
            try:
                workspace = await self.workspace(instance_id)
                options = SandboxOptions.from_json(meta.get("options", {}))
                async with workspace.paused():
                    info = await anyio.to_thread.run_sync(
                        shared_snapshots.take,
                        str(self.root / instance_id),
                        str(folder),
                        shared_snapshots.Taking(name, instance_id, options, started),
                    )
            except BaseException:
                await anyio.to_thread.run_sync(shared_snapshots.remove, folder)
                raise
            return info

    async def snapshots(self, tenant: str) -> Sequence[SnapshotInfo]:
        folder = self._snapshot_folder(tenant)
        found = []
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            note = shared_snapshots.read_note(str(path))
            if note is not None:
                found.append(note)
        return found

    async def delete_snapshot(self, name: str, tenant: str) -> None:
        folder = self._snapshot_folder(tenant, name)
        if not folder.is_dir():
            raise shared_snapshots.unknown(name)
        await anyio.to_thread.run_sync(shared_snapshots.remove, folder)

    async def restore(self, instance_id: str, name: str, tenant: str) -> ForkResult:
        started = time.monotonic()
        folder = self._snapshot_folder(tenant, name)
        if shared_snapshots.read_note(str(folder)) is None:
            raise shared_snapshots.unknown(name)
        info = await self.restart(instance_id)  # no executor runs while the files change
        async with self._locks.setdefault(instance_id, asyncio.Lock()):
            method = await anyio.to_thread.run_sync(
                shared_snapshots.restore, str(folder), str(self.root / instance_id)
            )
        return ForkResult(
            sandbox=info, method=method, duration_ms=int((time.monotonic() - started) * 1000)
        )

    def _remove_files(self, instance_id: str) -> None:
        _remove_quietly(self.root / instance_id)
        _remove_quietly(self.root / _META / "state" / instance_id)
        self._meta(instance_id).unlink(missing_ok=True)

    async def build_template(
        self, context: Path, dockerfile: str
    ) -> AsyncIterator[str | TemplateInfo]:
        raise unsupported("templates", self.name, "build the image with the engine's own tools")
        yield ""  # an async generator, as the port's

    async def template_from_snapshot(
        self, name: str, tenant: str
    ) -> AsyncIterator[str | TemplateInfo]:
        raise unsupported("templates", self.name, "build the image with the engine's own tools")
        yield ""  # an async generator, as the port's

    async def workspace(self, instance_id: str) -> LocalWorkspace:
        workspace = self._workspaces.get(instance_id)
        if workspace is not None:
            return workspace
        meta = self._read_meta(instance_id)
        if meta is None:
            raise unknown_instance(instance_id)
        options = SandboxOptions.from_json(meta.get("options", {}))
        state_dir = self.root / _META / "state" / instance_id
        state_dir.mkdir(parents=True, exist_ok=True)
        workdir = self._workdir(instance_id, options)
        workdir.mkdir(parents=True, exist_ok=True)
        executor = Executor(
            str(workdir),
            state_dir=str(state_dir),
            base_env=None,
            max_payload_bytes=self.settings.max_payload_bytes,
            max_output_bytes=self.settings.max_output_bytes,
            read_guard=not options.disable_read_guard,
        )
        executor.base_env.update(options.env)
        workspace = self._workspaces.setdefault(instance_id, LocalWorkspace(instance_id, executor))
        return workspace


def _remove_quietly(folder: Path) -> None:
    # Not shutil.rmtree: it recurses per level, and a workspace tree can be
    # deeper than Python's recursion limit (files.remove_tree).
    with contextlib.suppress(OSError):
        files.remove_tree(str(folder))
