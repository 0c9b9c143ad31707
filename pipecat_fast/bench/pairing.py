"""Which scripted utterance each measured turn answers, and ratios over the same turns.

Pure: plain values in (times in s on one clock, TTFA in ms), decisions out; no frames, no clock.

Two jobs:

1. :func:`match_turns` ties the TTFA meter's records of one call to the call's scripted
   utterances, using what the caller did (when each utterance started, where its speech ended,
   where it paused on purpose) and when the caller heard bot audio start. The answer to
   utterance ``k`` is the first record whose first audio comes after the caller's real end of
   speech and before utterance ``k + 1``; bot audio that starts inside a scripted mid-utterance
   pause is a *false cut-off*; bot audio that starts while the caller is speaking anywhere else
   is *talked over* (the bench's calls never ask for it: it is a finding).
2. :func:`paired_summary` compares configurations on the same turns: a turn is keyed by
   ``(slot, call, repeat, turn)`` (the call's position in the run, its id, the repetition, the
   scripted utterance), and p50/p95 are taken over the turns *every* configuration answered.
   Turns some configurations answered and others did not are listed apart: that difference is
   a finding, not noise. Deliberately paused turns are reported apart from TTFA too, with each
   configuration's false cut-offs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipecat_fast.ttfa.core import TurnRecord, percentile


@dataclass(frozen=True)
class UtteranceSpan:
    """What the caller did for one scripted utterance (s, one clock).

    Attributes:
        index: The scripted utterance (0-based turn index).
        started: When its audio started playing.
        speech_end: The caller's real end of speech (file start + ``speech_end_ms``).
        pauses: The deliberate mid-utterance pauses, as ``(start, end)``.
        next_started: When the next utterance started; ``None`` for the last one.
    """

    index: int
    started: float
    speech_end: float
    pauses: tuple[tuple[float, float], ...] = ()
    next_started: float | None = None


@dataclass
class TurnOutcome:
    """What happened to one scripted utterance in one call.

    Attributes:
        index: The scripted utterance.
        record: The TTFA record of the reply after the caller's real end of speech, or None.
        false_cutoffs: Deliberate pauses the pipeline took for the end of the turn: bot audio
            started after the pause began and before the caller's real end of speech.
        talked_over: Bot audio starts while the caller was speaking outside any pause.
        deliberate_pause: Whether the script pauses mid-utterance on purpose.
    """

    index: int
    record: TurnRecord | None = None
    false_cutoffs: int = 0
    talked_over: int = 0
    deliberate_pause: bool = False

    @property
    def answered(self) -> bool:
        """Whether the caller heard a reply after its real end of speech."""
        return self.record is not None


def match_turns(
    spans: Sequence[UtteranceSpan],
    records: Iterable[TurnRecord],
    bot_starts: Iterable[float],
) -> list[TurnOutcome]:
    """Tie a call's TTFA records and bot audio starts to its scripted utterances.

    Args:
        spans: The caller's utterances, in order.
        records: The TTFA meter's answered records (``first_audio_out`` marked), any order.
        bot_starts: When the caller heard bot audio start (s, the spans' clock).

    Returns:
        One outcome per span, in order; each matched record's ``turn`` is set to the
        scripted utterance's index. A record that answers no utterance (bot audio inside an
        utterance, i.e. a false cut-off or a talk-over) is not returned.
    """
    answered = sorted((r for r in records if r.complete), key=lambda r: r.marks["first_audio_out"])
    starts = sorted(bot_starts)
    outcomes = []
    used: set[int] = set()
    for span in spans:
        outcome = TurnOutcome(span.index, deliberate_pause=bool(span.pauses))
        horizon = span.next_started if span.next_started is not None else float("inf")
        # The zero of a real answer is the real end of speech, never a pause inside it.
        earliest_zero = span.pauses[-1][1] if span.pauses else span.started
        for i, record in enumerate(answered):
            out = record.marks["first_audio_out"]
            if i in used or not span.speech_end <= out < horizon:
                continue
            if record.user_stopped_at < earliest_zero:
                continue
            used.add(i)
            record.turn = span.index
            outcome.record = record
            break
        cut_pauses: set[int] = set()
        for at in starts:
            if not span.started <= at < span.speech_end:
                continue
            # After a pause began, bot audio before the real end can only come from the
            # pipeline taking that pause for the end of the turn (however late it started).
            before = [j for j, (a, _b) in enumerate(span.pauses) if a <= at]
            if before:
                cut_pauses.add(before[-1])
            else:
                outcome.talked_over += 1
        outcome.false_cutoffs = len(cut_pauses)
        outcomes.append(outcome)
    return outcomes


TurnKey = tuple[int, str, int, int]
"""``(slot, call, repeat, turn)``: one scripted utterance of one call of the run."""


def turn_key(row: Mapping[str, Any]) -> TurnKey:
    """The key of a report row (``slot``, ``call``, ``repeat``, ``turn``)."""
    return (int(row.get("slot", 0)), str(row["call"]), int(row.get("repeat", 0)), int(row["turn"]))


def _stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"ttfa_p50_ms": None, "ttfa_p95_ms": None}
    return {
        "ttfa_p50_ms": round(percentile(values, 50), 1),
        "ttfa_p95_ms": round(percentile(values, 95), 1),
    }


def _ratio(value: float | None, base: float | None) -> float | None:
    return round(value / base, 3) if value is not None and base else None


def paired_summary(
    rows: Sequence[Mapping[str, Any]], configs: Sequence[str], baseline: str
) -> dict[str, Any]:
    """p50/p95 TTFA and ratios over the turns every configuration answered.

    Args:
        rows: One row per scripted turn per configuration: ``config``, ``slot``, ``call``,
            ``repeat``, ``turn``, ``ttfa_ms`` (None when unanswered), ``deliberate_pause``,
            ``false_cutoffs``.
        configs: The configurations compared, baseline included.
        baseline: The configuration ratios are taken to.

    Returns:
        ``{"n_scripted", "n_paired", "configs": {config: {"ttfa_p50_ms", "ttfa_p95_ms"}},
        "ratios": {config: {"p50", "p95"}}, "unanswered": {config: [key, ...]},
        "answer_differences": [{"key", "answered_by", "unanswered_by"}],
        "paused": {"n_turns", "n_paired", "false_cutoffs": {config: n},
        "configs": {config: {"ttfa_p50_ms", "ttfa_p95_ms"}}}}``; keys as
        ``"slot/call/repeat/turn"`` strings.
    """
    by_key: dict[TurnKey, dict[str, Mapping[str, Any]]] = {}
    paused_keys: set[TurnKey] = set()
    for row in rows:
        key = turn_key(row)
        by_key.setdefault(key, {})[row["config"]] = row
        if row.get("deliberate_pause"):
            paused_keys.add(key)

    def answered(key: TurnKey, config: str) -> bool:
        row = by_key[key].get(config)
        return row is not None and row.get("ttfa_ms") is not None

    keys = sorted(by_key)
    clean = [k for k in keys if k not in paused_keys]
    paired = [k for k in clean if all(answered(k, c) for c in configs)]
    paused = [k for k in keys if k in paused_keys]
    paused_paired = [k for k in paused if all(answered(k, c) for c in configs)]

    def stats_over(subset: list[TurnKey]) -> dict[str, dict[str, float | None]]:
        return {c: _stats([by_key[k][c]["ttfa_ms"] for k in subset]) for c in configs}

    summary = stats_over(paired)
    base = summary.get(baseline, {})
    ratios = {
        c: {q: _ratio(s[f"ttfa_{q}_ms"], base.get(f"ttfa_{q}_ms")) for q in ("p50", "p95")}
        for c, s in summary.items()
    }
    differences = []
    for key in keys:
        yes = [c for c in configs if answered(key, c)]
        if yes and len(yes) < len(configs):
            differences.append(
                {
                    "key": key_name(key),
                    "answered_by": yes,
                    "unanswered_by": [c for c in configs if c not in yes],
                }
            )
    return {
        "n_scripted": len(clean),
        "n_paired": len(paired),
        "configs": summary,
        "ratios": ratios,
        "unanswered": {c: [key_name(k) for k in keys if not answered(k, c)] for c in configs},
        "answer_differences": differences,
        "paused": {
            "n_turns": len(paused),
            "n_paired": len(paused_paired),
            "false_cutoffs": {
                c: sum(int(by_key[k].get(c, {}).get("false_cutoffs", 0)) for k in paused)
                for c in configs
            },
            "configs": stats_over(paused_paired),
        },
    }


def key_name(key: TurnKey) -> str:
    """``"slot/call/repeat/turn"``, e.g. ``"0/book_cleaning/0/3"``."""
    return "/".join(str(part) for part in key)
