"""The frameworks' extras: what sandboxd.contract.extras says each brings is what
pyproject.toml installs, checked where they are installed."""

from __future__ import annotations

import pytest

from sandboxd.contract import extras
from tests.unit.test_extras import assert_extra_modules_match


@pytest.mark.parametrize("extra", sorted(extras.FRAMEWORK_EXTRAS))
def test_framework_extra_modules_match_its_requirements(extra: str) -> None:
    assert_extra_modules_match(extra)
