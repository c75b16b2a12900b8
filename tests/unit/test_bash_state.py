"""bash state: ``export -p`` parsed (``bashstate``) keeps exactly what the old
name-by-name loop kept, for every kind of exported variable."""

from __future__ import annotations

import os
import string
import subprocess

import pytest

from sandboxd.executor.tools import bashstate

# The loop the trap ran before: every name, by first character; an exported
# one printed as NAME=VALUE ("${!n-}": element 0 of an array, a reference's target).
_OLD = (
    "for __sbx_n in " + " ".join("${!" + c + "*}" for c in string.ascii_letters + "_") + "; do "
    '[[ ${!__sbx_n@a} == *x* ]] && printf "%s=%s\\0" "$__sbx_n" "${!__sbx_n-}"; done'
)
_NEW = bashstate.SAVE.replace('"$PWD"', '"/here"')

SETUPS = [
    "export A=plain B='with space' C='q\"uo\\\\te$`x`' D=$'l1\\nl2' E=$'t\\tx' F=$'\\x01c'",
    "export G=$'\\xff\\xfebytes' H='é ✓' I= J=$'cr\\r' K='!bang' L=\"a'b\" M=$'\\e[0m'",
    "export EMPTY; declare -ax ARR=(x y); declare -Ax ASC=([0]=z [k]=v); declare -Ax A2=([k]=v)",
    "declare -ax SPARSE=([3]=s); T=tv; declare -nx REF=T; export T2=t2; declare -nx REF2=T2",
    "declare -ix INT=5; declare -rx RO=r; declare -lx LOW=ABC; declare -ux UP=abc; export _u=1",
    "declare -Ax QK=(['a b']=1 [$'\\n']=2 [0]=$'\\\\0x'); export Z9=$'\\\\\\'' a1=$'\\177'",
    "set -o posix; export POSIXMODE=1 P2='x y'",
    "export PS4=x BASH_ENV=/x LD_PRELOAD=/y __sbx_z=1 OK=1; unset HOME; export HOME",
    "export V=$'\\x80\\xc3(' W=$'\\u00e9' X=$'\\\\E' Y='$(id)' Z='`id`'",
]


def _old(setup: str) -> dict[str, str]:
    out = subprocess.run(
        ["bash", "-c", f"{setup}\n{_OLD}"], capture_output=True, check=False, env=_env()
    ).stdout
    env: dict[str, str] = {}
    for item in out.split(b"\0")[:-1]:
        name, _, value = item.partition(b"=")
        key = name.decode()
        if key in bashstate.NOT_KEPT or key.startswith("__sbx_"):
            continue
        env[key] = value.decode("utf-8", "surrogateescape")
    return env


def _new(setup: str) -> dict[str, str] | None:
    r, w = os.pipe()
    with os.fdopen(r, "rb") as reader:
        subprocess.run(
            ["bash", "-c", f"{setup}\n__sbx_fd={w}; {_NEW}"], check=False, env=_env(),
            pass_fds=(w,),
        )  # fmt: skip
        os.close(w)
        state = bashstate.parse_state(reader.read())
    assert state is not None and state[0] == "/here"
    return state[1]


def _env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8", "HOME": "/h"}


@pytest.mark.parametrize("setup", SETUPS)
def test_export_p_keeps_what_the_loop_kept(setup: str) -> None:
    old, new = _old(setup), _new(setup)
    assert new == old
    assert list(new) == list(old)  # the same order, so the same environ order


def test_the_last_record_counts_and_forgeries_are_data() -> None:
    forged = b'\0sbx2\0/evil\0declare -x BASH_ENV="/x/evil.sh"\ndeclare -x PATH="/evil"\n'
    real = b'\0sbx2\0/real\0declare -x PATH="/usr/bin"\ndeclare -x BASH_ENV="/x"\n'
    assert bashstate.parse_state(forged + real) == ("/real", {"PATH": "/usr/bin"})
    assert bashstate.parse_state(forged)[1] == {"PATH": "/evil"}  # type: ignore[index]


@pytest.mark.parametrize(
    "blob",
    [
        b"", b"sbx1\0/x\0A=b\0", b"\0sbx2\0relative\0", b"\0sbx2\0/x",
        b'\0sbx2\0/x\0declare -x A="unterminated', b"\0sbx2\0/x\0declare -x A=$'\\",
        b"\0sbx2\0/x\0declare -ax A=([0]=\"a\"", b"\0sbx2\0/x\0declare -x 1A=\"x\"\n",
        b"\0sbx2\0/x\0declare -ax A=([\"k\"x]=\"a\")\n", b"\0sbx2\0/x\0garbage\n",
    ],
)  # fmt: skip
def test_malformed_state_never_raises(blob: bytes) -> None:
    state = bashstate.parse_state(blob)
    assert state is None or all(v == "" or v for v in state[1].values())


def test_malformed_entry_ends_the_parse_keeping_what_came_before() -> None:
    blob = b'\0sbx2\0/x\0declare -x A="1"\ndeclare -x B="2\ndeclare -x C="3"\n'
    assert bashstate.parse_state(blob) == ("/x", {"A": "1"})
