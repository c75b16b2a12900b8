"""The relay: what the daemon runs with exec to reach a Pod's executor.

The executor listens on a unix socket in a root-only folder of its state
tmpfs (``executor.direct``). Kubernetes offers no way to that socket but a
process in the Pod, so each channel is an exec of this small program: it
connects to the socket (waiting for it while the executor starts), checks
that the listener is root, and copies bytes both ways until either side
ends. Its stdin and stdout are the exec stream's, so nothing of the channel
reaches the container's log (which is PID 1's stdout only). On stdin's end
it half-closes the socket; the executor then retires the connection.

Exit codes the daemon reads from the status channel: ``NO_EXECUTOR`` when
no executor socket answered in time (the bundle was never shipped, or the
executor is starting).
"""

from __future__ import annotations

from sandboxd.executor.direct import SOCKET_NAME
from sandboxd.executor.main import STATE_DIR

#: No executor socket answered within the wait.
NO_EXECUTOR = 3
#: A socket answered, but its listener is not root (never the executor's).
NOT_ROOT = 4

# Run as ``python3 -I -c RELAY <wait seconds>``; stdlib only, kept small (it
# travels in the exec request's query string).
RELAY = f"""\
import glob, os, socket, struct, sys, threading, time
end = time.monotonic() + float(sys.argv[1])
while True:
    s = None
    for path in sorted(glob.glob({STATE_DIR + "/" + "?" * 16 + "/" + SOCKET_NAME!r})):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            break
        except OSError:
            s.close()
            s = None
    if s is not None:
        break
    if time.monotonic() > end:
        sys.stderr.write("sandboxd relay: no executor socket\\n")
        sys.exit({NO_EXECUTOR})
    time.sleep(0.05)
if struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1] != 0:
    sys.stderr.write("sandboxd relay: the socket's listener is not root\\n")
    sys.exit({NOT_ROOT})
def up():
    try:
        while True:
            b = os.read(0, 1 << 20)
            if not b:
                break
            s.sendall(b)
    except OSError:
        pass
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
threading.Thread(target=up, daemon=True).start()
try:
    while True:
        b = memoryview(s.recv(1 << 20))
        if not b:
            break
        while b:
            b = b[os.write(1, b):]
except OSError:
    pass
"""


def relay_command(python: str, wait_s: float) -> list[str]:
    """The exec command: ``python`` (an absolute path, never a PATH lookup)."""
    return [python, "-I", "-c", RELAY, f"{wait_s:.1f}"]
