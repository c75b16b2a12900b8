"""The operator's maxima (issue 23 item 9): one table, and everything follows it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from sandboxd.backends.shared import bounds
from sandboxd.backends.shared.options import effective, overridden
from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.models import ExecRequest, SandboxOptions
from sandboxd.daemon.settings import Settings

pytestmark = pytest.mark.unit

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_numeric_option_has_a_bound() -> None:
    # A resource option added without a maximum fails here.
    numeric = {
        f.name
        for f in dataclasses.fields(SandboxOptions)
        if f.type in ("int", "float") or f.type in (int, float)
    }
    assert numeric == {bound.field for bound in bounds.OPTION_BOUNDS}
    assert bounds.EXEC_TIMEOUT.field in {f.name for f in dataclasses.fields(ExecRequest)}


def test_every_bound_names_settings_that_exist() -> None:
    for bound in bounds.BOUNDS:
        assert bound.maximum in Settings.model_fields, bound
        assert bound.default in Settings.model_fields, bound


def test_the_readme_settings_table_describes_every_maximum() -> None:
    # The row of each maximum says which request field it bounds.
    rows = dict(
        re.findall(r"^\| `(SANDBOXD_[A-Z0-9_]+)` \| [^|]+ \| ([^\n]+)$", README.read_text(), re.M)
    )
    for bound in bounds.BOUNDS:
        row = rows.get(bounds.setting_name(bound.maximum))
        assert row is not None, f"README.md has no row for {bound.maximum}"
        assert f"largest `{bound.field}`" in row, (bound, row)


@pytest.mark.parametrize("bound", bounds.OPTION_BOUNDS, ids=lambda b: b.field)
def test_an_option_over_its_maximum_is_refused_naming_the_maximum(bound: bounds.Bound) -> None:
    settings = Settings.from_arguments()
    maximum = getattr(settings, bound.maximum)
    # At the maximum: accepted.
    at_most = effective(SandboxOptions(**{bound.field: maximum}), settings)
    assert getattr(at_most, bound.field) == maximum
    over = maximum * 2
    with pytest.raises(InvalidArgument) as refused:
        effective(SandboxOptions(**{bound.field: over}), settings)
    assert bounds.setting_name(bound.maximum) in refused.value.message
    assert f"over this daemon's maximum of {bounds._show(maximum)}" in refused.value.message


def test_a_fork_cannot_lift_the_maximum_either() -> None:
    # The engines derive a fork's options with overridden() then effective().
    settings = Settings.from_arguments(max_memory_bytes=2 << 30)
    source = effective(SandboxOptions(), settings)
    with pytest.raises(InvalidArgument, match="memory_bytes 1099511627776 is over"):
        effective(overridden(source, SandboxOptions(memory_bytes=1 << 40)), settings)


def test_the_operator_sets_the_maximum() -> None:
    settings = Settings.from_arguments(max_pids_limit=100, pids_limit=64, max_cpus=0.5, cpus=0.25)
    with pytest.raises(InvalidArgument, match=r"pids_limit 101 .* 100 \(SANDBOXD_MAX_PIDS_LIMIT\)"):
        effective(SandboxOptions(pids_limit=101), settings)
    with pytest.raises(InvalidArgument, match=r"cpus 0.75 .* 0.5 \(SANDBOXD_MAX_CPUS\)"):
        effective(SandboxOptions(cpus=0.75), settings)


@pytest.mark.parametrize("bound", bounds.BOUNDS, ids=lambda b: b.field)
def test_a_default_over_its_maximum_is_a_configuration_error(bound: bounds.Bound) -> None:
    default = getattr(Settings.from_arguments(), bound.default) or 1
    with pytest.raises(ValidationError, match=f"{bound.default}=.* is over {bound.maximum}="):
        Settings.from_arguments(**{bound.default: default * 4, bound.maximum: default * 2})
