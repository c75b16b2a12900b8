"""The egress gateway's settings (composed into the daemon's ``Settings``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from sandboxd.egress.limits import Limits
from sandboxd.egress.resolver import HostsResolver, Resolver, SystemResolver

_DEFAULT = Limits()


class EgressSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SANDBOXD_", extra="forbid", frozen=True)

    egress_max_connections: int = Field(
        _DEFAULT.max_connections,
        ge=1,
        le=120,
        description="connections one sandbox may have open through its egress proxies at once; "
        "more are answered 503 (SOCKS: general failure)",
    )
    egress_bytes_per_second: int = Field(
        _DEFAULT.bytes_per_second,
        ge=0,
        description="bytes per second one sandbox's egress may move, both ways together "
        "(0: no limit)",
    )
    egress_connect_timeout_s: float = Field(
        _DEFAULT.connect_timeout_s, gt=0, le=120, description="egress: longest connect upstream"
    )
    egress_hosts_file: Path | None = Field(
        None,
        description="egress: resolve names from this hosts-format file only, never DNS "
        "(tests; air-gapped mirrors); unset: the daemon host's resolver",
    )

    def egress_limits(self) -> Limits:
        return Limits(
            max_connections=self.egress_max_connections,
            bytes_per_second=self.egress_bytes_per_second,
            connect_timeout_s=self.egress_connect_timeout_s,
        )

    def egress_resolver(self) -> Resolver:
        if self.egress_hosts_file is not None:
            return HostsResolver(self.egress_hosts_file)
        return SystemResolver()
