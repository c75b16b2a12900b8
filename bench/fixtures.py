"""The files every subject works on, made the same way everywhere.

The tree generator is a self-contained Python script: it runs on the host
for the floor and as ``python3 -c`` inside the containers, so all three
subjects search byte-identical trees.
"""

from __future__ import annotations

import shlex

#: grep pattern: one file in ten of a tree matches.
GREP_PATTERN = "needle_[0-9]+"
#: glob pattern over a tree (a quarter of its files).
GLOB_PATTERN = "**/*.py"

TREE_1K = "tree1k"

#: bash ``true`` again, each call after a pause: a model's calls come seconds
#: apart, so the shell started ahead of a call is ready by then; back to back
#: the call waits for it. Timed after ``PAUSE_S`` idle (the pause not counted).
PACED_BASH = "bash true, 50 ms apart"
PAUSE_S = {PACED_BASH: 0.05}

TREE_10K = "tree10k"
SMALL = "small"
SMALL_FILES = 20

READ_FILE = "r1k.txt"
WRITE_FILE = "w1k.txt"
EDIT_FILE = "edit.txt"

#: 1 KiB of text: 16 lines of 64 bytes.
KIB_TEXT = "".join(
    f"{i:02d} the quick brown fox jumps over the lazy dog 0123456789abcdef\n" for i in range(16)
)
assert len(KIB_TEXT) == 1024
#: A small file with one line the edit loop flips between two values.
EDIT_TEXT = KIB_TEXT.replace("03 the quick", "03 marker_a")
EDIT_A, EDIT_B = "03 marker_a", "03 marker_b"

TREE_SCRIPT = r"""
import os, sys
root, count = sys.argv[1], int(sys.argv[2])
exts = (".py", ".txt", ".md", ".json")
for i in range(count):
    d = os.path.join(root, "d%02d" % (i % 50), "s%d" % (i % 7))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d%s" % (i, exts[i % 4])), "w") as f:
        for j in range(40):
            f.write("line %d of file %d: lorem ipsum dolor sit amet %d\n" % (j, i, i * j % 997))
        if i % 10 == 3:
            f.write("needle_%d is here\n" % i)
"""


def tree_command(root: str, count: int) -> list[str]:
    """argv that builds a tree of ``count`` files under ``root`` (relative to cwd)."""
    return ["python3", "-c", TREE_SCRIPT, root, str(count)]


def tree_shell(root: str, count: int) -> str:
    """The same, as one shell command line."""
    return shlex.join(tree_command(root, count))


def setup_shell() -> str:
    """One shell command that lays out every fixture of the per-op table."""
    small = (
        f"mkdir -p {SMALL} && for i in $(seq 1 {SMALL_FILES}); do "
        f"printf 'x\\n' > {SMALL}/s$i.py; printf 'y\\n' > {SMALL}/s$i.txt; done"
    )
    return " && ".join(
        [
            f"printf %s {_sh(KIB_TEXT)} > {READ_FILE}",
            f"printf %s {_sh(KIB_TEXT)} > {WRITE_FILE}",
            f"printf %s {_sh(EDIT_TEXT)} > {EDIT_FILE}",
            small,
            tree_shell(TREE_1K, 1000),
        ]
    )


def _sh(text: str) -> str:
    return shlex.quote(text)


#: The throughput run: kind -> (tool, arguments, callers per sandbox), over
#: ``THROUGHPUT_SANDBOXES`` sandboxes; the floor's run (bench.floor_throughput)
#: uses the same.
THROUGHPUT_SANDBOXES = 8
THROUGHPUT_KINDS: dict[str, tuple[str, dict[str, str], int]] = {
    "file": ("read", {"file_path": READ_FILE}, 4),
    "bash": ("bash", {"command": "true"}, 2),
}
