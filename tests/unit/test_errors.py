"""The error tree and its single status table."""

from __future__ import annotations

import grpc
import pytest

from runtime_client._status import error_from_rpc
from sandboxd.contract import errors
from sandboxd.transports.grpc.status import status_code

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("cls", errors.ERROR_CLASSES)
def test_every_error_round_trips_through_its_status_code(cls: type[errors.SandboxdError]) -> None:
    code = status_code(cls("boom"))
    assert code.name == cls.status_name

    class FakeRpcError(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return code

        def details(self) -> str:
            return "boom"

    back = error_from_rpc(FakeRpcError())
    assert type(back) is cls
    assert back.message == "boom"


@pytest.mark.parametrize("cls", errors.ERROR_CLASSES)
def test_every_error_round_trips_through_its_kind(cls: type[errors.SandboxdError]) -> None:
    rebuilt = errors.error_from_kind(cls.kind, "why")
    assert type(rebuilt) is cls and str(rebuilt) == "why"


def test_unknown_kind_becomes_internal() -> None:
    assert type(errors.error_from_kind("no-such-kind", "x")) is errors.Internal


def test_status_names_are_distinct_so_the_client_table_is_unambiguous() -> None:
    names = [cls.status_name for cls in errors.ERROR_CLASSES]
    assert len(names) == len(set(names))
