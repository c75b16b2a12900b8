"""Who is calling, as the service sees it: the tenant and the instance ids the caller may touch.

A transport turns a caller's credentials into a ``Scope`` (``transports/auth.py``)
and sets it for the call (``enter_scope``); the service checks every instance
id against ``current_scope()``, whichever door the call came in by.

Two independent fences:

- **ids**: explicit rules, each an exact id (``team-a``) or a prefix that ends
  with a separator (``team-a-*``; the earlier ``team-a-`` form means the
  same). A bare prefix (``team-b`` reaching ``team-bzz-1``) cannot be written.
- **tenant**: a token of tenant ``acme`` sees and touches only sandboxes
  labelled ``sandboxd.tenant=acme`` (the label is written by the service on
  create, never by the caller), and every sandbox it creates carries it. A
  sandbox of another tenant is ``NotFound`` to it, as if it did not exist.
  A token without a tenant (and the unix socket) is the operator's: every
  tenant.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass

from sandboxd.backends.shared.options import RESERVED_LABEL_PREFIX
from sandboxd.contract import validation
from sandboxd.contract.errors import InvalidArgument, PermissionDenied
from sandboxd.contract.network import MODES, NetworkMode, NetworkPolicy

#: The label that says which tenant a sandbox belongs to (set by the service only).
TENANT_LABEL = f"{RESERVED_LABEL_PREFIX}tenant"
#: What a prefix rule must end with, so ``team-b-*`` never reaches ``team-bzz-1``.
SEPARATORS = "-_."


@dataclass(frozen=True)
class IdRule:
    """An exact instance id, or (``prefix``) every id starting with ``text``."""

    text: str
    prefix: bool = False

    def matches(self, instance_id: str) -> bool:
        return instance_id.startswith(self.text) if self.prefix else instance_id == self.text

    def describe(self) -> str:
        return f"starting with {self.text!r}" if self.prefix else repr(self.text)

    @classmethod
    def parse(cls, rule: str) -> IdRule:
        stem = rule[:-1] if rule.endswith("*") else rule
        if not validation.INSTANCE_ID.fullmatch(stem):
            raise InvalidArgument(
                f"scope {rule!r}: write an instance id (`team-a`) or a prefix ending "
                f"with one of {SEPARATORS!r} and `*` (`team-a-*`)"
            )
        if rule.endswith("*"):
            if stem[-1] not in SEPARATORS:
                raise InvalidArgument(
                    f"scope {rule!r} is a bare prefix (it would reach {stem}zz...): end the "
                    f"prefix with one of {SEPARATORS!r}, e.g. `{stem}-*`"
                )
            return cls(stem, prefix=True)
        # The earlier form: a prefix written without `*`, always ending with a separator.
        return cls(stem, prefix=stem[-1] in SEPARATORS)


@dataclass(frozen=True)
class Scope:
    """What a caller may touch: ids matching one of ``ids`` (none: every id), in
    ``tenant`` (None: every tenant)."""

    ids: tuple[IdRule, ...] = ()
    tenant: str | None = None
    #: The widest network mode this caller may set (at create, SetNetworkPolicy):
    #: none < allow < full. A token with network=none cannot widen any policy.
    network: NetworkMode = "full"

    def allows(self, instance_id: str) -> bool:
        return not self.ids or any(rule.matches(instance_id) for rule in self.ids)

    def check(self, instance_id: str) -> None:
        if not self.allows(instance_id):
            rules = " or ".join(rule.describe() for rule in self.ids)
            raise PermissionDenied(f"this token may only use instance ids {rules}")

    def check_network(self, policy: NetworkPolicy) -> None:
        if MODES.index(policy.mode) > MODES.index(self.network):
            raise PermissionDenied(
                f"this token may set network mode {self.network!r} at most, not "
                f'{policy.mode!r} (the token\'s network= field, README "Network policy")'
            )

    def owns(self, sandbox_labels: Mapping[str, str]) -> bool:
        """Whether a sandbox with these labels is this caller's tenant's."""
        return self.tenant is None or sandbox_labels.get(TENANT_LABEL) == self.tenant

    def tenant_labels(self) -> dict[str, str]:
        """The labels a sandbox this caller creates carries (and a listing filters on)."""
        return {} if self.tenant is None else {TENANT_LABEL: self.tenant}


FULL_SCOPE = Scope()

_current: contextvars.ContextVar[Scope] = contextvars.ContextVar(
    "sandboxd_scope", default=FULL_SCOPE
)


def current_scope() -> Scope:
    """The scope of the call being served (full scope outside any call)."""
    return _current.get()


def enter_scope(scope: Scope) -> contextvars.Token[Scope]:
    return _current.set(scope)


def leave_scope(token: contextvars.Token[Scope]) -> None:
    _current.reset(token)


def check_caller_labels(values: Mapping[str, str], field: str = "labels") -> None:
    """Refuse a caller's label in the daemon's own namespace (it could claim a tenant)."""
    for key in values:
        if key.startswith(RESERVED_LABEL_PREFIX):
            raise InvalidArgument(
                f"{field}: key {key!r} is reserved: keys starting with "
                f"{RESERVED_LABEL_PREFIX!r} are the daemon's"
            )
