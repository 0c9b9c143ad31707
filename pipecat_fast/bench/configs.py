"""Named bench configurations: each is the stock pipeline plus one or more levers.

A configuration is a function that receives the :class:`~pipecat_fast.bench.pipeline.PipelineSpec`
of a call before it is assembled and adds its levers. Each lever's issue registers its own
configuration here, so the bench can run any of them side by side with ``stock``::

    def _warmup(spec: PipelineSpec) -> None:
        spec.observers.append(...)           # or spec.after_stt / before_llm / between_llm_tts

    register(BenchConfig("warmup", "one line for the report", _warmup), in_all=True)

``all`` is the best composition of levers, the one ``make demo`` shows against stock: every
configuration registered with ``in_all=True``, applied in registration order (today ``warmup``,
``aggregator``, ``draft`` (which includes ``prefill``), ``truncation``, ``tts-pool`` and
``guard``). Join it only with a lever that composes with
the others and makes TTFA no worse; a lever that conflicts with a member (both replace the user
turn strategies, say) must compose with it explicitly instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipecat_fast.bench.pipeline import PipelineSpec

if TYPE_CHECKING:
    from pipecat_fast.endofturn.dial import Patience


@dataclass(frozen=True)
class BenchConfig:
    """A named pipeline configuration.

    Parameters:
        name: As given to ``--configs``.
        description: One line for the report.
        customize: Adds the configuration's levers to a call's pipeline spec.
    """

    name: str
    description: str
    customize: Callable[[PipelineSpec], None]


def _stock(spec: PipelineSpec) -> None:
    """Pipecat as a user would configure it: nothing added."""


CONFIGS: dict[str, BenchConfig] = {}

ALL: list[str] = []
"""The configurations ``all`` composes, in the order they are applied."""


def register(config: BenchConfig, *, in_all: bool = False) -> BenchConfig:
    """Add a configuration to :data:`CONFIGS` (its name must be new).

    Args:
        config: The configuration.
        in_all: Also apply it in ``all``, the best composition (after the earlier members).

    Raises:
        ValueError: If the name is taken.
    """
    if config.name in CONFIGS:
        raise ValueError(f"bench configuration {config.name!r} already registered")
    CONFIGS[config.name] = config
    if in_all:
        ALL.append(config.name)
    return config


def _all(spec: PipelineSpec) -> None:
    """Every member of :data:`ALL`, in order (read when a call is built, so later members count)."""
    for name in ALL:
        CONFIGS[name].customize(spec)


register(BenchConfig("stock", "stock Pipecat 1.14 pipeline (the baseline)", _stock))
register(BenchConfig("stock-again", "the same stock pipeline again: shows the noise floor", _stock))


def _aggregator(first_phrase: bool, min_chars: int = 20) -> Callable[[PipelineSpec], None]:
    def customize(spec: PipelineSpec) -> None:
        from pipecat_fast.aggregator import make_text_processor

        spec.between_llm_tts.append(
            make_text_processor(first_phrase=first_phrase, first_phrase_min_chars=min_chars)
        )

    return customize


def _prefill_with(words: int) -> Callable[[PipelineSpec], None]:
    """Prefill at ``words`` stable words, then every ``words`` new ones (a tuning variant).

    The sweep that chose the defaults (docs/prefill.md, "Choosing min_new_words"): the first
    prefill of a turn also waited for ``words`` words.
    """

    def customize(spec: PipelineSpec) -> None:
        from pipecat_fast.prefill import PrefillConfig, SpeculativePrefill, backend_for
        from pipecat_fast.stabilizer import TwoUpdateStabilizer

        backend = backend_for(spec.llm)
        config = PrefillConfig(
            first_words=words,
            min_new_words=words,
            min_prompt_tokens=backend.min_prompt_tokens,
        )
        spec.after_stt.append(TwoUpdateStabilizer())
        spec.before_llm.append(
            SpeculativePrefill(spec.llm, context=spec.context, backend=backend, config=config)
        )

    return customize


def _prefill(spec: PipelineSpec) -> None:
    from pipecat_fast.prefill import SpeculativePrefill
    from pipecat_fast.stabilizer import TwoUpdateStabilizer

    spec.after_stt.append(TwoUpdateStabilizer())
    spec.before_llm.append(SpeculativePrefill(spec.llm, context=spec.context))


def _draft(spec: PipelineSpec) -> None:
    from pipecat.turns.user_turn_strategies import UserTurnStrategies

    from pipecat_fast.prefill import DraftAndHoldUserTurnStopStrategy

    _prefill(spec)
    spec.user_params.user_turn_strategies = UserTurnStrategies(
        stop=[DraftAndHoldUserTurnStopStrategy()]
    )


RING_S = 6.0
"""Ring-back before the callee answers, for configurations that use it: one North American
ring cycle (2 s ring, 4 s silence). Our assumption; seed 001 runs its warmup during ring-back."""


def _warmup(spec: PipelineSpec) -> None:
    """Session warmup while the phone rings, with the prewarm policy (docs/warmup.md)."""
    from pipecat_fast.warmup import PrewarmPolicy, SessionWarmup

    # A fresh policy per call: the bench empties the provider's cache between calls. The
    # provider comes from the service (the emulator's gpt-4.1-mini is OpenAI's, with its
    # 1,024-token floor; the local engine is unknown: no floor).
    warmup = SessionWarmup(spec.llm, spec.context, policy=PrewarmPolicy())
    spec.ringing.append(warmup.start)
    spec.ring_s = max(spec.ring_s, RING_S)
    spec.before_llm.append(warmup.checker())
    spec.on_hangup.append(warmup.cancel)


register(
    BenchConfig(
        "warmup",
        "session warmup during a 6 s ring-back (2 streamed 8-token requests, prewarm policy)",
        _warmup,
    ),
    in_all=True,
)
register(
    BenchConfig(
        "aggregator",
        "unicode-safe sentence aggregator between LLM and TTS, first-phrase policy on",
        _aggregator(first_phrase=True),
    ),
    in_all=True,
)
register(
    BenchConfig(
        "aggregator-sentences",
        "the same aggregator with the first-phrase policy off (sentences only)",
        _aggregator(first_phrase=False),
    )
)
register(
    BenchConfig(
        "prefill",
        "two-update stabiliser + speculative prefill of the LLM prefix cache during speech",
        _prefill,
    )
)
register(
    BenchConfig(
        "draft",
        "prefill + draft-and-hold: reply starts at end of speech, held until confirmed",
        _draft,
    ),
    in_all=True,
)
register(
    BenchConfig(
        "all",
        "the best composition of levers: every configuration registered with in_all=True",
        _all,
    )
)


def _eot_with(
    preset: str | Patience, *, preempt: bool = True, **draft_kwargs: Any
) -> Callable[[PipelineSpec], None]:
    """The end-of-turn levers on the patience dial's ``preset`` (docs/endofturn.md).

    Prefill, draft-and-hold drafting at the pause, confirmation on a complete transcript, and
    (``preempt``) the first audio held ready; ``draft_kwargs`` go to draft-and-hold.
    """

    def customize(spec: PipelineSpec) -> None:
        from pipecat.turns.user_turn_strategies import UserTurnStrategies

        from pipecat_fast.endofturn import (
            patience_stop_strategy,
            patience_vad,
            report_finalize_answers,
        )
        from pipecat_fast.preemptive import PreemptiveTTS

        _prefill(spec)
        vad = patience_vad(preset, spec.user_params.vad_analyzer)
        spec.user_params.vad_analyzer = vad
        spec.user_params.user_turn_strategies = UserTurnStrategies(
            stop=[patience_stop_strategy(preset, vad, **draft_kwargs)]
        )
        report_finalize_answers(spec.stt)
        if preempt:
            tts = PreemptiveTTS(spec.llm, spec.tts)
            spec.between_llm_tts.insert(0, tts)  # right after the LLM
            spec.after_tts.insert(0, tts.hold)  # right after the TTS

    return customize


register(
    BenchConfig(
        "eot",
        "draft + early draft at the pause + confirm on a complete transcript + first audio "
        "held ready (patience: balanced)",
        _eot_with("balanced"),
    )
)
for _preset in ("snappy", "patient"):
    register(
        BenchConfig(
            f"eot-{_preset}",
            f"eot on the patience dial's {_preset!r} preset",
            _eot_with(_preset),
        )
    )
register(
    BenchConfig(
        "eot-nopreempt",
        "eot without the preemptive TTS (the first audio synthesized after confirmation)",
        _eot_with("balanced", preempt=False),
    )
)


def _all_with_eot(eot: Callable[[PipelineSpec], None]) -> Callable[[PipelineSpec], None]:
    """``all`` with ``eot`` in ``draft``'s place (both replace the user turn strategies)."""

    def customize(spec: PipelineSpec) -> None:
        for name in ALL:
            (eot if name == "draft" else CONFIGS[name].customize)(spec)

    return customize


register(
    BenchConfig(
        "all-eot",
        "all with eot in draft's place (both replace the user turn strategies)",
        _all_with_eot(CONFIGS["eot"].customize),
    )
)


def _all_eot_drafting_at(early_s: float, **draft_kwargs: Any) -> Callable[[PipelineSpec], None]:
    """``all-eot`` with the balanced preset's early-draft silence set to ``early_s`` (s).

    For the dial's study of drafting sooner (docs/endofturn.md): the draft starts at that
    much silence when the words are in hand, else when the final arrives; ``draft_kwargs`` go
    to draft-and-hold.
    """
    from dataclasses import replace

    from pipecat_fast.endofturn.dial import PRESETS

    preset = replace(PRESETS["balanced"], early_silence_s=early_s)
    return _all_with_eot(_eot_with(preset, **draft_kwargs))


for _ms in (32, 64):
    register(
        BenchConfig(
            f"all-eot-d{_ms}",
            f"all-eot drafting at {_ms} ms of silence (balanced drafts at 100 ms)",
            _all_eot_drafting_at(_ms / 1000),
        )
    )
# Silence as the second update (docs/endofturn.md): at the first silent Silero frame (32 ms)
# with no new interim, the draft starts on the latest interim's words.
register(
    BenchConfig(
        "all-eot-interim",
        "all-eot drafting at the first silent frame (32 ms) on the latest interim when no "
        "interim came in that silence (pause_stable_s)",
        _all_eot_drafting_at(0.032, pause_stable_s=0.032),
    )
)


# Barge-in: callers who talk over the reply at scripted moments (0.8, 1.4 or 2.0 s into it,
# turn by turn), with the truncation lever and without it (docs/bargein.md).
def barge_in_moments(n: int) -> list[float | None]:
    """When each utterance of an ``n``-utterance call talks over the previous reply (s)."""
    return [None] + [0.8 + 0.6 * (i % 3) for i in range(n - 1)]


def _barge_in_callers(spec: PipelineSpec) -> None:
    spec.call.barge_in_after_s = barge_in_moments(len(spec.call.utterances))


def _bargein(spec: PipelineSpec) -> None:
    from pipecat_fast.bargein import BargeInTruncator

    _barge_in_callers(spec)
    spec.barge_in = BargeInTruncator()


def _deepgram_tts(spec: PipelineSpec) -> None:
    """Deepgram's WebSocket TTS (no word timestamps) in place of Cartesia."""
    from pipecat.services.deepgram.tts import DeepgramTTSService

    url = spec.endpoints.deepgram_tts_url if spec.endpoints is not None else None
    if not url:
        raise ValueError("this configuration needs the Deepgram TTS emulator")
    spec.tts = DeepgramTTSService(api_key=spec.endpoints.tts_api_key, base_url=url)


def _stock_bargein_deepgram(spec: PipelineSpec) -> None:
    _deepgram_tts(spec)
    _barge_in_callers(spec)


def _bargein_deepgram(spec: PipelineSpec) -> None:
    _deepgram_tts(spec)
    _bargein(spec)


register(
    BenchConfig(
        "stock-bargein",
        "stock pipeline; the caller talks over replies at scripted moments",
        _barge_in_callers,
    )
)
register(
    BenchConfig(
        "bargein",
        "barge-in truncation: the context keeps only what the caller heard (same callers)",
        _bargein,
    )
)


register(
    BenchConfig(
        "stock-bargein-deepgram",
        "stock-bargein on Deepgram's WebSocket TTS (no word timestamps)",
        _stock_bargein_deepgram,
    )
)
register(
    BenchConfig(
        "bargein-deepgram",
        "bargein on Deepgram's WebSocket TTS: the estimate without word timestamps",
        _bargein_deepgram,
    )
)


# TTS warm-pool (docs/ttspool.md): calls as production has them for a TTS connection, on
# Sarvam's TTS, whose Pipecat service redials on every interruption: the bot greets when the call
# is answered, callers talk over replies, and one caller goes quiet past the provider's idle close.
POOL_GREETING = "Thanks for calling, this is the clinic's assistant. How can I help you today?"
POOL_RING_S = 2.0
"""Ring-back for the pool's dial: two seconds is far more than a dial takes (our assumption;
real ring-backs run several seconds, RING_S)."""


def _pool_calls(spec: PipelineSpec) -> None:
    """Sarvam TTS; a greeting at answer; barge-ins; an idle gap before the middle utterance."""
    from pipecat.services.sarvam.tts import SarvamTTSService

    from pipecat_fast.testing.stack import SARVAM_IDLE_CLOSE_S

    url = spec.endpoints.sarvam_tts_url if spec.endpoints is not None else None
    if not url:
        raise ValueError("this configuration needs the Sarvam TTS emulator")
    spec.tts = SarvamTTSService(api_key=spec.endpoints.tts_api_key, url=url)
    n = len(spec.call.utterances)
    spec.call.greeting = POOL_GREETING
    moments = barge_in_moments(n)
    pauses: list[float | None] = [None] * n
    if n > 1:
        middle = n // 2
        moments[middle] = None  # waits for the reply to end, then goes quiet
        pauses[middle] = SARVAM_IDLE_CLOSE_S + 3.0
    spec.call.barge_in_after_s = moments
    spec.call.pause_before_s = pauses


def _pool(spec: PipelineSpec) -> None:
    """The same calls with the TTS warm-pool: dialled while the phone rings, a spare."""
    _pool_calls(spec)
    _pool_lever(spec)


def _pool_lever(spec: PipelineSpec) -> None:
    """The TTS warm-pool on the call's own TTS: dialled while the phone rings, a spare."""
    from pipecat_fast.ttspool import TTSWarmPool

    pool = TTSWarmPool()
    leases = []

    async def ring() -> None:
        leases.append(pool.prewarm(spec.tts, call_id=spec.call.id))

    async def hang_up() -> None:
        for lease in leases:
            await lease.close()
        await pool.aclose()

    spec.ringing.append(ring)
    spec.ring_s = max(spec.ring_s, POOL_RING_S)
    spec.on_hangup.append(hang_up)


register(
    BenchConfig(
        "stock-pool",
        "stock pipeline on the pool's calls: Sarvam TTS (redials on every barge-in), a greeting "
        "at answer, barge-ins, an idle gap past the idle close",
        _pool_calls,
    )
)
register(
    BenchConfig(
        "pool",
        "TTS warm-pool on the same calls: the socket dialled during a 2 s ring-back, a spare "
        "for every barge-in",
        _pool,
    )
)


# The levers that do not change TTFA on the stock calls, or not by themselves, in `all` too, so
# `all` is every lever at once (the example bots' composition, docs/examples.md): barge-in
# truncation (stock callers wait for each reply: it has nothing to cut, and costs what it costs),
# the TTS warm-pool on the call's own TTS, and the cache-bust guard.
def _truncation(spec: PipelineSpec) -> None:
    from pipecat_fast.bargein import BargeInTruncator

    spec.barge_in = BargeInTruncator()


def _guard(spec: PipelineSpec) -> None:
    from pipecat_fast.lint import CacheBustGuard

    spec.observers.append(CacheBustGuard(llm=spec.llm))


register(
    BenchConfig(
        "truncation",
        "barge-in truncation on the stock callers (who wait for each reply: nothing to cut)",
        _truncation,
    ),
    in_all=True,
)
register(
    BenchConfig(
        "tts-pool",
        "TTS warm-pool on the stock calls' own TTS: the socket dialled during a 2 s ring-back",
        _pool_lever,
    ),
    in_all=True,
)
register(
    BenchConfig("guard", "cache-bust guard on the LLM's requests (an observer)", _guard),
    in_all=True,
)


# Tuning variants: the sweeps that chose the defaults (docs/prefill.md, docs/aggregator.md).
for _words in (1, 3, 4):
    register(
        BenchConfig(
            f"prefill-{_words}w",
            f"prefill with first_words=min_new_words={_words} (tuning sweep)",
            _prefill_with(_words),
        )
    )
for _chars in (10, 40):
    register(
        BenchConfig(
            f"aggregator-fp{_chars}",
            f"aggregator with first_phrase_min_chars={_chars} (tuning sweep)",
            _aggregator(first_phrase=True, min_chars=_chars),
        )
    )


def get_configs(names: list[str]) -> list[BenchConfig]:
    """Look configurations up by name, in the order given.

    Raises:
        ValueError: Naming the unknown configuration and listing the known ones.
    """
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise ValueError(
            f"unknown bench configuration(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}"
        )
    return [CONFIGS[n] for n in names]
