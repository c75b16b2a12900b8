"""The one error this adapter adds to openai-agents' tree: what sandboxd will not do.

Some requests have no sandboxd counterpart by design (switching user, root,
host mounts: a workspace is one non-root user's, with no path of the host
inside). Each is refused when it is asked, with the reason, instead of
failing later or doing nothing.
"""

from __future__ import annotations

from typing import Literal

from agents.sandbox.errors import ConfigurationError, ErrorCode, OpName

#: ``by_design``: sandboxd refuses it for isolation; ``not_yet``: not built yet (none today).
Why = Literal["by_design", "not_yet"]


class SandboxdUnsupportedError(ConfigurationError):
    """A request sandboxd refuses (``why``: by design, or not yet built)."""

    def __init__(self, feature: str, why: Why, reason: str, *, op: OpName = "start") -> None:
        super().__init__(
            message=f"{feature}: {reason}",
            error_code=ErrorCode.SANDBOX_CONFIG_INVALID,
            op=op,
            context={"backend": "sandboxd", "feature": feature, "why": why},
            retryable=False,
        )
        self.feature = feature
        self.why = why
