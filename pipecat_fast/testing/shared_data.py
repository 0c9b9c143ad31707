"""Where the public test material (``../shared/data``) is, in one place.

The material sits beside a project checkout (``<checkout>/../shared/data``); set
``PIPECAT_FAST_SHARED_DATA`` to point elsewhere. Suites and tests that need it skip or exit
with the reason when it is absent (an installed wheel has none).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "PIPECAT_FAST_SHARED_DATA"


def shared_data_dir() -> Path:
    """The shared test-material folder (it may not exist)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[2].parent / "shared" / "data"
    if checkout.is_dir():
        return checkout
    return Path.cwd().parent / "shared" / "data"
