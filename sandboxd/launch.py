"""The console-script launchers: check the extra a command needs, then start it.

``pip install sandboxd`` is the client alone; ``sandboxd serve`` needs the
server extra, ``sandboxd mcp`` the mcp extra, ``sandboxctl`` the ctl extra.
These launchers run before anything optional is known to be there, so they
name the missing extra instead of showing an ImportError traceback; each
command needs its extra to be imported, so the check comes first (``cli``
itself is standard library only and imports the daemon only for ``serve``).
"""

from __future__ import annotations

import sys

from sandboxd import cli
from sandboxd.contract.extras import message, missing, python_problem


def _launch_check(extra: str, feature: str) -> None:
    problem = python_problem(extra, feature)
    if problem:
        print(problem, file=sys.stderr)
        sys.exit(2)
    absent = missing(extra)
    if absent:
        print(message(extra, feature, absent), file=sys.stderr)
        sys.exit(2)


def sandboxd_main() -> None:
    """``sandboxd``: ``sandboxd mcp`` needs the mcp extra, anything else the server extra."""
    args = sys.argv[1:]
    if args[:1] == ["mcp"]:
        _launch_check("mcp", "sandboxd mcp")
    elif args[:1] not in (["--version"], ["-h"], ["--help"], []):
        _launch_check("server", "sandboxd serve")
    sys.exit(cli.main())


def sandboxctl_main() -> None:
    """``sandboxctl``: the command line client needs the ctl extra."""
    _launch_check("ctl", "sandboxctl")
    # After the check: sandboxctl imports typer and rich at once.
    from sandboxd.ctl.app import main

    main()
