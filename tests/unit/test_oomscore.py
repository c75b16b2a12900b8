"""``executor.oomscore``: the workload's OOM score is in place before its first
instruction (the Docker tier checks it in a sandbox: tests/hostile/test_oom_choice.py)."""

from __future__ import annotations

import os
import subprocess

import pytest

from sandboxd.executor import oomscore

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

_OWN = "cat /proc/self/oom_score_adj"


@pytest.mark.skipif(oomscore.choom() is None, reason="no choom on this host")
def test_a_scored_command_and_what_it_forks_at_once_start_at_the_workloads_score() -> None:
    argv = oomscore.scored(["sh", "-c", f"{_OWN}; sh -c '{_OWN}'"])
    assert argv is not None and argv[-3:] == ["sh", "-c", f"{_OWN}; sh -c '{_OWN}'"]
    out = subprocess.run(argv, capture_output=True, check=True).stdout
    assert out.split() == [str(oomscore.WORKLOAD_OOM_SCORE_ADJ).encode()] * 2


def test_a_score_written_from_outside_reaches_the_process_and_a_gone_one_is_no_failure() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert oomscore.raise_now(proc.pid)
        with open(f"/proc/{proc.pid}/oom_score_adj") as score:
            assert score.read().strip() == str(oomscore.WORKLOAD_OOM_SCORE_ADJ)
    finally:
        proc.kill()
        proc.wait()
    # Gone (a pid past the largest, so no other process is touched): nothing of
    # it can run at a lower score.
    with open("/proc/sys/kernel/pid_max") as pid_max:
        assert oomscore.raise_now(int(pid_max.read()) + 1)


@pytest.mark.parametrize(
    ("refusals", "written"),
    [
        (0, True),  # root's: setpriv, not dumpable yet
        (1, True),  # the user's: the command runs
        (2, True),  # root's again: the command exited between the first two tries
        (3, False),  # refused whoever writes: the child is stopped
    ],
)
def test_the_write_follows_the_files_owner_through_a_short_lived_child(
    monkeypatch: pytest.MonkeyPatch, refusals: int, written: bool
) -> None:
    """The file's owner goes root, user, root (a zombie) under the write."""
    tries: list[str] = []
    real_open = os.open

    def open_as_owner_allows(path: str, flags: int) -> int:
        tries.append(path)
        if len(tries) <= refusals:
            raise PermissionError(13, "Permission denied", path)
        return real_open(os.devnull, os.O_WRONLY)

    monkeypatch.setattr(oomscore.os, "open", open_as_owner_allows)
    assert oomscore.raise_now(4242) is written
    assert tries == ["/proc/4242/oom_score_adj"] * min(refusals + 1, 3)
