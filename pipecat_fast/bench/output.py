"""Terminal output for the demo and bench (rich tables)."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from typing import Any

from loguru import logger
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipecat_fast.bench.runner import CallResult
from pipecat_fast.ttfa import STAGE_NAMES

# Wide enough for the per-stage table when output is piped (rich defaults to 80 columns).
console = Console(width=None if Console().is_terminal else 132)

_SHORT = {
    "endpointing": "VAD",
    "stt_final": "STT",
    "turn_detection": "turn",
    "llm_dispatch": "LLM req",
    "llm_ttft": "LLM TTFT",
    "sentence_aggregation": "aggr",
    "tts_ttfb": "TTS TTFB",
    "output": "out",
}


def print_problem(label: str, message: object, style: str = "red") -> None:
    """One line ``label: message``; the message is printed as is (``[llama]`` is no markup)."""
    console.print(f"[{style}]{label}:[/{style}] {escape(str(message))}", soft_wrap=True)


def quiet_logs(verbose: bool) -> None:
    """Pipecat logs every frame at DEBUG; keep warnings only unless ``verbose``."""
    logger.remove()
    logger.add(sys.stderr, level="DEBUG" if verbose else "WARNING")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def turns_table(result: CallResult, title: str) -> Table:
    """Per-turn TTFA with its blocking stages (ms) for one call."""
    table = Table(title=title, title_justify="left")
    table.add_column("turn", justify="right")
    table.add_column("TTFA ms", justify="right", style="bold")
    for stage in STAGE_NAMES:
        table.add_column(_SHORT[stage], justify="right")
    table.add_column("prompt tok", justify="right")
    table.add_column("cached tok", justify="right")
    for turn in result.turns:
        stages = turn.stages_ms()
        table.add_row(
            str(turn.turn),
            _ms(turn.ttfa_ms),
            *(_ms(stages.get(s)) for s in STAGE_NAMES),
            _ms(turn.prompt_tokens),
            _ms(turn.cached_tokens),
        )
    gaps = [str(o.index) for o in result.outcomes if not o.answered]
    notes = []
    if gaps:
        notes.append(f"turn {', '.join(gaps)}: no reply heard after the caller's end of speech")
    for o in result.outcomes:
        if o.false_cutoffs:
            notes.append(f"turn {o.index}: bot audio started inside the caller's pause")
    table.caption = "\n".join(notes) or None
    return table


def paired_turns_table(results: Sequence[CallResult], configs: Sequence[str], title: str) -> Table:
    """One call's turns across configurations: TTFA of each, the ratio to the first, notes.

    Args:
        results: The call's results, one per configuration.
        configs: Configuration names, baseline first.
        title: Table title.
    """
    by_config = {r.config: r for r in results}
    table = Table(title=title, title_justify="left")
    table.add_column("turn", justify="right")
    for name in configs:
        table.add_column(f"{name} TTFA", justify="right", style="bold")
    for name in configs[1:]:
        table.add_column(f"{name}/{configs[0]}", justify="right")
    for name in configs:
        table.add_column(f"{name} LLM TTFT", justify="right")
    table.add_column("notes")
    turns = max((len(r.outcomes) for r in results), default=0)
    for index in range(turns):
        outcomes = {
            n: by_config[n].outcomes[index]
            for n in configs
            if n in by_config and index < len(by_config[n].outcomes)
        }
        ttfa = {n: o.record.ttfa_ms if o.record else None for n, o in outcomes.items()}
        ttft = {
            n: o.record.stages_ms().get("llm_ttft") if o.record else None
            for n, o in outcomes.items()
        }
        base = ttfa.get(configs[0])
        ratios = [
            f"{ttfa[n] / base:.2f}" if base and ttfa.get(n) is not None else "-"
            for n in configs[1:]
        ]
        notes = []
        if any(o.deliberate_pause for o in outcomes.values()):
            cut = [n for n, o in outcomes.items() if o.false_cutoffs]
            notes.append("pauses mid-utterance" + (f"; cut off by {', '.join(cut)}" if cut else ""))
        missing = [n for n in configs if ttfa.get(n) is None]
        if missing:
            notes.append(f"no reply after the end: {', '.join(missing)}")
        table.add_row(
            str(index),
            *(_ms(ttfa.get(n)) for n in configs),
            *ratios,
            *(_ms(ttft.get(n)) for n in configs),
            "; ".join(notes),
        )
    return table


def summary_table(report: dict[str, Any], title: str) -> Table:
    """Per-configuration p50/p95 TTFA over the same turns, the ratios, and what else differed.

    p50/p95 are over the turns every configuration answered (``report["paired"]``); the
    caption says how many those are, which turns only some configurations answered, and how
    many false cut-offs (bot audio inside a caller's deliberate pause) each one made.
    """
    paired = report.get("paired", {})
    table = Table(title=title, title_justify="left")
    for name, justify in (
        ("config", "left"),
        ("answered", "right"),
        ("TTFA p50 ms", "right"),
        ("TTFA p95 ms", "right"),
        ("p50 ratio", "right"),
        ("p95 ratio", "right"),
        ("false cut-offs", "right"),
        ("median LLM TTFT ms", "right"),
        ("extra prefill compute", "right"),
    ):
        table.add_column(name, justify=justify)
    n_clean = paired.get("n_scripted", 0)
    for config in report["configs"]:
        s = paired.get("configs", {}).get(config, {})
        ratio = report["ratios"].get(config, {})
        mine = [t for t in report["turns"] if t["config"] == config]
        ttft = [t["stages_ms"].get("llm_ttft") for t in mine if t.get("ttfa_ms") is not None]
        ttft = [v for v in ttft if v is not None]
        answered = sum(1 for t in mine if t.get("ttfa_ms") is not None)
        table.add_row(
            config + (" (baseline)" if config == report["baseline"] else ""),
            f"{answered}/{len(mine)}",
            _ms(s.get("ttfa_p50_ms")),
            _ms(s.get("ttfa_p95_ms")),
            "-" if ratio.get("p50") is None else f"{ratio['p50']:.3f}",
            "-" if ratio.get("p95") is None else f"{ratio['p95']:.3f}",
            str(report.get("false_cutoffs", {}).get(config, 0)),
            _ms(statistics.median(ttft)) if ttft else "-",
            _pct(report.get("prefill_compute", {}).get(config, {}).get("extra_compute_pct")),
        )
    lines = [
        f"p50/p95 and ratios over the {paired.get('n_paired', 0)} of {n_clean} turns every "
        "configuration answered (deliberately paused turns apart)"
    ]
    paused = paired.get("paused", {})
    if paused.get("n_turns"):
        lines.append(
            f"{paused['n_turns']} turns pause mid-utterance on purpose; a false cut-off is bot "
            "audio starting inside such a pause"
        )
    for diff in paired.get("answer_differences", []):
        lines.append(
            f"finding: turn {diff['key']} answered by {', '.join(diff['answered_by'])}, "
            f"not by {', '.join(diff['unanswered_by'])}"
        )
    talked = {c: n for c, n in report.get("talked_over", {}).items() if n}
    if talked:
        lines.append(
            "finding: bot audio started while the caller was speaking (not in a pause): "
            + ", ".join(f"{c} {n}x" for c, n in talked.items())
        )
    table.caption = "\n".join(lines)
    table.caption_justify = "left"
    return table


def compute_table(report: dict[str, Any], title: str) -> Table | None:
    """Per configuration: what the bets cost (LLM prefill and decode, TTS) and words lost."""
    levers = report.get("levers") or {}
    compute = report.get("prefill_compute") or {}
    if not levers and not compute:
        return None
    table = Table(title=title, title_justify="left")
    for name in (
        "config",
        "prompt tok computed",
        "extra",
        "output tok decoded",
        "extra",
        "extra total",
        "TTS chars",
        "extra",
        "TTS chars discarded",
        "words lost",
        "confirmed early",
        "late finals",
    ):
        table.add_column(name, justify="left" if name == "config" else "right")
    for config in report["configs"]:
        c = compute.get(config, {})
        lv = levers.get(config, {})
        table.add_row(
            config,
            _ms(c.get("computed_tokens")),
            _pct(c.get("extra_compute_pct")),
            _ms(c.get("decoded_tokens")),
            _pct(c.get("extra_decode_pct")),
            _pct(c.get("extra_total_pct")),
            _ms(lv.get("tts_chars")),
            _pct(lv.get("extra_tts_pct")),
            _ms(lv.get("tts_chars_discarded")),
            f"{lv.get('words_lost', 0)}/{lv.get('words_scripted', 0)}",
            str(lv.get("eot_early", 0)),
            str(lv.get("eot_late_finals", 0)),
        )
    table.caption = (
        "extra = against the baseline over the same calls; total = prompt tokens computed plus "
        "output tokens decoded; TTS chars discarded = handed to the TTS for drafts withdrawn "
        "before confirmation"
    )
    table.caption_justify = "left"
    return table


def stages_table(report: dict[str, Any], title: str) -> Table | None:
    """Median blocking time per stage (ms), one row per configuration."""
    medians = report.get("stage_medians_ms") or {}
    if not medians:
        return None
    table = Table(title=title, title_justify="left")
    table.add_column("config")
    for stage in STAGE_NAMES:
        table.add_column(_SHORT[stage], justify="right")
    for config in report["configs"]:
        m = medians.get(config, {})
        table.add_row(config, *(_ms(m.get(stage)) for stage in STAGE_NAMES))
    return table


def first_turn_line(report: dict[str, Any]) -> str:
    """The first turn of each call (cold without a warmup): p50/p95, ratios, warmup tokens."""
    parts = []
    for config, s in report.get("first_turn", {}).items():
        ratios = "" if s.get("p50") is None else f" ({s['p50']:.3f}x / {s['p95']:.3f}x)"
        cost = f", warmup {s['warmup_prompt_tokens']:,} tokens" if s["warmup_prompt_tokens"] else ""
        parts.append(f"{config} {_ms(s['ttfa_p50_ms'])} / {_ms(s['ttfa_p95_ms'])} ms{ratios}{cost}")
    return "first turn of each call, TTFA p50 / p95: " + "; ".join(parts)


def progress_line(result: CallResult, index: int, total: int) -> str:
    """One line per finished call."""
    values = [t.ttfa_ms for t in result.turns if t.ttfa_ms is not None]
    median = f"median TTFA {statistics.median(values):.0f} ms" if values else "no answered turns"
    error = f"  [red]error: {result.error}[/red]" if result.error else ""
    scripted = len(result.outcomes) or len(result.turns)
    cutoffs = sum(o.false_cutoffs for o in result.outcomes)
    cut = f", {cutoffs} false cut-off(s)" if cutoffs else ""
    return (
        f"[{index}/{total}] {result.config:<14} {result.call:<18} "
        f"{len(result.turns)}/{scripted} turns answered, {median}{cut}, "
        f"{result.wall_s:.0f} s{error}"
    )


def stage_medians(results: Sequence[CallResult]) -> dict[str, float]:
    """Median blocking time per stage over every answered turn (ms)."""
    per_stage: dict[str, list[float]] = {s: [] for s in STAGE_NAMES}
    for r in results:
        for t in r.turns:
            for stage, ms in t.stages_ms().items():
                per_stage[stage].append(ms)
    return {s: round(statistics.median(v), 1) for s, v in per_stage.items() if v}
