"""A working subset of ``.gitignore`` semantics, for glob and grep's fallback.

Supported: comments, blank lines, ``\\#``/``\\!`` escapes, trailing-space
trimming, ``!`` negation, ``dir/`` (folders only), anchoring (a slash at the
start or in the middle anchors a pattern to its .gitignore's folder, else it
matches a name at any depth), ``*``, ``?``, ``[...]`` and ``**``. The last
matching rule wins; an ignored folder is never entered, so nothing inside it
can be re-included (as in git). Not supported: .git/info/exclude and the
global excludes file (grep's ripgrep engine is told to skip them too).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

from .fsio import open_regular
from .gilpause import pause
from .globpat import Alternative, Glob, PatternError, alternatives

#: Most lines in one rule: compiling a regex of more alternatives costs more per line.
RUN_MAX = 256
#: Parsed .gitignore files kept, by content: a glob or grep walk reads the
#: same few files on every call, and compiling them is the costly part.
CACHED = 64
_cache: OrderedDict[bytes, tuple[Rule, ...]] = OrderedDict()
_cache_lock = threading.Lock()


@dataclass(frozen=True)
class Rule:
    """Consecutive lines of one kind, matched as one glob (any of them)."""

    glob: Glob
    negate: bool
    dir_only: bool
    anchored: bool


@dataclass(frozen=True)
class IgnoreFile:
    base: str  # the folder holding the .gitignore
    rules: tuple[Rule, ...]


def parse(text: str) -> tuple[Rule, ...]:
    """The rules of a .gitignore; lines in a row of the same kind (negated or
    not, folders only or not, anchored or not) become one rule: whichever of
    them matches, the outcome is the same, and one regex is one call (a
    .gitignore of thousands of lines costs a path a few calls, not thousands)."""
    runs: list[tuple[tuple[bool, bool, bool], list[str], list[Alternative]]] = []
    for raw in text.splitlines():
        line = raw
        if not line or line.startswith("#"):
            continue
        # Trailing spaces are dropped unless escaped with a backslash.
        stripped = line.rstrip(" ")
        if stripped.endswith("\\") and len(stripped) < len(line):
            stripped += " "
        line = stripped
        negate = line.startswith("!")
        if negate or line.startswith(("\\!", "\\#")):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        try:
            parsed = alternatives(line, braces=False)
        except PatternError:
            continue  # git ignores patterns it cannot parse; so do we
        kind = (negate, dir_only, anchored)
        if not runs or runs[-1][0] != kind or len(runs[-1][1]) >= RUN_MAX:
            runs.append((kind, [], []))
        runs[-1][1].append(line)
        runs[-1][2].extend(parsed)
    rules = []
    for kind, lines, parsed in runs:
        pause()  # compiling thousands of lines is seconds of pure Python
        rules.append(Rule(Glob("\n".join(lines), parsed), *kind))
    return tuple(rules)


#: A .gitignore larger than this is read only this far.
_MAX_BYTES = 1 << 20


def load(folder: str) -> IgnoreFile | None:
    try:
        with open_regular(os.path.join(folder, ".gitignore")) as fh:
            data = fh.read(_MAX_BYTES)
    except OSError:
        return None
    key = hashlib.sha256(data).digest()
    with _cache_lock:
        rules = _cache.get(key)
        if rules is not None:
            _cache.move_to_end(key)
    if rules is None:
        rules = parse(data.decode("utf-8", errors="replace"))
        with _cache_lock:
            _cache[key] = rules
            while len(_cache) > CACHED:
                _cache.popitem(last=False)
    return IgnoreFile(folder, rules) if rules else None


def ancestors(root: str) -> tuple[IgnoreFile, ...]:
    """The .gitignore files of the folders above ``root`` (outermost first)."""
    found = []
    folder = os.path.dirname(root)
    while True:
        ignore_file = load(folder)
        if ignore_file is not None:
            found.append(ignore_file)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return tuple(reversed(found))


def is_ignored(files: tuple[IgnoreFile, ...], path: str, is_dir: bool) -> bool:
    """The last rule that matches decides."""
    ignored = False
    name = os.path.basename(path)
    for ignore_file in files:
        prefix = ignore_file.base.rstrip("/") + "/"
        if not path.startswith(prefix):
            continue
        rel = path[len(prefix) :]
        for number, rule in enumerate(ignore_file.rules, 1):
            if not number & 255:
                pause()  # a planted .gitignore may alternate kinds for many lines
            if rule.dir_only and not is_dir:
                continue
            if rule.negate != ignored:
                continue  # cannot change the outcome
            if rule.glob.match(rel if rule.anchored else name):
                ignored = not rule.negate
    return ignored
