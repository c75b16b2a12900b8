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

import os
import re
from dataclasses import dataclass

from .fsio import open_regular
from .globpat import PatternError, compile_glob


@dataclass(frozen=True)
class Rule:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    anchored: bool


@dataclass(frozen=True)
class IgnoreFile:
    base: str  # the folder holding the .gitignore
    rules: tuple[Rule, ...]


def parse(text: str) -> tuple[Rule, ...]:
    rules = []
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
            regex = compile_glob(line, braces=False)
        except PatternError:
            continue  # git ignores patterns it cannot parse; so do we
        rules.append(Rule(regex, negate, dir_only, anchored))
    return tuple(rules)


#: A .gitignore larger than this is read only this far.
_MAX_BYTES = 1 << 20


def load(folder: str) -> IgnoreFile | None:
    try:
        with open_regular(os.path.join(folder, ".gitignore")) as fh:
            rules = parse(fh.read(_MAX_BYTES).decode("utf-8", errors="replace"))
    except OSError:
        return None
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
    ignored = False
    name = os.path.basename(path)
    for ignore_file in files:
        prefix = ignore_file.base.rstrip("/") + "/"
        if not path.startswith(prefix):
            continue
        rel = path[len(prefix) :]
        for rule in ignore_file.rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.negate != ignored:
                continue  # cannot change the outcome
            if rule.regex.match(rel if rule.anchored else name):
                ignored = not rule.negate
    return ignored
