"""Glob translation and the .gitignore subset."""

from __future__ import annotations

import pytest

from sandboxd.executor.tools import gitignore
from sandboxd.executor.tools.globpat import PatternError, compile_glob


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", "a/b.py", False),
        ("**/*.py", "b.py", True),
        ("**/*.py", "a/b/c.py", True),
        ("src/**", "src/a/b", True),
        ("src/**/x", "src/x", True),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("[a-c]x", "bx", True),
        ("[!a-c]x", "dx", True),
        ("[!a-c]x", "/x", False),
        ("*.{py,md}", "r.md", True),
        ("{a,b{c,d}}.txt", "bd.txt", True),
        ("\\*.txt", "*.txt", True),
        ("\\*.txt", "a.txt", False),
        ("x**y", "xay", True),
        ("x**y", "xa/y", False),
    ],
)
def test_glob(pattern: str, path: str, matches: bool) -> None:
    assert bool(compile_glob(pattern).match(path)) is matches


@pytest.mark.parametrize("pattern", ["[abc", "{a,b", "a{b{c}"])
def test_invalid(pattern: str) -> None:
    with pytest.raises(PatternError):
        compile_glob(pattern)


def test_braces_off_for_gitignore() -> None:
    assert compile_glob("{a,b}", braces=False).match("{a,b}")


def test_gitignore_rules() -> None:
    text = "# comment\n\n*.log\n!keep.log\nbuild/\n/top.txt\ndocs/*.md\n\\#hash\ntrail \n"
    files = (gitignore.IgnoreFile("/r", gitignore.parse(text)),)

    def ignored(path: str, is_dir: bool = False) -> bool:
        return gitignore.is_ignored(files, "/r/" + path, is_dir)

    assert ignored("x.log") and ignored("a/b/x.log")
    assert not ignored("keep.log")
    assert ignored("build", is_dir=True) and not ignored("build")
    assert ignored("top.txt") and not ignored("sub/top.txt")
    assert ignored("docs/a.md") and not ignored("docs/x/a.md") and not ignored("a/docs/a.md")
    assert ignored("#hash")
    assert ignored("trail")
    assert not ignored("other.txt")


def test_gitignore_outside_base_does_not_apply() -> None:
    files = (gitignore.IgnoreFile("/r/sub", gitignore.parse("*.txt\n")),)
    assert not gitignore.is_ignored(files, "/r/a.txt", False)
    assert gitignore.is_ignored(files, "/r/sub/a.txt", False)
