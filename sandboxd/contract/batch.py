"""What both ends of ``ToolCalls`` agree on about batches (the contract package).

Under load one gRPC message per call is most of a call's cost at both ends,
so requests made, or answers ready, at the same moment may share a message's
``batch``. The daemon reads batched requests from any client and says so in
its headers; it batches answers only for a client that opened the stream
with the same metadata (an older client never gets one).
"""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf.message import Message

#: Sent by a client that reads batched answers; sent back in the daemon's
#: headers: it reads batched requests.
BATCH_METADATA = ("sandboxd-batch", "1")
#: One batch holds at most this many messages, and this many bytes (a
#: message bigger than that goes alone). Far under either end's receive limit.
MAX_BATCH_MESSAGES = 64
MAX_BATCH_BYTES = 256 * 1024


def says_batches(metadata: Iterable[tuple[str, str]] | None) -> bool:
    return any(tuple(item) == BATCH_METADATA for item in metadata or ())


class BatchBudget:
    """Admits messages into one batch while it stays within the limits."""

    def __init__(self) -> None:
        self.count = 0
        self.size = 0

    def admits(self, message: Message) -> bool:
        size = message.ByteSize()
        if self.count and (self.count >= MAX_BATCH_MESSAGES or self.size + size > MAX_BATCH_BYTES):
            return False
        self.count += 1
        self.size += size
        return True
