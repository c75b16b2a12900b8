"""The service: every operation a client can ask, once, for every transport.

``SandboxService`` (``sandbox_service``) is written by concern, one module
each (``lifecycle``, ``files``, ``exec``, ``tools``, ``processes``,
``transfers``) on ``core``; ``ports`` is the ``WorkspaceBackend`` it drives
(a ``typing.Protocol``), ``scope`` the caller model it checks, ``settings``
its own settings.
"""
