"""What both ends of ``OpenPorts`` (many connections over one stream) agree on.

A connection on a shared stream cannot lean on HTTP/2's flow control (that
would stop every connection behind the slowest), so each direction of each
connection has a window of its own, in bytes: the daemon takes at most
``INPUT_WINDOW`` bytes of a connection's input that it has not yet written
to the server inside, and grants more as it writes; the client grants the
daemon its own window for the connection's output. The caps bound what a
caller can make the daemon hold: connections times ``INPUT_WINDOW``.
"""

from __future__ import annotations

#: Bytes of data one message carries at most, either way.
CHUNK = 256 << 10
#: Bytes a client may send to one connection beyond what the daemon has
#: written to the server inside (a window's worth is in flight: bulk
#: uploads keep the pipe full across a round trip).
INPUT_WINDOW = 512 << 10
#: Connections one stream may have open at once; a client opens another
#: stream beyond it.
CONNECTIONS_PER_STREAM = 64
#: Connections open at once over every OpenPorts stream of one caller.
CONNECTIONS_PER_CALLER = 256
