"""edit's matching levels."""

from __future__ import annotations

from sandboxd.executor.tools.matching import find


def test_exact() -> None:
    level, found = find("a b c", "b", "B")
    assert level == "exact" and [(m.start, m.end) for m in found] == [(2, 3)]


def test_crlf_in_mixed_file_keeps_crlf_in_replacement() -> None:
    text = "a\r\nb\r\nc\n"
    level, found = find(text, "a\nb", "x\ny")
    assert level == "crlf"
    m = found[0]
    assert text[m.start : m.end] == "a\r\nb" and m.replacement == "x\r\ny"


def test_unicode() -> None:
    level, found = find("say \u201chi\u201d\n", 'say "hi"', "x")
    assert level == "unicode" and found[0].end == 8


def test_trailing_whitespace_spans_original() -> None:
    text = "a  \nb  \nc"
    level, found = find(text, "a\nb", "x")
    assert level == "trailing_whitespace"
    assert text[found[0].start : found[0].end] == "a  \nb"


def test_indentation_both_directions() -> None:
    text = "class A:\n    def f(self):\n        return 1\n"
    level, found = find(text, "def f(self):\n    return 1", "def g(self):\n    return 2")
    assert level == "indentation"
    assert found[0].replacement == "    def g(self):\n        return 2"
    level, found = find("x:\n  y\n", "        x:\n          y", "        z:\n          y")
    assert level == "indentation" and found[0].replacement == "z:\n  y"


def test_nothing() -> None:
    assert find("abc", "zzz", "y") == ("none", [])
