"""``python -m sandboxd.ctl`` is ``sandboxctl``."""

from sandboxd.ctl.app import main

main()
