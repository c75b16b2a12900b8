"""Every RPC under generated input: each answer is OK or a typed status
(never UNKNOWN or INTERNAL), and the server stays healthy.

The budget is SANDBOXD_FUZZ_CALLS generated calls in all (500 by default,
inside ``make test``; ``make fuzz`` sets 10,000+), shared evenly by the RPCs.
"""

from __future__ import annotations

import math
import os
from typing import Any

import pytest

# hypothesis is a dev dependency; until a venv has it, this module skips.
pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings

from fuzz.harness import FuzzServer
from fuzz.streams import ALL_RPCS as RPCS

pytestmark = [pytest.mark.inproc, pytest.mark.timeout(3600)]

BUDGET = int(os.environ.get("SANDBOXD_FUZZ_CALLS", "500"))
PER_RPC = max(1, math.ceil(BUDGET / len(RPCS)))


@pytest.mark.parametrize("method", sorted(RPCS))
def test_every_answer_is_typed_and_the_server_stays_healthy(
    fuzz_server: FuzzServer, method: str
) -> None:
    @settings(
        max_examples=PER_RPC,
        deadline=None,
        database=None,  # nothing written into the tree
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        derandomize=os.environ.get("SANDBOXD_FUZZ_SEED") is None and BUDGET <= 1000,
    )
    @given(RPCS[method])
    def one_call(request: Any) -> None:
        fuzz_server.call(method, request)

    before = fuzz_server.calls
    one_call()
    # Hypothesis may stop early when it has seen every distinct input.
    assert fuzz_server.calls > before
    assert fuzz_server.healthy(), f"the server is not healthy after fuzzing {method}"
