"""The executor bootstrapped from its bundle, over real pipes, as in a container."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import marshal
import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from sandboxd.contract.extras import SERVER_PYTHON
from sandboxd.executor import bundle, wire

pytestmark = pytest.mark.unit


def test_bootstrapped_executor_serves_requests_and_survives_garbage(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        bundle.bootstrap_command(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(bundle.bundle_payload())
    proc.stdin.write(b"{torn frame from a dead daemon\n")
    proc.stdin.write(b"[]\n")
    proc.stdin.write(wire.encode({"id": 1, "op": "hello", "args": {}}))
    proc.stdin.write(
        wire.encode(
            {"id": 2, "op": "write_file", "args": {"path": "f", "data_base64": wire.b64(b"hi")}}
        )
    )
    proc.stdin.flush()
    replies = {}
    for _ in range(2):
        reply = json.loads(proc.stdout.readline())
        replies[reply["id"]] = reply
    assert replies[1]["ok"]["bundle"] == bundle.bundle_id()
    assert replies[2]["ok"]["created"] is True
    assert (tmp_path / "f").read_bytes() == b"hi"
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    assert proc.stderr is not None
    assert b"dropped a malformed frame" in proc.stderr.read()


def test_bundle_id_is_stable_and_covers_the_executor() -> None:
    assert bundle.bundle_id() == bundle.bundle_id()
    blob = bundle.bundle_blob()
    modules = json.loads(blob)
    assert {"sandboxd.contract.errors", "sandboxd.executor.main", "sandboxd.executor.files"} <= set(
        modules
    )


# The loader of the bootstrap the first round shipped (no bytecode): the
# command of every container an older daemon made, which a newer daemon may
# restart and feed its bundle.
ROUND_ONE_LOADER = """\
import sys, os, json, hashlib, importlib.abc, importlib.util
r = sys.stdin.buffer
blob = r.read(int(r.readline()))
mods = json.loads(blob)
class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name in mods:
            return importlib.util.spec_from_loader(name, self, is_package=mods[name][0])
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        code = compile(mods[module.__name__][1], "<sandboxd>/" + module.__name__, "exec")
        exec(code, module.__dict__)
sys.meta_path.insert(0, Finder())
import sandboxd.executor.main as m
m.main(r, hashlib.sha256(blob).hexdigest()[:16], sys.argv[1:])
"""


def _hello(command: list[str], blob: bytes, cwd: Path) -> dict[str, object]:
    done = subprocess.run(
        command,
        input=f"{len(blob)}\n".encode() + blob + wire.encode({"id": 1, "op": "hello", "args": {}}),
        capture_output=True,
        cwd=cwd,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout.splitlines()[0])
    assert "ok" in reply, reply
    ok: dict[str, object] = reply["ok"]
    return ok


def _blob(*, bytecode: bool = True) -> bytes:
    return bundle.bundle_blob(bytecode=bytecode)


def test_an_interpreter_of_the_same_magic_runs_the_shipped_bytecode(tmp_path: Path) -> None:
    hello = _hello(bundle.bootstrap_command(sys.executable), _blob(), tmp_path)
    assert hello["bytecode"] == "shipped"
    assert hello["bundle"] == bundle.bundle_id()


def test_another_magic_compiles_the_sources(tmp_path: Path) -> None:
    modules = json.loads(_blob())
    magic, packed = modules[bundle.BYTECODE_KEY]
    assert magic == importlib.util.MAGIC_NUMBER.hex()
    modules[bundle.BYTECODE_KEY] = ["00000d0a", packed]  # another interpreter's
    blob = json.dumps(modules).encode()
    hello = _hello(bundle.bootstrap_command(sys.executable), blob, tmp_path)
    assert hello["bytecode"] == "compiled"
    assert hello["bundle"] == hashlib.sha256(blob).hexdigest()[:16]


def test_without_bytecode_the_sources_are_compiled(tmp_path: Path) -> None:
    hello = _hello(bundle.bootstrap_command(sys.executable), _blob(bytecode=False), tmp_path)
    assert hello["bytecode"] == "compiled"
    assert hello["bundle"] == bundle.bundle_id(bytecode=False) != bundle.bundle_id()


def test_a_round_one_bootstrap_runs_the_bundle_from_its_sources(tmp_path: Path) -> None:
    hello = _hello([sys.executable, "-I", "-c", ROUND_ONE_LOADER], _blob(), tmp_path)
    assert hello["bundle"] == bundle.bundle_id()
    assert hello["bytecode"] == "compiled"


def test_the_shipped_bytecode_is_what_the_bootstrap_would_compile() -> None:
    # Compiled in a fresh interpreter the way the bootstrap compiles (no
    # inherited __future__ flags), module by module: the same instructions,
    # flags, names and constants. (marshal's bytes differ between processes
    # with interning, so code objects are compared by what they hold.)
    modules = json.loads(_blob())
    _, packed = modules.pop(bundle.BYTECODE_KEY)
    shipped = marshal.loads(zlib.decompress(base64.b64decode(packed)))
    assert set(shipped) == set(modules)
    fresh = subprocess.run(
        [sys.executable, "-I", "-c", CANON + COMPILE_LIKE_THE_BOOTSTRAP],
        input=json.dumps(modules).encode(),
        capture_output=True,
        check=True,
    )
    space: dict[str, Any] = {}
    exec(CANON, space)
    assert json.loads(fresh.stdout) == {
        name: space["canon"](code) for name, code in shipped.items()
    }
    # The canon holds the flags; this says which ones matter: a module asks
    # for postponed annotations itself or does not get them.
    for name, code in shipped.items():
        asked = "from __future__ import annotations" in modules[name][1]
        assert bool(code.co_flags & ANNOTATIONS_FUTURE) == asked, name


#: CO_FUTURE_ANNOTATIONS: what compile() would inherit from bundle.py itself.
ANNOTATIONS_FUTURE = 0x1000000

CANON = """\
import types
def canon(code):
    def const(value):
        if isinstance(value, types.CodeType):
            return canon(value)
        if isinstance(value, frozenset):
            return sorted(repr(item) for item in value)
        return repr(value)
    return [code.co_code.hex(), code.co_flags, list(code.co_names), list(code.co_varnames),
            code.co_filename, code.co_firstlineno, [const(c) for c in code.co_consts]]
"""

COMPILE_LIKE_THE_BOOTSTRAP = """\
import json, sys
mods = json.loads(sys.stdin.buffer.read())
print(json.dumps({
    name: canon(compile(src, "<sandboxd>/" + name, "exec")) for name, (_, src) in mods.items()
}))
"""


def test_what_a_daemon_left_in_stdin_before_the_bundle_is_skipped(tmp_path: Path) -> None:
    # A daemon that re-attached while the executor was dying sent its resync
    # padding and a hello into stdin; the container's restart finds them
    # there, then the bundle. Before: int(b"\n") -> the executor "did not
    # start" (seen in CI on test_a_dead_executor_is_replaced_on_the_next_call).
    padding = wire.resync_padding()
    assert len(padding) > 1 << 20 and not padding.strip(b"\n")
    stale = padding + wire.encode({"id": 1, "op": "hello", "args": {}}) + b"\n\n"
    done = subprocess.run(
        bundle.bootstrap_command(sys.executable),
        input=stale + bundle.bundle_payload() + wire.encode({"id": 2, "op": "hello", "args": {}}),
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in replies] == [2]  # the stale hello is not answered
    assert replies[0]["ok"]["bundle"] == bundle.bundle_id()


#: A "bundle" whose executor only says who runs it on stderr, then exits 3:
#: what a client could upload (a raw payload goes into stdin as it is) while
#: the executor had stopped reading, for the next start to find first.
_FORGED = json.dumps(
    {
        "sandboxd": [True, ""],
        "sandboxd.executor": [True, ""],
        "sandboxd.executor.main": [
            False,
            "import os, sys\nsys.stderr.write('FORGED BUNDLE RAN\\n')\nos._exit(3)\n",
        ],
    }
).encode()
_STALE_UPLOAD = (
    wire.frame({"id": 9, "op": "upload_chunk"}, "args", {"data": b"x"})[0]
    + b"\n"
    + str(len(_FORGED)).encode()
    + b"\n"
    + _FORGED
    + b"\nsandboxd-bundle 00000000000000000000000000000000 5 x\nhello"
    + wire.RAW_END
)


def _start_with_nonce(command: list[str], stale: bytes, cwd: Path) -> subprocess.Popen[bytes]:
    """A nonce bootstrap with ``stale`` already in its stdin: read its nonce,
    then send the bundle with it, then a hello."""
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(stale)
    proc.stdin.flush()
    said = json.loads(proc.stdout.readline())
    proc.stdin.write(bundle.bundle_payload(nonce=said["nonce"]))
    proc.stdin.write(wire.encode({"id": 2, "op": "hello", "args": {}}))
    proc.stdin.close()
    return proc


def test_a_forged_bundle_left_in_stdin_is_never_run(tmp_path: Path) -> None:
    """Issue 23 item 15. The old rule (the first all-digit line is the
    length) ran it; with a nonce only this start's bundle is taken."""
    old = subprocess.run(
        bundle.bootstrap_command(sys.executable),
        input=_STALE_UPLOAD + bundle.bundle_payload(),
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert old.returncode == 3 and b"FORGED BUNDLE RAN" in old.stderr
    command = bundle.bootstrap_command(sys.executable, nonce=True)
    assert bundle.takes_nonce(command) and not bundle.takes_nonce(bundle.bootstrap_command())
    proc = _start_with_nonce(command, _STALE_UPLOAD, tmp_path)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    assert proc.wait(timeout=60) == 0 and b"FORGED" not in err, err
    replies = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in replies] == [2]
    assert replies[0]["ok"]["bundle"] == bundle.bundle_id()


def test_a_bundle_mixed_with_stale_bytes_is_refused(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        bundle.bootstrap_command(sys.executable, nonce=True),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdin is not None and proc.stdout is not None
    said = json.loads(proc.stdout.readline())
    payload = bundle.bundle_payload(nonce=said["nonce"])
    middle = len(payload) // 2
    # The engine copying old bytes in while the bundle goes in: same length, other bytes.
    mixed = payload[:middle] + b"\n" * 64 + payload[middle + 64 :]
    _, err = proc.communicate(mixed, timeout=60)
    assert proc.returncode == 70 and b"cut or mixed" in err, err


def _other_pythons() -> list[Path]:
    """This machine's other CPythons a daemon runs on (pyenv) whose bytecode
    magic is not ours."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    found = []
    for python in sorted((root / "versions").glob("3.*/bin/python")):
        minor = tuple(int(part) for part in python.parts[-3].split(".")[:2])
        if minor < SERVER_PYTHON:
            continue
        magic = subprocess.run(
            [str(python), "-I", "-c", "import importlib.util as u; print(u.MAGIC_NUMBER.hex())"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if magic and magic != importlib.util.MAGIC_NUMBER.hex():
            found.append(python)
    return found


OTHER_PYTHONS = _other_pythons()


@pytest.mark.skipif(not OTHER_PYTHONS, reason="no other CPython here (pyenv)")
@pytest.mark.parametrize("daemon_python", OTHER_PYTHONS, ids=lambda p: p.parts[-3])
def test_a_bundle_from_a_daemon_on_another_python_is_compiled_here(
    daemon_python: Path, tmp_path: Path
) -> None:
    # A daemon on 3.12 or 3.13 feeding a container whose python3 is 3.11 (and
    # the other way round): its bundle, made by that interpreter, carries
    # bytecode this one cannot load, so the executor compiles the sources and
    # works the same.
    made = subprocess.run(
        [str(daemon_python), "-I", "-c", MAKE_BUNDLE, str(Path(bundle.__file__).parents[2])],
        capture_output=True,
        check=True,
    ).stdout
    blob = made.lstrip(b"\n").split(b"\n", 1)[1]
    theirs = json.loads(blob)[bundle.BYTECODE_KEY][0]
    assert theirs != importlib.util.MAGIC_NUMBER.hex()
    hello = _hello(bundle.bootstrap_command(sys.executable), blob, tmp_path)
    assert hello["bytecode"] == "compiled"
    assert hello["bundle"] == hashlib.sha256(blob).hexdigest()[:16]
    done = subprocess.run(
        bundle.bootstrap_command(sys.executable),
        input=made
        + wire.encode(
            {"id": 1, "op": "tool", "args": {"name": "bash", "args": {"command": "echo hi"}}}
        ),
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
    )
    reply = json.loads(done.stdout.splitlines()[0])
    assert reply["ok"]["text"].startswith("hi\n"), reply


MAKE_BUNDLE = """\
import sys
sys.path.insert(0, sys.argv[1])
from sandboxd.executor import bundle
sys.stdout.buffer.write(bundle.bundle_payload())
"""
