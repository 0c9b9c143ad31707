"""pipecat-fast: drop-in Pipecat processors that cut time to first audio (TTFA).

Each latency lever lives in its own module; this package root only carries the version.
Import the levers from their modules, e.g. ``from pipecat_fast.ttfa import TTFAObserver``.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
