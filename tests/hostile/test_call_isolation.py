"""A process left by one call cannot forge another call's result (issue 23, item 5).

The attack: a process left running by an earlier call watches /proc for the
later calls' processes and (1) attaches to them with ptrace and rewrites
their ``exit_group(3)`` to ``exit_group(0)``, so the call reports success,
and (2) opens their ``/proc/<pid>/fd/<n>`` for writing and injects text into
their output. Both leftovers log what they managed to do; the later calls'
results must be exactly what their commands produced.

Under runc each workload process starts in a Landlock domain of its own
(``executor.isolation``): ptrace and /proc/<pid>/fd, mem, environ of
another call's processes are refused. Under gVisor (no Landlock) its own
Yama ptrace scope refuses the attach, and the output channels (pipes, the
bash state file) are made by the executor as root, mode 0600, so another
process of the sandbox user cannot reopen them. Processes of one call still
trace each other (a debugger run by the command works).
"""

from __future__ import annotations

import asyncio

import docker
import pytest

from runtime_client import Sandbox
from sandboxd.contract.models import Runtime, SandboxOptions
from tests.helpers import Daemon
from tests.hostile.conftest import sandbox_with

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(240)]

#: What both leftovers share: the pid of every process started from now on
#: whose command line holds VICTIM.
WATCH = r"""
import ctypes, os, sys, time
log = open(sys.argv[1], "a", buffering=1)
def victims():
    done = set(os.listdir("/proc"))
    first_seen = {}
    log.write("ready\n")
    while True:
        now = time.monotonic()
        for name in os.listdir("/proc"):
            if name in done or not name.isdigit():
                continue
            # Looked at again for a while: a forked child shows its parent's
            # command line until it execs.
            first = first_seen.setdefault(name, now)
            try:
                cmdline = open(f"/proc/{name}/cmdline", "rb").read()
            except OSError:
                done.add(name)
                continue
            if b"VICTIM" in cmdline:
                done.add(name)
                yield int(name)
            elif now - first > 2:
                done.add(name)
        time.sleep(0.002)
"""

#: Seizes each victim and turns its exit_group(n) into exit_group(0) (x86_64).
TRACER = (
    WATCH
    + r"""
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
NAMES = ("r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags "
         "rsp ss fs_base gs_base ds es fs gs").split()
class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in NAMES]
SEIZE, INTERRUPT, SYSCALL, GETREGS, SETREGS = 0x4206, 0x4207, 24, 12, 13
def trace(pid):
    if libc.ptrace(SEIZE, pid, None, ctypes.c_void_p(1)) != 0:  # TRACESYSGOOD
        log.write(f"seize {pid}: {os.strerror(ctypes.get_errno())}\n")
        return
    log.write(f"seized {pid}\n")
    libc.ptrace(INTERRUPT, pid, None, None)
    while True:
        _, status = os.waitpid(pid, 0x40000000)
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            return
        sig = 0
        if os.WIFSTOPPED(status) and os.WSTOPSIG(status) == 0x85:  # syscall stop
            regs = Regs()
            libc.ptrace(GETREGS, pid, None, ctypes.byref(regs))
            if regs.orig_rax == 231 and regs.rdi != 0:  # exit_group(n)
                regs.rdi = 0
                libc.ptrace(SETREGS, pid, None, ctypes.byref(regs))
                log.write(f"rewrote {pid}\n")
        elif os.WIFSTOPPED(status) and status >> 16 == 0:
            sig = os.WSTOPSIG(status)  # pass real signals on
        libc.ptrace(SYSCALL, pid, None, ctypes.c_void_p(sig))
for pid in victims():
    trace(pid)
"""
)

#: Writes into every descriptor of each victim it can reopen.
INJECTOR = (
    WATCH
    + r"""
for pid in victims():
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError as exc:
        log.write(f"{pid}: {exc.strerror}\n")
        continue
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/null":
                continue  # shared by everyone, and carries nothing
            out = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
            os.write(out, b"INJECTED\n")
            os.close(out)
            log.write(f"injected {pid} fd {fd}\n")
        except OSError as exc:
            log.write(f"{pid} fd {fd}: {exc.strerror}\n")
"""
)


async def _leave_behind(box: Sandbox, name: str, source: str) -> None:
    """Start ``source`` as a process that outlives its call, and wait until it watches."""
    await box.write_file(f"/tmp/{name}.py", source)
    await box.bash(f"nohup python3 /tmp/{name}.py /tmp/{name}.log > /dev/null 2>&1 &")
    for _ in range(100):
        if "ready" in (await box.exec(["cat", f"/tmp/{name}.log"])).stdout.decode():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} did not start")


async def test_a_leftover_process_cannot_rewrite_a_later_exit_code(box: Sandbox) -> None:
    await _leave_behind(box, "tracer", TRACER)
    for _ in range(3):
        tool = await box.bash("bash -c ': VICTIM; sleep 0.5; exit 3'")
        assert tool.fields["exit_code"] == 3 and tool.is_error, tool.text
        # (The victim a child of the call's first process: that one is setpriv
        # at first, not dumpable, and never traceable.)
        ran = await box.exec(["bash", "-c", "bash -c ': VICTIM; sleep 0.5; exit 3'; exit $?"])
        assert ran.exit_code == 3, ran
    log = (await box.exec(["cat", "/tmp/tracer.log"])).stdout.decode()
    assert "rewrote" not in log and "seized" not in log, log
    assert "seize" in log, log  # it saw the victims and tried


async def test_a_leftover_process_cannot_write_into_a_later_calls_output(box: Sandbox) -> None:
    await _leave_behind(box, "injector", INJECTOR)
    for _ in range(3):
        tool = await box.bash("bash -c ': VICTIM; sleep 0.5; echo real'")
        assert tool.text == "real\n\nExit code: 0", tool.text
        ran = await box.exec(["bash", "-c", ": VICTIM; sleep 0.5; echo real; echo err >&2"])
        assert (ran.stdout, ran.stderr) == (b"real\n", b"err\n"), ran
    # The next call's state (cwd, env) is the command's own.
    after = await box.bash("pwd; echo ${INJECTED:-clean}")
    assert after.text == "/workspace\nclean\n\nExit code: 0", after.text
    log = (await box.exec(["cat", "/tmp/injector.log"])).stdout.decode()
    assert "injected" not in log, log
    assert "denied" in log, log  # it found the victims and tried


#: Writes into every terminal it can open while a victim runs.
TERMINALS = (
    WATCH
    + r"""
for pid in victims():
    for name in os.listdir("/dev/pts"):
        if not name.isdigit():
            continue
        try:
            out = os.open(f"/dev/pts/{name}", os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
            os.write(out, b"INJECTED\n")
            os.close(out)
            log.write(f"injected /dev/pts/{name}\n")
        except OSError as exc:
            log.write(f"/dev/pts/{name}: {exc.strerror}\n")
"""
)


async def test_a_leftover_process_cannot_write_into_a_later_terminal(box: Sandbox) -> None:
    await _leave_behind(box, "terminals", TERMINALS)
    process = await box.start_process("bash -c ': VICTIM; sleep 1; echo real'", pty=(24, 80))
    output = b""
    async for chunk in process:
        output += chunk.data
    assert output.replace(b"\r", b"") == b"real\n", output
    log = (await box.exec(["cat", "/tmp/terminals.log"])).stdout.decode()
    assert "injected" not in log and "denied" in log, log


#: A process tracing its own child: what a debugger run by the command does.
OWN_CHILD = r"""
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
child = os.fork()
if child == 0:
    time.sleep(5)
    os._exit(0)
ok = libc.ptrace(16, child, None, None)  # PTRACE_ATTACH
print("attach", ok, os.strerror(ctypes.get_errno()) if ok else "")
os.kill(child, signal.SIGKILL)
"""


async def test_a_call_may_still_trace_its_own_processes(box: Sandbox) -> None:
    await box.write_file("/tmp/own.py", OWN_CHILD)
    result = await box.bash("python3 /tmp/own.py")
    assert result.text.startswith("attach 0\n"), result.text


async def test_allow_ptrace_lets_calls_trace_each_other_again(
    daemon: Daemon, docker_client: docker.DockerClient, namespace: str, instance_id: str
) -> None:
    """The explicit opt-out: under runc a later call's processes can be
    attached to (and so, as the option's cost, their results forged). gVisor's
    own ptrace scope still refuses a process that is not an ancestor."""
    options = SandboxOptions(runtime=Runtime.RUNC, allow_ptrace=True)
    async with sandbox_with(daemon, docker_client, namespace, instance_id, options) as box:
        await _leave_behind(box, "tracer", TRACER)
        tool = await box.bash("bash -c ': VICTIM; sleep 0.5; exit 3'")
        ran = await box.exec(["bash", "-c", "bash -c ': VICTIM; sleep 0.5; exit 3'; exit $?"])
        log = (await box.exec(["cat", "/tmp/tracer.log"])).stdout.decode()
        assert log.count("rewrote") == 2, log
        # What isolation prevents, allowed here: both results forged.
        assert tool.fields["exit_code"] == 0 and ran.exit_code == 0, (tool.text, ran)
