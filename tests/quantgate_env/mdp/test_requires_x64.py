"""The environment tells a trainer whether it needs JAX's x64 mode (docs/contracts.md, issue 36)."""

from __future__ import annotations

import pytest
from quantgate_env import make, make_multi


@pytest.mark.parametrize("precision, needs", [("float64", True), ("float32", False)])
def test_requires_x64_follows_the_precision(precision, needs):
    for env in (make(precision=precision), make_multi(precision=precision)):
        assert env.requires_x64 is needs
        assert env.core.requires_x64 is needs


def test_the_default_physics_needs_x64():
    assert make().requires_x64 is True and make_multi().requires_x64 is True
