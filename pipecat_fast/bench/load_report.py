"""The load bench's figures: per configuration and K, from the episodes' raw records.

Pure functions over plain rows (no I/O but :func:`plot`): TTFA of the full pipelines' turns
(ratios to ``stock`` over the turns both answered at the same K, round and caller position),
the background callers' reply latency, the engine's queue time and computed prompt tokens from
the metering proxy's records, what share of the requests and tokens were speculative, and how
often the levers yielded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pipecat_fast.bench.pairing import paired_summary
from pipecat_fast.ttfa.core import percentile

BASELINE = "stock"


def _q(values: Sequence[float], q: float) -> float | None:
    return round(percentile(values, q), 1) if values else None


def is_prefill(record: dict[str, Any]) -> bool:
    """A prefill-only request (``max_tokens`` 1, not streamed)."""
    return not record.get("stream") and record.get("max_tokens") == 1


def is_real(record: dict[str, Any]) -> bool:
    """A streamed request the client read to its end: a turn's answer (a reused draft too)."""
    return bool(record.get("stream")) and not record.get("cancelled")


def computed(record: dict[str, Any]) -> int:
    """Prompt tokens the engine computed for a request (not read from its cache)."""
    return max(0, int(record.get("prompt_tokens") or 0) - int(record.get("cached_tokens") or 0))


def engine_figures(requests: Sequence[dict[str, Any]], answered_turns: int) -> dict[str, Any]:
    """Queue time, compute and speculative share of one group of requests.

    Args:
        requests: The metering proxy's records.
        answered_turns: Turns answered (full pipelines and background callers) in the group.
    """
    real = [r for r in requests if is_real(r)]
    spec = [r for r in requests if is_prefill(r) or (r.get("stream") and r.get("cancelled"))]
    queue = [r["queue_ms"] for r in real if r.get("queue_ms") is not None]
    ttft = [r["ttft_ms"] for r in real if r.get("ttft_ms") is not None]
    total = sum(computed(r) for r in requests)
    spec_tokens = sum(computed(r) for r in spec)
    return {
        "requests": len(requests),
        "speculative_requests": len(spec),
        "speculative_share": round(len(spec) / len(requests), 3) if requests else None,
        "computed_tokens": total,
        "speculative_token_share": round(spec_tokens / total, 3) if total else None,
        "computed_per_turn": round(total / answered_turns, 1) if answered_turns else None,
        "queue_p50_ms": _q(queue, 50),
        "queue_p95_ms": _q(queue, 95),
        "engine_ttft_p50_ms": _q(ttft, 50),
        "engine_ttft_p95_ms": _q(ttft, 95),
        "failed": sum(1 for r in requests if r.get("status") not in (200, 0)),
    }


def summarize_load(
    turns: Sequence[dict[str, Any]],
    background: Sequence[dict[str, Any]],
    requests: Sequence[dict[str, Any]],
    episodes: Sequence[dict[str, Any]],
    configs: Sequence[str],
    ks: Sequence[int],
) -> dict[str, Any]:
    """The table: ``{config: {K: figures}}`` (K as a string key, JSON-friendly).

    Args:
        turns: Full-pipeline turn rows (``config``, ``k``, ``slot`` = caller position,
            ``call``, ``repeat`` = round, ``turn``, ``ttfa_ms``, ``deliberate_pause``...).
        background: Background callers' turns (``config``, ``k``, ``reply_ms``, ``ttft_ms``,
            ``prefills``, ``prefills_yielded``, ``drafts``, ``drafts_yielded``,
            ``prefills_cancelled`` by reason).
        requests: Metering-proxy records with ``config`` and ``k``.
        episodes: Per-episode monitors (``config``, ``k``, ``engine_busy``, ``waiting_mean``,
            ``bench_cpu``, ``loop_lag_p95_ms``, ``engine_cpu``).
        configs: The configurations, ``stock`` first.
        ks: The caller counts.
    """
    table: dict[str, dict[str, Any]] = {c: {} for c in configs}
    for k in ks:
        rows_k = [t for t in turns if t["k"] == k]
        paired = {
            c: paired_summary(
                [t for t in rows_k if t["config"] in (BASELINE, c)], [BASELINE, c], BASELINE
            )
            for c in configs
        }
        for config in configs:
            mine = [t for t in rows_k if t["config"] == config and not t.get("deliberate_pause")]
            ttfa = [t["ttfa_ms"] for t in mine if t.get("ttfa_ms") is not None]
            bg = [b for b in background if b["config"] == config and b["k"] == k]
            reply = [b["reply_ms"] for b in bg]
            req = [r for r in requests if r["config"] == config and r["k"] == k]
            eps = [e for e in episodes if e["config"] == config and e["k"] == k]
            pair = paired[config]
            figures: dict[str, Any] = {
                "ttfa_p50_ms": _q(ttfa, 50),
                "ttfa_p95_ms": _q(ttfa, 95),
                "n_turns": len(ttfa),
                "n_unanswered": sum(1 for t in mine if t.get("ttfa_ms") is None),
                "n_paired": pair["n_paired"],
                "ratio_p50": pair["ratios"].get(config, {}).get("p50"),
                "ratio_p95": pair["ratios"].get(config, {}).get("p95"),
                "reply_p50_ms": _q(reply, 50),
                "reply_p95_ms": _q(reply, 95),
                "n_background_turns": len(reply),
                **engine_figures(req, len(ttfa) + len(bg)),
                "prefills": _sum(mine, "prefill_requests") + _sum(bg, "prefills"),
                "prefills_yielded": _sum(mine, "prefill_yielded") + _sum(bg, "prefills_yielded"),
                "drafts": _sum(mine, "drafts") + _sum(bg, "drafts"),
                "drafts_yielded": _sum(mine, "drafts_yielded") + _sum(bg, "drafts_yielded"),
                **{
                    f"prefills_cancelled_{why}": _sum(mine, f"prefill_cancelled_{why}")
                    + int(sum((b.get("prefills_cancelled") or {}).get(why, 0) for b in bg))
                    for why in ("dispatched", "contended")
                },
                **reasons([*mine, *(b.get("accounting") or {} for b in bg)]),
                "first_turn_prefill": first_turn_prefill(
                    [*(t for t in mine if t.get("turn") == 0), *_first_bg(bg)]
                )
                if config != BASELINE
                else None,
                "first_turn_prefix": first_turn_prefix(
                    [*(t for t in mine if t.get("turn") == 0), *_first_bg(bg)]
                )
                if config != BASELINE
                else None,
                "engine_busy": _mean(e.get("engine_busy") for e in eps),
                "waiting_mean": _mean(e.get("waiting_mean") for e in eps),
                "bench_cpu": _mean(e.get("bench_cpu") for e in eps),
                "engine_cpu": _mean(e.get("engine_cpu") for e in eps),
                "loop_lag_p95_ms": _mean(e.get("loop_lag_p95_ms") for e in eps),
                "episodes": len(eps),
            }
            figures["by_turn"] = {
                kind: _kind_figures(rows_k, config, keep) for kind, keep in _TURN_KINDS.items()
            }
            table[config][str(k)] = figures
    return table


# A call's first turn is cold (its prompt is not in the engine's cache) and takes seconds;
# its later turns are warm and take well under one. Pooled, a p50 over both lands on one kind
# or the other by a single turn, so the report also pairs each kind on its own.
_TURN_KINDS = {
    "first": lambda row: row.get("turn") == 0,
    "later": lambda row: (row.get("turn") or 0) > 0,
}


def _kind_figures(rows_k: Sequence[dict[str, Any]], config: str, keep) -> dict[str, Any]:
    rows = [t for t in rows_k if t["config"] in (BASELINE, config) and keep(t)]
    pair = paired_summary(rows, [BASELINE, config], BASELINE)
    mine = pair["configs"].get(config, {})
    return {
        "n_paired": pair["n_paired"],
        "ttfa_p50_ms": mine.get("ttfa_p50_ms"),
        "ratio_p50": pair["ratios"].get(config, {}).get("p50"),
        "ratio_p95": pair["ratios"].get(config, {}).get("p95"),
    }


def _first_bg(bg: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b.get("accounting") or {} for b in bg if b.get("turn") == 0]


def _by_prefix(rows: Iterable[dict[str, Any]], prefix: str) -> dict[str, int]:
    """Counts of the flat ``<prefix><reason>`` keys over ``rows``, by reason."""
    out: dict[str, int] = {}
    for row in rows:
        for key, value in row.items():
            if key.startswith(prefix) and isinstance(value, int | float):
                reason = key[len(prefix) :]
                out[reason] = out.get(reason, 0) + int(value)
    return dict(sorted(out.items()))


def reasons(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Every speculative decision of a group of turns, counted by its reason.

    Args:
        rows: Turn accounting: a pipeline's TTFA rows, or a background turn's ``accounting``
            (the same keys: ``prefill_decisions``, ``prefill_yielded_<rule>``,
            ``prefill_skipped_<rule>``, ``prefill_cancelled_<rule>``,
            ``drafts_yielded_<rule>``, ``drafts_over_budget``).

    Returns:
        ``prefill_decisions``: the judged prefill decisions by outcome and reason (``sent``,
        ``cannot_finish``, ``busy``...); ``prefill_yielded_by``, ``prefill_skipped_by``
        (the planner's rules, the cheap per-update ones included), ``prefill_cancelled_by``,
        ``drafts_yielded_by``: counts by rule; ``drafts_over_budget``.
    """
    decisions: dict[str, int] = {}
    for row in rows:
        for d in row.get("prefill_decisions") or ():
            label = str(d.get("reason"))
            decisions[label] = decisions.get(label, 0) + 1
    skipped = _by_prefix(rows, "prefill_skipped_")
    return {
        "prefill_decisions": dict(sorted(decisions.items())),
        "prefill_yielded_by": _by_prefix(rows, "prefill_yielded_"),
        "prefill_skipped_by": skipped,
        "prefill_cancelled_by": _by_prefix(rows, "prefill_cancelled_"),
        "drafts_yielded_by": _by_prefix(rows, "drafts_yielded_"),
        "drafts_over_budget": _sum(rows, "drafts_over_budget"),
    }


CHEAP_SKIPS = ("in_flight", "too_few_new_words")
"""Planner skips that only pace prefills (one in flight, too few words): never a refusal."""


def turn_prefill_verdict(row: dict[str, Any]) -> list[str]:
    """Why one turn had no prefill: ``["sent"]`` if it had one, else the rules that refused it.

    The reasons of its judged decisions (``cannot_finish``, a load rule, ``below_minimum``...),
    each once; with none judged, the planner's other skips (``silence``, ``backing_off``,
    ``turn_ended``...); ``["not_judged"]`` when nothing says (no stable words came).
    """
    if int(row.get("prefill_requests") or 0) > 0:
        return ["sent"]
    judged = sorted(
        {str(d.get("reason")) for d in row.get("prefill_decisions") or () if d.get("reason")}
    )
    if judged:
        return judged
    others = sorted(
        reason
        for reason, n in _by_prefix([row], "prefill_skipped_").items()
        if n and reason not in CHEAP_SKIPS
    )
    return others or ["not_judged"]


def first_turn_prefill(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The calls' cold first turns: how many got a prefill, and what refused the others.

    Returns:
        ``{"turns", "sent", "cancelled", "not_sent_by": {rule: turns}}`` (a turn refused by two
        rules counts under both; ``cancelled``: sent but cancelled in flight).
    """
    not_sent: dict[str, int] = {}
    sent = cancelled = 0
    for row in rows:
        verdict = turn_prefill_verdict(row)
        if verdict == ["sent"]:
            sent += 1
            cancelled += int(int(row.get("prefill_cancelled") or 0) > 0)
            continue
        for reason in verdict:
            not_sent[reason] = not_sent.get(reason, 0) + 1
    return {
        "turns": len(rows),
        "sent": sent,
        "cancelled": cancelled,
        "not_sent_by": dict(sorted(not_sent.items())),
    }


def first_turn_prefix(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The first turns' speech-start prefix decisions (``words`` 0): what each one was.

    Returns:
        ``{"turns", "sent", "decisions": {reason: n}}``: turns with a prefix prefill sent,
        and every speech-start decision by its reason (``sent``, ``busy``, ``cannot_finish``...).
    """
    decisions: dict[str, int] = {}
    for row in rows:
        for d in row.get("prefill_decisions") or ():
            if d.get("words") == 0 and d.get("reason"):
                reason = str(d["reason"])
                decisions[reason] = decisions.get(reason, 0) + 1
    return {
        "turns": len(rows),
        "sent": sum(1 for row in rows if int(row.get("prefill_prefix_requests") or 0) > 0),
        "decisions": dict(sorted(decisions.items())),
    }


def goals(table: dict[str, dict[str, Any]], ks: Sequence[int]) -> dict[str, Any]:
    """The issue's goal per lever configuration and K.

    ``p95_ok``: p95 ratio to stock at the same K at most 1.05 (the noise floor of a paired
    run on this machine, docs/bench.md). ``p50_kept``: the p50 gain (1 - ratio) at K is at
    least half the gain at the smallest K. ``p50_kept_first`` / ``p50_kept_later``: the same
    for the calls' first (cold) turns and their later (warm) turns, each paired on its own
    (``by_turn``), since the pooled p50 falls on one kind or the other by one turn.
    """
    out: dict[str, Any] = {}
    first = str(min(ks))
    for config, by_k in table.items():
        if config == BASELINE:
            continue
        out[config] = {}
        for k in ks:
            row = by_k.get(str(k), {})
            verdict = {
                "p95_ok": None if row.get("ratio_p95") is None else row["ratio_p95"] <= 1.05,
                "p50_kept": _kept(by_k.get(first, {}).get("ratio_p50"), row.get("ratio_p50")),
            }
            for kind in _TURN_KINDS:
                base = _kind_ratio(by_k.get(first, {}), kind)
                verdict[f"p50_kept_{kind}"] = _kept(base, _kind_ratio(row, kind))
            out[config][str(k)] = verdict
    return out


def _kind_ratio(row: dict[str, Any], kind: str) -> float | None:
    """One turn kind's paired p50 ratio in a table row (``None`` where it has none)."""
    return ((row.get("by_turn") or {}).get(kind) or {}).get("ratio_p50")


def _kept(base_ratio: float | None, ratio: float | None) -> bool | None:
    """Whether the gain at ``ratio`` is at least half the gain at ``base_ratio``."""
    gain, base_gain = _gain(ratio), _gain(base_ratio)
    if gain is None or base_gain is None or base_gain <= 0:
        return None
    return gain >= 0.5 * base_gain


def _gain(ratio: float | None) -> float | None:
    return None if ratio is None else 1.0 - ratio


def _sum(rows: Iterable[dict[str, Any]], key: str) -> int:
    return int(sum(r.get(key) or 0 for r in rows))


def _mean(values: Iterable[Any]) -> float | None:
    got = [float(v) for v in values if v is not None]
    return round(sum(got) / len(got), 3) if got else None


def plot(report: dict[str, Any], path: Path) -> None:
    """TTFA p95 (full pipelines) and reply p95 (every caller) against K, one line per config."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = report["k"]
    table = report["table"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    for config in report["configs"]:
        by_k = table[config]
        for ax, key in zip(axes, ("ttfa_p95_ms", "reply_p95_ms"), strict=True):
            points = [(k, by_k[str(k)].get(key)) for k in ks if by_k.get(str(k))]
            points = [(k, v) for k, v in points if v is not None]
            if points:
                style = "-" if "greedy" not in config else "--"
                ax.plot(*zip(*points, strict=True), style, marker="o", label=config)
    axes[0].set_title("TTFA p95, full Pipecat pipelines")
    axes[1].set_title("first token after end of speech p95, every caller")
    for ax in axes:
        ax.set_xlabel("concurrent callers (K)")
        ax.set_ylabel("ms")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.grid(True, alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"pipecat-fast bench load: {report['engine']}, {report['slots']} slots")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
