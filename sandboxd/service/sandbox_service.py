"""The service layer: every transport (gRPC, HTTP, in-process for
runtime_client's local factory) calls ``SandboxService``, so validation,
limits and semantics exist once. Values in and out are ``sandboxd.contract.models``.

One class for callers, written by concern: each base class is one module of
this package (lifecycle, snapshots, netpolicy, files, exec, tools, processes,
transfers, forwarding), all on
``ServiceCore`` (the backend, the settings, the workspace lookup).
"""

from __future__ import annotations

from sandboxd.service.exec import Exec
from sandboxd.service.files import Files
from sandboxd.service.forwarding import Forwarding
from sandboxd.service.netpolicy import NetworkPolicies
from sandboxd.service.processes import Processes
from sandboxd.service.snapshots import Snapshots
from sandboxd.service.templates import Templates
from sandboxd.service.tools import Tools
from sandboxd.service.transfers import Transfers


class SandboxService(
    Snapshots, Templates, NetworkPolicies, Files, Exec, Tools, Processes, Transfers, Forwarding
):
    """Every operation a client can ask of sandboxd, over one ``WorkspaceBackend``."""
