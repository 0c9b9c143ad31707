"""The frame the stabiliser pushes; it lives in :mod:`pipecat_fast.frames` (re-exported here)."""

from pipecat_fast.frames import StableTranscriptFrame

__all__ = ["StableTranscriptFrame"]
