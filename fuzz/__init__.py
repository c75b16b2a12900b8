"""Property-based fuzzing of every sandboxd RPC (hypothesis).

``strategies`` builds malformed and well-formed requests as raw protobuf
messages; ``harness`` runs an in-process server on the local backend inside a
temporary folder and checks every answer. ``tests/fuzz`` drives them: about
500 calls inside ``make test``, 10,000+ with ``make fuzz``
(``SANDBOXD_FUZZ_CALLS``).

The local backend has no isolation, so nothing generated here may reach
outside the temporary folder: mutating verbs get relative paths without
``..``, and commands come from a fixed harmless set.
"""
