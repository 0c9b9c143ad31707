"""llama-cpp-python's verbose server log: the only place it reports prefix-cache reuse.

Pure parsing, no process: feed it the log text (``LlamaCppServer.log_text()``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PREFIX_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens")
_FULL_HIT = re.compile(r"Llama\.generate: full prompt already cached")
_PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_EVAL = re.compile(r"\beval time =\s*([\d.]+) ms /\s*(\d+) runs")


@dataclass(frozen=True)
class PrefixHit:
    """One prefix-cache reuse the engine logged.

    Attributes:
        reused_tokens: Prompt tokens served from the KV cache (``-1``: the whole prompt).
        remaining_tokens: Prompt tokens left to prefill (``0`` when the whole prompt was
            cached).
    """

    reused_tokens: int
    remaining_tokens: int


@dataclass(frozen=True)
class GenerationTiming:
    """llama.cpp's own timing of one completed generation (``llama_perf_context_print``).

    Attributes:
        prompt_eval_ms: Prefill time in ms.
        prompt_eval_tokens: Tokens prefilled in batches.
        eval_ms: Decode time in ms.
        eval_runs: Single-token decode steps.
    """

    prompt_eval_ms: float
    prompt_eval_tokens: int
    eval_ms: float
    eval_runs: int


@dataclass
class EngineLog:
    """What the engine's verbose log says, in order.

    A cold prompt logs no prefix line, and a request abandoned mid-stream logs no timing, so
    the two lists line up with requests only when requests complete one after another.

    Attributes:
        prefix_hits: Prefix-cache reuses.
        timings: Completed generations.
    """

    prefix_hits: list[PrefixHit] = field(default_factory=list)
    timings: list[GenerationTiming] = field(default_factory=list)


def parse_engine_log(text: str) -> EngineLog:
    """Parse llama-cpp-python's verbose server log.

    Args:
        text: Log text (stdout and stderr of ``python -m llama_cpp.server --verbose true``).

    Returns:
        The prefix-cache reuses and generation timings found; unrelated lines are ignored.
    """
    log = EngineLog()
    pending_prompt: tuple[float, int] | None = None
    for line in text.splitlines():
        if match := _PREFIX_HIT.search(line):
            log.prefix_hits.append(PrefixHit(int(match[1]), int(match[2])))
        elif _FULL_HIT.search(line):
            log.prefix_hits.append(PrefixHit(-1, 0))
        elif match := _PROMPT_EVAL.search(line):
            pending_prompt = (float(match[1]), int(match[2]))
        elif (match := _EVAL.search(line)) and pending_prompt is not None:
            prompt_ms, prompt_tokens = pending_prompt
            log.timings.append(
                GenerationTiming(prompt_ms, prompt_tokens, float(match[1]), int(match[2]))
            )
            pending_prompt = None
    return log
