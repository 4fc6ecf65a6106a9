"""Shared fixtures for the sb3-bridge tests: the committed SB3 checkpoints and their expected outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sb3_craft import FIXTURES


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def expected() -> dict[str, np.ndarray]:
    with np.load(FIXTURES / "expected.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture
def ppo_box(fixtures_dir) -> Path:
    return fixtures_dir / "ppo_box.zip"
