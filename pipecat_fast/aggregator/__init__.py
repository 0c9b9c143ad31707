"""Unicode-safe streaming sentence aggregator for the text between an LLM and a TTS."""

from pipecat_fast.aggregator.core import Chunk, ChunkKind, SegmenterConfig, StreamSegmenter

__all__ = ["Chunk", "ChunkKind", "SegmenterConfig", "StreamSegmenter"]
