"""TTFA report output: JSON export and a waterfall PNG of a call's turns."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipecat_fast.ttfa.core import STAGE_NAMES, TurnRecord, summarize

# One colour per stage, stable across plots (matplotlib's tab10 order).
_STAGE_COLOURS = dict(
    zip(
        STAGE_NAMES,
        (
            "#1f77b4",
            "#ff7f0e",
            "#2ca02c",
            "#d62728",
            "#9467bd",
            "#8c564b",
            "#e377c2",
            "#7f7f7f",
        ),
        strict=True,
    )
)


def turns_report(turns: Sequence[TurnRecord], **labels: Any) -> list[dict[str, Any]]:
    """Per-turn JSON rows, each prefixed with ``labels`` (e.g. ``config=..., call=...``)."""
    return [{**labels, **t.to_dict()} for t in turns]


def write_json(path: str | Path, report: dict[str, Any]) -> Path:
    """Write a report as pretty JSON (UTF-8), creating parent folders.

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def waterfall_png(
    path: str | Path,
    turns: Sequence[TurnRecord],
    *,
    title: str = "Time to first audio per turn",
) -> Path:
    """Draw each turn's blocking stages as one stacked bar (ms from the caller's end of speech).

    Args:
        path: Output PNG path (parent folders are created).
        turns: Answered turns to draw, top to bottom.
        title: Figure title; p50/p95 over ``turns`` are appended.

    Returns:
        The path written.

    Raises:
        ImportError: If matplotlib is not installed (``pip install 'pipecat-fast[bench]'``).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the waterfall PNG needs matplotlib: pip install 'pipecat-fast[bench]'"
        ) from e

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    answered = [t for t in turns if t.complete]
    fig, ax = plt.subplots(figsize=(10, 0.55 * max(len(answered), 1) + 1.6))
    labels = []
    used: set[str] = set()
    for row, turn in enumerate(answered):
        left = 0.0
        for stage, ms in turn.stages_ms().items():
            ax.barh(
                row,
                ms,
                left=left,
                color=_STAGE_COLOURS[stage],
                edgecolor="white",
                label=None if stage in used else stage,
            )
            used.add(stage)
            left += ms
        ax.text(left + 5, row, f"{turn.ttfa_ms:.0f} ms", va="center", fontsize=8)
        labels.append(str(turn.extra.get("label", f"turn {turn.turn}")))
    ax.set_yticks(range(len(answered)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("ms after the caller stopped speaking (blocking time per stage)")
    stats = summarize([t.ttfa_ms for t in answered])
    if stats["n_turns"]:
        title += f"  (p50 {stats['ttfa_p50_ms']:.0f} ms, p95 {stats['ttfa_p95_ms']:.0f} ms)"
    ax.set_title(title, fontsize=10)
    if used:
        ax.legend(loc="lower right", fontsize=7, ncols=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
