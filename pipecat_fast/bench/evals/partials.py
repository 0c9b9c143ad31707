"""``pipecat-fast bench partials``: prefill tokens re-read on real ASR partial sequences.

For each rule (every partial, the two-update rule, the three-update rule) a prefill is sent
whenever the text the rule passes on changes; each prefill reads the tokens after the common
token prefix with the previous one (what a prefix/KV cache can keep). The useful tokens are
those of the final transcript; everything else was read and thrown away. The same table is
computed on the revising interims the STT emulator replays for the shipped bench calls
(:mod:`pipecat_fast.testing.revisions`), to show the replay has the real structure.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipecat_fast.stabilizer.core import PartialStabilizer, common_prefix_len
from pipecat_fast.testing.profiles import SAME_REGION
from pipecat_fast.testing.revisions import (
    DEFAULT_PARTIALS_PATH,
    fit_revision_model,
    load_partial_sequences,
)
from pipecat_fast.textnorm import normalize_words
from pipecat_fast.tokens import count_tokens

DEFAULT_RULES = (1, 2, 3)


@dataclass(frozen=True)
class TimedSequence:
    """Interims of one utterance and its final.

    Parameters:
        name: Where it came from.
        partials: ``(s, text)`` interims in order.
        final: The final transcript.
        final_s: When the final is available (s, same clock as the partials).
    """

    name: str
    partials: tuple[tuple[float, str], ...]
    final: str
    final_s: float


@dataclass
class RuleResult:
    """One rule over a set of sequences. Token counts are o200k_base.

    Parameters:
        updates: The rule's N (1 passes every partial on).
        sequences: Sequences run.
        prefills: Prefills sent (changes of the passed-on text, the final included).
        tokens_sent: Tokens those prefills read, each after the common token prefix with the
            previous prefill.
        useful_tokens: Tokens of the final transcripts (what stock reads at end of turn).
        reread_at_final_tokens: Of the re-read tokens, those the final threw away (the
            final rewrote text the rule had passed on); the rest went on interims.
        retracted_words: Passed-on words later withdrawn.
        words: Words in the final transcripts.
        words_ready_early: Final words the rule had passed on for good before the final.
        lag_s: Sum over final words of how much later (s) than with every partial the word
            was passed on for good.
    """

    updates: int
    sequences: int = 0
    prefills: int = 0
    tokens_sent: int = 0
    useful_tokens: int = 0
    reread_at_final_tokens: int = 0
    retracted_words: int = 0
    words: int = 0
    words_ready_early: int = 0
    lag_s: float = 0.0
    per_sequence: list[dict] = field(default_factory=list)

    @property
    def reread_tokens(self) -> int:
        """Tokens read for nothing: sent minus useful."""
        return self.tokens_sent - self.useful_tokens

    @property
    def reread_pct(self) -> float:
        """Re-read tokens as a share of the tokens sent (%)."""
        return 100.0 * self.reread_tokens / self.tokens_sent if self.tokens_sent else 0.0

    @property
    def extra_pct(self) -> float:
        """Re-read tokens as extra prefill compute over stock's useful tokens (%)."""
        return 100.0 * self.reread_tokens / self.useful_tokens if self.useful_tokens else 0.0

    @property
    def mean_lag_s(self) -> float:
        """Mean per-word delay (s) against passing every partial on."""
        return self.lag_s / self.words if self.words else 0.0

    def to_dict(self) -> dict:
        """JSON-ready dict, derived figures included."""
        d = asdict(self)
        d.update(
            reread_tokens=self.reread_tokens,
            reread_pct=round(self.reread_pct, 2),
            extra_pct=round(self.extra_pct, 2),
            mean_lag_s=round(self.mean_lag_s, 4),
        )
        return d


def ready_times(seq: TimedSequence, updates: int) -> tuple[list[float], PartialStabilizer, int]:
    """When each final word was passed on for good under the N-update rule.

    Returns:
        Per final word, the time (s) from which the passed-on prefix held the final's words
        up to it and kept them; the stabiliser, whose ``turn`` counters hold the run; and
        the tokens the final itself threw away (its rewrite of the passed-on text).
    """
    stab = PartialStabilizer(updates)
    target = normalize_words(seq.final)
    ready: list[float | None] = [None] * len(target)

    def mark(t: float, text: str) -> None:
        k = common_prefix_len(normalize_words(text), target)
        for i in range(len(target)):
            if i >= k:
                ready[i] = None
            elif ready[i] is None:
                ready[i] = t

    for t, text in seq.partials:
        update = stab.feed(text, at=t)
        if update.counted:
            mark(t, update.text)
    last = stab.feed(seq.final, final=True, at=seq.final_s)
    mark(seq.final_s, last.text)
    return [seq.final_s if r is None else r for r in ready], stab, last.wasted_tokens


def evaluate(sequences: Sequence[TimedSequence], rules: Iterable[int] = DEFAULT_RULES) -> list:
    """The waste table: one :class:`RuleResult` per rule, lag measured against N=1."""
    rules = list(rules)
    baseline = [ready_times(s, 1)[0] for s in sequences]
    results = []
    for n in rules:
        result = RuleResult(updates=n)
        for seq, base in zip(sequences, baseline, strict=True):
            ready, stab, at_final = ready_times(seq, n)
            c = stab.turn
            useful = count_tokens(seq.final)
            lag = sum(r - b for r, b in zip(ready, base, strict=True))
            early = sum(r < seq.final_s for r in ready)
            result.sequences += 1
            result.prefills += c.stable_changes
            result.tokens_sent += c.prefill_tokens
            result.useful_tokens += useful
            result.reread_at_final_tokens += at_final
            result.retracted_words += c.retracted_words
            result.words += len(ready)
            result.words_ready_early += early
            result.lag_s += lag
            result.per_sequence.append(
                {
                    "name": seq.name,
                    "prefills": c.stable_changes,
                    "tokens_sent": c.prefill_tokens,
                    "useful_tokens": useful,
                    "reread_at_final_tokens": at_final,
                    "retracted_words": c.retracted_words,
                    "words": len(ready),
                    "words_ready_early": early,
                    "lag_s": round(lag, 4),
                }
            )
        results.append(result)
    return results


def real_sequences(path: str | Path = DEFAULT_PARTIALS_PATH) -> list[TimedSequence]:
    """The shared pocketsphinx sequences.

    The data has no time for the final: it counts as ready one chunk after the last partial.
    """
    return [
        TimedSequence(s.name, s.partials, s.final, round(s.partials[-1][0] + s.chunk_s, 6))
        for s in load_partial_sequences(path)
        if s.partials
    ]


def replay_sequences(interval_s: float, seeds: int = 5) -> list[TimedSequence]:
    """Revising interims replayed onto every utterance of the shipped bench calls.

    The final counts as ready at the end of speech.
    """
    from pipecat_fast.bench.material import bench_calls
    from pipecat_fast.testing.revisions import revising_partials

    out = []
    for call in bench_calls():
        for i, utterance in enumerate(call.stt_script):
            for seed in range(seeds):
                partials = revising_partials(utterance, interval_s, seed=seed)
                # The last partial is the true words, sent with the final: not an interim.
                out.append(
                    TimedSequence(
                        f"{call.id}/{i}/seed{seed}",
                        tuple(partials[:-1]),
                        utterance.text,
                        utterance.duration_s,
                    )
                )
    return out


def structure(sequences: Sequence[TimedSequence]) -> dict:
    """Revision structure of interim sequences (the revision model's counts)."""
    m = fit_revision_model(s.partials for s in sequences)
    revisions = m.revisions or 1
    return {
        "sequences": m.sequences,
        "updates": m.updates,
        "revision_rate": round(m.revision_rate, 3),
        "mean_words_touched": round(sum(k * v for k, v in m.touched.items()) / revisions, 2),
        "shown_2_plus_pct": round(
            100.0 * sum(v for k, v in m.persistence.items() if k >= 2) / revisions, 1
        ),
        "shrink_pct": round(100.0 * m.split_rate, 1),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``pipecat-fast bench partials``."""
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_PARTIALS_PATH, help="partial sequences jsonl"
    )
    parser.add_argument("--rules", default="1,2,3", help="comma-separated N of the N-update rule")
    parser.add_argument(
        "--interval-ms",
        type=float,
        default=SAME_REGION.stt_interim_interval_ms,
        help="interim interval of the replayed sequences (ms of audio)",
    )
    parser.add_argument("--seeds", type=int, default=5, help="replays per bench utterance")
    parser.add_argument("--no-replay", action="store_true", help="only the real sequences")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")


def _table(title: str, results: list[RuleResult]):
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for name in ("rule", "prefills", "tokens sent", "useful", "re-read", "at final", "re-read %"):
        table.add_column(name, justify="right")
    for name in ("extra %", "retracted", "lag s", "ready early %"):
        table.add_column(name, justify="right")
    for r in results:
        label = "every partial" if r.updates == 1 else f"{r.updates}-update"
        table.add_row(
            label,
            str(r.prefills),
            str(r.tokens_sent),
            str(r.useful_tokens),
            str(r.reread_tokens),
            str(r.reread_at_final_tokens),
            f"{r.reread_pct:.1f}",
            f"{r.extra_pct:.1f}",
            str(r.retracted_words),
            f"{r.mean_lag_s:.3f}",
            f"{100.0 * r.words_ready_early / r.words:.1f}" if r.words else "-",
        )
    return table


def run(args: argparse.Namespace) -> int:
    """Print the waste tables (rich) and optionally write them as JSON; returns the exit code."""
    from rich.console import Console

    console = Console(width=None if Console().is_terminal else 132)
    try:
        rules = [int(x) for x in str(args.rules).split(",") if x.strip()]
        if not rules or min(rules) < 1:
            raise ValueError
    except ValueError:
        console.print(f"[red]--rules must be integers >= 1, got {args.rules!r}[/red]")
        return 2
    if args.seeds < 1 or args.interval_ms <= 0:
        console.print("[red]--seeds must be >= 1 and --interval-ms > 0[/red]")
        return 2
    report: dict = {"token_encoding": "o200k_base", "rules": rules}
    if Path(args.data).is_file():
        try:
            real = real_sequences(args.data)
        except ValueError as e:
            console.print(f"[red]{e}[/red]")
            return 2
        results = evaluate(real, rules)
        console.print(_table(f"Real partials: {len(real)} pocketsphinx sequences", results))
        report["real"] = {
            "source": str(args.data),
            "structure": structure(real),
            "results": [r.to_dict() for r in results],
        }
    else:
        console.print(f"[yellow]no partial sequences at {args.data}; real table skipped[/yellow]")
    if not args.no_replay:
        replay = replay_sequences(args.interval_ms / 1000.0, args.seeds)
        results = evaluate(replay, rules)
        title = (
            f"Replayed revisions: {len(replay)} sequences (bench utterances x {args.seeds} seeds, "
            f"{args.interval_ms:.0f} ms interims)"
        )
        console.print(_table(title, results))
        report["replay"] = {
            "interval_ms": args.interval_ms,
            "seeds": args.seeds,
            "structure": structure(replay),
            "results": [r.to_dict() for r in results],
        }
    if "real" in report and "replay" in report:
        console.print(_structure_table(report["real"]["structure"], report["replay"]["structure"]))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        console.print(f"wrote {args.out}")
    return 0


def _structure_table(real: dict, replay: dict):
    from rich.table import Table

    table = Table(title="Revision structure: real vs replayed", title_justify="left")
    table.add_column("")
    for key in real:
        table.add_column(key.replace("_", " "), justify="right")
    table.add_row("real", *(str(v) for v in real.values()))
    table.add_row("replayed", *(str(v) for v in replay.values()))
    return table
