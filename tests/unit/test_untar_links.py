"""Symlinks from an untrusted tar (issue 23, items 3 and 13): a link is made
only if it resolves inside the target through the links of the same tree and
those already there; any other is left out and listed, never a reason to
stop the extraction."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sandboxd.contract import untar
from sandboxd.contract.errors import InvalidArgument
from tests.transfer_checks import links_leaving, tar_members

pytestmark = pytest.mark.unit


def _tar(*members: tuple[str, str, str]) -> io.BytesIO:
    return io.BytesIO(tar_members(*members))


def _links(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): os.readlink(path)
        for path in sorted(root.rglob("*"))
        if path.is_symlink()
    }


CHAIN = "sub/up/sub/up/sub/up/../../../etc"


@pytest.mark.parametrize("docs_first", [False, True])
def test_a_chain_through_a_link_is_left_out(tmp_path: Path, docs_first: bool) -> None:
    """The issue's tree: each step inside, the whole outside."""
    members = [("sub", "dir", ""), ("sub/up", "symlink", ".."), ("docs", "symlink", CHAIN)]
    if docs_first:
        members = [members[0], members[2], members[1]]
    result = untar.extract(_tar(*members, ("readme", "file", "hi")), str(tmp_path / "t"))
    assert _links(tmp_path / "t") == {"sub/up": ".."}
    assert result["symlinks"] == 1 and result["links_skipped"] == 1
    assert result["skipped_links"] == [
        {"path": "docs", "target": CHAIN, "reason": "it leads through the symlink sub/up"}
    ]
    assert (tmp_path / "t" / "readme").read_text() == "hi"


def test_absolute_and_outward_links_are_listed_and_the_rest_extracted(tmp_path: Path) -> None:
    result = untar.extract(
        _tar(
            ("venv/bin/python", "symlink", "/usr/bin/python3"),
            ("venv/bin/python3", "symlink", "python"),
            ("up", "symlink", "../.."),
            ("venv/lib/site.py", "file", "x"),
        ),
        str(tmp_path / "t"),
    )
    reasons = {link["path"]: link["reason"] for link in result["skipped_links"]}
    assert reasons == {
        "venv/bin/python": "it points to an absolute path",
        "up": "it points out of the target",
    }
    # python3 -> python is inside; python itself was left out, so it dangles.
    assert _links(tmp_path / "t") == {"venv/bin/python3": "python"}
    assert (tmp_path / "t" / "venv/lib/site.py").read_text() == "x"


def test_links_already_in_the_target_count(tmp_path: Path) -> None:
    target = tmp_path / "t"
    target.mkdir()
    (target / "old").symlink_to("/etc")
    result = untar.extract(
        _tar(("x", "symlink", "old/passwd"), ("y", "symlink", "old"), ("z", "symlink", "x")),
        str(target),
    )
    reasons = {link["path"]: link["reason"] for link in result["skipped_links"]}
    assert reasons == {
        "x": "it leads through the symlink old",
        "y": "it points to old, a symlink that was already there",
        # z points to x, which is left out; nothing was at x, so z dangles inside.
    }
    assert _links(target) == {"old": "/etc", "z": "x"}


def test_chains_and_loops_inside_are_made(tmp_path: Path) -> None:
    result = untar.extract(
        _tar(
            ("lib.so.1.2", "file", "elf"),
            ("lib.so.1", "symlink", "lib.so.1.2"),
            ("lib.so", "symlink", "lib.so.1"),
            ("loop/a", "symlink", "b"),
            ("loop/b", "symlink", "a"),
            ("here", "symlink", "."),
        ),
        str(tmp_path / "t"),
    )
    assert result["links_skipped"] == 0 and result["symlinks"] == 5
    assert (tmp_path / "t" / "lib.so").read_text() == "elf"


def test_nothing_is_written_below_a_link_of_the_tree(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="lib is a symlink in this tree"):
        untar.extract(
            _tar(("lib", "symlink", "lib64"), ("lib/x", "file", "x")), str(tmp_path / "t")
        )
    assert not (tmp_path / "t" / "lib").exists()


def test_a_later_entry_takes_a_links_place(tmp_path: Path) -> None:
    result = untar.extract(
        _tar(
            ("l", "symlink", "/etc"),
            ("l", "file", "plain"),
            ("d", "dir", ""),
            ("d", "symlink", "x"),
        ),
        str(tmp_path / "t"),
    )
    assert (tmp_path / "t" / "l").read_text() == "plain"
    assert result["skipped_links"] == [
        {"path": "d", "target": "x", "reason": "a folder is in its place"}
    ]


def test_hard_links_to_symlinks_are_left_out(tmp_path: Path) -> None:
    target = tmp_path / "t"
    target.mkdir()
    (target / "old").symlink_to("/etc")
    result = untar.extract(
        _tar(("l", "symlink", "x"), ("h1", "hardlink", "l"), ("h2", "hardlink", "old")),
        str(target),
    )
    assert {link["path"] for link in result["skipped_links"]} == {"h1", "h2"}
    assert not (target / "h1").exists() and not (target / "h2").is_symlink()


def test_the_list_is_bounded_the_count_is_not(tmp_path: Path) -> None:
    members = [(f"l{i}", "symlink", f"/x/{i}") for i in range(untar.MAX_LISTED + 50)]
    result = untar.extract(_tar(*members), str(tmp_path / "t"))
    assert result["links_skipped"] == untar.MAX_LISTED + 50
    assert len(result["skipped_links"]) == untar.MAX_LISTED


_NAMES = st.sampled_from(["a", "b"])
#: Links up (what makes a chain escape) often, long walks through the tree too.
_TARGETS = st.one_of(
    st.sampled_from([[".."], ["..", ".."], ["."]]),
    st.lists(st.sampled_from(["a", "b", ".."]), min_size=1, max_size=8),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(folders=[], links=[(["a", "b"], [".."]), (["b"], ["a", "b", ".."])])
@example(folders=[["a"]], links=[(["b"], ["a", "b", ".."]), (["a", "b"], [".."])])
@given(
    folders=st.lists(st.lists(_NAMES, min_size=1, max_size=3), max_size=4),
    links=st.lists(st.tuples(st.lists(_NAMES, min_size=1, max_size=3), _TARGETS), max_size=8),
)
def test_no_made_link_resolves_outside(
    tmp_path_factory: pytest.TempPathFactory,
    folders: list[list[str]],
    links: list[tuple[list[str], list[str]]],
) -> None:
    """Whatever the tree's links and their order, each link that is made
    resolves (through every link, as the kernel would) inside the target."""
    root = tmp_path_factory.mktemp("tree")
    members = [("/".join(parts), "dir", "") for parts in folders]
    members += [("/".join(parts), "symlink", "/".join(target)) for parts, target in links]
    # An entry below a link of the tree is refused (InvalidArgument); what was
    # extracted before it must hold no escaping link either.
    with contextlib.suppress(InvalidArgument):
        untar.extract(_tar(*members), str(root / "t"))
    assert links_leaving(root / "t") == []
