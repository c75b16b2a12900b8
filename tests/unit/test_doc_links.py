"""Every relative link of the documentation leads somewhere: the file exists
and, for a Markdown file, so does the heading its #anchor names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    {
        ROOT / "README.md",
        ROOT / "ARCHITECTURE.md",
        ROOT / "SECURITY.md",
        ROOT / "bench" / "README.md",
        ROOT / "clients" / "typescript" / "README.md",
        *(ROOT / "docs").glob("*.md"),
    }
)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_CODE = re.compile(r"^```.*?^```$", re.MULTILINE | re.DOTALL)


def _anchors(path: Path) -> set[str]:
    text = _CODE.sub("", path.read_text())
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE)
    }


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_relative_links_lead_somewhere(doc: Path) -> None:
    broken = []
    for target in _LINK.findall(_CODE.sub("", doc.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists() or (anchor and path.suffix == ".md" and anchor not in _anchors(path)):
            broken.append(target)
    assert broken == []
