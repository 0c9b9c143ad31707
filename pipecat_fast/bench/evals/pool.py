"""The TTS warm-pool's part of the bench report: the greeting's wait and the pool's account.

``greeting_summary``: per configuration, answer-to-first-audio of the calls whose bot speaks
first (the dial a stock TTS makes at setup sits on that path), p50/p95 and ratios to the
baseline. ``pool_summary``: per configuration that ran the pool, what its meter accounting
says (``pool_*`` keys of ``TTFAObserver.session``, docs/ttspool.md): calls whose first
connection was a pooled one, handshakes the TTS service paid itself, connections asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipecat_fast.ttfa import summarize


def greeting_summary(results: Sequence[Any], baseline: str) -> dict[str, Any]:
    """Per configuration: ``greeting_p50_ms``, ``greeting_p95_ms``, ``n``, ``p50``/``p95`` ratios.

    Args:
        results: ``CallResult``s (``config``, ``greeting_ms``).
        baseline: The configuration the ratios divide by.
    """
    out: dict[str, Any] = {}
    for config in dict.fromkeys(r.config for r in results):
        values = [r.greeting_ms for r in results if r.config == config]
        if all(v is None for v in values):
            continue
        s = summarize(values)
        out[config] = {
            "greeting_p50_ms": s["ttfa_p50_ms"],
            "greeting_p95_ms": s["ttfa_p95_ms"],
            "n": s["n_turns"],
            "missing": s["n_unanswered"],
        }
    base = out.get(baseline, {})
    for stats in out.values():
        for q in ("p50", "p95"):
            b, v = base.get(f"greeting_{q}_ms"), stats.get(f"greeting_{q}_ms")
            stats[q] = round(v / b, 3) if v and b else None
    return out


def pool_summary(results: Sequence[Any]) -> dict[str, Any]:
    """Per configuration with pool accounting: calls, first connections pooled, handshakes.

    Args:
        results: ``CallResult``s (``config``, ``session``).
    """
    out: dict[str, Any] = {}
    for config in dict.fromkeys(r.config for r in results):
        sessions = [r.session for r in results if r.config == config]
        pooled = [s for s in sessions if "pool_acquires" in s]
        if not pooled:
            continue
        out[config] = {
            "calls": len(pooled),
            "first_reused": sum(1 for s in pooled if s.get("pool_first_reused")),
            "acquires": sum(int(s.get("pool_acquires", 0)) for s in pooled),
            "service_handshakes": sum(int(s.get("pool_handshakes", 0)) for s in pooled),
            "acquire_ms": round(sum(float(s.get("pool_acquire_ms", 0)) for s in pooled), 1),
        }
    return out
