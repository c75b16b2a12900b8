"""Placeholder replacement in HTTP/1.1 request heads, streaming everything else.

``RequestRewriter`` sits on the sandbox-to-upstream direction of one
connection (TLS already terminated, or plain HTTP). It reads request after
request (keep-alive, pipelining): each head is collected whole (at most
``MAX_HEAD`` bytes), placeholders are replaced in header *values* only — the
request line (method, URL) and bodies go out as they came, so a secret cannot
be made to appear in a URL, a log of one, or an echoed body. Bodies are framed
exactly as the server will frame them (``Transfer-Encoding: chunked`` or
``Content-Length``; neither: none) and streamed through without buffering, so
the next head is found where the server will find it; anything ambiguous
(two different lengths, an unknown transfer coding, a bad chunk size) ends the
connection rather than guess — a guess that differs from the server's is
request smuggling. After an ``Upgrade`` request the rest is opaque bytes.

Responses are not parsed: they go back byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

MAX_HEAD = 64 * 1024
MAX_CHUNK_LINE = 4096


class HeaderError(Exception):
    """The request stream is not HTTP/1.1 this rewriter can frame; the connection ends.

    The message never carries header values (they may hold a secret's placeholder or value).
    """


class RequestRewriter:
    """Feed the sandbox's bytes in order; forward what ``feed`` returns."""

    def __init__(
        self,
        replacements: Mapping[bytes, bytes],
        check_target: Callable[[bytes], bool] | None = None,
    ) -> None:
        #: placeholder -> value, for the secrets bound to this connection's host.
        self._replacements = dict(replacements)
        #: asked with each request's target (URL); False ends the connection.
        self._check_target = check_target
        self._buffer = bytearray()
        self._state = "head"
        self._remaining = 0  # of a Content-Length body, or of a chunk's data (+ its CRLF)
        #: heads rewritten so far (tests, and the daemon's debug counters).
        self.requests = 0

    def feed(self, data: bytes) -> bytes:
        self._buffer += data
        out = bytearray()
        while self._buffer or self._state == "opaque":
            if self._state == "opaque":
                out += self._buffer
                self._buffer.clear()
                break
            step = getattr(self, f"_on_{self._state}")
            progressed = step(out)
            if not progressed:
                break
        return bytes(out)

    def at_boundary(self) -> bool:
        """Between requests (nothing half sent): the sandbox may close here cleanly."""
        return self._state == "head" and not self._buffer

    # Each state handler consumes from the buffer into ``out``; False: need more bytes.

    def _on_head(self, out: bytearray) -> bool:
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD:
                raise HeaderError(f"request head longer than {MAX_HEAD} bytes")
            return False
        if end + 4 > MAX_HEAD:
            raise HeaderError(f"request head longer than {MAX_HEAD} bytes")
        head = bytes(self._buffer[: end + 4])
        del self._buffer[: end + 4]
        out += self._rewrite(head)
        return True

    def _forward(self, out: bytearray, then: str) -> bool:
        """Pass ``_remaining`` body bytes through as they come; then state ``then``."""
        take = min(self._remaining, len(self._buffer))
        out += self._buffer[:take]
        del self._buffer[:take]
        self._remaining -= take
        if self._remaining == 0:
            self._state = then
        return take > 0 or self._remaining == 0

    def _line(self, limit: int, what: str) -> bytes | None:
        """The next CRLF-ended line (consumed), or None until it is complete."""
        end = self._buffer.find(b"\r\n")
        if end < 0:
            if len(self._buffer) > limit:
                raise HeaderError(f"{what} too long")
            return None
        line = bytes(self._buffer[: end + 2])
        del self._buffer[: end + 2]
        return line

    def _on_length(self, out: bytearray) -> bool:
        return self._forward(out, "head")

    def _on_chunk_size(self, out: bytearray) -> bool:
        line = self._line(MAX_CHUNK_LINE, "chunk size line")
        if line is None:
            return False
        size_text = line[:-2].split(b";", 1)[0].strip()
        if not size_text or any(c not in b"0123456789abcdefABCDEF" for c in size_text):
            raise HeaderError("bad chunk size")
        size = int(size_text, 16)
        out += line
        if size == 0:
            self._state = "trailers"
        else:
            self._remaining = size
            self._state = "chunk_data"
        return True

    def _on_chunk_data(self, out: bytearray) -> bool:
        return self._forward(out, "chunk_end")

    def _on_chunk_end(self, out: bytearray) -> bool:
        if len(self._buffer) < 2:
            return False
        if self._buffer[:2] != b"\r\n":
            raise HeaderError("chunk data not followed by CRLF")
        out += b"\r\n"
        del self._buffer[:2]
        self._state = "chunk_size"
        return True

    def _on_trailers(self, out: bytearray) -> bool:
        # Trailer lines until an empty line; passed through as they are.
        line = self._line(MAX_HEAD, "trailers")
        if line is None:
            return False
        out += line
        if line == b"\r\n":
            self._state = "head"
        return True

    def _rewrite(self, head: bytes) -> bytes:
        lines = head[:-4].split(b"\r\n")
        request_line, fields = lines[0], lines[1:]
        parts = request_line.split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            raise HeaderError("not an HTTP/1.x request line")
        if self._check_target is not None and not self._check_target(parts[1]):
            raise HeaderError("request for another host on this connection")
        lengths: set[bytes] = set()
        chunked = False
        upgrade = False
        rewritten = [request_line]
        for field in fields:
            name, colon, value = field.partition(b":")
            if not colon or not name or name != name.strip() or b"\n" in field or b"\r" in field:
                raise HeaderError("malformed header line")
            lower = name.lower()
            if lower == b"content-length":
                lengths.add(value.strip())
            elif lower == b"transfer-encoding":
                codings = [c.strip().lower() for c in value.split(b",") if c.strip()]
                if codings != [b"chunked"]:
                    raise HeaderError("transfer coding other than chunked")
                chunked = True
            elif lower == b"upgrade":
                upgrade = True
            for placeholder, secret in self._replacements.items():
                value = value.replace(placeholder, secret)
            rewritten.append(name + b":" + value)
        self.requests += 1
        if chunked:
            if lengths:
                raise HeaderError("both Content-Length and Transfer-Encoding")
            self._state = "chunk_size"
        elif lengths:
            if len(lengths) > 1 or not all(x.isdigit() for x in lengths):
                raise HeaderError("bad or conflicting Content-Length")
            self._remaining = int(lengths.pop())
            self._state = "length" if self._remaining else "head"
        else:
            self._state = "head"
        if upgrade:
            self._state = "opaque"
        return b"\r\n".join(rewritten) + b"\r\n\r\n"
