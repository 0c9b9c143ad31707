"""llama-cpp-python's verbose server log: the only place it reports prefix-cache reuse.

Pure parsing, no process: feed it the log text (``LlamaCppServer.log_text()``).

The server serves one request at a time, and logs, per request, in this order: a prefix line
(``N prefix-match hit, remaining M prompt tokens to eval`` or ``full prompt already cached``)
unless the KV cache had nothing to reuse, then llama.cpp's timing of the generation
(``prompt eval time = ... / T tokens``, ``eval time = ... / R runs``) once it completes. A reply
whose client hung up mid-stream stops at its next token and logs no timing; its prefill still
ran. :attr:`EngineLog.requests` puts the two together into one :class:`EngineRequest` per request
the engine started, completed or not: that, and not the timings alone, is what the engine
computed (a bench that counted only completed generations missed every abandoned reply's
prefill, and counted no prefix reuse at all).
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


@dataclass(frozen=True)
class EngineRequest:
    """One request the engine started, as its log tells it.

    Attributes:
        reused_tokens: Prompt tokens served from the KV cache (0 for a cold prompt).
        computed_tokens: Prompt tokens the engine prefilled.
        eval_runs: Single-token decode steps (``None`` when no timing was logged).
        completed: Whether the generation completed (its timing was logged); ``False`` for a
            reply whose client hung up mid-stream (its prefill still ran).
        full_hit: The whole prompt was already cached (the log gives no token count then).
    """

    reused_tokens: int
    computed_tokens: int
    eval_runs: int | None
    completed: bool
    full_hit: bool = False

    @property
    def prompt_tokens(self) -> int:
        """Reused plus computed prompt tokens."""
        return self.reused_tokens + self.computed_tokens

    @property
    def speculative(self) -> bool:
        """A prefill-only request: it completed after generating at most one token.

        The bench's real requests generate ``max_tokens`` 20 (19 decode steps after the first
        token); a ``max_tokens=1`` prefill logs one run at most.
        """
        return self.completed and (self.eval_runs or 0) <= 1

    def as_record(self) -> dict[str, int | bool]:
        """The provider-neutral record the bench's accounting reads (as the emulator's).

        ``decoded_tokens`` only when the engine logged the decode (an abandoned reply's
        count is unknown, and the bench then reports no decode total rather than a low one).
        """
        record: dict[str, int | bool] = {
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.reused_tokens,
            "speculative": self.speculative,
            "completed": self.completed,
        }
        if self.eval_runs is not None:
            record["decoded_tokens"] = self.eval_runs
        return record


@dataclass
class EngineLog:
    """What the engine's verbose log says, in order.

    A cold prompt logs no prefix line, and a request abandoned mid-stream logs no timing, so
    :attr:`prefix_hits` and :attr:`timings` line up with requests only when requests complete
    one after another; :attr:`requests` puts them together.

    Attributes:
        prefix_hits: Prefix-cache reuses.
        timings: Completed generations.
        requests: Every request the engine started, in order. The last one may still be
            running (:attr:`open_request`).
        open_request: Whether the last request has logged no timing yet (running, or a
            reply abandoned mid-stream and not yet followed by another request).
    """

    prefix_hits: list[PrefixHit] = field(default_factory=list)
    timings: list[GenerationTiming] = field(default_factory=list)
    requests: list[EngineRequest] = field(default_factory=list)
    open_request: bool = False


def parse_engine_log(text: str) -> EngineLog:
    """Parse llama-cpp-python's verbose server log.

    Args:
        text: Log text (stdout and stderr of ``python -m llama_cpp.server --verbose true``).

    Returns:
        The prefix-cache reuses and generation timings found; unrelated lines are ignored.
    """
    log = EngineLog()
    pending_prompt: tuple[float, int] | None = None
    started: PrefixHit | None = None  # prefix line of a request with no timing yet

    def close_abandoned() -> None:
        nonlocal started
        if started is not None:  # a new request began: the previous one never completed
            reused = max(0, started.reused_tokens)
            log.requests.append(
                EngineRequest(
                    reused, started.remaining_tokens, None, False, started.reused_tokens < 0
                )
            )
            started = None

    for line in text.splitlines():
        if match := _PREFIX_HIT.search(line):
            close_abandoned()
            started = PrefixHit(int(match[1]), int(match[2]))
            log.prefix_hits.append(started)
        elif _FULL_HIT.search(line):
            close_abandoned()
            started = PrefixHit(-1, 0)
            log.prefix_hits.append(started)
        elif match := _PROMPT_EVAL.search(line):
            pending_prompt = (float(match[1]), int(match[2]))
        elif (match := _EVAL.search(line)) and pending_prompt is not None:
            prompt_ms, prompt_tokens = pending_prompt
            timing = GenerationTiming(prompt_ms, prompt_tokens, float(match[1]), int(match[2]))
            log.timings.append(timing)
            pending_prompt = None
            if started is None:  # cold: nothing was reused, everything was prefilled
                log.requests.append(EngineRequest(0, prompt_tokens, timing.eval_runs, True))
            else:
                # The prefix line's count: a 1-token remainder is decoded as an eval run, not
                # counted in "prompt eval".
                reused = max(0, started.reused_tokens)
                computed = started.remaining_tokens if started.reused_tokens >= 0 else 0
                log.requests.append(
                    EngineRequest(
                        reused, computed, timing.eval_runs, True, started.reused_tokens < 0
                    )
                )
                started = None
    if started is not None:
        reused = max(0, started.reused_tokens)
        log.requests.append(
            EngineRequest(reused, started.remaining_tokens, None, False, started.reused_tokens < 0)
        )
        log.open_request = True
    return log
