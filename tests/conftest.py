import pathlib

import pytest

DATA = pathlib.Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def pulse_dir() -> pathlib.Path:
    """The paper's stored pulses (copied with provenance in tests/data/SOURCES.md)."""
    return DATA / "paper-pulses"
