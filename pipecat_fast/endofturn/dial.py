"""The patience dial: how eagerly the agent takes the floor, one named setting.

A support line wants the agent in fast; a counselling line cannot keep cutting people off
(seed 003: set the dial per use case). A :class:`Patience` preset sets, together:

- the VAD's stop window (``stop_secs``): the silence before the caller counts as stopped;
- the turn analyzer's threshold: Smart Turn v3's probability of *complete* above which the
  turn is over (Pipecat's own is 0.5);
- the early-draft silence: the pause inside the stop window at which the reply is drafted;
- the early-verdict silence: the pause at which Smart Turn is asked (sooner than the draft: the
  model's inference has to fit inside the stop window, and a verdict costs no LLM compute);
- the speculation budget: drafts one turn may start (early ones included).

``balanced`` is Pipecat's defaults plus the early draft; ``snappy`` answers sooner and bets
more compute on pauses; ``patient`` waits longer and bets once. Build the user aggregator's
parameters from one::

    user_params = patience_user_params("balanced")
    pair = LLMContextAggregatorPair(context, user_params=user_params)

Changing ``stop_secs`` from Pipecat's 0.2 s makes its turn strategy warn once that its STT p99
figures assume 0.2 s; with a complete transcript the confirmation does not wait for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Patience:
    """One setting of the dial.

    Attributes:
        name: The preset's name.
        vad_stop_secs: The VAD's stop window (s).
        turn_threshold: Smart Turn's probability of *complete* above which the turn is over.
        early_silence_s: The pause (s) inside the stop window that starts a draft.
        speculation_budget: Drafts one turn may start.
        use: What it is for.
        verdict_silence_s: The pause (s) inside the stop window at which Smart Turn's early
            verdict is asked (one 32 ms Silero frame is the soonest the VAD can show a pause).
    """

    name: str
    vad_stop_secs: float
    turn_threshold: float
    early_silence_s: float
    speculation_budget: int
    use: str = ""
    verdict_silence_s: float = 0.032

    def __post_init__(self):
        if not 0.05 <= self.vad_stop_secs <= 2.0:
            raise ValueError(f"vad_stop_secs must be in [0.05, 2.0], got {self.vad_stop_secs}")
        if not 0.0 < self.turn_threshold < 1.0:
            raise ValueError(f"turn_threshold must be in (0, 1), got {self.turn_threshold}")
        if not 0.0 < self.early_silence_s < self.vad_stop_secs:
            raise ValueError(
                f"early_silence_s must be in (0, vad_stop_secs={self.vad_stop_secs}), "
                f"got {self.early_silence_s}"
            )
        if not 0.0 < self.verdict_silence_s < self.vad_stop_secs:
            raise ValueError(
                f"verdict_silence_s must be in (0, vad_stop_secs={self.vad_stop_secs}), "
                f"got {self.verdict_silence_s}"
            )
        if self.speculation_budget < 1:
            raise ValueError(f"speculation_budget must be >= 1, got {self.speculation_budget}")


PRESETS: dict[str, Patience] = {
    p.name: p
    for p in (
        Patience("snappy", 0.15, 0.35, 0.06, 3, "support and booking lines: answer fast", 0.032),
        Patience("balanced", 0.2, 0.5, 0.1, 2, "Pipecat's defaults, drafting at the pause", 0.032),
        Patience("patient", 0.4, 0.7, 0.2, 1, "counselling, elderly callers: never cut in", 0.2),
    )
}


def patience(preset: str | Patience) -> Patience:
    """A preset by name (or the preset itself).

    Raises:
        ValueError: An unknown name (the message lists the presets).
    """
    if isinstance(preset, Patience):
        return preset
    try:
        return PRESETS[str(preset).strip().lower()]
    except KeyError:
        known = ", ".join(PRESETS)
        raise ValueError(f"unknown patience preset {preset!r}; known: {known}") from None


def patience_vad(preset: str | Patience, inner: Any = None) -> Any:
    """The VAD analyzer for a preset: ``inner`` (Silero by default) behind a ``PauseTap``."""
    from pipecat.audio.vad.vad_analyzer import VADParams

    from pipecat_fast.endofturn.vad import PauseTap

    p = patience(preset)
    if inner is None:
        from pipecat.audio.vad.silero import SileroVADAnalyzer

        inner = SileroVADAnalyzer()
    params = inner.params.model_copy(update={"stop_secs": p.vad_stop_secs})
    return PauseTap(inner, params=VADParams(**params.model_dump()))


def patience_stop_strategy(
    preset: str | Patience, vad: Any, *, early_verdict: bool = True, **draft_kwargs: Any
) -> Any:
    """Draft-and-hold around the complete-transcript confirmation around Smart Turn v3.

    Args:
        preset: The dial's setting.
        vad: The preset's ``PauseTap`` (the user aggregator's VAD analyzer).
        early_verdict: Also take Smart Turn's verdict at the early-draft pause (a second
            analyzer), so a complete turn is confirmed at the VAD's stop itself.
        **draft_kwargs: More ``DraftAndHoldUserTurnStopStrategy`` arguments.
    """
    from pipecat.turns.user_stop.turn_analyzer_user_turn_stop_strategy import (
        TurnAnalyzerUserTurnStopStrategy,
    )

    from pipecat_fast._pipecat import smart_turn_v3_with_threshold
    from pipecat_fast.endofturn.strategy import CompleteTranscriptUserTurnStopStrategy
    from pipecat_fast.prefill import DraftAndHoldUserTurnStopStrategy

    p = patience(preset)
    analyzer = smart_turn_v3_with_threshold(p.turn_threshold)
    confirm = CompleteTranscriptUserTurnStopStrategy(
        TurnAnalyzerUserTurnStopStrategy(turn_analyzer=analyzer),
        pauses=vad if early_verdict else None,
        early_analyzer=smart_turn_v3_with_threshold(p.turn_threshold) if early_verdict else None,
        early_silence_s=p.verdict_silence_s if early_verdict else None,
    )
    return DraftAndHoldUserTurnStopStrategy(
        confirm,
        pauses=vad,
        early_silence_s=p.early_silence_s,
        max_drafts_per_turn=p.speculation_budget,
        **draft_kwargs,
    )


def patience_user_params(preset: str | Patience, *, vad: Any = None, **params: Any) -> Any:
    """``LLMUserAggregatorParams`` set by the dial (VAD, stop strategy); ``params`` pass on."""
    from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregatorParams
    from pipecat.turns.user_turn_strategies import UserTurnStrategies

    tap = patience_vad(preset, vad)
    strategies = UserTurnStrategies(stop=[patience_stop_strategy(preset, tap)])
    return LLMUserAggregatorParams(vad_analyzer=tap, user_turn_strategies=strategies, **params)
