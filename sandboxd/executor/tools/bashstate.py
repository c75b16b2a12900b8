"""What a bash call leaves to the next one: its folder and exported variables.

The call's EXIT trap (``SAVE``) writes one record to an anonymous file:
``\\0sbx2\\0`` + ``$PWD`` + ``\\0`` + the output of bash's own ``export -p``
(one builtin, no loop over every variable in shell code: ~1 ms less bash
CPU per call than the name-by-name loop it replaces). ``parse_state`` reads
that back as data, never as code. What it keeps is what the loop kept: each
exported variable that has a value, arrays by their element 0 (what
``$NAME`` gives), a name reference by its target's value when the target is
exported, in the loop's order (names starting with a lower-case letter,
then upper case, then ``_``).
"""

from __future__ import annotations

import re

#: The trap's body (inside single quotes in the wrapper): no fork, builtins only.
SAVE = (
    "set +o posix; "
    '{ builtin printf "\\0sbx2\\0%s\\0" "$PWD"; builtin export -p; } >&"$__sbx_fd" 2>/dev/null; '
)

#: The state the trap reports is bounded; anything past it is ignored.
MAX_STATE_BYTES = 1 << 20
_MAGIC = b"\0sbx2\0"
_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_DECLARE = re.compile(rb"declare -([A-Za-z-]+) ([A-Za-z_][A-Za-z0-9_]*)(=?)")
#: Never carried to the next call: the shell's own bookkeeping, and the
#: variables that make bash or the dynamic loader run code before the
#: command does (any process of the call holds the state descriptor and could
#: report them; see SECURITY.md, "Bash state").
NOT_KEPT = frozenset(
    {"PWD", "OLDPWD", "SHLVL", "_", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4",
     "BASH_XTRACEFD", "PROMPT_COMMAND", "LD_PRELOAD", "LD_AUDIT"}
)  # fmt: skip
_ESCAPES = {
    ord("a"): 7, ord("b"): 8, ord("e"): 27, ord("E"): 27, ord("f"): 12, ord("n"): 10,
    ord("r"): 13, ord("t"): 9, ord("v"): 11, ord("\\"): 92, ord("'"): 39, ord('"'): 34,
    ord("?"): 63,
}  # fmt: skip
_OCTAL = b"01234567"


def parse_state(blob: bytes) -> tuple[str, dict[str, str]] | None:
    """The (cwd, exported variables) a call's EXIT trap reported, or None.

    Whatever the workload wrote is untrusted: the last record counts (the
    trap writes last), a malformed entry ends the parse.
    """
    blob = blob[:MAX_STATE_BYTES]
    start = blob.rfind(_MAGIC)
    if start < 0:
        return None
    cwd, sep, listing = blob[start + len(_MAGIC) :].partition(b"\0")
    if not sep or not cwd.startswith(b"/"):
        return None
    values: dict[bytes, bytes] = {}
    refs: dict[bytes, bytes] = {}
    for flags, name, value in _declarations(listing):
        if value is None or b"x" not in flags:
            continue  # exported but unset: the loop skipped it too
        (refs if b"n" in flags else values)[name] = value
    for name, target in refs.items():
        for _ in range(8):  # a reference to a reference
            if target not in refs:
                break
            target = refs[target]
        if target in values:
            values[name] = values[target]
    env: dict[str, str] = {}
    for name in sorted(values, key=_loop_order):
        key = name.decode("ascii")
        if key in NOT_KEPT or key.startswith("__sbx_"):
            continue
        env[key] = values[name].decode("utf-8", "surrogateescape")
    return cwd.decode("utf-8", "surrogateescape"), env


def _loop_order(name: bytes) -> tuple[int, bytes]:
    first = name[:1]
    return (0 if first.islower() else 1 if first.isupper() else 2), name


def _declarations(data: bytes) -> list[tuple[bytes, bytes, bytes | None]]:
    """(flags, name, value or None) per ``declare -FLAGS NAME[=VALUE]`` line."""
    out: list[tuple[bytes, bytes, bytes | None]] = []
    i = 0
    while i < len(data):
        m = _DECLARE.match(data, i)
        if m is None:
            break
        flags, name, eq = m.groups()
        i = m.end()
        value: bytes | None = None
        if eq:
            array = data.startswith(b"(", i)
            parsed = _array_first(data, i + 1) if array else _word(data, i)
            if parsed is None:
                break
            value, i = parsed
        if not data.startswith(b"\n", i):
            break
        i += 1
        out.append((flags, name, value))
    return out


def _word(data: bytes, i: int) -> tuple[bytes, int] | None:
    """A value as ``export -p`` quotes it: "..." or $'...'; (bytes, end)."""
    if data.startswith(b'"', i):
        return _double(data, i + 1)
    if data.startswith(b"$'", i):
        return _ansi_c(data, i + 2)
    return None


def _double(data: bytes, i: int) -> tuple[bytes, int] | None:
    out = bytearray()
    while i < len(data):
        c = data[i]
        if c == 0x22:  # "
            return bytes(out), i + 1
        if c == 0x5C and i + 1 < len(data) and data[i + 1] in b'$`"\\':
            out.append(data[i + 1])
            i += 2
            continue
        out.append(c)
        i += 1
    return None


def _ansi_c(data: bytes, i: int) -> tuple[bytes, int] | None:
    out = bytearray()
    while i < len(data):
        c = data[i]
        if c == 0x27:  # '
            return bytes(out), i + 1
        if c != 0x5C or i + 1 >= len(data):
            out.append(c)
            i += 1
            continue
        nxt = data[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in _OCTAL:
            j = i + 1
            while j < len(data) and j < i + 4 and data[j] in _OCTAL:
                j += 1
            out.append(int(data[i + 1 : j], 8) & 0xFF)
            i = j
        else:
            out += data[i : i + 2]
            i += 2
    return None


def _array_first(data: bytes, i: int) -> tuple[bytes, int] | None:
    """``([0]="a" [1]="b" )``: the element with key 0 ("" if none), and the end."""
    first = b""
    while i < len(data):
        if data[i] == 0x20:
            i += 1
            continue
        if data[i] == 0x29:  # )
            return first, i + 1
        if data[i] != 0x5B:  # [
            return None
        if data.startswith((b'"', b"$'"), i + 1):
            parsed = _word(data, i + 1)
            if parsed is None:
                return None
            key, i = parsed
        else:
            end = data.find(b"]", i + 1)
            if end < 0:
                return None
            key, i = data[i + 1 : end], end
        if not data.startswith(b"]=", i):
            return None
        parsed = _word(data, i + 2)
        if parsed is None:
            return None
        value, i = parsed
        if key == b"0":
            first = value
    return None
