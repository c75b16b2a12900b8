"""The conformance cases: every rule, notice and error of TOOLS.md.

Each case is data: setup steps (tool calls, so they run on any backend), the
call under test with its expectations, and optional follow-up steps that
check effects (e.g. the bytes on disk after a CRLF round trip).

Placeholders, in expected texts and in string arguments:
  ``{cwd}``        the backend's working directory
  ``{call.NAME}``  field NAME of the call under test (in follow-up steps)
Expectations: ``text`` is exact; ``match`` is a regex that must match the
whole text (``{cwd}`` is inserted escaped); ``contains`` are substrings;
``fields`` must be a subset of the result's fields. Setup steps must not
fail unless they say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Step:
    tool: str
    args: Mapping[str, object]
    text: str | None = None
    match: str | None = None
    contains: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    is_error: bool | None = None
    fields: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    name: str
    setup: tuple[Step, ...]
    call: Step
    then: tuple[Step, ...] = ()


# coreutils' stat, as an agent would use it; every case also runs under runsc
# (scripts/register-gvisor.sh installs one whose statx takes AT_NO_AUTOMOUNT).
MODE_OF = "stat -c %a {}"


def write(path: str, content: str) -> Step:
    return Step("write", {"file_path": path, "content": content})


def sh(command: str) -> Step:
    return Step("bash", {"command": command})


def read(path: str) -> Step:
    return Step("read", {"file_path": path})


def out(text: str, code: int = 0, note: str = "") -> str:
    """Expected bash text."""
    return f"{text}\n\nExit code: {code}" + (f" ({note})" if note else "")


def files_at(*names: str) -> Step:
    """Give files distinct, increasing mtimes (first is oldest)."""
    cmds = [f"touch -d '2020-01-01 00:00:{i:02d}' '{n}'" for i, n in enumerate(names, 1)]
    return sh(" && ".join(cmds))


CASES: list[Case] = []


def case(name: str, *setup: Step, call: Step, then: tuple[Step, ...] = ()) -> None:
    CASES.append(Case(name, tuple(setup), call, then))


GUARD_HINT = 'Read it first (read file_path="{p}"), then retry the {a}.'

# ----------------------------------------------------------------------- read

case(
    "read_basic",
    write("a.py", "one\ntwo\n"),
    call=Step("read", {"file_path": "a.py"}, text="     1\tone\n     2\ttwo", is_error=False,
              fields={"total_lines": 2, "start_line": 1, "end_line": 2, "truncated": False,
                      "next_offset": None}),
)  # fmt: skip
case(
    "read_last_line_without_newline",
    write("a.txt", "a\nb"),
    call=Step("read", {"file_path": "a.txt"}, text="     1\ta\n     2\tb",
              fields={"total_lines": 2}),
)  # fmt: skip
case(
    "read_offset_limit",
    write("f.txt", "l1\nl2\nl3\nl4\nl5\n"),
    call=Step("read", {"file_path": "f.txt", "offset": 2, "limit": 2},
              text="     2\tl2\n     3\tl3\n\n[Showing lines 2-3 of 5. Use offset=4 to read more.]",
              fields={"start_line": 2, "end_line": 3, "truncated": True, "next_offset": 4}),
)  # fmt: skip
case(
    "read_offset_zero_means_one",
    write("f.txt", "l1\nl2\n"),
    call=Step("read", {"file_path": "f.txt", "offset": 0}, text="     1\tl1\n     2\tl2"),
)
case(
    "read_numeric_strings_coerced",
    write("f.txt", "l1\nl2\nl3\n"),
    call=Step("read", {"file_path": "f.txt", "offset": "2", "limit": "1"},
              text="     2\tl2\n\n[Showing lines 2-2 of 3. Use offset=3 to read more.]"),
)  # fmt: skip
case(
    "read_default_page_is_2000_lines",
    sh("seq 1 2500 > n.txt"),
    call=Step("read", {"file_path": "n.txt"},
              match=r"     1\t1\n(.*\n)*  2000\t2000\n\n"
                    r"\[Showing lines 1-2000 of 2500\. Use offset=2001 to read more\.\]",
              fields={"end_line": 2000, "total_lines": 2500, "next_offset": 2001}),
)  # fmt: skip
case(
    "read_last_page_has_no_notice",
    sh("seq 1 2500 > n.txt"),
    call=Step("read", {"file_path": "n.txt", "offset": 2001},
              match=r"  2001\t2001\n(.*\n)*  2500\t2500",
              fields={"start_line": 2001, "end_line": 2500, "truncated": False}),
)  # fmt: skip
case(
    "read_limit_above_2000_is_capped",
    sh("seq 1 2500 > n.txt"),
    call=Step("read", {"file_path": "n.txt", "limit": 5000}, fields={"end_line": 2000}),
)
case(
    "read_offset_past_end",
    sh("seq 1 2250 > a.py"),
    call=Step("read", {"file_path": "a.py", "offset": 3000}, is_error=True,
              text="Error: offset 3000 is past the end of a.py, which has 2250 lines."),
)  # fmt: skip
case(
    "read_empty_file",
    write("e.txt", ""),
    call=Step("read", {"file_path": "e.txt"}, text="[File is empty.]", is_error=False,
              fields={"total_lines": 0}),
)  # fmt: skip
case(
    "read_long_line_cut",
    write("long.txt", "a" * 2500 + "\nshort\n"),
    call=Step("read", {"file_path": "long.txt"},
              text="     1\t" + "a" * 2000 + "…\n     2\tshort\n\n[Line 1 is longer than 2000 "
                   "characters and was cut. Use bash (e.g. sed -n '1p' long.txt | cut "
                   "-c2001-4000) to see the rest.]",
              fields={"cut_lines": [1]}),
)  # fmt: skip
case(
    "read_two_long_lines_cut",
    write("long.txt", "b" * 2001 + "\nok\n" + "c" * 3000 + "\n"),
    call=Step("read", {"file_path": "long.txt"},
              contains=("[Lines 1 and 3 are longer than 2000 characters and were cut. Use bash "
                        "(e.g. sed -n '1p' long.txt | cut -c2001-4000) to see the rest.]",
                        "     2\tok\n"),
              fields={"cut_lines": [1, 3]}),
)  # fmt: skip
case(
    "read_exactly_2000_chars_not_cut",
    write("l.txt", "d" * 2000 + "\n"),
    call=Step("read", {"file_path": "l.txt"}, text="     1\t" + "d" * 2000),
)
case(
    "read_output_limit_50_kib",
    write("wide.txt", ("é" * 250 + "\n") * 300),
    call=Step("read", {"file_path": "wide.txt"},
              match=r"(?s).*\n   100\té+\n\n\[Output limit of 50 KiB reached: showing lines 1-100 "
                    r"of 300\. Use offset=101 to read more\.\]",
              fields={"end_line": 100, "next_offset": 101, "truncated": True}),
)  # fmt: skip
case(
    "read_output_limit_30000_characters",
    write("wide.txt", ("x" * 199 + "\n") * 300),
    call=Step("read", {"file_path": "wide.txt"},
              match=r"(?s).*\n   141\tx+\n\n\[Output limit of 30,000 characters reached: showing "
                    r"lines 1-141 of 300\. Use offset=142 to read more\.\]",
              fields={"end_line": 141, "next_offset": 142}),
)  # fmt: skip
case(
    "read_not_found_with_similar_names",
    write("src/util.py", "x\n"),
    call=Step("read", {"file_path": "src/utils.py"}, is_error=True,
              text="Error: file not found: src/utils.py (working directory: {cwd}). Similar "
                   "names: src/util.py. Check the path, or find the file with glob."),
)  # fmt: skip
case(
    "read_not_found_missing_folder",
    write("src/util.py", "x\n"),
    call=Step("read", {"file_path": "scr/util.py"}, is_error=True,
              text="Error: file not found: scr/util.py (working directory: {cwd}). Similar "
                   "names: src. Check the path, or find the file with glob."),
)  # fmt: skip
case(
    "read_not_found_nothing_similar",
    call=Step("read", {"file_path": "zzz.txt"}, is_error=True,
              text="Error: file not found: zzz.txt (working directory: {cwd}). Check the path, "
                   "or find the file with glob."),
)  # fmt: skip
case(
    "read_directory_lists_entries",
    write("d/a.txt", "x"),
    write("d/sub/b.txt", "y"),
    call=Step("read", {"file_path": "d"}, is_error=True,
              text="Error: d is a directory, not a file. Read one of the files in it, or list "
                   "it with glob. Its first 2 entries:\na.txt\nsub/"),
)  # fmt: skip
case(
    "read_directory_first_50_entries",
    sh("mkdir many && cd many && touch f$(seq -s ' f' -w 1 60)"),
    call=Step("read", {"file_path": "many"}, is_error=True,
              contains=("Its first 50 entries:\nf01\n", "\nf50\n[... and 10 more entries]"),
              absent=("f51",)),
)  # fmt: skip
case(
    "read_binary_file",
    sh("printf 'a\\000b' > bin.dat"),
    call=Step("read", {"file_path": "bin.dat"}, is_error=True,
              text="Error: bin.dat is a binary file (3 bytes; it contains NUL bytes), so read "
                   "cannot show it as text. Inspect it with bash, e.g. file bin.dat or xxd "
                   "bin.dat | head -50."),
)  # fmt: skip
case(
    "read_crlf_shown_as_lf",
    sh("printf 'a\\r\\nb\\r\\n' > c.txt"),
    call=Step("read", {"file_path": "c.txt"}, text="     1\ta\n     2\tb"),
)
case(
    "read_bom_stripped",
    sh("printf '\\357\\273\\277hello\\nworld\\n' > b.txt"),
    call=Step("read", {"file_path": "b.txt"}, text="     1\thello\n     2\tworld"),
)
case(
    "read_invalid_utf8_replaced",
    sh("printf 'a\\377b\\n' > u.txt"),
    call=Step("read", {"file_path": "u.txt"}, text="     1\ta\ufffdb"),
)
case(
    "read_unicode_and_space_path",
    write("dir with space/ünï cödé.txt", "ok\n"),
    call=Step("read", {"file_path": "dir with space/ünï cödé.txt"}, text="     1\tok"),
)
case(
    "read_crlf_offset_and_notice",
    sh("printf 'a\\r\\nb\\r\\nc\\r\\n' > c.txt"),
    call=Step("read", {"file_path": "c.txt", "offset": 2, "limit": 1},
              text="     2\tb\n\n[Showing lines 2-2 of 3. Use offset=3 to read more.]"),
)  # fmt: skip
case(
    "read_tabs_and_trailing_spaces_kept",
    write("t.txt", "\tindented  \n"),
    call=Step("read", {"file_path": "t.txt"}, text="     1\t\tindented  "),
)
case(
    "read_absolute_path",
    write("a.txt", "abs\n"),
    call=Step("read", {"file_path": "{cwd}/a.txt"}, text="     1\tabs"),
)
case(
    "read_symlink",
    write("a.txt", "target\n"),
    sh("ln -s a.txt link.txt"),
    call=Step("read", {"file_path": "link.txt"}, text="     1\ttarget"),
)
case(
    "read_alias_path",
    write("a.txt", "alias\n"),
    call=Step("read", {"path": "a.txt"}, text="     1\talias"),
)
case(
    "read_unknown_parameter",
    call=Step("read", {"file_path": "a.txt", "bogus": 1}, is_error=True,
              text="Error: unknown parameter bogus for read. Valid parameters: file_path, offset, "
                   "limit."),
)  # fmt: skip
case(
    "read_missing_parameter",
    call=Step("read", {}, is_error=True,
              text="Error: missing required parameter file_path for read. Valid parameters: "
                   "file_path, offset, limit."),
)  # fmt: skip
case(
    "read_offset_not_a_number",
    call=Step("read", {"file_path": "a.txt", "offset": "abc"}, is_error=True,
              text='Error: parameter offset of read must be an integer, got "abc" (string).'),
)  # fmt: skip
case(
    "read_offset_boolean_rejected",
    call=Step("read", {"file_path": "a.txt", "offset": True}, is_error=True,
              text="Error: parameter offset of read must be an integer, got true (boolean)."),
)  # fmt: skip
case(
    "read_negative_offset",
    call=Step("read", {"file_path": "a.txt", "offset": -1}, is_error=True,
              text="Error: parameter offset of read must be at least 0, got -1."),
)  # fmt: skip
case(
    "read_limit_zero",
    call=Step("read", {"file_path": "a.txt", "limit": 0}, is_error=True,
              text="Error: parameter limit of read must be at least 1, got 0."),
)  # fmt: skip
case(
    "read_empty_path",
    call=Step("read", {"file_path": ""}, is_error=True,
              text="Error: file_path is empty. Give a path relative to {cwd}, or an absolute one."),
)  # fmt: skip
case(
    "read_nul_in_path",
    call=Step("read", {"file_path": "a\x00b"}, is_error=True,
              text="Error: file_path contains a NUL byte, which no path can contain. Remove it."),
)  # fmt: skip

# ---------------------------------------------------------------------- write

case(
    "write_creates_file",
    call=Step("write", {"file_path": "src/util.py", "content": "a = 1\nb = 2\n"},
              text="Created src/util.py (2 lines, 12 bytes).", is_error=False,
              fields={"created": True, "lines": 2, "bytes": 12, "previous_lines": None}),
    then=(Step("read", {"file_path": "src/util.py"}, text="     1\ta = 1\n     2\tb = 2"),),
)  # fmt: skip
case(
    "write_creates_parent_folders",
    call=Step("write", {"file_path": "x/y/z/deep.txt", "content": "d"},
              text="Created x/y/z/deep.txt (1 line, 1 byte)."),
    then=(Step("bash", {"command": "cd x/y/z && echo *"}, text=out("deep.txt")),),
)  # fmt: skip
case(
    "write_empty_content",
    call=Step("write", {"file_path": "e.txt", "content": ""},
              text="Created e.txt (0 lines, 0 bytes)."),
    then=(Step("read", {"file_path": "e.txt"}, text="[File is empty.]"),),
)  # fmt: skip
case(
    "write_unicode_content_bytes",
    call=Step("write", {"file_path": "u.txt", "content": "héllo ✓\n"},
              text="Created u.txt (1 line, 11 bytes).", fields={"bytes": 11}),
)  # fmt: skip
case(
    "write_overwrite_after_read",
    write("a.txt", "one\ntwo\n"),
    read("a.txt"),
    call=Step("write", {"file_path": "a.txt", "content": "new\n"},
              text="Overwrote a.txt (1 line, 4 bytes; previously 2 lines).",
              fields={"created": False, "previous_lines": 2}),
)  # fmt: skip
case(
    "write_overwrite_own_write_needs_no_read",
    write("a.txt", "one\n"),
    call=Step("write", {"file_path": "a.txt", "content": "two\n"},
              text="Overwrote a.txt (1 line, 4 bytes; previously 1 line)."),
)  # fmt: skip
case(
    "write_refuses_unread_file",
    sh("echo original > a.txt"),
    call=Step("write", {"file_path": "a.txt", "content": "x"}, is_error=True,
              text="Error: a.txt has not been read by this instance, so the write was refused "
                   "and nothing was changed. " + GUARD_HINT.format(p="a.txt", a="write")),
    then=(Step("bash", {"command": "cat a.txt"}, text=out("original")),),
)  # fmt: skip
case(
    "write_refuses_changed_file_with_diff_then_retry_works",
    write("a.txt", "one\ntwo\n"),
    sh("echo three >> a.txt"),
    call=Step("write", {"file_path": "a.txt", "content": "x\n"}, is_error=True,
              text="Error: a.txt changed since this instance last read it, so the write was "
                   "refused and nothing was changed. What changed:\n"
                   "--- a.txt (when last read)\n+++ a.txt (now)\n@@ -2 +2,2 @@\n two\n+three\n"
                   "The new content now counts as read: check that your write still fits it, "
                   "then retry."),
    then=(Step("write", {"file_path": "a.txt", "content": "x\n"},
               text="Overwrote a.txt (1 line, 2 bytes; previously 3 lines)."),),
)  # fmt: skip
case(
    "write_touch_is_not_a_change",
    write("a.txt", "one\n"),
    sh("touch -d '2001-01-01' a.txt"),
    call=Step("write", {"file_path": "a.txt", "content": "two\n"}, is_error=False,
              text="Overwrote a.txt (1 line, 4 bytes; previously 1 line)."),
)  # fmt: skip
case(
    "write_partial_read_counts_as_known",
    sh("seq 1 100 > n.txt"),
    Step("read", {"file_path": "n.txt", "limit": 1}),
    call=Step("write", {"file_path": "n.txt", "content": "1\n"}, is_error=False,
              text="Overwrote n.txt (1 line, 2 bytes; previously 100 lines)."),
)  # fmt: skip
case(
    "write_keeps_mode",
    write("run.sh", "echo hi\n"),
    sh("chmod 750 run.sh"),
    call=Step("write", {"file_path": "run.sh", "content": "echo bye\n"}),
    then=(Step("bash", {"command": MODE_OF.format("run.sh")}, text=out("750")),),
)
case(
    "write_crlf_round_trip",
    sh("printf 'a\\r\\nb\\r\\n' > c.txt"),
    read("c.txt"),
    call=Step("write", {"file_path": "c.txt", "content": "x\ny\nz\n"},
              text="Overwrote c.txt (3 lines, 9 bytes; previously 2 lines)."),
    then=(Step("bash", {"command": "cat -A c.txt"}, text=out("x^M$\ny^M$\nz^M$")),),
)  # fmt: skip
case(
    "write_bom_round_trip",
    sh("printf '\\357\\273\\277a\\n' > b.txt"),
    read("b.txt"),
    call=Step("write", {"file_path": "b.txt", "content": "b\n"},
              text="Overwrote b.txt (1 line, 5 bytes; previously 1 line)."),
    then=(Step("bash", {"command": "cat -A b.txt"}, text=out("M-oM-;M-?b$")),),
)  # fmt: skip
case(
    "write_new_file_is_exact",
    call=Step("write", {"file_path": "w.txt", "content": "a\r\nb"}),
    then=(Step("bash", {"command": "cat -A w.txt"}, text=out("a^M$\nb")),),
)
case(
    "write_through_symlink_keeps_link",
    write("a.txt", "old\n"),
    sh("ln -s a.txt l.txt"),
    call=Step("write", {"file_path": "l.txt", "content": "new\n"},
              text="Overwrote l.txt (1 line, 4 bytes; previously 1 line)."),
    then=(Step("bash", {"command": "readlink l.txt; cat a.txt"}, text=out("a.txt\nnew")),),
)  # fmt: skip
case(
    "write_directory_error",
    sh("mkdir d"),
    call=Step("write", {"file_path": "d", "content": "x"}, is_error=True,
              text="Error: d is a directory, so it cannot be written as a file. Give a file "
                   "path, e.g. d/name.txt."),
)  # fmt: skip
case(
    "write_parent_is_a_file",
    write("a.txt", "x"),
    call=Step("write", {"file_path": "a.txt/b.txt", "content": "y"}, is_error=True,
              match=r"Error: cannot (create the parent folders of|write) a\.txt/b\.txt: .*"),
)  # fmt: skip
case(
    "write_aliases",
    call=Step("write", {"path": "al.txt", "file_text": "hi"},
              text="Created al.txt (1 line, 2 bytes)."),
)  # fmt: skip
case(
    "write_missing_content",
    call=Step("write", {"file_path": "a.txt"}, is_error=True,
              text="Error: missing required parameter content for write. Valid parameters: "
                   "file_path, content."),
)  # fmt: skip
case(
    "write_content_wrong_type",
    call=Step("write", {"file_path": "a.txt", "content": 5}, is_error=True,
              text="Error: parameter content of write must be a string, got 5 (integer)."),
)  # fmt: skip
case(
    "write_unknown_parameter",
    call=Step("write", {"file_path": "a.txt", "content": "", "mode": "w"}, is_error=True,
              text="Error: unknown parameter mode for write. Valid parameters: file_path, "
                   "content."),
)  # fmt: skip

# ----------------------------------------------------------------------- edit

case(
    "edit_basic",
    write("f.txt", "a\nb\nc\n"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "b", "new_string": "B"},
              text="Edited f.txt: 1 replacement at line 2.\n     1\ta\n     2\tB\n     3\tc",
              is_error=False,
              fields={"replacements": 1, "first_line": 2, "match_level": "exact"}),
    then=(Step("bash", {"command": "cat f.txt"}, text=out("a\nB\nc")),),
)  # fmt: skip
case(
    "edit_multiline_new_string_line_range",
    write("f.txt", "a\nb\nc\n"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "b", "new_string": "B1\nB2\nB3"},
              text="Edited f.txt: 1 replacement at lines 2-4.\n     1\ta\n     2\tB1\n     3\tB2"
                   "\n     4\tB3\n     5\tc",
              fields={"first_line": 2, "last_line": 4}),
)  # fmt: skip
case(
    "edit_snippet_has_three_lines_of_context",
    sh("seq 1 20 > n.txt"),
    read("n.txt"),
    call=Step("edit", {"file_path": "n.txt", "old_string": "10\n", "new_string": "ten\n"},
              text="Edited n.txt: 1 replacement at line 10.\n     7\t7\n     8\t8\n     9\t9\n"
                   "    10\tten\n    11\t11\n    12\t12\n    13\t13"),
)  # fmt: skip
case(
    "edit_deletion",
    write("f.txt", "a\nb\nc\n"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "b\n", "new_string": ""},
              text="Edited f.txt: 1 replacement at line 2.\n     1\ta\n     2\tc"),
)  # fmt: skip
case(
    "edit_not_found",
    write("f.txt", "alpha\nbeta\n"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "zzzzzzzz", "new_string": "y"},
              is_error=True,
              text="Error: old_string was not found in f.txt. Nothing was changed.\nCopy "
                   "old_string exactly from the file (read it again if it may have changed), "
                   "then retry."),
    then=(Step("bash", {"command": "cat f.txt"}, text=out("alpha\nbeta")),),
)  # fmt: skip
case(
    "edit_not_found_shows_similar_region",
    write("f.py", "import os\n\ndef hello_world():\n    return 1\n"),
    call=Step("edit", {"file_path": "f.py", "old_string": "def hello_wrld():\n    return 1",
                       "new_string": "x"},
              is_error=True,
              text="Error: old_string was not found in f.py. Nothing was changed.\nThe most "
                   "similar region is at lines 3-4:\n     3\tdef hello_world():\n     4\t    "
                   "return 1\nCopy old_string exactly from the file (read it again if it may "
                   "have changed), then retry."),
)  # fmt: skip
case(
    "edit_ambiguous",
    write("f.txt", "x = 1\ny\nx = 1\nz\nx = 1\n"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "x = 1", "new_string": "x = 2"},
              is_error=True,
              text="Error: old_string matches 3 places in f.txt (lines 1, 3, 5). Nothing was "
                   "changed. To make it unique, add surrounding lines, or set replace_all=true."),
)  # fmt: skip
case(
    "edit_replace_all",
    write("f.txt", "x\ny\nx\n"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "x", "new_string": "X",
                       "replace_all": True},
              text="Edited f.txt: 2 replacements at lines 1 and 3.\n     1\tX\n     2\ty\n"
                   "     3\tX",
              fields={"replacements": 2, "lines": [1, 3]}),
)  # fmt: skip
case(
    "edit_replace_all_many_regions_capped",
    sh("for i in $(seq 1 40); do echo hit; echo pad; echo pad; echo pad; echo pad; done > m.txt"),
    read("m.txt"),
    call=Step("edit", {"file_path": "m.txt", "old_string": "hit", "new_string": "HIT",
                       "replace_all": "true"},
              match=r"Edited m\.txt: 40 replacements at lines 1, 6, 11, 16, 21, 26, 31, 36, 41, "
                    r"46 and 30 more\.\n(?:.+\n){13}\s+14\tpad",
              fields={"replacements": 40}),
)  # fmt: skip
case(
    "edit_snippet_long_lines_cut",
    write("wide.txt", ("y" * 5000 + "\n") * 3 + "target\n"),
    call=Step("edit", {"file_path": "wide.txt", "old_string": "target", "new_string": "T"},
              text="Edited wide.txt: 1 replacement at line 4.\n"
                   + "".join(f"     {i}\t" + "y" * 400 + "…\n" for i in (1, 2, 3))
                   + "     4\tT"),
)  # fmt: skip
case(
    "edit_ambiguous_many_places",
    sh("for i in $(seq 1 12); do echo dup; done > d.txt"),
    read("d.txt"),
    call=Step("edit", {"file_path": "d.txt", "old_string": "dup", "new_string": "x"},
              is_error=True,
              text="Error: old_string matches 12 places in d.txt (lines 1, 2, 3, 4, 5, 6, 7, 8, "
                   "9, 10, +2 more). Nothing was changed. To make it unique, add surrounding "
                   "lines, or set replace_all=true."),
)  # fmt: skip
case(
    "edit_replace_all_single_place",
    write("f.txt", "a\nb\n"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "b", "new_string": "c",
                       "replace_all": True},
              text="Edited f.txt: 1 replacement at line 2.\n     1\ta\n     2\tc"),
)  # fmt: skip
case(
    "edit_identical_strings",
    write("f.txt", "a\n"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "a", "new_string": "a"},
              is_error=True,
              text="Error: old_string and new_string are identical, so there is nothing to "
                   "change in f.txt. Put the changed text in new_string."),
)  # fmt: skip
case(
    "edit_new_string_is_literal",
    write("f.txt", "name\n"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "(name)".strip("()"),
                       "new_string": "$1 \\1 $&"}),
    then=(Step("bash", {"command": "cat f.txt"}, text=out("$1 \\1 $&")),),
)  # fmt: skip
case(
    "edit_empty_old_string_creates_file",
    call=Step("edit", {"file_path": "new/n.txt", "old_string": "", "new_string": "hi\n"},
              text="Created new/n.txt (1 line, 3 bytes).", fields={"created": True}),
    then=(Step("read", {"file_path": "new/n.txt"}, text="     1\thi"),),
)  # fmt: skip
case(
    "edit_empty_old_string_fills_empty_file",
    write("e.txt", ""),
    call=Step("edit", {"file_path": "e.txt", "old_string": "", "new_string": "x\n"},
              text="Edited e.txt: 1 replacement at line 1.\n     1\tx"),
)  # fmt: skip
case(
    "edit_empty_old_string_on_non_empty_file",
    write("f.txt", "a\nb\n"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "", "new_string": "x"},
              is_error=True,
              text="Error: old_string is empty, but f.txt is not empty (2 lines). An empty "
                   "old_string only creates a missing file or fills an empty one. Give the exact "
                   "text to replace."),
)  # fmt: skip
case(
    "edit_file_not_found",
    write("notes.txt", "x"),
    call=Step("edit", {"file_path": "note.txt", "old_string": "a", "new_string": "b"},
              is_error=True,
              text="Error: file not found: note.txt (working directory: {cwd}). Similar names: "
                   "notes.txt. To create it, use write, or edit with an empty old_string."),
)  # fmt: skip
case(
    "edit_directory",
    sh("mkdir d"),
    call=Step("edit", {"file_path": "d", "old_string": "a", "new_string": "b"}, is_error=True,
              text="Error: d is a directory, not a file. Give the path of a file in it."),
)  # fmt: skip
case(
    "edit_binary_file",
    sh("printf 'a\\000b' > bin.dat"),
    call=Step("edit", {"file_path": "bin.dat", "old_string": "a", "new_string": "b"},
              is_error=True,
              text="Error: bin.dat is a binary file (it contains NUL bytes); edit only changes "
                   "text files. Nothing was changed."),
)  # fmt: skip
case(
    "edit_refuses_unread_file",
    sh("echo hello > f.txt"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "hello", "new_string": "bye"},
              is_error=True,
              text="Error: f.txt has not been read by this instance, so the edit was refused and "
                   "nothing was changed. " + GUARD_HINT.format(p="f.txt", a="edit")),
)  # fmt: skip
case(
    "edit_refuses_changed_file_with_diff_then_retry_works",
    write("f.txt", "a\nb\nc\n"),
    sh("sed -i 's/c/C/' f.txt"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "a", "new_string": "A"}, is_error=True,
              text="Error: f.txt changed since this instance last read it, so the edit was "
                   "refused and nothing was changed. What changed:\n"
                   "--- f.txt (when last read)\n+++ f.txt (now)\n@@ -2,2 +2,2 @@\n b\n-c\n+C\n"
                   "The new content now counts as read: check that your edit still fits it, "
                   "then retry."),
    then=(Step("edit", {"file_path": "f.txt", "old_string": "a", "new_string": "A"},
               text="Edited f.txt: 1 replacement at line 1.\n     1\tA\n     2\tb\n     3\tC"),),
)  # fmt: skip
case(
    "edit_touch_is_not_a_change",
    write("f.txt", "a\n"),
    sh("touch -d '2001-01-01' f.txt"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "a", "new_string": "b"},
              is_error=False),
)  # fmt: skip
case(
    "edit_level_crlf",
    write("f.txt", "a\nb\nc\n"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "a\r\nb", "new_string": "x\r\ny"},
              text="Edited f.txt: 1 replacement at lines 1-2.\nNote: matched after normalising "
                   "line endings (CRLF vs LF).\n     1\tx\n     2\ty\n     3\tc",
              fields={"match_level": "crlf"}),
    then=(Step("bash", {"command": "cat -A f.txt"}, text=out("x$\ny$\nc$")),),
)  # fmt: skip
case(
    "edit_crlf_file_keeps_crlf",
    sh("printf 'one\\r\\ntwo\\r\\nthree\\r\\n' > c.txt"),
    read("c.txt"),
    call=Step("edit", {"file_path": "c.txt", "old_string": "two\nthree", "new_string": "2\n3\n4"},
              text="Edited c.txt: 1 replacement at lines 2-4.\n     1\tone\n     2\t2\n     3\t3\n"
                   "     4\t4",
              fields={"match_level": "exact"}),
    then=(Step("bash", {"command": "cat -A c.txt"}, text=out("one^M$\n2^M$\n3^M$\n4^M$")),),
)  # fmt: skip
case(
    "edit_level_unicode",
    write("q.txt", "say \u201chi\u201d \u2014 it\u2019s\u00a0ok\n"),
    call=Step("edit", {"file_path": "q.txt", "old_string": "say \"hi\" - it's ok",
                       "new_string": "done"},
              text="Edited q.txt: 1 replacement at line 1.\nNote: matched after normalising "
                   "curly quotes, dashes and non-breaking spaces.\n     1\tdone",
              fields={"match_level": "unicode"}),
)  # fmt: skip
case(
    "edit_level_trailing_whitespace",
    write("t.txt", "a  \nb\t\nc\n"),
    call=Step("edit", {"file_path": "t.txt", "old_string": "a\nb\n", "new_string": "x\n"},
              text="Edited t.txt: 1 replacement at line 1.\nNote: matched ignoring trailing "
                   "whitespace at the ends of lines.\n     1\tx\n     2\tc",
              fields={"match_level": "trailing_whitespace"}),
)  # fmt: skip
case(
    "edit_level_indentation_shift",
    write("i.py", "def f():\n    if x:\n        y()\n    return 1\n"),
    call=Step("edit", {"file_path": "i.py", "old_string": "if x:\n    y()",
                       "new_string": "if z:\n    y()\n    w()"},
              text="Edited i.py: 1 replacement at lines 2-4.\nNote: matched with a uniform "
                   "indentation shift; new_string was re-indented by the same shift.\n"
                   "     1\tdef f():\n     2\t    if z:\n     3\t        y()\n     4\t        w()\n"
                   "     5\t    return 1",
              fields={"match_level": "indentation"}),
)  # fmt: skip
case(
    "edit_exact_beats_looser_levels",
    write("f.txt", "it's\nit\u2019s\n"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "it's", "new_string": "X"},
              text="Edited f.txt: 1 replacement at line 1.\n     1\tX\n     2\tit\u2019s",
              fields={"match_level": "exact"}),
)  # fmt: skip
case(
    "edit_uniqueness_judged_at_matching_level",
    write("f.txt", "it\u2019s\nit\u2018s\n"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "it's", "new_string": "X"},
              is_error=True,
              text="Error: old_string matches 2 places in f.txt (lines 1, 2). Nothing was "
                   "changed. To make it unique, add surrounding lines, or set replace_all=true."),
)  # fmt: skip
case(
    "edit_line_number_prefixes",
    write("f.py", "def g():\n    return 1\n"),
    call=Step("edit", {"file_path": "f.py", "old_string": "     1\tdef g():\n     2\t    return 1",
                       "new_string": "     1\tdef h():"},
              is_error=True,
              text="Error: old_string carries line-number prefixes from read's output (like "
                   '"    12\\t"); they are not part of the file. Nothing was changed in f.py. '
                   "Remove the number and the tab from the start of every line of old_string "
                   "(and new_string), then retry."),
)  # fmt: skip
case(
    "edit_keeps_bom",
    sh("printf '\\357\\273\\277a\\nb\\n' > b.txt"),
    read("b.txt"),
    call=Step("edit", {"file_path": "b.txt", "old_string": "a", "new_string": "A"}),
    then=(Step("bash", {"command": "cat -A b.txt"}, text=out("M-oM-;M-?A$\nb$")),),
)
case(
    "edit_keeps_mode",
    write("run.sh", "echo a\n"),
    sh("chmod 755 run.sh"),
    call=Step("edit", {"file_path": "run.sh", "old_string": "a", "new_string": "b"}),
    then=(
        Step("bash", {"command": MODE_OF.format("run.sh") + " && ./run.sh"}, text=out("755\nb")),
    ),
)
case(
    "edit_aliases",
    write("f.txt", "a\na\n"),
    call=Step("edit", {"path": "f.txt", "oldText": "a", "newText": "b", "replaceAll": "true"},
              fields={"replacements": 2}),
)  # fmt: skip
case(
    "edit_aliases_old_str_new_str",
    write("f.txt", "a\n"),
    call=Step("edit", {"file_path": "f.txt", "old_str": "a", "new_str": "b"},
              fields={"replacements": 1}),
)  # fmt: skip
case(
    "edit_replace_all_not_boolean",
    write("f.txt", "a\n"),
    call=Step("edit", {"file_path": "f.txt", "old_string": "a", "new_string": "b",
                       "replace_all": "maybe"},
              is_error=True,
              text='Error: parameter replace_all of edit must be a boolean (true or false), got '
                   '"maybe" (string).'),
)  # fmt: skip

# ----------------------------------------------------------------------- bash

case(
    "bash_echo",
    call=Step("bash", {"command": "echo hi"}, text=out("hi"), is_error=False,
              fields={"exit_code": 0, "timed_out": False, "truncated": False}),
)  # fmt: skip
case("bash_no_output", call=Step("bash", {"command": "true"}, text=out("(no output)")))
case(
    "bash_exit_code_is_error",
    call=Step("bash", {"command": "echo bad; exit 3"}, text=out("bad", 3), is_error=True,
              fields={"exit_code": 3}),
)  # fmt: skip
case(
    "bash_stdout_stderr_merged_in_order",
    call=Step("bash", {"command": "echo out1; echo err >&2; echo out2"},
              text=out("out1\nerr\nout2")),
)  # fmt: skip
case(
    "bash_trailing_whitespace_trimmed",
    call=Step("bash", {"command": "printf 'a  \\n\\n\\n   \\n'"}, text=out("a")),
)
case(
    "bash_grep_exit_1_no_matches",
    write("a.txt", "hello\n"),
    call=Step("bash", {"command": "grep zzz a.txt"}, text=out("(no output)", 1, "no matches"),
              is_error=False, fields={"exit_code": 1}),
)  # fmt: skip
case(
    "bash_rg_in_pipeline_exit_1_no_matches",
    write("a.txt", "hello\n"),
    call=Step("bash", {"command": "cat a.txt | grep -c zzz"}, text=out("0", 1, "no matches"),
              is_error=False),
)  # fmt: skip
case(
    "bash_diff_exit_1_files_differ",
    write("a.txt", "a\n"),
    write("b.txt", "b\n"),
    call=Step("bash", {"command": "diff a.txt b.txt"},
              text=out("1c1\n< a\n---\n> b", 1, "files differ"), is_error=False),
)  # fmt: skip
case(
    "bash_cmp_exit_1_files_differ",
    write("a.txt", "a\n"),
    write("b.txt", "b\n"),
    call=Step("bash", {"command": "cmp -s a.txt b.txt"},
              text=out("(no output)", 1, "files differ"), is_error=False),
)  # fmt: skip
case(
    "bash_test_exit_1_not_an_error",
    call=Step("bash", {"command": "test -f nope.txt"},
              text=out("(no output)", 1, "condition false"), is_error=False),
)  # fmt: skip
case(
    "bash_bracket_test_exit_1_not_an_error",
    call=Step("bash", {"command": "[ -d nope ]"},
              text=out("(no output)", 1, "condition false"), is_error=False),
)  # fmt: skip
case(
    "bash_grep_exit_2_is_error",
    call=Step("bash", {"command": "grep x nope.txt"},
              text=out("grep: nope.txt: No such file or directory", 2), is_error=True),
)  # fmt: skip
case(
    "bash_other_exit_1_is_error",
    call=Step("bash", {"command": "false"}, text=out("(no output)", 1), is_error=True),
)
case(
    "bash_persistent_cd",
    sh("mkdir -p sub/deeper && cd sub"),
    call=Step("bash", {"command": "pwd"}, text=out("{cwd}/sub")),
)
case(
    "bash_persistent_export",
    sh("export GREETING='hello world'"),
    call=Step("bash", {"command": 'echo "$GREETING"'}, text=out("hello world")),
)
case(
    "bash_unexported_variable_not_persisted",
    sh("LOCAL_ONLY=1"),
    call=Step("bash", {"command": 'echo "[$LOCAL_ONLY]"'}, text=out("[]")),
)
case(
    "bash_cd_persists_even_after_failure",
    sh("mkdir d"),
    Step("bash", {"command": "cd d && false"}, is_error=True),
    call=Step("bash", {"command": "pwd"}, text=out("{cwd}/d")),
)  # fmt: skip
case(
    "bash_workdir_does_not_change_saved_cwd",
    sh("mkdir -p sub other"),
    sh("cd other"),
    call=Step("bash", {"command": "pwd", "workdir": "sub"}, text=out("{cwd}/sub")),
    then=(Step("bash", {"command": "pwd"}, text=out("{cwd}/other")),),
)
case(
    "bash_workdir_missing",
    sh("mkdir src"),
    call=Step("bash", {"command": "pwd", "workdir": "srx"}, is_error=True,
              text="Error: workdir not found: srx (working directory: {cwd}). Similar names: src. "
                   "Create it first (mkdir -p), or run without workdir."),
)  # fmt: skip
case(
    "bash_saved_cwd_deleted",
    sh("mkdir gone && cd gone"),
    sh("rmdir ../gone"),
    call=Step("bash", {"command": "pwd"},
              text=out("[The saved working directory {cwd}/gone no longer exists; running in "
                       "{cwd}.]\n{cwd}")),
)  # fmt: skip
case(
    "bash_environment_defaults",
    call=Step("bash", {"command": "echo $PAGER $GIT_PAGER $GIT_TERMINAL_PROMPT $TERM"},
              text=out("cat cat 0 dumb")),
)  # fmt: skip
case(
    "bash_stdin_is_dev_null",
    call=Step("bash", {"command": "cat; echo done"}, text=out("done")),
)
case(
    "bash_ansi_escapes_stripped",
    call=Step("bash", {"command": "printf '\\033[1;31mred\\033[0m plain \\033]0;title\\007x\\n'"},
              text=out("red plain x")),
)  # fmt: skip
case(
    "bash_carriage_return_progress_collapsed",
    call=Step("bash", {"command": "printf 'p 10%%\\rp 50%%\\rp 100%%\\ndone\\r\\n'"},
              text=out("p 100%\ndone")),
)  # fmt: skip
case(
    "bash_unicode_output",
    call=Step("bash", {"command": "echo 'héllo ✓ 日本'"}, text=out("héllo ✓ 日本")),
)
case(
    "bash_killed_by_signal",
    call=Step("bash", {"command": "kill -9 $$"}, text=out("(no output)", 137), is_error=True),
)
case(
    "bash_command_not_found",
    call=Step("bash", {"command": "echo before\nnosuchcmd_xyz"}, is_error=True,
              text=out("before\nbash: line 2: nosuchcmd_xyz: command not found", 127)),
)  # fmt: skip
case(
    "bash_syntax_error",
    call=Step("bash", {"command": "if then fi"}, is_error=True,
              match=r".*syntax error.*\n\nExit code: 2", fields={"exit_code": 2}),
)  # fmt: skip
case(
    "bash_timeout",
    call=Step("bash", {"command": "echo started; sleep 20", "timeout": 1000}, is_error=True,
              text="started\n\nExit code: 124\n[Timed out after 1000 ms: the command was stopped "
                   "(SIGTERM, then SIGKILL). Re-run with a larger timeout (up to 600000), or "
                   "with run_in_background=true and check its log.]",
              fields={"exit_code": 124, "timed_out": True}),
)  # fmt: skip
case(
    "bash_timeout_kills_process_group",
    call=Step("bash", {"command": "(sleep 30; echo leaked > leak.txt) & sleep 30",
                       "timeout": "1000"},
              fields={"exit_code": 124, "timed_out": True}),
    then=(Step("bash", {"command": "sleep 0.5; cat leak.txt"}, is_error=True,
               match=r".*No such file or directory\n\nExit code: 1"),),
)  # fmt: skip
case(
    "bash_timeout_too_small_hints_milliseconds",
    call=Step("bash", {"command": "echo hi", "timeout": 30}, is_error=True,
              text="Error: timeout 30 is too small: timeout is in milliseconds, from 1000 to "
                   "600000. Did you mean timeout=30000?"),
)  # fmt: skip
case(
    "bash_timeout_too_large",
    call=Step("bash", {"command": "echo hi", "timeout": 700000}, is_error=True,
              text="Error: timeout 700000 is too large: the maximum is 600000 ms (10 minutes). "
                   "For longer commands use run_in_background=true and check the job's log."),
)  # fmt: skip
case(
    "bash_returns_while_background_child_holds_pipe",
    call=Step("bash", {"command": "sleep 30 & echo started"}, text=out("started")),
)
case(
    "bash_huge_output_truncated_with_log",
    call=Step("bash", {"command": "seq 1 200000"}, is_error=False,
              match=r"1\n2\n3\n(?:\d+\n)+\[\.\.\. 19\d{4} lines \(\d+ chars\) omitted \.\.\.\]\n"
                    r"(?:\d+\n)+200000\n\nExit code: 0\n\[Output truncated: 1288895 characters, "
                    r"shown as the first 20% and the last 80%\. The full output is saved in "
                    r"\S+/bash-\d+\.log: read it with read or grep instead of re-running the "
                    r"command\.\]",
              fields={"truncated": True}),
    then=(Step("grep", {"pattern": "^123456$", "path": "{call.log_path}",
                        "output_mode": "content"},
               match=r"\S+/bash-\d+\.log:123456:123456"),
          Step("read", {"file_path": "{call.log_path}", "offset": 199999},
               text="199999\t199999\n200000\t200000")),
)  # fmt: skip
# The whole text, exit line included, stays within 30,000 characters: 29,986
# characters of output plus "\n\nExit code: 0" is the most that fits whole.
case(
    "bash_output_at_limit_not_truncated",
    call=Step("bash", {"command": "head -c 29986 /dev/zero | tr '\\0' a"},
              match=r"a{29986}\n\nExit code: 0", fields={"truncated": False, "log_path": None}),
)  # fmt: skip
case(
    "bash_output_one_over_limit_truncated",
    call=Step("bash", {"command": "head -c 29987 /dev/zero | tr '\\0' a"},
              match=r"a+\n\[\.\.\. 0 lines \(\d+ chars\) omitted \.\.\.\]\na+\n\nExit code: 0\n"
                    r"\[Output truncated: 29987 characters, .*\]",
              fields={"truncated": True}),
)  # fmt: skip
case(
    "bash_run_in_background",
    call=Step("bash", {"command": "echo bg-out; sleep 30", "run_in_background": True},
              match=r"Started background job bash_1 \(pid (\d+)\): echo bg-out; sleep 30\nIts "
                    r"output goes to \S+/job-1\.log\. Follow it with bash_output "
                    r"\(bash_id=\"bash_1\"\), which shows the output since the last check and "
                    r"whether it is still running; stop it with kill_shell "
                    r"\(shell_id=\"bash_1\"\)\.",
              is_error=False, fields={"job_id": 1, "bash_id": "bash_1", "background": True,
                                      "exit_code": None}),
    then=(Step("bash", {"command": "sleep 1; cat {call.log_path}"}, text=out("bg-out")),
          Step("bash", {"command": "kill {call.pid} && echo stopped"}, text=out("stopped"))),
)  # fmt: skip
case(
    "bash_background_job_uses_saved_cwd_and_env",
    sh("mkdir w && cd w && export JOBVAR=42"),
    call=Step("bash", {"command": "echo $JOBVAR $PWD", "run_in_background": True}),
    then=(Step("bash", {"command": "sleep 1; cat {call.log_path}"}, text=out("42 {cwd}/w")),),
)
case(
    "bash_empty_command",
    call=Step("bash", {"command": "  "}, is_error=True,
              text='Error: command is empty. Give a shell command to run, e.g. "ls -la".'),
)  # fmt: skip
case(
    "bash_description_is_accepted",
    call=Step("bash", {"command": "echo ok", "description": "say ok"}, text=out("ok")),
)
case(
    "bash_unknown_parameter",
    call=Step("bash", {"command": "echo ok", "cwd": "/"}, is_error=True,
              text="Error: unknown parameter cwd for bash. Valid parameters: command, timeout, "
                   "description, run_in_background, workdir."),
)  # fmt: skip

# ------------------------------------------------------ bash_output, kill_shell


def background(command: str) -> Step:
    return Step("bash", {"command": command, "run_in_background": True})


def wait_for(name: str) -> Step:
    """Wait (up to 10 s) for a job to create ``name``, then a little more."""
    return sh(f"for i in $(seq 200); do [ -e {name} ] && break; sleep 0.05; done; sleep 0.5")


def job_status(text: str, status: str) -> str:
    return f"{text}\n\nStatus: {status}"


_JOB_ERROR = "Error: no background job {!r} ({}). "
_NO_JOBS = "There are no background jobs; start one with bash and run_in_background=true."

case(
    "bash_output_of_finished_job",
    background("echo one; echo two >&2; touch done.mark; exit 3"),
    wait_for("done.mark"),
    call=Step("bash_output", {"bash_id": "bash_1"}, is_error=False,
              text=job_status("one\ntwo", "exited (Exit code: 3)"),
              fields={"bash_id": "bash_1", "status": "exited", "exit_code": 3, "signal": None,
                      "new_bytes": 8, "truncated": False}),
    then=(Step("bash_output", {"bash_id": "bash_1"},
               text=job_status("(no new output)", "exited (Exit code: 3)"),
               fields={"new_bytes": 0}),),
)  # fmt: skip
case(
    "bash_output_only_new_output_since_last_read",
    background("echo first; touch a.mark; while [ ! -e go.mark ]; do sleep 0.05; done; "
               "echo second; touch b.mark; sleep 30"),
    wait_for("a.mark"),
    Step("bash_output", {"bash_id": "bash_1"}, text=job_status("first", "running")),
    sh("touch go.mark"),
    wait_for("b.mark"),
    call=Step("bash_output", {"bash_id": "bash_1"}, text=job_status("second", "running"),
              fields={"status": "running", "exit_code": None, "new_bytes": 7}),
    then=(Step("kill_shell", {"shell_id": "bash_1"}, match=r"Killed bash_1 \(pid \d+\)\.",
               fields={"status": "killed", "signal": 15, "exit_code": 143, "killed": True}),),
)  # fmt: skip
case(
    "bash_output_filter_shows_matching_lines",
    background("printf 'ok 1\\nFAIL 2\\nok 3\\nFAIL 4\\n'; touch done.mark"),
    wait_for("done.mark"),
    call=Step("bash_output", {"bash_id": "bash_1", "filter": "^FAIL"},
              text=job_status("FAIL 2\nFAIL 4", "exited (Exit code: 0)"),
              fields={"new_bytes": 24}),
    then=(Step("bash_output", {"bash_id": "bash_1"},
               text=job_status("(no new output)", "exited (Exit code: 0)")),),
)  # fmt: skip
case(
    "bash_output_filter_without_matches",
    background("echo nothing here; touch done.mark"),
    wait_for("done.mark"),
    call=Step("bash_output", {"bash_id": "bash_1", "filter": "error"},
              text=job_status("(no new lines match the filter 'error')",
                              "exited (Exit code: 0)")),
)  # fmt: skip
case(
    "bash_output_shell_id_alias_and_bare_number",
    background("echo hi; touch done.mark"),
    wait_for("done.mark"),
    call=Step("bash_output", {"shell_id": "1"}, text=job_status("hi", "exited (Exit code: 0)"),
              fields={"bash_id": "bash_1"}),
)  # fmt: skip
case(
    "bash_output_cleans_like_bash",
    background("printf 'a\\033[31mred\\033[0m\\n10%%\\r50%%\\r100%%\\n'; touch done.mark"),
    wait_for("done.mark"),
    call=Step("bash_output", {"bash_id": "bash_1"},
              text=job_status("ared\n100%", "exited (Exit code: 0)")),
)  # fmt: skip
case(
    "bash_output_huge_output_truncated_with_log",
    background("seq 1 300000; touch done.mark"),
    wait_for("done.mark"),
    call=Step("bash_output", {"bash_id": "bash_1"},
              match=r"1\n2\n(?:\d+\n)+\[\.\.\. 2\d{5} lines \(\d+ chars\) omitted \.\.\.\]\n"
                    r"(?:\d+\n)+300000\n\nStatus: exited \(Exit code: 0\)\n\[Output truncated: "
                    r"1988895 characters, shown as the first 20% and the last 80%\. The full "
                    r"output is saved in \S+/job-1\.log: read it with read or grep\.\]",
              fields={"truncated": True, "new_bytes": 1988895}),
    then=(Step("grep", {"pattern": "^123456$", "path": "{call.log_path}",
                        "output_mode": "content"},
               match=r"\S+/job-1\.log:123456:123456"),),
)  # fmt: skip
case(
    "bash_output_killed_job_status",
    background("touch started.mark; sleep 30"),
    wait_for("started.mark"),
    Step("kill_shell", {"shell_id": "bash_1"}),
    call=Step("bash_output", {"bash_id": "bash_1"},
              text=job_status("(no new output)", "killed by signal 15 (SIGTERM)"),
              fields={"status": "killed", "exit_code": 143, "signal": 15}),
)  # fmt: skip
case(
    "bash_output_unknown_id_without_jobs",
    call=Step(
        "bash_output",
        {"bash_id": "bash_7"},
        is_error=True,
        text=_JOB_ERROR.format("bash_7", "bash_id") + _NO_JOBS,
    ),
)
case(
    "bash_output_unknown_id_lists_jobs",
    background("touch started.mark; sleep 30"),
    background("exit 4"),
    wait_for("started.mark"),
    call=Step("bash_output", {"bash_id": "nope"}, is_error=True,
              text=_JOB_ERROR.format("nope", "bash_id")
              + "The jobs are: bash_1 (running), bash_2 (exit code 4)."),
    then=(Step("kill_shell", {"shell_id": "bash_1"}, is_error=False),),
)  # fmt: skip
case(
    "bash_output_invalid_filter",
    background("true"),
    call=Step("bash_output", {"bash_id": "bash_1", "filter": "(unclosed"}, is_error=True,
              match=r"Error: filter '\(unclosed' is not a valid regular expression: .*\. Escape "
                    r"special characters \(e\.g\. \\\( or \\\.\), or leave filter out\."),
)  # fmt: skip
case(
    "bash_output_missing_bash_id",
    call=Step("bash_output", {}, is_error=True,
              text="Error: missing required parameter bash_id for bash_output. "
                   "Valid parameters: bash_id, filter."),
)  # fmt: skip
case(
    "kill_shell_stops_whole_process_group",
    background("(sleep 2; echo leaked > leak.txt) & touch started.mark; sleep 30"),
    wait_for("started.mark"),
    call=Step("kill_shell", {"shell_id": "bash_1"}, is_error=False,
              match=r"Killed bash_1 \(pid \d+\)\.", fields={"killed": True}),
    then=(Step("bash", {"command": "sleep 2.5; cat leak.txt"}, is_error=True,
               match=r".*No such file or directory\n\nExit code: 1"),),
)  # fmt: skip
case(
    "kill_shell_escalates_to_sigkill",
    background("trap '' TERM; touch started.mark; sleep 30"),
    wait_for("started.mark"),
    call=Step("kill_shell", {"bash_id": "bash_1"}, match=r"Killed bash_1 \(pid \d+\)\.",
              fields={"status": "killed", "signal": 9, "exit_code": 137}),
)  # fmt: skip
case(
    "kill_shell_finished_job_is_not_an_error",
    background("touch done.mark; exit 2"),
    wait_for("done.mark"),
    call=Step("kill_shell", {"shell_id": "bash_1"}, is_error=False,
              match=r"bash_1 \(pid \d+\) had already ended: exited \(Exit code: 2\)\. "
                    r"Nothing to kill\.",
              fields={"killed": False, "status": "exited", "exit_code": 2}),
)  # fmt: skip
case(
    "kill_shell_unknown_id",
    call=Step(
        "kill_shell",
        {"shell_id": "bash_3"},
        is_error=True,
        text=_JOB_ERROR.format("bash_3", "shell_id") + _NO_JOBS,
    ),
)
case(
    "kill_shell_unknown_parameter",
    call=Step("kill_shell", {"shell_id": "bash_1", "signal": 9}, is_error=True,
              text="Error: unknown parameter signal for kill_shell. Valid parameters: shell_id."),
)  # fmt: skip

# ----------------------------------------------------------------------- grep

_GREP_FILES = (
    write("a.py", "foo = 1\n"),
    write("b.py", "bar = foo\n"),
    write("c.txt", "nothing\n"),
    write("src/d.py", "# foo here\nFOO = 2\n"),
    files_at("a.py", "src/d.py", "c.txt", "b.py"),
)
case(
    "grep_files_with_matches_newest_first",
    *_GREP_FILES,
    call=Step("grep", {"pattern": "foo"}, text="b.py\nsrc/d.py\na.py", is_error=False,
              fields={"mode": "files_with_matches", "file_count": 3, "truncated": False}),
)  # fmt: skip
case(
    "grep_content_mode",
    *_GREP_FILES,
    call=Step("grep", {"pattern": "foo", "output_mode": "content"},
              text="a.py:1:foo = 1\nb.py:1:bar = foo\nsrc/d.py:1:# foo here",
              fields={"matches": 3}),
)  # fmt: skip
case(
    "grep_content_without_line_numbers",
    *_GREP_FILES,
    call=Step("grep", {"pattern": "foo", "output_mode": "content", "-n": False},
              text="a.py:foo = 1\nb.py:bar = foo\nsrc/d.py:# foo here"),
)  # fmt: skip
case(
    "grep_count_mode",
    *_GREP_FILES,
    call=Step("grep", {"pattern": "foo", "output_mode": "count", "-i": True},
              text="a.py:1\nb.py:1\nsrc/d.py:2\n\nTotal: 4 matching lines in 3 files.",
              fields={"matches": 4, "file_count": 3}),
)  # fmt: skip
case(
    "grep_case_insensitive",
    *_GREP_FILES,
    call=Step("grep", {"pattern": "^FOO", "-i": "true", "output_mode": "content"},
              text="a.py:1:foo = 1\nsrc/d.py:2:FOO = 2"),
)  # fmt: skip
case(
    "grep_no_matches",
    *_GREP_FILES,
    call=Step("grep", {"pattern": "zzz"}, text='No matches found for "zzz" in {cwd}.',
              is_error=False, fields={"file_count": 0}),
)  # fmt: skip
case(
    "grep_no_matches_names_path_and_filters",
    *_GREP_FILES,
    call=Step("grep", {"pattern": "zzz", "path": "src", "glob": "*.py"},
              text='No matches found for "zzz" in src (glob "*.py").'),
)  # fmt: skip
case(
    "grep_path_subfolder",
    *_GREP_FILES,
    call=Step("grep", {"pattern": "foo", "path": "src"}, text="src/d.py"),
)
case(
    "grep_path_single_file",
    *_GREP_FILES,
    call=Step("grep", {"pattern": "o", "path": "b.py", "output_mode": "content"},
              text="b.py:1:bar = foo"),
)  # fmt: skip
case(
    "grep_absolute_path",
    *_GREP_FILES,
    call=Step("grep", {"pattern": "foo", "path": "{cwd}/src"}, text="src/d.py"),
)
case(
    "grep_glob_filter",
    *_GREP_FILES,
    write("notes.md", "foo\n"),
    call=Step("grep", {"pattern": "foo", "glob": "*.md"}, text="notes.md"),
)  # fmt: skip
case(
    "grep_glob_braces",
    *_GREP_FILES,
    write("notes.md", "foo\n"),
    call=Step("grep", {"pattern": "foo", "glob": "*.{md,txt}", "output_mode": "count"},
              text="notes.md:1\n\nTotal: 1 matching line in 1 file."),
)  # fmt: skip
case(
    "grep_include_alias",
    *_GREP_FILES,
    call=Step("grep", {"pattern": "foo", "include": "src/*.py"}, text="src/d.py"),
)
case(
    "grep_type_filter",
    *_GREP_FILES,
    write("notes.md", "foo\n"),
    call=Step("grep", {"pattern": "foo", "type": "md"}, text="notes.md"),
)  # fmt: skip
case(
    "grep_type_alias",
    *_GREP_FILES,
    call=Step("grep", {"pattern": "foo", "type": "python", "path": "src"}, text="src/d.py"),
)
case(
    "grep_unknown_type",
    call=Step("grep", {"pattern": "foo", "type": "klingon"}, is_error=True,
              match=r'Error: unknown file type "klingon"\. Known types: asm, .*py, .*\. Or use '
                    r'glob instead, e\.g\. glob="\*\.ext"\.'),
)  # fmt: skip
case(
    "grep_context_lines",
    write("f.txt", "l1\nl2\nfoo\nl4\nl5\nl6\nl7\nfoo\nl9\n"),
    call=Step("grep", {"pattern": "foo", "output_mode": "content", "-C": 1},
              text="f.txt-2-l2\nf.txt:3:foo\nf.txt-4-l4\n--\nf.txt-7-l7\nf.txt:8:foo\nf.txt-9-l9"),
)  # fmt: skip
case(
    "grep_after_and_before_context",
    write("f.txt", "l1\nfoo\nl3\nl4\nfoo\n"),
    call=Step("grep", {"pattern": "foo", "output_mode": "content", "-A": 1, "-B": "0"},
              text="f.txt:2:foo\nf.txt-3-l3\n--\nf.txt:5:foo"),
)  # fmt: skip
case(
    "grep_context_groups_across_files",
    write("a.txt", "x\nfoo\n"),
    write("b.txt", "foo\ny\n"),
    call=Step("grep", {"pattern": "foo", "output_mode": "content", "-B": 1},
              text="a.txt-1-x\na.txt:2:foo\n--\nb.txt:1:foo"),
)  # fmt: skip
case(
    "grep_adjacent_matches_share_context",
    write("f.txt", "a\nfoo\nfoo\nb\n"),
    call=Step("grep", {"pattern": "foo", "output_mode": "content", "-C": 1},
              text="f.txt-1-a\nf.txt:2:foo\nf.txt:3:foo\nf.txt-4-b"),
)  # fmt: skip
case(
    "grep_literal",
    write("f.txt", "call a.b(x)\naxb(x)\n"),
    call=Step("grep", {"pattern": "a.b(", "literal": True, "output_mode": "content"},
              text="f.txt:1:call a.b(x)"),
)  # fmt: skip
case(
    "grep_regex_dot",
    write("f.txt", "call a.b(x)\naxb(x)\n"),
    call=Step("grep", {"pattern": "a.b\\(", "output_mode": "count"},
              text="f.txt:2\n\nTotal: 2 matching lines in 1 file."),
)  # fmt: skip
case(
    "grep_invalid_regex",
    write("f.txt", "x\n"),
    call=Step("grep", {"pattern": "foo("}, is_error=True,
              match=r'(?s)Error: invalid regex "foo\(": regex parse error.*\nEscape special '
                    r"characters with a backslash \(e\.g\. \\\( or \\\.\), or set literal=true to "
                    r"search for the text as written\."),
)  # fmt: skip
case(
    "grep_lookaround_rejected",
    write("f.txt", "x\n"),
    call=Step("grep", {"pattern": "a(?=b)"}, is_error=True,
              match=r'(?s)Error: invalid regex "a\(\?=b\)": .*look-around.*literal=true.*'),
)  # fmt: skip
case(
    "grep_pattern_starting_with_dash",
    write("f.txt", "a -x b\n"),
    call=Step("grep", {"pattern": "-x", "output_mode": "content"}, text="f.txt:1:a -x b"),
)
case(
    "grep_missing_path",
    write("src/a.py", "x\n"),
    call=Step("grep", {"pattern": "x", "path": "srcc"}, is_error=True,
              text="Error: path not found: srcc (working directory: {cwd}). Similar names: src. "
                   "Check the path, or run grep without path."),
)  # fmt: skip
case(
    "grep_hidden_files_searched_git_skipped",
    write(".hidden/h.txt", "needle\n"),
    write(".env", "needle\n"),
    sh("mkdir -p .git && echo needle > .git/config"),
    files_at(".env", ".hidden/h.txt"),
    call=Step("grep", {"pattern": "needle"}, text=".hidden/h.txt\n.env"),
)  # fmt: skip
case(
    "grep_gitignore_respected",
    write(".gitignore", "*.log\nbuild/\n/top.txt\n!keep.log\n"),
    write("a.log", "needle\n"),
    write("keep.log", "needle\n"),
    write("build/out.txt", "needle\n"),
    write("top.txt", "needle\n"),
    write("sub/top.txt", "needle\n"),
    write("src/s.txt", "needle\n"),
    call=Step("grep", {"pattern": "needle", "output_mode": "count"},
              text="keep.log:1\nsrc/s.txt:1\nsub/top.txt:1\n\nTotal: 3 matching lines in 3 files."),
)  # fmt: skip
case(
    "grep_nested_gitignore",
    write("sub/.gitignore", "*.tmp\n"),
    write("sub/x.tmp", "needle\n"),
    write("x.tmp", "needle\n"),
    call=Step("grep", {"pattern": "needle", "output_mode": "count"},
              text="x.tmp:1\n\nTotal: 1 matching line in 1 file."),
)  # fmt: skip
case(
    "grep_binary_files_skipped",
    sh("printf 'needle\\000\\n' > bin.dat"),
    write("t.txt", "needle\n"),
    call=Step("grep", {"pattern": "needle"}, text="t.txt"),
)  # fmt: skip
case(
    "grep_binary_file_as_path",
    sh("printf 'needle\\000\\n' > bin.dat"),
    call=Step("grep", {"pattern": "needle", "path": "bin.dat"}, is_error=True,
              text="Error: bin.dat is a binary file (it contains NUL bytes), which grep does not "
                   "search. Use bash, e.g. strings bin.dat | grep -n PATTERN."),
)  # fmt: skip
case(
    "grep_symlinks_not_followed",
    write("real.txt", "needle\n"),
    sh("ln -s real.txt link.txt && mkdir d && ln -s ../real.txt d/l2.txt"),
    call=Step("grep", {"pattern": "needle"}, text="real.txt"),
)  # fmt: skip
case(
    "grep_crlf_line_end_anchor",
    sh("printf 'foo\\r\\nbar\\r\\n' > c.txt"),
    call=Step("grep", {"pattern": "foo$", "output_mode": "content"}, text="c.txt:1:foo"),
)
case(
    "grep_multiline",
    write("m.txt", "start\nfoo\nbar\nend\n"),
    call=Step("grep", {"pattern": "foo.bar", "multiline": True, "output_mode": "content"},
              text="m.txt:2:foo\nm.txt:3:bar"),
)  # fmt: skip
case(
    "grep_without_multiline_no_cross_line_match",
    write("m.txt", "start\nfoo\nbar\nend\n"),
    call=Step("grep", {"pattern": "foo.bar"}, text='No matches found for "foo.bar" in {cwd}.'),
)
case(
    "grep_unicode_and_space_paths",
    write("dir with space/ünï.txt", "naïve needle ✓\n"),
    call=Step("grep", {"pattern": "naïve", "output_mode": "content"},
              text="dir with space/ünï.txt:1:naïve needle ✓"),
)  # fmt: skip
case(
    "grep_files_paging",
    sh("for i in 1 2 3 4 5; do echo hit > f$i.txt; touch -d \"2020-01-01 00:00:0$i\" f$i.txt;"
       " done"),
    call=Step("grep", {"pattern": "hit", "head_limit": 2},
              text="f5.txt\nf4.txt\n\n[Showing 2 of 5 matching files. Use offset=2 for the next "
                   "page, or narrow with path, glob or type.]",
              fields={"truncated": True, "next_offset": 2, "total": 5}),
    then=(Step("grep", {"pattern": "hit", "head_limit": 2, "offset": 2},
               text="f3.txt\nf2.txt\n\n[Showing 3-4 of 5 matching files. Use offset=4 for the "
                    "next page, or narrow with path, glob or type.]"),
          Step("grep", {"pattern": "hit", "head_limit": 2, "offset": 4}, text="f1.txt")),
)  # fmt: skip
case(
    "grep_content_paging",
    sh("seq 1 10 | sed 's/^/hit /' > h.txt"),
    call=Step("grep", {"pattern": "hit", "output_mode": "content", "head_limit": 3},
              text="h.txt:1:hit 1\nh.txt:2:hit 2\nh.txt:3:hit 3\n\n[Showing 3 of 10 matching "
                   "lines. Use offset=3 for the next page, or narrow with path, glob or type.]"),
)  # fmt: skip
case(
    "grep_default_head_limit_250",
    sh("seq 1 300 | sed 's/^/hit /' > h.txt"),
    call=Step("grep", {"pattern": "hit", "output_mode": "content"},
              match=r"(?s)h\.txt:1:hit 1\n.*\nh\.txt:250:hit 250\n\n\[Showing 250 of 300 matching "
                    r"lines\. Use offset=250 for the next page, or narrow with path, glob or "
                    r"type\.\]"),
)  # fmt: skip
case(
    "grep_count_paging",
    sh("for i in 1 2 3; do echo hit > f$i.txt; done"),
    call=Step("grep", {"pattern": "hit", "output_mode": "count", "head_limit": 2},
              text="f1.txt:1\nf2.txt:1\n\nTotal: 3 matching lines in 3 files.\n\n[Showing 2 "
                   "of 3 files with matches. Use offset=2 for the next page, or narrow with "
                   "path, glob or type.]"),
)  # fmt: skip
case(
    "grep_offset_past_end",
    write("a.txt", "hit\n"),
    call=Step("grep", {"pattern": "hit", "offset": 5}, is_error=True,
              text='Error: offset 5 is past the end: there are 1 matching files for "hit" in '
                   "{cwd}. Use an offset below 1."),
)  # fmt: skip
case(
    "grep_long_lines_cut",
    write("min.js", "x" * 2100 + "needle\n"),
    call=Step("grep", {"pattern": "needle", "output_mode": "content"},
              text="min.js:1:" + "x" * 2000 + "…"),
)  # fmt: skip
case(
    "grep_bad_output_mode",
    call=Step("grep", {"pattern": "x", "output_mode": "lines"}, is_error=True,
              text="Error: parameter output_mode of grep must be one of files_with_matches, "
                   'content, count; got "lines".'),
)  # fmt: skip
case(
    "grep_negative_context",
    call=Step("grep", {"pattern": "x", "-C": -2}, is_error=True,
              text="Error: parameter -C of grep must be at least 0, got -2."),
)  # fmt: skip
case(
    "grep_empty_pattern",
    call=Step("grep", {"pattern": ""}, is_error=True,
              text='Error: pattern is empty. Give a regex (e.g. "def main") or literal text.'),
)  # fmt: skip

# ----------------------------------------------------------------------- glob

_GLOB_FILES = (
    write("a.py", ""),
    write("src/b.py", ""),
    write("src/x/y/c.py", ""),
    write("src/readme.md", ""),
    write("docs/guide.md", ""),
    files_at("src/x/y/c.py", "a.py", "docs/guide.md", "src/readme.md", "src/b.py"),
)
case(
    "glob_name_pattern_matches_at_any_depth",
    *_GLOB_FILES,
    call=Step("glob", {"pattern": "*.py"}, text="src/b.py\na.py\nsrc/x/y/c.py", is_error=False,
              fields={"total": 3, "truncated": False, "ignored": 0}),
)  # fmt: skip
case(
    "glob_dot_slash_pattern_is_anchored",
    *_GLOB_FILES,
    call=Step("glob", {"pattern": "./*.py"}, text="a.py"),
)
case(
    "glob_double_star",
    *_GLOB_FILES,
    call=Step("glob", {"pattern": "src/**/*.py"}, text="src/b.py\nsrc/x/y/c.py"),
)
case(
    "glob_slash_pattern_is_anchored",
    *_GLOB_FILES,
    call=Step("glob", {"pattern": "src/*.py"}, text="src/b.py"),
)
case(
    "glob_leading_double_star",
    *_GLOB_FILES,
    call=Step("glob", {"pattern": "**/*.md"}, text="src/readme.md\ndocs/guide.md"),
)
case(
    "glob_braces",
    *_GLOB_FILES,
    call=Step("glob", {"pattern": "*.{md,py}", "path": "src"},
              text="src/b.py\nsrc/readme.md\nsrc/x/y/c.py"),
)  # fmt: skip
case(
    "glob_path_relative_pattern",
    *_GLOB_FILES,
    call=Step("glob", {"pattern": "x/**", "path": "src"}, text="src/x/y/c.py"),
)
case(
    "glob_question_mark_and_class",
    write("f1.txt", ""),
    write("f2.txt", ""),
    write("f10.txt", ""),
    write("g1.txt", ""),
    files_at("f1.txt", "f2.txt", "f10.txt", "g1.txt"),
    call=Step("glob", {"pattern": "[fg]?.txt"}, text="g1.txt\nf2.txt\nf1.txt"),
)  # fmt: skip
case(
    "glob_negated_class",
    write("f1.txt", ""),
    write("g1.txt", ""),
    call=Step("glob", {"pattern": "[!f]*.txt"}, text="g1.txt"),
)
case(
    "glob_dot_files_included_git_excluded",
    write(".env", ""),
    write(".config/app.toml", ""),
    sh("mkdir .git && touch .git/HEAD"),
    files_at(".env", ".config/app.toml"),
    call=Step("glob", {"pattern": "**"}, text=".config/app.toml\n.env"),
)  # fmt: skip
case(
    "glob_files_only",
    sh("mkdir -p emptydir/nested"),
    write("f.txt", ""),
    call=Step("glob", {"pattern": "*"}, text="f.txt"),
)  # fmt: skip
case(
    "glob_gitignore_respected_and_counted",
    write(".gitignore", "*.log\nbuild/\n"),
    write("a.log", ""),
    write("build/b.txt", ""),
    write("build/c.log", ""),
    write("keep.txt", ""),
    files_at(".gitignore", "keep.txt"),
    call=Step("glob", {"pattern": "*.log"}, is_error=False,
              text='No files found matching "*.log" in {cwd}.\n\n[2 more matching files are '
                   "ignored by .gitignore. Use no_ignore=true to include them.]",
              fields={"total": 0, "ignored": 2}),
    then=(Step("glob", {"pattern": "*.txt"},
               text="keep.txt\n\n[1 more matching file is ignored by .gitignore. Use "
                    "no_ignore=true to include them.]"),),
)  # fmt: skip
case(
    "glob_no_ignore",
    write(".gitignore", "*.log\n"),
    write("a.log", ""),
    call=Step("glob", {"pattern": "*.log", "no_ignore": True}, text="a.log",
              fields={"ignored": 0}),
)  # fmt: skip
case(
    "glob_gitignore_negation_and_anchoring",
    write(".gitignore", "*.txt\n!keep.txt\n/root.md\n"),
    write("keep.txt", ""),
    write("drop.txt", ""),
    write("root.md", ""),
    write("sub/root.md", ""),
    files_at("keep.txt", "sub/root.md"),
    call=Step("glob", {"pattern": "*.{txt,md}"},
              text="sub/root.md\nkeep.txt\n\n[2 more matching files are ignored by .gitignore. "
                   "Use no_ignore=true to include them.]"),
)  # fmt: skip
case(
    "glob_none",
    sh("mkdir src"),
    call=Step("glob", {"pattern": "**/*.rs", "path": "src"}, is_error=False,
              text='No files found matching "**/*.rs" in src.', fields={"total": 0}),
)  # fmt: skip
case(
    "glob_same_mtime_sorted_by_path",
    write("b.txt", ""),
    write("a.txt", ""),
    write("c.txt", ""),
    sh("touch -d '2020-02-02' a.txt b.txt c.txt"),
    call=Step("glob", {"pattern": "*.txt"}, text="a.txt\nb.txt\nc.txt"),
)  # fmt: skip
case(
    "glob_paging",
    sh("for i in 1 2 3 4 5; do touch -d \"2020-01-01 00:00:0$i\" f$i.txt; done"),
    call=Step("glob", {"pattern": "*.txt", "head_limit": 2},
              text="f5.txt\nf4.txt\n\n[Showing 2 of 5 matching files, newest first. Use "
                   "offset=2 for the next page, or narrow the pattern.]",
              fields={"truncated": True, "next_offset": 2, "total": 5}),
    then=(Step("glob", {"pattern": "*.txt", "head_limit": "2", "offset": "2"},
               text="f3.txt\nf2.txt\n\n[Showing files 3-4 of 5 matching files, newest first. "
                    "Use offset=4 for the next page, or narrow the pattern.]"),
          Step("glob", {"pattern": "*.txt", "head_limit": 2, "offset": 4},
               text="f1.txt\n\n[Showing files 5-5 of 5 matching files, newest first; this is "
                    "the last page.]")),
)  # fmt: skip
case(
    "glob_default_head_limit_100",
    sh("mkdir m && cd m && touch $(seq -f 'f%03g.txt' 1 150)"),
    call=Step("glob", {"pattern": "*.txt"},
              match=r"(?s)(m/f\d{3}\.txt\n){100}\n\[Showing 100 of 150 matching files, newest "
                    r"first\. Use offset=100 for the next page, or narrow the pattern\.\]"),
)  # fmt: skip
case(
    "glob_offset_past_end",
    write("a.txt", ""),
    call=Step("glob", {"pattern": "*.txt", "offset": 3}, is_error=True,
              text='Error: offset 3 is past the end: 1 file match "*.txt" in {cwd}. Use an '
                   "offset below 1."),
)  # fmt: skip
case(
    "glob_unicode_and_spaces",
    write("dir with space/ünï cödé.txt", ""),
    call=Step("glob", {"pattern": "**/ü*"}, text="dir with space/ünï cödé.txt"),
)
case(
    "glob_absolute_pattern",
    *_GLOB_FILES,
    call=Step("glob", {"pattern": "{cwd}/src/*.py"}, text="src/b.py"),
)
case(
    "glob_symlinks",
    write("real.txt", ""),
    write("d/in.txt", ""),
    # A symlinked file is listed (with its target's mtime); a symlinked
    # folder is not entered, so loops cannot happen.
    sh("ln -s real.txt link.txt && ln -s ../d d/loop && ln -s d dlink"),
    files_at("d/in.txt", "real.txt"),
    call=Step("glob", {"pattern": "**"}, text="link.txt\nreal.txt\nd/in.txt"),
)  # fmt: skip
case(
    "glob_path_missing",
    sh("mkdir src"),
    call=Step("glob", {"pattern": "*", "path": "scr"}, is_error=True,
              text="Error: folder not found: scr (working directory: {cwd}). Similar names: src. "
                   "Check the path, or run glob without path."),
)  # fmt: skip
case(
    "glob_path_is_file",
    write("a.txt", ""),
    call=Step("glob", {"pattern": "*", "path": "a.txt"}, is_error=True,
              text="Error: path a.txt is a file, not a folder; glob searches folders. Give its "
                   "folder as path, or use read or grep on the file."),
)  # fmt: skip
case(
    "glob_invalid_bracket",
    call=Step("glob", {"pattern": "[abc"}, is_error=True,
              text='Error: invalid glob pattern "[abc": unclosed [ at position 1. Escape a '
                   "literal [ or { with a backslash, or fix the brackets."),
)  # fmt: skip
case(
    "glob_invalid_brace",
    call=Step("glob", {"pattern": "*.{py,md"}, is_error=True,
              text='Error: invalid glob pattern "*.{py,md": unclosed { at position 3. Escape a '
                   "literal [ or { with a backslash, or fix the brackets."),
)  # fmt: skip
case(
    "glob_head_limit_zero",
    call=Step("glob", {"pattern": "*", "head_limit": 0}, is_error=True,
              text="Error: parameter head_limit of glob must be at least 1, got 0."),
)  # fmt: skip
case(
    "glob_unknown_parameter",
    call=Step("glob", {"pattern": "*", "recursive": True}, is_error=True,
              text="Error: unknown parameter recursive for glob. Valid parameters: pattern, "
                   "path, head_limit, offset, no_ignore."),
)  # fmt: skip
