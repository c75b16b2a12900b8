"""grep: time limit, cancel, and the two engines agreeing on a mixed tree."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxd.executor.tools import ToolSession, grep_py

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
