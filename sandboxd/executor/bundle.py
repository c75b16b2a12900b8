"""Ship the executor into a container over its stdin.

The container's command is a few lines of bootstrap (``bootstrap_command``)
that, as PID 1, fork a minimal init (reaps orphans, forwards signals, holds
no channel fd) and in the child read one length-prefixed JSON bundle of
module sources from stdin and import the executor from memory. So any image
with a ``python3`` (at a fixed path: Settings.executor_python) works,
nothing is written to the read-only root, and the executor always matches
the daemon that started it (the bundle id tells a re-attaching daemon
whether it does).

Compiling the ~50 modules costs every executor start ~35 ms of the
container's CPU (a cold create, each warm-pool refill). So the bundle also
carries them compiled by the daemon's interpreter (marshal, zlib, base64,
under a key no module can have) with that interpreter's bytecode magic; a
container whose ``python3`` has the same magic loads them as they are, any
other compiles the sources as before. A bootstrap from before this (the
command of a container an older daemon made) never asks for that key.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import marshal
import zlib
from functools import cache
from pathlib import Path
from typing import Any

from sandboxd.executor.identity import SEPARATE

#: The contract modules the executor imports (standard library only), shipped
#: with it; pyproject.toml's import-linter contract keeps the executor off the rest.
CONTRACT_MODULES = ("errors", "tools", "untar")

#: The bundle's key for the compiled modules (NUL: no module name has one).
BYTECODE_KEY = "\x00bytecode"
#: The bootstrap argument that makes a start ask for its bundle with a nonce
#: (the Docker backend's containers, from issue 23 item 15 on).
NONCE_ARG = "nonce"
#: The first word of a bundle header that carries a nonce.
HEADER = b"sandboxd-bundle"

# The bootstrap runs as ``python3 -I -c``. It must stay tiny and stdlib-only.
_BOOTSTRAP = (
    """\
import sys, os, json, hashlib, ctypes, signal, importlib.abc, importlib.util
# Not dumpable, before anything else: no process of the sandbox user may open
# this process's (or, after the fork, the executor's) stdio through /proc.
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
if os.getpid() == 1:
    executor = os.fork()
    if executor:
        # PID 1: reap orphans and pass signals on; it holds no channel fd, so
        # /proc/1/fd leads nowhere. The container lives as long as the executor.
        os.close(0)
        os.close(1)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda number, frame: os.kill(executor, number))
        while True:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                os._exit(0)
            except InterruptedError:
                continue
            if pid == executor:
                code = os.waitstatus_to_exitcode(status)
                os._exit(code if code >= 0 else 128 - code)
r = sys.stdin.buffer
# Anything before the bundle's header is stale: bytes a daemon wrote to the
# last executor (resync padding, a hello, requests with raw payloads, when it
# had stopped reading), which the engine hands to this start first. With
# NONCE_ARG the header must hold a number only this start knows, said on
# stdout first: nothing already in stdin can pass for it.
nonce = b""
if NONCE_ARG in sys.argv[1:]:
    nonce = os.urandom(16).hex().encode()
    sys.stdout.buffer.write(b'{"nonce":"' + nonce + b'"}\\n')
    sys.stdout.buffer.flush()
while True:
    ahead = r.peek(1)
    blank = len(ahead) - len(ahead.lstrip(b"\\n"))
    if blank:
        r.read(blank)
        continue
    line = r.readline()
    if not line:
        break
    fields = line.split()
    if nonce and len(fields) == 4 and fields[:2] == [HEADER, nonce] and fields[2].isdigit():
        line, digest = fields[2], fields[3].decode()
        break
    if not nonce and line.strip().isdigit():
        digest = None
        break
blob = r.read(int(line))
if digest is not None and hashlib.sha256(blob).hexdigest() != digest:
    sys.stderr.write("the bundle was cut or mixed on its way in; start the container again\\n")
    sys.exit(70)
mods = json.loads(blob)
shipped = mods.pop(BYTECODE_KEY, None)
codes = {}
try:
    if shipped and shipped[0] == importlib.util.MAGIC_NUMBER.hex():
        import base64, marshal, zlib
        codes = marshal.loads(zlib.decompress(base64.b64decode(shipped[1])))
except Exception:
    codes = {}
class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name in mods:
            return importlib.util.spec_from_loader(name, self, is_package=mods[name][0])
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        code = codes.get(module.__name__)
        if code is None:
            code = compile(mods[module.__name__][1], "<sandboxd>/" + module.__name__, "exec")
        exec(code, module.__dict__)
sys.meta_path.insert(0, Finder())
import sandboxd.executor.main as m
if codes:
    m.BYTECODE = "shipped"
m.main(r, hashlib.sha256(blob).hexdigest()[:16], sys.argv[1:])
""".replace("BYTECODE_KEY", repr(BYTECODE_KEY))
    .replace("NONCE_ARG", repr(NONCE_ARG))
    .replace("HEADER", repr(HEADER))
)


def bootstrap_command(
    python: str = "/usr/bin/python3", *, separate: bool = False, nonce: bool = False
) -> list[str]:
    """The container's command; ``separate`` when it starts as root (Docker
    backend); ``nonce``: each start says a nonce on stdout and takes only a
    bundle whose header carries it (``bundle_payload(nonce=...)``).

    ``python`` is an absolute path: the engine looks a bare name up on the
    container's PATH, which must not decide what runs as root.
    """
    flags = [*([SEPARATE] if separate else []), *([NONCE_ARG] if nonce else [])]
    return [python, "-I", "-c", _BOOTSTRAP, *flags]


def takes_nonce(command: list[str]) -> bool:
    """A container of this command asks for its bundle with a nonce."""
    return len(command) > 3 and NONCE_ARG in command[4:]


@cache
def _bundle(bytecode: bool) -> tuple[bytes, str]:
    # The real sandboxd/__init__ may grow imports; inside the container the
    # package is only a namespace. The contract's face is shipped as it is:
    # it imports nothing (tests/unit/test_package_boundary.py imports every
    # shipped module without site-packages).
    root = Path(__file__).resolve().parents[1]
    modules: dict[str, tuple[bool, str]] = {
        "sandboxd": (True, ""),
        "sandboxd.contract": (True, (root / "contract" / "__init__.py").read_text()),
    }
    for name in CONTRACT_MODULES:
        modules[f"sandboxd.contract.{name}"] = (
            False,
            (root / "contract" / f"{name}.py").read_text(),
        )
    _add_package(modules, "sandboxd.executor", root / "executor")
    shipped: dict[str, Any] = dict(modules)
    if bytecode:
        shipped[BYTECODE_KEY] = (importlib.util.MAGIC_NUMBER.hex(), _bytecode(modules))
    blob = json.dumps(shipped, sort_keys=True).encode()
    return blob, hashlib.sha256(blob).hexdigest()[:16]


def _bytecode(modules: dict[str, tuple[bool, str]]) -> str:
    """Every module compiled as the bootstrap would compile it, packed."""
    codes = {
        # dont_inherit: this file's own __future__ imports must not leak in.
        name: compile(source, f"<sandboxd>/{name}", "exec", dont_inherit=True)
        for name, (_, source) in modules.items()
    }
    return base64.b64encode(zlib.compress(marshal.dumps(codes), 6)).decode("ascii")


def _add_package(modules: dict[str, tuple[bool, str]], package: str, folder: Path) -> None:
    # Read the files rather than importing: shipping code must not run it here.
    modules[package] = (True, (folder / "__init__.py").read_text())
    for entry in sorted(folder.iterdir()):
        if entry.is_dir() and (entry / "__init__.py").is_file():
            _add_package(modules, f"{package}.{entry.name}", entry)
        elif entry.suffix == ".py" and entry.name != "__init__.py":
            modules[f"{package}.{entry.stem}"] = (False, entry.read_text())


def bundle_blob(*, bytecode: bool = True) -> bytes:
    """The bundle itself: module sources (and ``bytecode``) as JSON."""
    return _bundle(bytecode)[0]


def bundle_payload(*, bytecode: bool = True, nonce: str | None = None) -> bytes:
    """What to write to a freshly started container's stdin (``bytecode``:
    with the compiled modules, Settings.ship_bytecode): a header, then the
    bundle. ``nonce``: the one the start said (a ``nonce`` bootstrap); the
    header then also carries the bundle's sha256. The newline first ends a
    line left torn in stdin, so the header starts a line of its own."""
    blob = bundle_blob(bytecode=bytecode)
    if nonce is None:
        return f"\n{len(blob)}\n".encode() + blob
    digest = hashlib.sha256(blob).hexdigest()
    return b"\n%s %s %d %s\n" % (HEADER, nonce.encode(), len(blob), digest.encode()) + blob


def bundle_id(*, bytecode: bool = True) -> str:
    """What the executor started from ``bundle_payload(bytecode=...)`` says in hello."""
    return _bundle(bytecode)[1]
