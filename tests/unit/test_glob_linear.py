"""Glob matching in linear time (issue 23, item 7).

The attack: a planted ``.gitignore`` line of thirty ``*a`` then ``b``, and a
file name of sixty ``a``s: the pattern's translation to a Python regex
backtracked exponentially with the GIL held, so ``glob`` ran past 60 s and
every other call of the sandbox waited with it. The matcher now places the
chunks between stars greedily (``globpat``). Its answers are checked against
the regex translation it replaced, on patterns small enough for that to end.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandboxd.executor.tools import gitignore
from sandboxd.executor.tools.globpat import (
    ATOMIC,
    MAX_ALTERNATIVES,
    PatternError,
    _class,
    compile_glob,
)

pytestmark = pytest.mark.unit

EVIL_PATTERN = "*a" * 30 + "b"
EVIL_NAME = "a" * 60

#: The matchers this interpreter has: the one-regex form needs atomic groups
#: (Python 3.11+); on 3.10 the placed matcher is the only one globpat uses.
ENGINES = [True, False] if ATOMIC else [False]
ENGINE_IDS = ["regex", "python"] if ATOMIC else ["python"]


def test_the_planted_pattern_answers_at_once_in_a_fresh_interpreter() -> None:
    """In a child with a deadline: the regex translation never came back (it
    holds the GIL in C, so no in-process timeout could stop it)."""
    probe = textwrap.dedent(
        f"""
        from sandboxd.executor.tools import gitignore
        from sandboxd.executor.tools.globpat import compile_glob
        rules = gitignore.parse({EVIL_PATTERN!r} + "\\n" + "*a\\n" * 30 + "b\\n")
        files = (gitignore.IgnoreFile("/w", rules),)
        print(gitignore.is_ignored(files, "/w/" + {EVIL_NAME!r}, False))
        evil, name = {EVIL_PATTERN!r}, {EVIL_NAME!r}
        for atomic in {ENGINES!r}:
            print(bool(compile_glob("**/" + evil, atomic=atomic).match("x/" + name)))
            print(bool(compile_glob(evil, atomic=atomic).match(name + "b")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=True
    )
    # Ignored by the 30 "*a" lines; the planted pattern itself needs a final b.
    assert done.stdout.split() == ["True"] + ["False", "True"] * len(ENGINES), done


# The translation globpat used before: the oracle for small inputs (its
# classes were translated as they still are, by globpat._class).
def _old_parse(pattern: str, i: int, depth: int) -> tuple[str, int]:
    out: list[str] = []
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if depth and c in ",}":
            return "".join(out), i
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            seg_start = i == 0 or pattern[i - 1] == "/"
            seg_end = j == n or pattern[j] == "/"
            if j - i >= 2 and seg_start and seg_end:
                if j < n and pattern[j] == "/":
                    out.append("(?:.*/)?")
                    j += 1
                else:
                    out.append(".*")
            else:
                out.append("[^/]*")
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            part, i = _class(pattern, i)
            out.append(part)
        elif c == "{":
            alternatives = []
            i += 1
            while True:
                part, i = _old_parse(pattern, i, depth + 1)
                alternatives.append(part)
                if pattern[i] == "}":
                    i += 1
                    break
                i += 1
            out.append("(?:" + "|".join(alternatives) + ")")
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out), i


def _old_match(pattern: str, text: str) -> bool:
    return re.compile("(?s:" + _old_parse(pattern, 0, 0)[0] + r")\Z").match(text) is not None


_PIECES = ["a", "b", "/", "*", "**", "?", "[ab]", "[!a]", "{a,b}", "{a/b,*}", "**/", "/**"]


@st.composite
def _patterns(draw: st.DrawFn) -> str:
    pattern = "".join(draw(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=6)))
    # "**" touching a brace is read differently on purpose (the old code took
    # "{**" for a whole segment); "***"-style runs across pieces likewise.
    return pattern


@pytest.mark.parametrize("atomic", ENGINES, ids=ENGINE_IDS)
@settings(max_examples=1000, deadline=None)
@given(pattern=_patterns(), text=st.text(alphabet="ab/", min_size=1, max_size=8))
def test_same_answers_as_the_regex_translation(atomic: bool, pattern: str, text: str) -> None:
    if "**{" in pattern or "{**" in pattern or ",**" in pattern or "**}" in pattern:
        return
    expected = _old_match(pattern, text)
    assert bool(compile_glob(pattern, atomic=atomic).match(text)) == expected, (pattern, text)


def test_braces_are_bounded() -> None:
    assert compile_glob("{a,b}" * 10).match("ab" * 5)  # 1024 patterns, one regex
    with pytest.raises(PatternError, match=f"more than {MAX_ALTERNATIVES}"):
        compile_glob("{a,b}" * 11)


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("**", "a/b/c", True),
        ("a/**", "a", False),
        ("a/**", "a/b", True),
        ("a/**/b/**/c", "a/b/c", True),
        ("a/**/b/**/c", "a/x/b/y/z/c", True),
        ("a/**/b/**/c", "a/x/y/c", False),
        ("**/b/*c", "x/b/c/bc", False),
        ("**/x*y", "x/xy", True),
        ("*a*b*c", "zazbzc", True),
        ("*a*b*c", "zazbzcz", False),
        ("?*?", "a", False),
        ("?*?", "ab", True),
        ("[a-c]*[x-z]", "bqqz", True),
    ],
)
@pytest.mark.parametrize("atomic", ENGINES, ids=ENGINE_IDS)
def test_segments_and_stars(pattern: str, text: str, matches: bool, atomic: bool) -> None:
    assert bool(compile_glob(pattern, atomic=atomic).match(text)) is matches


def test_gitignore_uses_it() -> None:
    rules = gitignore.parse(EVIL_PATTERN + "\n")
    files = (gitignore.IgnoreFile("/w", rules),)
    assert gitignore.is_ignored(files, "/w/sub/" + EVIL_NAME + "b", False)
    assert not gitignore.is_ignored(files, "/w/sub/" + EVIL_NAME, False)
