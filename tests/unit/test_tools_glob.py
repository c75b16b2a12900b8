"""glob beyond the conformance cases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxd.executor.tools import ToolSession


@pytest.fixture
def tools(tmp_path: Path) -> Iterator[ToolSession]:
    s = ToolSession(str(tmp_path / "w"), state_dir=str(tmp_path / "s"))
    yield s
    s.close()


def test_glob_ignored_count_is_bounded(tools: ToolSession) -> None:
    root = Path(tools.workdir)
    (root / ".gitignore").write_text("node_modules/\n")
    modules = root / "node_modules"
    modules.mkdir()
    for i in range(10_050):
        (modules / f"m{i}.js").touch()
    (root / "app.js").touch()
    result = tools.run("glob", {"pattern": "*.js"})
    assert result["text"] == (
        "app.js\n\n[at least 9999 more matching files are ignored by .gitignore. Use "
        "no_ignore=true to include them.]"
    )
    assert result["fields"]["ignored_incomplete"] is True  # type: ignore[index]
