"""Text helpers: BOM/CRLF round trips, line counting, cat -n, lists in words.

TOOLS.md: files are decoded as UTF-8 with replacement, a BOM is stripped and
remembered, CRLF files are shown as LF and written back as CRLF. ``Decoded``
carries exactly what is needed to write a file back the way it was.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

BOM = b"\xef\xbb\xbf"
#: A NUL byte in this many leading bytes makes a file binary.
BINARY_SNIFF_BYTES = 8192
#: Files up to this size are read whole (hash, line count, edit); larger
#: ones are only streamed, so a page of a huge file stays cheap.
MAX_TEXT_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Decoded:
    text: str  # BOM stripped; LF line endings when ``crlf``
    bom: bool
    crlf: bool


def is_binary(prefix: bytes) -> bool:
    return b"\x00" in prefix[:BINARY_SNIFF_BYTES]


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def decode(data: bytes) -> Decoded:
    bom = data.startswith(BOM)
    if bom:
        data = data[len(BOM) :]
    text = data.decode("utf-8", errors="replace")
    crlf_count = text.count("\r\n")
    # Only a file whose every line ends in CRLF is converted: a mixed file
    # keeps its bytes, and edit's CRLF-insensitive level handles the rest.
    crlf = crlf_count > 0 and crlf_count == text.count("\n")
    if crlf:
        text = text.replace("\r\n", "\n")
    return Decoded(text, bom, crlf)


def encode(text: str, *, bom: bool, crlf: bool) -> bytes:
    if crlf:
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    data = text.encode("utf-8", errors="replace")
    return BOM + data if bom else data


def count_lines(text: str) -> int:
    """Lines as ``wc -l`` counts them, plus a last line without newline."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def cat_n(number: int, line: str) -> str:
    return f"{number:>6}\t{line}"


def words(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    return f"{count} {noun if count == 1 else (plural_form or noun + 's')}"


def fit(lines: Sequence[str], budget: int) -> int:
    """How many leading ``lines`` fit in ``budget`` characters joined by newlines."""
    used = 0
    for index, line in enumerate(lines):
        used += len(line) + (1 if index else 0)
        if used > budget:
            return index
    return len(lines)
