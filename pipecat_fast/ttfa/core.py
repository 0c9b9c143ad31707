"""TTFA arithmetic: stage marks in, blocking stage times and percentiles out.

Pure functions and dataclasses, no frames and no clocks: every time is a number passed in
(seconds since the epoch for marks, milliseconds for everything reported).

A turn's time to first audio (TTFA) runs from the moment the caller actually stopped speaking
(VAD stop timestamp minus VAD ``stop_secs``) to the first bot audio leaving the output
transport. Between them the pipeline leaves *marks* (final transcript, turn confirmed, LLM
request sent, ...). Each stage is charged only its **blocking** time: how far it pushed the
critical path beyond everything that comes before it in the canonical order, never less than
zero. A TTS is not charged for the LLM writing its sentence, an STT final that lands inside
the VAD's silence window costs nothing, and a speculative LLM request sent before the turn
was confirmed costs only what it still made the caller wait after confirmation. The blocking
times of a turn add up to its TTFA.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Canonical order of the marks, and the stage each one closes (field-standard names).
STAGES: tuple[tuple[str, str], ...] = (
    ("vad_stopped", "endpointing"),  # VAD silence window (stop_secs)
    ("final_transcript", "stt_final"),  # STT final after end of speech, beyond the VAD window
    ("turn_confirmed", "turn_detection"),  # end-of-turn model (Smart Turn) / stop strategy
    ("llm_request", "llm_dispatch"),  # context aggregation until the request leaves
    ("llm_first_token", "llm_ttft"),  # network + queue + prefill + first decode step
    ("tts_text", "sentence_aggregation"),  # waiting for the first speakable chunk
    ("tts_first_byte", "tts_ttfb"),  # TTS time to first audio byte
    ("first_audio_out", "output"),  # output transport until the first audio leaves
)
MARKS: tuple[str, ...] = tuple(mark for mark, _ in STAGES)
STAGE_NAMES: tuple[str, ...] = tuple(stage for _, stage in STAGES)


def blocking_stages_ms(user_stopped_at: float, marks: Mapping[str, float]) -> dict[str, float]:
    """Blocking time of each stage whose mark is present.

    Args:
        user_stopped_at: When the caller actually stopped speaking (s, epoch).
        marks: Mark name (one of :data:`MARKS`) to the time it was reached (s, epoch).
            Unknown names are ignored; absent marks simply fold their time into the next
            present stage.

    Returns:
        Stage name to blocking time in ms, in canonical order, for present marks only.
    """
    frontier = user_stopped_at
    stages: dict[str, float] = {}
    for mark, stage in STAGES:
        at = marks.get(mark)
        if at is None:
            continue
        stages[stage] = max(0.0, at - frontier) * 1000.0
        frontier = max(frontier, at)
    return stages


@dataclass
class TurnRecord:
    """One user turn as the TTFA meter saw it.

    Parameters:
        turn: 0-based index of the turn within its call.
        user_stopped_at: When the caller actually stopped speaking (s, epoch).
        marks: Mark name to time reached (s, epoch); see :data:`MARKS`.
        prompt_tokens: Prompt tokens of the LLM request that answered the turn, from
            Pipecat's ``LLMTokenUsage`` as the service reports them (OpenAI: including the
            cached ones; Anthropic: Pipecat adds the cache reads and writes back in); None
            when not reported (e.g. llama-cpp-python's streamed replies carry no usage).
        cached_tokens: Prompt tokens read from the provider's prefix cache
            (``LLMTokenUsage.cache_read_input_tokens``); None when not reported.
        extra: Lever-specific accounting (e.g. speculation outcome), JSON-serializable.
    """

    turn: int
    user_stopped_at: float
    marks: dict[str, float] = field(default_factory=dict)
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Whether the first bot audio of the reply was observed."""
        return "first_audio_out" in self.marks

    @property
    def ttfa_ms(self) -> float | None:
        """Time to first audio in ms, or None if no bot audio answered the turn."""
        out = self.marks.get("first_audio_out")
        return None if out is None else (out - self.user_stopped_at) * 1000.0

    def stages_ms(self) -> dict[str, float]:
        """Blocking time per stage in ms (see :func:`blocking_stages_ms`)."""
        return blocking_stages_ms(self.user_stopped_at, self.marks)

    def marks_ms(self) -> dict[str, float]:
        """Each mark relative to the caller's end of speech, in ms (negative = before it)."""
        return {
            m: (self.marks[m] - self.user_stopped_at) * 1000.0 for m in MARKS if m in self.marks
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form of the turn.

        Returns:
            ``turn, ttfa_ms, stages_ms, marks_ms, prompt_tokens, cached_tokens`` plus the
            ``extra`` fields; times in ms rounded to 0.1 ms.
        """
        ttfa = self.ttfa_ms
        return {
            "turn": self.turn,
            "ttfa_ms": None if ttfa is None else round(ttfa, 1),
            "stages_ms": {k: round(v, 1) for k, v in self.stages_ms().items()},
            "marks_ms": {k: round(v, 1) for k, v in self.marks_ms().items()},
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            **self.extra,
        }


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile with linear interpolation between closest ranks.

    Args:
        values: Samples (any order); must not be empty.
        q: Percentile in [0, 100].

    Raises:
        ValueError: If ``values`` is empty or ``q`` is outside [0, 100].
    """
    if not values:
        raise ValueError("percentile of an empty sample")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(ttfa_ms: Iterable[float | None]) -> dict[str, float | int | None]:
    """p50/p95 of the answered turns.

    Args:
        ttfa_ms: TTFA per turn in ms; None marks a turn that got no audio.

    Returns:
        ``{"ttfa_p50_ms", "ttfa_p95_ms", "n_turns", "n_unanswered"}``; percentiles are None
        when no turn was answered.
    """
    all_values = list(ttfa_ms)
    answered = [v for v in all_values if v is not None]
    return {
        "ttfa_p50_ms": round(percentile(answered, 50), 1) if answered else None,
        "ttfa_p95_ms": round(percentile(answered, 95), 1) if answered else None,
        "n_turns": len(answered),
        "n_unanswered": len(all_values) - len(answered),
    }
