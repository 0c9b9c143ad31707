"""When to send a speculative prefill: the pure decision logic, no I/O and no clock.

The bet: while the caller is still talking, send the LLM provider a prefill-only request
(``max_tokens=1``) carrying exactly the context the real turn will send, with the caller's
stable words as the user message, so the provider's prefix/KV cache already holds everything up
to the last stable word when the turn ends. The real request then only prefills the last few
words. Who pays when it loses: the provider (and, on a shared engine, other callers) computes
prefill tokens that a later revision or an abandoned turn throws away.

:class:`PrefillPlanner` keeps the rules in one place. Cheap rules first (no prompt needed):

- at most one prefill in flight per session;
- no new prefill once the turn was confirmed (the real request is on its way);
- no new prefill once the VAD reports silence (the turn is about to end, and on engines that
  finish a cancelled prefill under a global lock a late prefill would delay the real request —
  measured on llama-cpp-python's server);
- the first prefill of a turn at ``first_words`` stable words, then one per ``min_new_words``
  newly stable words;
- after a failed prefill (error, timeout, 429), back off for ``backoff_s`` and double it on each
  further failure, up to ``max_backoff_s``; the stock path is never affected.
- **engine busy** (last, only for a prefill that would otherwise go): the engine's load says
  other callers' turns would pay for it (:mod:`pipecat_fast.load`); the caller passes that
  verdict in.

Then the rules that need the prompt's size (tokens, as the provider counts them):

- **below the minimum**: the provider cannot cache a prompt shorter than its minimum cacheable
  prefix (or one cache block);
- **no new block**: a later prefill whose prompt ends in the same cache block as the turn's last
  one adds nothing the cache can keep (OpenAI caches in 128-token steps, vLLM in 16-token blocks);
- **not caching**: the provider reported no cached tokens on consecutive prefills that repeated
  a prefix it had just been sent — its cache is not keeping them (a minimum we do not know, or
  caching off), so prefills of that size stop;
- **cannot finish**: the prefill's uncached tokens would take the provider longer to compute
  than the caller is likely to keep talking (plus the end-of-turn wait), so the real request
  would arrive first and compute them again. The provider's speed is its *idle* speed
  (:class:`ProviderSpeed`, from its own time to first token against uncached tokens, learnt
  from requests sent while the load probe saw the engine idle, else a low quantile of all),
  plus the queueing measured now; the load now is otherwise the yield rules' to judge. The
  caller's likely turn length from this session's turns (before it has one, the process's
  earlier first turns): the median, or a long turn (``idle_turn_quantile``) when losing costs
  no one — the engine idle and an unfinished prefill cancelled at the real request. A provider
  seen to make a real request reuse an unfinished prefill (a serial engine) is exempt.

**The cold prefix goes at speech start** (:meth:`PrefillPlanner.decide_prefix`): the part of
the prompt that does not depend on the caller's words (system prompt, tools, history) is known
when the caller starts speaking, so it is planned then, with the whole turn to finish in,
under the same size and load rules; not while this session's own real request (a greeting, the
last turn) or a session warmup computes it, and not when the cache is known to hold it. The
stable words follow as before. A prefix no real request read is counted as wasted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Skip(StrEnum):
    """Why a stable update did not start a prefill."""

    IN_FLIGHT = "in_flight"
    TOO_FEW_NEW_WORDS = "too_few_new_words"
    SILENCE = "silence"
    BELOW_MINIMUM = "below_minimum"
    NO_NEW_BLOCK = "no_new_block"
    NOT_CACHING = "not_caching"
    CANNOT_FINISH = "cannot_finish"
    BACKING_OFF = "backing_off"
    TURN_ENDED = "turn_ended"
    DISABLED = "disabled"
    ENGINE_BUSY = "engine_busy"
    PREFIX_WARM = "prefix_warm"
    WARMING = "warming"
    REAL_PENDING = "real_pending"


@dataclass(frozen=True)
class PrefillConfig:
    """Tuning of the prefill bet.

    Parameters:
        first_words: Stable words that start a turn's first prefill. Default 1: the first
            prefill carries the whole context (system, tools, history), the part worth
            warming early; a later one only adds the caller's words.
        min_new_words: Newly stable words required between later prefills. Default 4: on
            our bench 1, 2, 3 and 4 words gave the same TTFA and cost +16, +10, +7 and +4 %
            prefill compute (docs/prefill.md).
        min_prompt_tokens: The provider's minimum cacheable prompt (tokens); a smaller
            prompt is never sent. ``None``: the provider's own figure from the registry
            (``pipecat_fast/providers/llm_cache.json``: OpenAI 1,024; Anthropic 512-4,096 by
            model; vLLM, SGLang, llama.cpp 0). Set it when the registry does not know your
            provider or model.
        block_tokens: The provider's cache block (a hit covers whole blocks only). ``None``:
            the registry's figure (OpenAI 128, vLLM 16, SGLang and llama.cpp 1); set it to
            your engine's block size (vLLM ``--block-size``).
        stop_on_silence: Send no new prefill once the VAD reports the caller silent.
        backoff_s: Pause after a failed prefill (s), doubled per consecutive failure.
        max_backoff_s: Longest pause (s).
        skip_unfinishable: Skip a prefill the provider cannot finish before the real request
            is likely to leave (see :class:`ProviderSpeed`).
        expected_turn_s: How long a caller's turn lasts before this session has measured any
            (s of speech) and the process's sessions have measured too few
            (:class:`CallerTurns`); later, the median of this session's turns.
        dispatch_s: Time from the caller's last word to the real request (the VAD's stop
            window plus turn detection; s).
        uncached_alarm: Stop sending prefills of a size after this many in a row from which
            the provider cached nothing although it had just been sent their prefix.
        idle_turn_quantile: Which turn length ``cannot_finish`` plans for when losing costs
            no one: the engine idle (``load_now == 0``) and an unfinished prefill cancelled
            at the real request (``PrefillPlanner.decide(..., cancels_unfinished=True)``).
            Default 0.75, a long turn (the quantile of the turn lengths measured, as
            :meth:`PrefillPlanner.time_left` reads them); otherwise the median.
        prefix_on_speech: Plan the turn's cold prefix — everything the prompt carries that
            does not depend on the caller's words (system prompt, tools, history) — when the
            caller starts speaking (:meth:`PrefillPlanner.decide_prefix`), not at the first
            stable word: it is known then, and ``cannot_finish`` gives it the whole turn.
        prefix_min_tokens: The prefix goes at speech start only with at least this many
            tokens the cache is not known to hold (a warm session's few new tokens ride on
            the first stable word's prefill, as before). 256 tokens: the size the load rules
            call cold work (:attr:`pipecat_fast.load.YieldConfig.cold_tokens`), so a prefix
            sent at speech start is one those rules judge as cold.
    """

    first_words: int = 1
    min_new_words: int = 4
    min_prompt_tokens: int | None = None
    block_tokens: int | None = None
    stop_on_silence: bool = True
    backoff_s: float = 2.0
    max_backoff_s: float = 30.0
    skip_unfinishable: bool = True
    expected_turn_s: float = 2.0
    dispatch_s: float = 0.35
    uncached_alarm: int = 2
    idle_turn_quantile: float = 0.75
    prefix_on_speech: bool = True
    prefix_min_tokens: int = 256

    def __post_init__(self):
        for name in ("first_words", "min_new_words", "uncached_alarm", "prefix_min_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"PrefillConfig.{name} must be an integer >= 1, got {value!r}")
        for name in ("min_prompt_tokens", "block_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"PrefillConfig.{name} must be None or an integer >= 0")
        q = self.idle_turn_quantile
        if isinstance(q, bool) or not isinstance(q, int | float) or not 0 <= q <= 1:
            raise ValueError(f"PrefillConfig.idle_turn_quantile must be in [0, 1], got {q!r}")
        for name in ("backoff_s", "max_backoff_s", "expected_turn_s", "dispatch_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"PrefillConfig.{name} must be a number >= 0, got {value!r}")

    def cacheable(self, prompt_tokens: int) -> int:
        """Tokens of a ``prompt_tokens``-long prompt the provider can keep in its cache."""
        minimum = self.min_prompt_tokens or 0
        block = max(1, self.block_tokens or 1)
        if prompt_tokens < max(minimum, block, 1):
            return 0
        return prompt_tokens - prompt_tokens % block


@dataclass
class TurnAccount:
    """What the bet cost and bought in one user turn (tokens are provider-reported).

    Parameters:
        prefills: Prefill requests sent.
        prefill_failures: Of those, how many failed.
        prefill_prompt_tokens: Prompt tokens sent speculatively.
        prefill_computed_tokens: Of those, tokens the provider had to prefill (not cached).
        skipped: Count of stable updates that did not start a prefill, by reason.
        prefill_cancelled: Prefills cancelled in flight.
        cancelled: Of those, how many by reason: ``ended`` (the session ended),
            ``dispatched`` (the real request left and the engine does not read an unfinished
            prefill), ``contended`` (another caller's request started on the shared engine
            while it computed); :class:`pipecat_fast.load.CancelReason`.
        yielded: Prefills held back because the engine was busy, by the load rule that said so
            (``queue``, ``busy``, ``slow``, ``stale``, ``down``; :mod:`pipecat_fast.load`).
        decisions: The turn's *judged* decisions, in order: every stable update that passed
            the cheap rules and was sized (:class:`Decision`: sent, skipped by a size rule
            with its figures, or yielded with the load rule's reason). At most
            ``DECISIONS_KEPT``; ``decisions_dropped`` counts the rest.
        prefix_prefills: Of ``prefills``, the cold prefixes sent when the caller started
            speaking (:meth:`PrefillPlanner.decide_prefix`; their decisions have ``words`` 0).
        prefix_wasted: Prefix prefills that no real request could read, by why: ``unused``
            (the session ended before a real request: a caller who said nothing),
            ``changed`` (the context stopped starting with what it carried: a reset).
    """

    prefills: int = 0
    prefill_failures: int = 0
    prefill_prompt_tokens: int = 0
    prefill_computed_tokens: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    prefill_cancelled: int = 0
    cancelled: dict[str, int] = field(default_factory=dict)
    yielded: dict[str, int] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    decisions_dropped: int = 0
    prefix_prefills: int = 0
    prefix_wasted: dict[str, int] = field(default_factory=dict)

    def record(self, decision: Decision) -> None:
        """Keep one judged decision (bounded: a long turn keeps its first ones)."""
        if len(self.decisions) < DECISIONS_KEPT:
            self.decisions.append(decision)
        else:
            self.decisions_dropped += 1

    def to_dict(self) -> dict[str, object]:
        """JSON form, keys prefixed for the TTFA report.

        ``prefill_cancelled`` is the total; ``prefill_cancelled_<reason>`` each reason's count
        (only the reasons that occurred); likewise ``prefill_yielded`` and
        ``prefill_yielded_<load rule>``, and ``prefill_skipped_<rule>`` for the planner's own
        rules (:class:`Skip`; ``engine_busy`` is not repeated there, it is the yields).
        ``prefill_decisions``: the judged decisions (:meth:`Decision.to_dict`).
        """
        fields: dict[str, object] = {
            "prefill_requests": self.prefills,
            "prefill_failures": self.prefill_failures,
            "prefill_prompt_tokens": self.prefill_prompt_tokens,
            "prefill_computed_tokens": self.prefill_computed_tokens,
            "prefill_yielded": sum(self.yielded.values()),
            "prefill_cancelled": self.prefill_cancelled,
        }
        for reason, count in sorted(self.cancelled.items()):
            fields[f"prefill_cancelled_{reason}"] = count
        for reason, count in sorted(self.yielded.items()):
            fields[f"prefill_yielded_{reason}"] = count
        for reason, count in sorted(self.skipped.items()):
            if reason != Skip.ENGINE_BUSY.value:
                fields[f"prefill_skipped_{reason}"] = count
        if self.prefix_prefills:
            fields["prefill_prefix_requests"] = self.prefix_prefills
        for reason, count in sorted(self.prefix_wasted.items()):
            fields[f"prefill_prefix_wasted_{reason}"] = count
        fields["prefill_decisions"] = [d.to_dict() for d in self.decisions]
        if self.decisions_dropped:
            fields["prefill_decisions_dropped"] = self.decisions_dropped
        return fields


DECISIONS_KEPT = 8
"""Judged prefill decisions a turn's account keeps (the first ones; the rest are counted)."""


@dataclass(frozen=True)
class Decision:
    """One judged prefill decision: what the planner decided for a sized stable update, and why.

    Parameters:
        at_s: When (s, since the caller started speaking this turn; ``None`` if unknown).
        words: Stable words of the turn then.
        outcome: ``"sent"``, ``"skipped"`` (a size rule, :class:`Skip`) or ``"yielded"`` (a
            load rule, :mod:`pipecat_fast.load`).
        reason: ``"sent"``, the :class:`Skip` value, or the load rule (``"busy"``...).
        work_tokens: Prompt tokens the prefill would have the provider compute.
        estimate_s: The provider's idle time for them (:class:`ProviderSpeed`), plus
            ``queue_s``; ``None`` before it has measured a cold request.
        queue_s: Queueing measured now on the sessions' own requests (s), if any.
        time_left_s: Until the real request is likely to leave (:meth:`PrefillPlanner.time_left`).
        load_now: Other requests on the engine (``None`` unknown).
        detail: The rule's own words (the load verdict's detail), if any.
    """

    at_s: float | None
    words: int
    outcome: str
    reason: str
    work_tokens: int | None = None
    estimate_s: float | None = None
    queue_s: float | None = None
    time_left_s: float | None = None
    load_now: int | None = None
    detail: str = ""

    def to_dict(self) -> dict[str, object]:
        """JSON form: times rounded to ms; unknown figures left out."""
        out: dict[str, object] = {"outcome": self.outcome, "reason": self.reason}
        out["words"] = self.words
        for name in ("at_s", "estimate_s", "queue_s", "time_left_s"):
            value = getattr(self, name)
            if value is not None:
                out[name] = round(value, 3)
        for name in ("work_tokens", "load_now"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.detail:
            out["detail"] = self.detail
        return out


def low_quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (linear between the nearest ranks; not empty)."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def busiest(sent: int | None, after: int | None) -> int | None:
    """A request's load tag from the load it was sent into and the load as it ended.

    ``None`` when the load at send is unknown; the send tag alone when the end is unknown.
    """
    if sent is None:
        return None
    return sent if after is None else max(sent, after)


class ProviderSpeed:
    """How long a provider takes to first token when it is idle, against the uncached tokens.

    Fed with the provider's own measurements — each real request's time to first token and
    each prefill's round trip, with the uncached prompt tokens its usage reported, and the
    load the engine had when it was sent (``load``: other requests running or waiting, from
    the load probe; ``None`` when unknown) — and read as ``seconds_for(uncached_tokens)``: a
    base (warm requests, under ``warm_tokens`` uncached) plus a per-token cost (cold requests'
    time above the base per uncached token).

    It estimates the engine's **idle** speed: what a prefill takes when it is allowed to run.
    A request slowed by other callers (queued behind them, or sharing the engine's compute
    with them) says nothing about that, and learning from it made a speed measured under load
    refuse every cold prefill long after the engine was idle again. So:

    - samples sent with ``load == 0`` (the engine idle) are kept apart and, once one of them
      is cold, the estimate uses only them — a run of loaded samples never pushes them out;
    - without an idle cold sample (no probe, e.g. a hosted API; or none measured yet) every
      sample counts (the ``keep`` most recent of each kind, so old ones age out);
    - base and per-token cost are a low quantile (``quantile``, the 25th percentile) of the
      samples rather than their median: queueing and shared compute only ever add time, so
      the faster samples are the closer to the engine's own speed.

    Load *now* is not baked in here: the yield rules (:mod:`pipecat_fast.load`) judge it,
    and the planner adds the queueing measured now.

    Unknown (``None``) until it has seen a cold request: a prefill is then never skipped for
    speed.

    Args:
        warm_tokens: Requests with fewer uncached tokens count as warm (they measure the base).
        keep: Most recent samples kept, of idle ones and of the others each.
        quantile: Which quantile of the samples estimates the speed (0 the fastest, 0.5 the
            median).
    """

    def __init__(self, *, warm_tokens: int = 256, keep: int = 32, quantile: float = 0.25):
        if isinstance(quantile, bool) or not isinstance(quantile, int | float):
            raise ValueError(f"ProviderSpeed quantile must be in [0, 1], got {quantile!r}")
        if not 0 <= quantile <= 1:
            raise ValueError(f"ProviderSpeed quantile must be in [0, 1], got {quantile!r}")
        self.warm_tokens = warm_tokens
        self.quantile = float(quantile)
        self._idle: deque[tuple[int, int, float]] = deque(maxlen=keep)
        self._other: deque[tuple[int, int, float]] = deque(maxlen=keep)
        self._seq = 0
        self.reuses_unfinished: bool | None = None
        """Whether a real request was seen to reuse a prefill still running (a serial engine)."""

    def add(self, uncached_tokens: int, seconds: float, load: int | None = None) -> None:
        """One measured request: ``uncached_tokens`` prefilled, first token after ``seconds``.

        Args:
            uncached_tokens: Prompt tokens the provider computed.
            seconds: Time to its first token (or the prefill's round trip).
            load: Other requests on the engine when it was sent
                (:func:`pipecat_fast.load.requests_on_engine`); ``0`` idle, ``None`` unknown.
        """
        if uncached_tokens >= 0 and seconds >= 0:
            idle = load is not None and not isinstance(load, bool) and load == 0
            self._seq += 1
            sample = (self._seq, int(uncached_tokens), float(seconds))
            (self._idle if idle else self._other).append(sample)

    @property
    def samples(self) -> list[tuple[int, float]]:
        """The samples kept, oldest first: ``(uncached_tokens, seconds)``."""
        return [(u, s) for _, u, s in sorted([*self._idle, *self._other])]

    @property
    def idle_samples(self) -> list[tuple[int, float]]:
        """Of those, the ones sent while the engine was idle, oldest first."""
        return [(u, s) for _, u, s in self._idle]

    def seconds_for(self, uncached_tokens: int) -> float | None:
        """Expected idle time to first token with ``uncached_tokens`` to prefill, or ``None``."""
        pool = [(u, s) for _, u, s in self._idle]
        if not any(u >= self.warm_tokens for u, _ in pool):
            pool = self.samples
        q = self.quantile
        warm = [s for u, s in pool if u < self.warm_tokens]
        base = low_quantile(warm, q) if warm else 0.0
        cold = [(u, s) for u, s in pool if u >= self.warm_tokens]
        if not cold:
            return base if warm and uncached_tokens < self.warm_tokens else None
        per_token = low_quantile([max(0.0, s - base) / u for u, s in cold], q)
        return base + per_token * max(0, uncached_tokens)


class CallerTurns:
    """How long callers' turns last (s of speech), pooled by the sessions of one process.

    A new session has measured none of its own turns, and its first turn is the cold one (its
    whole prompt uncached): judging whether that prefill can finish needs a turn length. The
    callers of one deployment speak to the same agent about the same things, so the sessions
    that came before are the better guess than a fixed default (a fixed 2 s refused every cold
    first-turn prefill of the load bench's callers, whose first turns last ~2.5–3 s, although the
    one sent while nothing was known paid off).

    Args:
        keep: Most recent turn lengths kept.
        min_samples: Turns needed before :attr:`typical` speaks.
    """

    def __init__(self, *, keep: int = 64, min_samples: int = 3):
        self._lengths: deque[float] = deque(maxlen=keep)
        self._first: deque[float] = deque(maxlen=keep)
        self.min_samples = min_samples

    def add(self, seconds: float, *, first: bool = False) -> None:
        """One caller turn, ``seconds`` of speech from its first word to its last.

        ``first``: the session's first turn (kept apart too: it is the one judged by the
        pool, and a call's opening turn, the reason for the call, is seldom a later turn's
        length — the load bench's first turns last ~2.5–3 s, its later ones ~2 s).
        """
        if seconds > 0:
            self._lengths.append(float(seconds))
            if first:
                self._first.append(float(seconds))

    @property
    def typical(self) -> float | None:
        """The median turn length, or ``None`` with fewer than ``min_samples`` turns."""
        return self.quantile(0.5)

    @property
    def typical_first(self) -> float | None:
        """The median first turn, or ``None`` with fewer than ``min_samples`` of them."""
        return self.quantile(0.5, first=True)

    def quantile(self, q: float, *, first: bool = False) -> float | None:
        """The ``q`` quantile of the turns (``first``: of the first turns), or ``None``."""
        lengths = self._first if first else self._lengths
        return low_quantile(list(lengths), q) if len(lengths) >= self.min_samples else None


class PrefillPlanner:
    """Decides, update by update, whether to send a speculative prefill now.

    Args:
        config: The rules' parameters.
        speed: The provider's measured speed (shared by the sessions on one provider); a new
            one by default.
        caller_turns: Turn lengths pooled over the process's sessions (used while this
            session has measured none of its own); a new pool by default.
    """

    def __init__(
        self,
        config: PrefillConfig | None = None,
        speed: ProviderSpeed | None = None,
        caller_turns: CallerTurns | None = None,
    ):
        self.config = config or PrefillConfig()
        self.speed = speed if speed is not None else ProviderSpeed()
        self.caller_turns = caller_turns if caller_turns is not None else CallerTurns()
        self.turn = TurnAccount()
        self._in_flight = False
        self._in_flight_account: TurnAccount | None = None
        self._in_flight_sent_at = 0.0
        self._in_flight_tokens = 0
        self._in_flight_load: int | None = None
        self._dispatch_load: int | None = None
        self._overlapped_tokens = 0
        self._overlapped_base = 0
        self._overlap_cancelled = False
        self._silent = False
        self._turn_over = False
        self._sent_words = 0
        self._sent_tokens: int | None = None
        self._unsent: tuple[int, int | None] = (0, None)
        self._failures = 0
        self._blocked_until = 0.0
        self._known_cached = 0
        self._speech_started: float | None = None
        self._turn_lengths: deque[float] = deque(maxlen=16)
        self._had_success = False
        self._uncached_streak = 0
        self._streak_tokens = 0
        self._not_caching_below = 0
        self.not_caching_raised = False
        """Set once the provider was seen not to cache repeated prefixes (for a warning)."""
        self._real_pending = False
        self._prefix_pending: TurnAccount | None = None

    @property
    def turn_over(self) -> bool:
        """Whether the current turn was confirmed (no new prefills for it)."""
        return self._turn_over

    @property
    def in_flight(self) -> bool:
        """Whether a prefill request is outstanding."""
        return self._in_flight

    @property
    def real_pending(self) -> bool:
        """Whether this session's real request left and its usage (or end) was not seen yet."""
        return self._real_pending

    @property
    def caller_is_speaking(self) -> bool:
        """Whether the VAD last reported the caller speaking in this turn."""
        return self._speech_started is not None and not self._silent

    @property
    def in_flight_work_tokens(self) -> int:
        """Prompt tokens the prefill in flight asks the provider to compute (estimated)."""
        return max(0, self._in_flight_tokens - self._known_cached) if self._in_flight else 0

    def blocked(self, stable_words: int, now: float) -> Skip | None:
        """The cheap rules alone (no prompt size): why a prefill cannot go now, or None.

        Lets a caller skip rendering the prompt when a prefill could not go anyway.
        """
        if self._turn_over:
            return Skip.TURN_ENDED
        if self._in_flight:
            return Skip.IN_FLIGHT
        if self._silent and self.config.stop_on_silence:
            return Skip.SILENCE
        needed = self.config.first_words if self._sent_words == 0 else self.config.min_new_words
        if stable_words - self._sent_words < max(1, needed):
            return Skip.TOO_FEW_NEW_WORDS
        if now < self._blocked_until:
            return Skip.BACKING_OFF
        return None

    def decide(
        self,
        stable_words: int,
        prompt_tokens: int | None,
        now: float,
        engine_busy: Callable[[int, float | None, float | None], Any] | None = None,
        *,
        load_now: int | None = None,
        queue_s: float | None = None,
        cancels_unfinished: bool = False,
    ) -> Skip | None:
        """Whether a stable update should start a prefill.

        Args:
            stable_words: Stable words of the caller's turn so far.
            prompt_tokens: Prompt tokens of the prefill request (provider's count, estimated);
                ``None`` when unknown (the size rules are then not applied).
            now: Current time (s, any monotonic clock).
            engine_busy: Asked last, only when every other rule lets the prefill go, with the
                prompt tokens the prefill would have the provider compute (beyond what its
                cache is known to hold), the speed rule's estimate of its time alone on the
                engine and the time left until the real request (s; ``None`` when not
                judged; :func:`pipecat_fast.load.decide`'s ``idle_s`` and ``time_left_s``):
                the engine-load rule that holds it back (``"queue"``,
                ``"busy"``...), or ``None`` when the engine has room; or the load
                :class:`~pipecat_fast.load.Verdict` itself (its detail is then kept in the
                turn's decisions). Counted in the turn's ``yielded``.
            load_now: Other requests on the engine now
                (:func:`pipecat_fast.load.requests_on_engine`; ``None`` unknown): a prefill
                sent now is tagged with it, so its time counts for the provider's idle speed
                only if the engine was idle.
            queue_s: Queueing measured now on the sessions' own requests (s), added to the
                idle speed in the ``cannot_finish`` rule (the load now, from the load side;
                ``None`` none measured).
            cancels_unfinished: A prefill still computing when the real request leaves will
                be cancelled then (the engine is known not to read an unfinished prefill and
                the ``dispatched`` rule is on, :func:`pipecat_fast.load.cancel_on_dispatch`):
                with the engine idle (``load_now == 0``) a prefill that does not finish costs
                no one, so ``cannot_finish`` plans for a long turn (``idle_turn_quantile``).

        Returns:
            None to send now (and the planner counts it as in flight), else why not.
        """
        reason = self.blocked(stable_words, now)
        return self._judge(
            reason,
            stable_words,
            prompt_tokens,
            now,
            engine_busy,
            load_now=load_now,
            queue_s=queue_s,
            cancels_unfinished=cancels_unfinished,
        )

    def prefix_blocked(
        self, prompt_tokens: int, now: float, *, warming: bool = False, next_turn: bool = False
    ) -> Skip | None:
        """Why the turn's cold prefix cannot go at speech start, or ``None``: the cheap rules.

        Not counted in the turn's account (they are asked at every speech start, and a warm
        session answers ``prefix_warm`` to each). ``next_turn``: judged for the turn after the
        confirmed one (its account not opened yet).
        """
        if not self.config.prefix_on_speech:
            return Skip.DISABLED
        if self._turn_over and not next_turn:
            return Skip.TURN_ENDED
        if self._in_flight:
            return Skip.IN_FLIGHT
        if now < self._blocked_until:
            return Skip.BACKING_OFF
        if self._real_pending:
            return Skip.REAL_PENDING
        if warming:
            return Skip.WARMING
        if self._sent_tokens is not None and not next_turn:  # this turn's prefill carried it
            return Skip.PREFIX_WARM
        if max(0, prompt_tokens - self._known_cached) < self.config.prefix_min_tokens:
            return Skip.PREFIX_WARM
        return None

    def decide_prefix(
        self,
        prompt_tokens: int,
        now: float,
        engine_busy: Callable[[int, float | None, float | None], Any] | None = None,
        *,
        load_now: int | None = None,
        queue_s: float | None = None,
        cancels_unfinished: bool = False,
        warming: bool = False,
    ) -> Skip | None:
        """Whether to send the turn's cold prefix now, as the caller starts speaking.

        The prefix (``prompt_tokens``: the prompt without the caller's words — system prompt,
        tools, history) is what the first stable word's prefill would carry first, and it does
        not depend on the words: it is known when the caller starts speaking, so planning it
        then gives it the whole turn (``cannot_finish`` against :meth:`time_left` from speech
        start) rather than what is left after the first stable word. Every size and load rule
        is the stable update's (:meth:`decide`), as strict; the cheap ones are
        :meth:`prefix_blocked` (``warming``: a session warmup is computing the same prefix now).
        A sent prefix counts as the turn's prefill (``words`` 0); its words follow from the
        first stable word once it finished, as a warm turn's.

        Returns:
            None to send the prefix now (in flight), else why not.
        """
        reason = self.prefix_blocked(prompt_tokens, now, warming=warming)
        if reason is not None:
            return reason
        decision = self._judge(
            None,
            0,
            prompt_tokens,
            now,
            engine_busy,
            load_now=load_now,
            queue_s=queue_s,
            cancels_unfinished=cancels_unfinished,
        )
        if decision is None:
            self.turn.prefix_prefills += 1
            self._prefix_pending = self.turn
        return decision

    def _judge(
        self,
        reason: Skip | None,
        stable_words: int,
        prompt_tokens: int | None,
        now: float,
        engine_busy: Callable[[int, float | None, float | None], Any] | None,
        *,
        load_now: int | None,
        queue_s: float | None,
        cancels_unfinished: bool,
    ) -> Skip | None:
        """The size rules, then the load verdict; records the judged decision and its count."""
        judged = reason is None and prompt_tokens is not None
        work = max(0, (prompt_tokens or 0) - self._known_cached)
        figures: dict[str, float | None] = {}
        why_detail = ""
        yielded_to = ""
        if judged:
            free = cancels_unfinished and load_now == 0
            reason, figures = self._size_rule(prompt_tokens, now, queue_s, free)
        if reason is None and engine_busy is not None:
            why = engine_busy(work, figures.get("estimate_s"), figures.get("time_left_s"))
            if why is not None and not isinstance(why, str):  # a load Verdict
                why, why_detail = (None if why.allow else str(why.reason)), why.detail
            if why:
                reason = Skip.ENGINE_BUSY
                self.turn.yielded[why] = self.turn.yielded.get(why, 0) + 1
                yielded_to = why
        if judged:
            if reason is None:
                outcome, label = "sent", "sent"
            elif reason is Skip.ENGINE_BUSY:
                outcome, label = "yielded", yielded_to
            else:
                outcome, label = "skipped", reason.value
            started = self._speech_started
            self.turn.record(
                Decision(
                    at_s=None if started is None else max(0.0, now - started),
                    words=stable_words,
                    outcome=outcome,
                    reason=label,
                    work_tokens=work,
                    estimate_s=figures.get("estimate_s"),
                    queue_s=queue_s,
                    time_left_s=figures.get("time_left_s"),
                    load_now=load_now,
                    detail=why_detail,
                )
            )
        if reason is None:
            self._in_flight = True
            self._in_flight_account = self.turn
            self._in_flight_sent_at = now
            self._in_flight_tokens = prompt_tokens or 0
            self._in_flight_load = load_now
            self._unsent = (self._sent_words, self._sent_tokens)
            self._sent_words = stable_words
            self._sent_tokens = prompt_tokens
            self.turn.prefills += 1
        else:
            self.turn.skipped[reason.value] = self.turn.skipped.get(reason.value, 0) + 1
        return reason

    def _size_rule(
        self, prompt_tokens: int, now: float, queue_s: float | None, free: bool = False
    ) -> tuple[Skip | None, dict[str, float | None]]:
        """The size rules: why not (or ``None``), and the speed rule's figures when judged."""
        config = self.config
        cacheable = config.cacheable(prompt_tokens)
        if cacheable == 0:
            return Skip.BELOW_MINIMUM, {}
        if prompt_tokens < self._not_caching_below:
            return Skip.NOT_CACHING, {}
        if self._sent_tokens is not None and cacheable <= config.cacheable(self._sent_tokens):
            return Skip.NO_NEW_BLOCK, {}
        if config.skip_unfinishable and self.speed.reuses_unfinished is not True:
            seconds = self.speed.seconds_for(max(0, prompt_tokens - self._known_cached))
            if seconds is not None:
                seconds += max(0.0, queue_s or 0.0)
            left = self.time_left(now)
            if free and seconds is not None and seconds > left:
                # Losing costs no one: plan for a long turn rather than the median one.
                left = self.time_left(now, config.idle_turn_quantile)
            figures = {"estimate_s": seconds, "time_left_s": left}
            if seconds is not None and seconds > left:
                return Skip.CANNOT_FINISH, figures
            return None, figures
        return None, {}

    def time_left(self, now: float, quantile: float = 0.5) -> float:
        """Seconds until the real request is likely to leave.

        The rest of the caller's turn (this session's median turn so far; before it has one,
        the median of the process's sessions' first turns, else of all their turns
        (:class:`CallerTurns`), else ``expected_turn_s``) plus ``dispatch_s``. ``quantile``
        plans for a longer (or shorter) turn than the median.
        """
        if self._turn_lengths:
            typical = low_quantile(list(self._turn_lengths), quantile)
        else:
            pooled = self.caller_turns.quantile(quantile, first=True)
            if pooled is None:
                pooled = self.caller_turns.quantile(quantile)
            typical = pooled if pooled is not None else self.config.expected_turn_s
        elapsed = now - self._speech_started if self._speech_started is not None else 0.0
        return max(0.0, typical - elapsed) + self.config.dispatch_s

    def finished(
        self,
        ok: bool,
        now: float,
        prompt_tokens: int = 0,
        cached_tokens: int | None = 0,
        load_after: int | None = None,
    ):
        """Record the end of the prefill in flight, in the account of the turn that sent it.

        Args:
            ok: Whether the provider answered it.
            now: Current time (s).
            prompt_tokens: Prompt tokens the provider reported.
            cached_tokens: Of those, tokens it read from its cache; ``None`` when its usage
                does not say (llama-cpp-python's server): then neither its speed nor whether
                it caches is judged from this prefill.
            load_after: Other requests on the engine as it ended (``None`` unknown): with the
                load it was sent into, its speed sample counts as idle only if the engine was
                idle at both ends (:func:`busiest`) — a request that joined it mid-way shared
                its compute.
        """
        account = self._in_flight_account or self.turn
        sent_at = self._in_flight_sent_at
        self._in_flight = False
        self._in_flight_account = None
        if not ok:
            self._prefix_pending = None  # a failed prefill is counted as failed
            if account is self.turn:  # it cached nothing: the next one counts from before it
                self._sent_words, self._sent_tokens = self._unsent
            account.prefill_failures += 1
            self._failures += 1
            exponent = min(self._failures - 1, 30)  # no overflow however long the outage
            pause = min(self.config.max_backoff_s, self.config.backoff_s * 2**exponent)
            self._blocked_until = now + pause
            return
        self._failures = 0
        account.prefill_prompt_tokens += prompt_tokens
        account.prefill_computed_tokens += max(0, prompt_tokens - (cached_tokens or 0))
        self._known_cached = max(self._known_cached, prompt_tokens)
        if cached_tokens is None:
            return
        self.speed.add(
            max(0, prompt_tokens - cached_tokens),
            max(0.0, now - sent_at),
            busiest(self._in_flight_load, load_after),
        )
        self._watch_caching(prompt_tokens, cached_tokens)

    def _watch_caching(self, prompt_tokens: int, cached_tokens: int) -> None:
        if cached_tokens > 0 or not self._had_success:
            self._had_success = True
            self._uncached_streak = 0
            self._streak_tokens = 0
            return
        # A repeat of a prefix the provider was just sent, and nothing came from its cache.
        self._uncached_streak += 1
        self._streak_tokens = max(self._streak_tokens, prompt_tokens)
        if self._uncached_streak >= self.config.uncached_alarm:
            # A prompt that grows well past these may cross a minimum we do not know.
            self._not_caching_below = int(self._streak_tokens * 1.5) + 1
            self._uncached_streak = 0
            self.not_caching_raised = True

    def cancelled(self, reason: str = "ended") -> None:
        """The prefill in flight was cancelled: counted by ``reason``, no backoff.

        Its words count as not sent (nothing of them is known to be cached), but no new
        prefill goes for the turn once its real request has left.
        """
        if not self._in_flight:
            return
        account = self._in_flight_account or self.turn
        self._in_flight = False
        self._in_flight_account = None
        account.prefill_cancelled += 1
        account.cancelled[reason] = account.cancelled.get(reason, 0) + 1
        self._prefix_pending = None  # counted as cancelled, not again as wasted
        if account is self.turn:
            self._sent_words, self._sent_tokens = self._unsent
        if self._overlapped_tokens:
            self._overlap_cancelled = True  # the real request cannot say whether it reads one

    def request_dispatched(self, now: float, load_now: int | None = None) -> None:
        """The real request for the turn left (the user aggregator pushed its context).

        ``load_now``: other requests on the engine as it left (``None`` unknown); its time to
        first token (:meth:`real_request`) is tagged with it.
        """
        self._dispatch_load = load_now
        self._real_pending = True
        self._prefix_pending = None  # a real request reads what the prefix prefill computed
        if self._in_flight:
            self._overlapped_tokens = self._in_flight_tokens
            self._overlapped_base = self._known_cached
            self._overlap_cancelled = False

    def real_request(
        self,
        prompt_tokens: int,
        cached_tokens: int | None,
        ttft_s: float | None,
        load_after: int | None = None,
    ) -> bool:
        """The provider's usage (and time to first token, if measured) of a real request.

        ``cached_tokens`` is ``None`` when the usage does not say: nothing is judged from it.
        ``load_after``: other requests on the engine when its usage came (``None`` unknown),
        for the idle tag as in :meth:`finished`.

        Returns:
            Whether its time measures the provider alone (it did not wait for a prefill of
            this session still running, and the usage says what was cached), so it can count
            as a speed or queueing sample.
        """
        load, self._dispatch_load = busiest(self._dispatch_load, load_after), None
        self._real_pending = False
        if cached_tokens is None:
            self._overlapped_tokens = 0
            self._known_cached = max(self._known_cached, prompt_tokens)
            return False
        uncached = max(0, prompt_tokens - cached_tokens)
        clean = not self._overlapped_tokens and ttft_s is not None
        base = self._overlapped_base
        if self._overlapped_tokens and not self._overlap_cancelled:
            # It left while a prefill was still running: did it read what the prefill was
            # computing beyond what the cache already held? (Its time then includes waiting
            # for the prefill: not a speed sample.) Judged only on a prefill with real work.
            new = self._overlapped_tokens - base
            if self.speed.reuses_unfinished is None and new >= self.speed.warm_tokens:
                self.speed.reuses_unfinished = cached_tokens - base >= new // 2
        elif not self._overlapped_tokens and ttft_s is not None:
            self.speed.add(uncached, ttft_s, load)
        self._overlapped_tokens = 0
        self._overlap_cancelled = False
        self._known_cached = max(self._known_cached, prompt_tokens)
        return clean

    def real_request_ended(self) -> None:
        """The real request's response ended (or was interrupted) without usage being seen."""
        self._real_pending = False

    def prefix_cached(self, tokens: int) -> None:
        """The provider's cache is known to hold the prompt's first ``tokens``.

        A session warmup committed them: the speech-start prefix does not go again.
        """
        self._known_cached = max(self._known_cached, int(tokens))

    def prefix_changed(self) -> None:
        """The context no longer starts with what the cache is known to hold (a reset).

        What the planner knew cached is dropped (the next prefill is judged cold again), and a
        prefix prefill no real request read yet counts as wasted (``changed``).
        """
        self._known_cached = 0
        self._overlapped_base = 0
        if not self._in_flight:
            self._sent_tokens = None
        self._waste_prefix("changed")

    def session_ended(self) -> None:
        """The session ended: a prefix prefill no real request followed counts as wasted.

        ``unused``: the caller started speaking and never had a turn sent.
        """
        self._waste_prefix("unused")

    def _waste_prefix(self, why: str) -> None:
        account, self._prefix_pending = self._prefix_pending, None
        if account is not None:
            account.prefix_wasted[why] = account.prefix_wasted.get(why, 0) + 1

    def caller_silent(self, now: float | None = None, stop_secs: float = 0.0) -> None:
        """The VAD reports the caller stopped speaking (``stop_secs`` after their last word)."""
        self._silent = True
        if now is not None and self._speech_started is not None:
            length = now - stop_secs - self._speech_started
            if length > 0:
                self.caller_turns.add(length, first=not self._turn_lengths)
                self._turn_lengths.append(length)
        self._speech_started = None

    def caller_speaking(self, now: float | None = None) -> None:
        """The VAD reports the caller speaking (again)."""
        self._silent = False
        if now is not None and self._speech_started is None:
            self._speech_started = now

    def end_turn(self) -> TurnAccount:
        """Close the turn: no more prefills for it; returns its account and starts a new one.

        The VAD state carries over: a short reply ("Yes") can reach the stabiliser only with its
        final, after the VAD stop, and must not send a prefill then.
        """
        account, self.turn = self.turn, TurnAccount()
        self._turn_over = False
        self._sent_words = 0
        self._sent_tokens = None
        return account

    def stop_turn(self) -> None:
        """No new prefill for this turn (the real request is on its way)."""
        self._turn_over = True
