"""Bash output cleaning and bounded capture."""

from __future__ import annotations

from sandboxd.executor.tools.output import Capture, Cleaner, clean


def test_clean() -> None:
    assert clean("\x1b[31mred\x1b[0m\n") == "red\n"
    assert clean("a\rb\rc\n") == "c\n"
    assert clean("50%\r100%\r\n") == "100%\n"
    assert clean("x\r\ny\r\n") == "x\ny\n"
    assert clean("\x1b]0;title\x07t\n") == "t\n"


def test_cleaner_handles_split_chunks() -> None:
    cleaner = Cleaner()
    parts = [b"\x1b[3", b"1mred\x1b[0m\npro", b"gress 1\rprogress 2", b"\rdone\n", "é".encode()[:1]]
    out = "".join(cleaner.feed(p) for p in parts)
    out += cleaner.feed("é".encode()[1:] + b"\n", final=True)
    assert out == "red\ndone\né\n"


def test_cleaner_bounds_a_line_without_newline() -> None:
    cleaner = Cleaner()
    emitted = sum(len(cleaner.feed(b"x" * 65536)) for _ in range(50))
    assert emitted >= 49 * 65536  # passed on, not accumulated


def test_progress_bar_without_newline_keeps_last_frame() -> None:
    cleaner = Cleaner()
    out = "".join(cleaner.feed(f"\rframe {i:07d}".encode()) for i in range(20000))
    out += cleaner.feed(b"", final=True)
    assert out.endswith("frame 0019999")
    assert len(out) < 200_000


def test_capture_small_output_is_whole() -> None:
    cap = Capture(None, 0)
    cap.add("a\nb\n  \n")
    assert cap.render(30_000) == ("a\nb", False)


def test_capture_head_and_tail_at_line_boundaries() -> None:
    cap = Capture(None, 0)
    for i in range(100_000):
        cap.add(f"line {i}\n")
    text, truncated = cap.render(10_000)
    assert truncated and len(text) <= 10_000
    head, _, rest = text.partition("\n[... ")
    marker, _, tail = rest.partition("\n")
    assert head.startswith("line 0\nline 1\n") and head.endswith(tuple("0123456789"))
    assert tail.startswith("line ") and tail.endswith("line 99999")
    omitted_lines = int(marker.split()[0])
    shown = head.count("\n") + 1 + tail.count("\n") + 1
    assert shown + omitted_lines == 100_000
    assert len(cap.head) + len(cap.tail) < 300_000  # memory stayed bounded
