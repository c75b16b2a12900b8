"""grep: time limit, cancel, the two engines agreeing on a mixed tree, result order."""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sandboxd.executor.tools import ToolSession, grep_py, grep_rg
from sandboxd.executor.tools.grep_model import FileHits, Query, path_order

ENGINES = ["python"] + (["rg"] if shutil.which("rg") else [])


@pytest.fixture
def tools(tmp_path: Path) -> Iterator[ToolSession]:
    s = ToolSession(str(tmp_path / "w"), state_dir=str(tmp_path / "s"))
    yield s
    s.close()


def make_tree(root: Path) -> None:
    files = {
        ".gitignore": "*.log\nbuild/\n!keep.log\n",
        "a.py": "import os\ndef foo():\n    return 'FOO'\n",
        "b.md": "# Foo\ntext foo\n\nmore\n",
        "keep.log": "foo in log\n",
        "x.log": "foo hidden\n",
        "build/out.py": "foo\n",
        "src/deep/c.py": "x = 1\nfoo = 2\n# foo again\n",
        "src/.hidden.py": "foo\n",
        "crlf.txt": "foo\r\nbar\r\n",
        "bom.txt": "\ufefffoo first\n",
        "u.txt": "naïve foo ✓\n",
        "sp ace/é.txt": "foo\n",
    }
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    (root / "bin.dat").write_bytes(b"foo\x00\n")


QUERIES: list[dict[str, object]] = [
    {"pattern": "foo"},
    {"pattern": "foo", "output_mode": "content"},
    {"pattern": "foo", "output_mode": "count", "-i": True},
    {"pattern": "^foo", "output_mode": "content", "-n": False},
    {"pattern": "foo$", "output_mode": "content"},
    {"pattern": "fo+", "output_mode": "content", "-C": 1},
    {"pattern": "foo", "glob": "*.py", "output_mode": "content"},
    {"pattern": "foo", "type": "py", "output_mode": "count"},
    {"pattern": "x = 1\nfoo", "multiline": True, "output_mode": "content"},
    {"pattern": "[[:alpha:]]+ foo", "output_mode": "content"},
    {"pattern": "\\bfoo\\b", "output_mode": "content", "head_limit": 3, "offset": 1},
    {"pattern": "first", "path": "bom.txt", "output_mode": "content"},
    {"pattern": "foo", "path": "build", "output_mode": "content"},
    {"pattern": "foo", "path": "x.log", "output_mode": "content"},
    {"pattern": "foo", "path": "src", "glob": "!*.py"},
    {"pattern": "foo", "glob": "src/**", "output_mode": "count"},
    {"pattern": "FOO|foo", "output_mode": "content", "-B": 2, "head_limit": 4},
]


@pytest.mark.parametrize("query", QUERIES, ids=[str(q) for q in QUERIES])
def test_engines_agree(tools: ToolSession, query: dict[str, object]) -> None:
    if "rg" not in ENGINES:
        # CI must compare the engines (the workspace image uses rg); a
        # developer machine without ripgrep only loses this comparison.
        message = "ripgrep (rg) is not installed: apt-get install ripgrep"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    make_tree(Path(tools.workdir))
    results = {}
    for engine in ENGINES:
        tools.context.grep_engine = engine
        result = tools.run("grep", query)
        fields = dict(result["fields"])  # type: ignore[call-overload]
        fields.pop("engine")
        results[engine] = (result["text"], result["is_error"], fields)
    assert results["python"] == results["rg"]


@pytest.mark.parametrize("engine", ENGINES)
def test_time_limit_without_results_is_not_no_matches(tools: ToolSession, engine: str) -> None:
    make_tree(Path(tools.workdir))
    tools.context.grep_engine = engine
    tools.context.grep_time_limit = 0.0
    result = tools.run("grep", {"pattern": "foo"})
    text = str(result["text"])
    assert "No matches" not in text and "time limit" in text
    assert result["is_error"] is True
    assert result["fields"]["timed_out"] is True  # type: ignore[index]


def test_time_limit_returns_partial_results(
    tools: ToolSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(30):
        (Path(tools.workdir) / f"f{i:02d}.txt").write_text("foo\n")
    real = grep_py.search_file

    def slow(*args: object, **kwargs: object) -> object:
        time.sleep(0.05)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(grep_py, "search_file", slow)
    tools.context.grep_engine = "python"
    tools.context.grep_time_limit = 0.5
    result = tools.run("grep", {"pattern": "foo", "output_mode": "count"})
    text = str(result["text"])
    assert result["is_error"] is False
    assert "f00.txt:1" in text and "f29.txt" not in text
    assert text.endswith(
        "[The search hit its 0.5 s time limit, so these results are incomplete. Narrow it "
        "with path, glob or type.]"
    )


def test_cancel_stops_grep(tools: ToolSession, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(100):
        (Path(tools.workdir) / f"f{i:02d}.txt").write_text("foo\n")
    real = grep_py.search_file

    def slow(*args: object, **kwargs: object) -> object:
        time.sleep(0.05)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(grep_py, "search_file", slow)
    tools.context.grep_engine = "python"
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    result = tools.run("grep", {"pattern": "foo"}, cancel=cancel)
    assert time.monotonic() - started < 2
    assert result["is_error"] and "cancelled" in str(result["text"])


# Names whose path order (a depth-first walk, each folder in byte order)
# differs from plain string order: "a/b.txt" comes before "a.txt" ('/' is
# not compared, the folder "a" is), upper case before lower, UTF-8 last.
ORDER_NAMES = [
    "a.txt", "a/b.txt", "a-b.txt", "a/a/z.txt", "B.txt", "b.txt", "é.txt", "e.txt",
    "sp ace/x.txt", "_x.txt", "a0.txt", "ab/c.txt", "a/.h.txt",
    *(f"d{i % 7}/f{i:03d}.txt" for i in range(200)),
]  # fmt: skip


def _order_tree(root: Path, names: list[str] | list[bytes]) -> None:
    for i, name in enumerate(names):
        path = os.path.join(os.fsencode(root), os.fsencode(name))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(b"foo\n" * (1 + i % 3))
        # Equal mtimes: files_with_matches falls back to path order.
        os.utime(path, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))


@pytest.mark.parametrize("mode", ["count", "files_with_matches", "content"])
def test_engines_agree_on_order(tools: ToolSession, mode: str) -> None:
    """rg searches unsorted (in parallel) outside content mode: the order is
    put back in Python, the same as a sorted search and the Python engine's."""
    if "rg" not in ENGINES:
        pytest.skip("ripgrep (rg) is not installed")
    _order_tree(Path(tools.workdir), ORDER_NAMES)
    texts = {}
    for engine in ENGINES:
        tools.context.grep_engine = engine
        result = tools.run("grep", {"pattern": "foo", "output_mode": mode, "head_limit": 1000})
        assert result["is_error"] is False
        texts[engine] = result["text"]
    assert texts["python"] == texts["rg"]
    shown = str(texts["rg"]).splitlines()
    if mode == "count":
        assert shown.index("a/b.txt:2") < shown.index("a.txt:1")
    elif mode == "files_with_matches":
        # Newest first; equal times by path as a string.
        assert shown.index("a.txt") < shown.index("a/b.txt")


@pytest.mark.parametrize("mode", ["count", "files_with_matches"])
def test_rg_unsorted_equals_sorted_with_raw_names(
    tools: ToolSession, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Names that are not UTF-8 (shown with U+FFFD) keep their byte order."""
    if "rg" not in ENGINES:
        pytest.skip("ripgrep (rg) is not installed")
    names = [b"x\xff.txt", b"x\xfe.txt", b"x\xc3\xa9.txt", b"x.txt", b"x\xff/y.txt", b"nl\nname"]
    _order_tree(Path(tools.workdir), [*names, *(n.encode() for n in ORDER_NAMES)])
    tools.context.grep_engine = "rg"
    args = {"pattern": "foo", "output_mode": mode, "head_limit": 1000}
    unsorted = tools.run("grep", args)
    real = grep_rg.search

    def sorted_search(rg: str, q: Query, stop: Callable[[], bool]) -> Iterator[FileHits]:
        assert not q.ordered
        return real(rg, dataclasses.replace(q, ordered=True), stop)

    monkeypatch.setattr(grep_rg, "search", sorted_search)
    assert tools.run("grep", args) == unsorted
    assert "x\ufffd.txt" in str(unsorted["text"])


def test_path_order_is_ripgreps() -> None:
    paths = [b"a.txt", b"a/b.txt", b"a-b.txt", b"B", b"a/a", b"\xff", b"z/\xc3\xa9"]
    assert sorted(paths, key=path_order) == [
        b"B",
        b"a/a",
        b"a/b.txt",
        b"a-b.txt",
        b"a.txt",
        b"z/\xc3\xa9",
        b"\xff",
    ]
