"""Smart Turn v3 verdicts on the bench's caller audio, and how far they move when kernels change.

The stock pipeline asks Pipecat's default end-of-turn model, Smart Turn v3
(``LocalSmartTurnAnalyzerV3`` with the bundled int8 ``smart-turn-v3.2-cpu.onnx``), whether the
caller has finished once the VAD has heard ``stop_secs`` (0.2 s) of silence. Below 0.5 the
pipeline waits up to 3 s more (``SmartTurnParams.stop_secs``), so a bench utterance near 0.5 is
answered at once on one machine and 3 s late on another: the bench would measure different
turns on different machines. int8 kernels differ by CPU instruction set (AVX-512 VNNI, AVX2,
...), so the model's probabilities move by several hundredths between CPUs.

:class:`SmartTurnProbe` asks the model exactly as the pipeline does (through the analyzer's
public API: speech, then silence, then ``analyze_end_of_turn``), optionally with onnxruntime
built another way: graph optimisations off, or another intra-op thread count. Those change
which kernels run (fused or not, split across threads or not), as another CPU does. Run under
an emulated CPU without AVX-512 (``qemu-x86_64 -cpu Haswell``, see ``scripts/smart_turn_spread.py``)
to take the AVX2 kernels of a machine like the one issue 9 failed on.

The model is also sensitive to exactly where the audio it is given ends: shifting the end by
4 samples moved one bench turn from 0.84 to 0.95, because the 8 s window is aligned to its end
and the log-mel frames (160 samples) move with it. The pipeline only ever asks at the end of a
20 ms transport chunk (:data:`CHUNK_SAMPLES`) once the VAD has heard its stop window: measured
on the bench, ~260 ms after the last voiced audio. :func:`verdicts` therefore asks at every chunk
boundary from :data:`STOP_WINDOW_MS` 170 to 450 ms after the speech (or pause) begins its
silence, the range a VAD stop can fall in, and reports each probability.

The fixtures keep every complete turn at ``p >= FIXTURE_MIN_P`` over that whole window on the
machine that makes them, and the tests only ask ``p >= 0.5`` on the machine that runs them: a
margin of 0.3 against a spread measured at under 0.1 between kernels
(``docs/results/smart_turn_spread.json``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

SAMPLE_RATE = 16_000
SILENCE_MS = 200
"""Silero VAD's default ``stop_secs``: the silence after the speech when the model is asked."""

CHUNK_SAMPLES = 320
"""The caller transport's 20 ms audio frames: the pipeline asks at a chunk boundary."""

STOP_WINDOW_MS = (170, 450)
"""Where a VAD stop can fall, ms after the last voiced audio (measured: ~260 ms)."""

PRE_SPEECH_MS = 500
"""Audio Smart Turn keeps from before a turn's speech restarts (``SmartTurnParams``)."""

FIXTURE_MIN_P = 0.8
"""Every complete bench turn scores at least this on the machine that makes the fixtures."""

VERDICT_P = 0.5
"""Pipecat's threshold: above it the turn is complete (``LocalSmartTurnAnalyzerV3``)."""


@dataclass(frozen=True)
class KernelVariant:
    """One way to build the onnxruntime session.

    Attributes:
        name: Short name for reports.
        graph_optimization: onnxruntime's graph optimisations (Pipecat: all on). Off runs the
            unfused int8 graph: other kernels, other rounding.
        threads: Intra-op threads (Pipecat: ``cpu_count=1``). Two split each matrix product
            into blocks summed in another order.
    """

    name: str
    graph_optimization: bool = True
    threads: int = 1


VARIANTS: dict[str, KernelVariant] = {
    v.name: v
    for v in (
        KernelVariant("pipecat-default"),
        KernelVariant("graph-opt-off", graph_optimization=False),
        KernelVariant("2-threads", threads=2),
        KernelVariant("graph-opt-off-2-threads", graph_optimization=False, threads=2),
    )
}


@contextlib.contextmanager
def _session_options(variant: KernelVariant) -> Iterator[None]:
    """While Pipecat builds its session, apply ``variant``'s graph optimisation level.

    Pipecat sets ``graph_optimization_level`` itself and exposes only the thread count
    (``cpu_count``), so the one session the analyzer builds is built through a wrapper of
    ``onnxruntime.InferenceSession`` that lowers the level; nothing else changes.
    """
    if variant.graph_optimization:
        yield
        return
    import onnxruntime as ort

    real = ort.InferenceSession

    def build(path, sess_options=None, *args, **kwargs):
        options = sess_options or ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        return real(path, *args, sess_options=options, **kwargs)

    ort.InferenceSession = build
    try:
        yield
    finally:
        ort.InferenceSession = real


class SmartTurnUnavailable(RuntimeError):
    """Pipecat's local Smart Turn v3 (onnxruntime and its bundled model) cannot be loaded."""


class SmartTurnProbe:
    """Pipecat's ``LocalSmartTurnAnalyzerV3``, asked as the pipeline asks it.

    Args:
        variant: How to build the onnxruntime session (default: as Pipecat does).

    Raises:
        SmartTurnUnavailable: If onnxruntime or the bundled model is missing (the message
            names the extra to install).
    """

    def __init__(self, variant: KernelVariant | str = "pipecat-default") -> None:
        self.variant = VARIANTS[variant] if isinstance(variant, str) else variant
        try:
            from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import (
                LocalSmartTurnAnalyzerV3,
            )
        except ImportError as e:
            raise SmartTurnUnavailable(
                f"Smart Turn v3 needs onnxruntime ({e}): pip install 'pipecat-fast[bench]'"
            ) from None
        from loguru import logger

        logger.disable("pipecat.audio.turn")  # it logs every prediction at DEBUG
        try:
            with _session_options(self.variant):
                self._analyzer = LocalSmartTurnAnalyzerV3(
                    sample_rate=SAMPLE_RATE, cpu_count=self.variant.threads
                )
        except Exception as e:  # the model file is missing or unreadable
            raise SmartTurnUnavailable(f"Smart Turn v3 model unavailable: {e!r}") from None
        self._analyzer.set_sample_rate(SAMPLE_RATE)

    async def p_complete(self, pcm: bytes | np.ndarray, silence_ms: int = SILENCE_MS) -> float:
        """P(turn complete) for ``pcm`` (16 kHz mono s16) followed by ``silence_ms`` of silence."""
        if isinstance(pcm, np.ndarray):
            pcm = pcm.astype("<i2").tobytes()
        analyzer = self._analyzer
        analyzer.clear()
        analyzer.append_audio(pcm, is_speech=True)
        if silence_ms:
            analyzer.append_audio(b"\x00\x00" * (SAMPLE_RATE * silence_ms // 1000), is_speech=False)
        _state, metrics = await analyzer.analyze_end_of_turn()
        analyzer.clear()
        if metrics is None:
            raise SmartTurnUnavailable("Smart Turn v3 returned no prediction")
        return float(metrics.probability)

    def p_complete_sync(self, pcm: bytes | np.ndarray, silence_ms: int = SILENCE_MS) -> float:
        """:meth:`p_complete` from synchronous code (scripts)."""
        return asyncio.run(self.p_complete(pcm, silence_ms))

    async def close(self) -> None:
        """Release the analyzer's thread."""
        await self._analyzer.cleanup()


def analysis_ends(silence_from_ms: int, window_ms: tuple[int, int] = STOP_WINDOW_MS) -> list[int]:
    """Chunk boundaries (samples from the WAV start) ``window_ms`` after ``silence_from_ms``."""
    lo, hi = window_ms
    first = -(-((silence_from_ms + lo) * SAMPLE_RATE // 1000) // CHUNK_SAMPLES)
    last = (silence_from_ms + hi) * SAMPLE_RATE // 1000 // CHUNK_SAMPLES
    return [k * CHUNK_SAMPLES for k in range(first, last + 1)]


@dataclass
class TurnVerdicts:
    """What Smart Turn says about one scripted turn, at every plausible VAD stop.

    Attributes:
        end: P(complete) at each analysis end in the stop window after the real end of speech.
        pauses: The same, in the window after each deliberate pause begins, per pause.
    """

    end: list[float]
    pauses: list[list[float]]


async def verdicts(
    probe: SmartTurnProbe,
    pcm: bytes,
    speech_end_ms: int,
    pauses: Sequence[tuple[int, int]] = (),
    window_ms: tuple[int, int] = STOP_WINDOW_MS,
) -> TurnVerdicts:
    """Ask as the pipeline does, at every chunk boundary a VAD stop can fall on.

    A pause Smart Turn takes for an end of turn clears its buffer (Pipecat's analyzer does on
    COMPLETE), so the verdict at the real end then sees only what follows, from
    ``PRE_SPEECH_MS`` before the caller goes on.

    Args:
        probe: The model.
        pcm: The turn's WAV samples (16 kHz mono s16).
        speech_end_ms: The real end of speech (ms from the WAV start).
        pauses: ``(start_ms, end_ms)`` of each deliberate pause.
        window_ms: Where the VAD stop can fall after the silence begins.
    """
    x = np.frombuffer(pcm, dtype="<i2")
    padded = -(-len(x) // CHUNK_SAMPLES) * CHUNK_SAMPLES
    audio = np.concatenate([x, np.zeros(padded - len(x) + SAMPLE_RATE, dtype="<i2")])
    start = 0
    at_pauses = []
    for a, b in pauses:
        lo, hi = window_ms
        ends = analysis_ends(a, (lo, min(hi, b - a)))
        ps = [await probe.p_complete(audio[start:e], 0) for e in ends]
        at_pauses.append(ps)
        if max(ps) >= VERDICT_P:
            start = max(0, (b - PRE_SPEECH_MS) * SAMPLE_RATE // 1000) // CHUNK_SAMPLES
            start *= CHUNK_SAMPLES
    ends = analysis_ends(speech_end_ms, window_ms)
    end = [await probe.p_complete(audio[start:e], 0) for e in ends]
    return TurnVerdicts(end, at_pauses)
