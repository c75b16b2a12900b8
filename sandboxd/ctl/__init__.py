"""``sandboxctl``: the command line client of a running sandboxd (typer + rich).

``app`` holds the commands, ``connect`` the gRPC side (target, token, errors,
health), ``render`` the tables. Every command is a short ``asyncio.run`` of
the same ``runtime_client`` calls a program would make.
"""
