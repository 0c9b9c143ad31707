"""The caller's pauses inside the VAD's stop window, from the VAD's own per-frame confidence.

Pipecat's ``VADAnalyzer`` computes one voice confidence per analysis frame (Silero: 512
samples, 32 ms at 16 kHz; ``voice_confidence``) and reports a stop only after ``stop_secs`` of
frames under its ``confidence`` threshold. :class:`PauseTap` wraps the analyzer the user
aggregator runs, passes every call through unchanged, and keeps a
:class:`~pipecat_fast.endofturn.core.PauseTracker` of the silence building up, so a lever can
act on a pause before the VAD's stop window ends. It counts a frame as speech on confidence
alone; the VAD also requires a minimum volume, so the tap may see speech where the VAD sees
silence — never the other way round (it reports pauses no earlier than the VAD would).
"""

from __future__ import annotations

import numpy as np
from loguru import logger
from pipecat.audio.vad.vad_analyzer import VADAnalyzer, VADParams

from pipecat_fast.endofturn.core import PauseTracker


class PauseTap(VADAnalyzer):
    """A VAD analyzer that also says how long the caller has been silent.

    Use it where the VAD analyzer goes, and give the same object to the strategy that acts on
    pauses::

        vad = PauseTap(SileroVADAnalyzer())
        LLMUserAggregatorParams(vad_analyzer=vad, user_turn_strategies=UserTurnStrategies(
            stop=[DraftAndHoldUserTurnStopStrategy(..., pauses=vad, early_silence_s=0.1)]))

    Args:
        inner: The VAD analyzer that computes the confidences (Silero...).
        params: VAD parameters (``stop_secs``, ``confidence``...); the inner's by default.

    Raises:
        TypeError: If ``inner`` is not a Pipecat ``VADAnalyzer``.
    """

    def __init__(self, inner: VADAnalyzer, *, params: VADParams | None = None):
        if not isinstance(inner, VADAnalyzer):
            raise TypeError(f"PauseTap wraps a Pipecat VADAnalyzer, got {type(inner).__name__}")
        super().__init__(params=params or inner.params)
        self._tap_inner = inner
        self._tap_pauses = PauseTracker(self._params.confidence)
        self._tap_broken = False

    @property
    def inner(self) -> VADAnalyzer:
        """The wrapped analyzer."""
        return self._tap_inner

    @property
    def silence_s(self) -> float:
        """Silence since the caller's last speech frame (0 while they speak)."""
        return self._tap_pauses.silence_s

    @property
    def heard_speech(self) -> bool:
        """Whether any speech frame was seen."""
        return self._tap_pauses.heard_speech

    def set_sample_rate(self, sample_rate: int):
        """Set the wrapped analyzer's rate, and use the rate it settles on."""
        self._tap_inner.set_sample_rate(sample_rate)
        super().set_sample_rate(self._tap_inner.sample_rate)

    def set_params(self, params: VADParams):
        """Set the parameters here and on the wrapped analyzer."""
        if self._tap_inner.sample_rate:
            self._tap_inner.set_params(params)
        super().set_params(params)
        self._tap_pauses.threshold = params.confidence

    def num_frames_required(self) -> int:
        """The wrapped analyzer's frame size."""
        return self._tap_inner.num_frames_required()

    def voice_confidence(self, buffer: bytes) -> float:
        """The wrapped analyzer's confidence for one frame; the pause tracker sees it too.

        The confidence is returned exactly as the wrapped analyzer gave it (Silero's is a
        one-element array). A value the tracker cannot read stops the tracking (logged once),
        never the VAD.
        """
        confidence = self._tap_inner.voice_confidence(buffer)
        if self._tap_broken:
            return confidence
        try:
            value = float(np.asarray(confidence, dtype=float).reshape(-1)[0])
        except (TypeError, ValueError, IndexError) as e:
            self._tap_broken = True
            logger.warning(
                f"{self}: cannot read the VAD's confidence ({e}); pauses are no longer tracked"
            )
            return confidence
        rate = self.sample_rate or 16000
        self._tap_pauses.feed(value, self.num_frames_required() / rate)
        return confidence

    async def cleanup(self):
        """Release both analyzers."""
        await self._tap_inner.cleanup()
        await super().cleanup()
