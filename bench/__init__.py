"""``make bench``: sandboxd against raw ``docker exec`` and an in-process floor.

Run ``python -m bench.run`` (or ``make bench``); see ``bench/README.md``.
"""
