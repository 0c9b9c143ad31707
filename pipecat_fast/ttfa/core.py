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

:class:`TurnTracker` is the meter's state machine: plain events, each with the time it happened
(the moment its frame was pushed, on one clock), in; turn records out.
:class:`~pipecat_fast.ttfa.observer.TTFAObserver` only translates Pipecat frames into these
events. Nothing here imports Pipecat.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

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
        extra: Lever accounting (e.g. the speculation outcome), JSON-serializable, flattened
            into :meth:`to_dict`; levers write it with a ``TTFAAnnotationFrame``.
        cache_write_tokens: Prompt tokens written to the provider's prefix cache by that
            request (``LLMTokenUsage.cache_creation_input_tokens``); None when not reported.
    """

    turn: int
    user_stopped_at: float
    marks: dict[str, float] = field(default_factory=dict)
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    cache_write_tokens: int | None = None

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
            ``turn, ttfa_ms, stages_ms, marks_ms, prompt_tokens, cached_tokens,
            cache_write_tokens`` plus the ``extra`` fields; times in ms rounded to 0.1 ms.
        """
        ttfa = self.ttfa_ms
        return {
            "turn": self.turn,
            "ttfa_ms": None if ttfa is None else round(ttfa, 1),
            "stages_ms": {k: round(v, 1) for k, v in self.stages_ms().items()},
            "marks_ms": {k: round(v, 1) for k, v in self.marks_ms().items()},
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
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


# -- lever accounting ------------------------------------------------------------------------

AnnotationTarget = Literal["current", "next", "session"]
ANNOTATION_TARGETS: tuple[str, ...] = ("current", "next", "session")


def check_accounting(fields: Any, add: Any, target: Any) -> None:
    """Raise a clear error for malformed lever accounting (see :meth:`TurnTracker.annotate`).

    Raises:
        TypeError: ``fields``/``add`` not dicts with string keys, or an ``add`` value that is
            not a number.
        ValueError: An unknown ``target``.
    """
    for name, value in (("fields", fields), ("add", add)):
        if not isinstance(value, dict):
            raise TypeError(f"TTFA annotation {name} must be a dict, got {type(value).__name__}")
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"TTFA annotation {name} keys must be strings, got {key!r}")
    for key, value in add.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(
                f"TTFA annotation add[{key!r}] must be a number to add up, "
                f"got {type(value).__name__}"
            )
    if target not in ANNOTATION_TARGETS:
        raise ValueError(
            f"TTFA annotation target must be one of {', '.join(ANNOTATION_TARGETS)}; got {target!r}"
        )


def merge_accounting(
    into: dict[str, Any], fields: Mapping[str, Any], add: Mapping[str, float]
) -> None:
    """Set ``fields`` on ``into`` and add ``add`` to its values (a missing key starts at 0)."""
    into.update(fields)
    for key, value in add.items():
        into[key] = into.get(key, 0) + value


# -- the turn state machine ------------------------------------------------------------------


class TurnTracker:
    """Turns pipeline events into turn records: the TTFA meter's state machine.

    Every event carries ``at``, the time it happened in seconds, all on one clock (the observer
    uses the push time of the frame behind the event). Events must come in the order they
    happened. A turn *opens* when the VAD reports the caller stopped (``user_stopped``), is
    *confirmed* by the turn detector (``turn_confirmed``), and is *answered* by the first bot
    audio (``first_audio_out``). Marks of stages that come later in a reply only count once the
    turn's LLM request was seen, so leftovers of the previous reply (its TTS audio) never mark
    a new turn. A caller who speaks again before any bot audio either ends a pause (the turn
    was not confirmed: no record) or leaves a confirmed turn unanswered.

    A reply may start before its turn opens: a draft started at a pause inside the VAD's stop
    window, with its first audio synthesized ahead (the ``eot`` levers). An LLM request while
    the caller is in their turn (after the VAD heard them, before it stopped) is remembered, with
    the TTS marks after it, and carried into the turn the VAD's stop opens; speech again
    forgets them. A later request replaces the turn's request and drops the TTS marks of the
    one it replaces (they belonged to a withdrawn draft).

    Attributes:
        turns: Answered turns, in order.
        unanswered: Confirmed turns that got no bot audio before the caller spoke again or the
            session ended (:meth:`close`).
        session: Session-wide lever accounting (``target="session"``).
    """

    def __init__(self) -> None:
        self.turns: list[TurnRecord] = []
        self.unanswered: list[TurnRecord] = []
        self.session: dict[str, Any] = {}
        self._open: TurnRecord | None = None  # caller stopped, no bot audio yet
        self._last: TurnRecord | None = None  # closed last, answered or not (late accounting)
        self._final_at: float | None = None  # last final transcript of the caller's turn
        self._index = 0
        self._usage_pending = False
        self._next_fields: dict[str, Any] = {}
        self._next_add: dict[str, float] = {}
        self._in_speech = False  # the VAD heard the caller and has not stopped yet
        self._early: dict[str, float] = {}  # a reply's marks from before its turn opened

    @property
    def open_turn(self) -> TurnRecord | None:
        """The turn whose caller stopped and that has no bot audio yet, if any."""
        return self._open

    # -- the caller ------------------------------------------------------------------------

    def user_started(self) -> TurnRecord | None:
        """The VAD heard the caller start speaking.

        Returns:
            The open turn if it was confirmed and is now unanswered, else None (an open but
            unconfirmed turn was only a pause and is dropped).
        """
        closed = self._close_open_unanswered()
        self._open = None
        self._in_speech = True
        self._early = {}
        return closed

    def user_stopped(self, at: float, stop_secs: float) -> None:
        """The VAD decided the caller stopped, ``stop_secs`` of silence after they did."""
        self._close_open_unanswered()
        marks = {"vad_stopped": at}
        # A fast STT finalizes inside the VAD's silence window, before the turn opens.
        if self._final_at is not None:
            marks["final_transcript"] = self._final_at
        # A reply drafted at a pause inside that window started before the turn opened.
        early = self._early if "llm_request" in self._early else {}
        marks.update(early)
        self._in_speech, self._early = False, {}
        record = TurnRecord(turn=self._index, user_stopped_at=at - stop_secs, marks=marks)
        if self._next_fields or self._next_add:
            merge_accounting(record.extra, self._next_fields, self._next_add)
            self._next_fields, self._next_add = {}, {}
        self._open = record
        self._usage_pending = bool(early)

    def final_transcript(self, at: float) -> None:
        """A final transcript (the last one before confirmation is the one the turn waited for)."""
        if self._open is None:
            self._final_at = at
        elif "turn_confirmed" not in self._open.marks:
            self._open.marks["final_transcript"] = at
            self._final_at = at

    def turn_confirmed(self, at: float) -> None:
        """The turn detector confirmed the end of the caller's turn."""
        self._mark_once("turn_confirmed", at)

    # -- the reply -------------------------------------------------------------------------

    def llm_request(self, at: float) -> None:
        """A context reached the LLM; the latest one before the first token answers the turn.

        An earlier request (a discarded speculative one) is replaced, with the TTS marks it
        made. A request before the turn opens (see the class docstring) is remembered for it.
        """
        if self._open is not None and "llm_first_token" not in self._open.marks:
            self._open.marks["llm_request"] = at
            self._open.marks.pop("tts_text", None)
            self._open.marks.pop("tts_first_byte", None)
            self._usage_pending = True
        elif self._open is None and self._in_speech:
            self._early = {"llm_request": at}

    def llm_first_token(self, at: float) -> None:
        """The LLM pushed text."""
        self._mark_after("llm_first_token", at)

    def tts_text(self, at: float) -> None:
        """The TTS got (or announced) text to speak."""
        self._mark_after("tts_text", at)

    def tts_first_byte(self, at: float) -> None:
        """The TTS pushed audio."""
        self._mark_after("tts_first_byte", at)

    def first_audio_out(self, at: float) -> TurnRecord | None:
        """The output transport started playing bot audio.

        Returns:
            The turn this answered, or None (no open turn, or no LLM request seen for it).
        """
        record = self._open
        if record is None or "llm_request" not in record.marks:
            return None
        record.marks["first_audio_out"] = at
        self._final_at = None
        self.turns.append(record)
        self._last = record
        self._open = None
        self._index += 1
        return record

    def llm_usage(
        self,
        prompt_tokens: int | None,
        cached_tokens: int | None,
        cache_write_tokens: int | None = None,
    ) -> TurnRecord | None:
        """Token usage an LLM reported; the first after the turn's request is that request's.

        Usage usually arrives after the first audio, so it lands on the turn closed last when
        no turn is open.

        Returns:
            The turn it was attributed to, or None (no request waiting for its usage).
        """
        if not self._usage_pending:
            return None
        target = self._open if self._open is not None else self._last
        if target is None:
            return None
        target.prompt_tokens = prompt_tokens
        target.cached_tokens = cached_tokens
        target.cache_write_tokens = cache_write_tokens
        self._usage_pending = False
        return target

    # -- accounting and the end ------------------------------------------------------------

    def annotate(
        self,
        fields: dict[str, Any] | None = None,
        add: dict[str, float] | None = None,
        target: AnnotationTarget = "current",
    ) -> None:
        """Attach lever accounting (see :class:`pipecat_fast.frames.TTFAAnnotationFrame`).

        Args:
            fields: Values to set (a later value replaces an earlier one).
            add: Numbers to add to the values of the same keys.
            target: ``"current"``: the open turn, else the turn closed last, else the first
                turn to open; ``"next"``: the next turn to open; ``"session"``: :attr:`session`.

        Raises:
            TypeError, ValueError: Malformed accounting (see :func:`check_accounting`).
        """
        fields = {} if fields is None else fields
        add = {} if add is None else add
        check_accounting(fields, add, target)
        if target == "session":
            merge_accounting(self.session, fields, add)
            return
        record = None
        if target == "current":
            record = self._open if self._open is not None else self._last
        if record is not None:
            merge_accounting(record.extra, fields, add)
        else:
            self._next_fields.update(fields)
            for key, value in add.items():
                self._next_add[key] = self._next_add.get(key, 0) + value

    def close(self) -> TurnRecord | None:
        """The session ended: a turn still open is unanswered, confirmed or not.

        Returns:
            That turn, or None.
        """
        record = self._open
        if record is not None:
            self.unanswered.append(record)
            self._last = record
            self._open = None
        return record

    # -- helpers ---------------------------------------------------------------------------

    def _close_open_unanswered(self) -> TurnRecord | None:
        record = self._open
        if record is None or "turn_confirmed" not in record.marks:
            return None
        self.unanswered.append(record)
        self._last = record
        self._index += 1
        # A final from before an unanswered turn must not mark the next one.
        self._final_at = None
        self._open = None
        return record

    def _mark_once(self, mark: str, at: float) -> None:
        if self._open is not None and mark not in self._open.marks:
            self._open.marks[mark] = at

    def _mark_after(self, mark: str, at: float) -> None:
        # Leftovers of the previous reply (its TTS audio, say) must not mark this turn.
        if self._open is not None and "llm_request" in self._open.marks:
            self._mark_once(mark, at)
        elif self._open is None and "llm_request" in self._early:
            self._early.setdefault(mark, at)
