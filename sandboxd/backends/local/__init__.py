"""The local engine: a workspace is a folder, the executor runs in-process (no isolation).

For tests and trusted use (``LocalSandboxFactory``); the same ``Executor``
object the containers run carries out every operation.
"""
