"""Shared test helpers: where the public test material lives, and how to skip without it."""

from pathlib import Path

import pytest

from pipecat_fast.testing.shared_data import shared_data_dir

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = shared_data_dir()


@pytest.fixture
def shared_data() -> Path:
    """The public test material beside the project (``../shared/data``); skips when absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"public test material not found at {SHARED_DATA} (../shared/data)")
    return SHARED_DATA
