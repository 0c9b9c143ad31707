"""Unicode-safe streaming sentence aggregator for the text between an LLM and a TTS.

``make_text_processor()`` builds the processor to put between the LLM and the TTS service;
``StreamSegmenter`` is the pure core. The Pipecat names load lazily, so importing the core
does not import Pipecat.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipecat_fast.aggregator.core import Chunk, ChunkKind, SegmenterConfig, StreamSegmenter

if TYPE_CHECKING:
    from pipecat_fast.aggregator.processor import (
        FastTextAggregator,
        FastTextProcessor,
        make_text_processor,
    )

__all__ = [
    "Chunk",
    "ChunkKind",
    "FastTextAggregator",
    "FastTextProcessor",
    "SegmenterConfig",
    "StreamSegmenter",
    "make_text_processor",
]

_LAZY = {"FastTextAggregator", "FastTextProcessor", "make_text_processor"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from pipecat_fast.aggregator import processor

        return getattr(processor, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
