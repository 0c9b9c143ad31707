"""A simulated day of calls with seed 000's published shares, through three warmup strategies.

Pure arithmetic (a seeded ``random.Random`` for the few draws): no I/O, no clock. Every
parameter is a field with its source, so the table in ``docs/warmup.md`` is reproducible with
``python -m pipecat_fast.warmup.traffic`` and any figure can be changed.

The strategies: ``always`` warms every call when it starts ringing, ``never`` warms none,
``policy`` asks :class:`~pipecat_fast.warmup.policy.PrewarmPolicy` (retries skipped, prefixes
below the provider's minimum skipped, waits past the cache lifetime skipped, a prefix still
warm from another call not warmed again).

The cost model: a warmup sends ``requests`` requests of the prefix plus a short user message;
the first reads the cache only if the prefix is still warm from another request, each later one
reads what the one before wrote (with probability ``hit_rate``). A live turn ``k`` (1-based)
sends the prefix plus ``k`` turns of history; it reads from the cache the prefix and the
history up to the previous turn when the prefix is warm. Only the provider's cacheable part
counts as cached (:meth:`~pipecat_fast.providers.PrefixMinimum.cacheable`: nothing below the
minimum). First-turn TTFA is ``warm_first_turn_ms`` (which includes the turn's own new tokens) plus
the prefill of the prefix tokens not served from the cache.
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

from pipecat_fast.providers import cache_facts, prefix_minimum
from pipecat_fast.warmup.policy import PrewarmPolicy, WarmupTarget


@dataclass(frozen=True)
class Traffic:
    """A day of calls (seed 000's published shares unless noted).

    Attributes:
        calls: Calls in the day (seed 000: 48,103).
        retries: Of those, retries (seed 000: 15,859, "about a third").
        dead_retries: Retries that were voicemail or no answer (seed 000: 15,143, 95 %).
        end_before_agent: Share of calls that ended before the agent played anything
            (seed 000: "about 28%").
        greeting_only: Share that heard the greeting and never spoke (seed 000: 63 %).
        turns: Caller turns of a call that talks, as ``(turns, weight)``. Assumption: seed 000
            says only that "most of what was left was over inside one or two turns".
        day_s: Length of the day the calls spread over (s); arrivals uniform at random.
        wait_s: From the call ringing (warmup sent) to the first turn's request: ring-back,
            a scripted greeting and the caller's first words. Assumption: 10 s.
        turn_gap_s: Between later turns (s). Assumption.
    """

    calls: int = 48_103
    retries: int = 15_859
    dead_retries: int = 15_143
    end_before_agent: float = 0.28
    greeting_only: float = 0.63
    turns: tuple[tuple[int, float], ...] = ((1, 0.45), (2, 0.35), (4, 0.15), (8, 0.05))
    day_s: float = 86_400.0
    wait_s: float = 10.0
    turn_gap_s: float = 8.0

    @property
    def talking(self) -> int:
        """Calls in which the caller spoke at least once (the rest of the 28 % + 63 %)."""
        return self.calls - round((self.end_before_agent + self.greeting_only) * self.calls)

    @property
    def talking_retries(self) -> int:
        """Retries that were answered by a person who talked."""
        return self.retries - self.dead_retries


@dataclass(frozen=True)
class Prompt:
    """The agent's prompt and the provider's timing (each scenario names its sources).

    Attributes:
        name: Scenario label.
        provider: Provider registry name (decides the minimum and the lifetime).
        model: Model id (per-model minimums).
        prefix_tokens: System prompt plus tool schemas (the cacheable prefix).
        turn_tokens: Tokens each turn adds (the caller's words and the previous reply).
        warmup_user_tokens: The warmup's throwaway user message.
        warm_first_turn_ms: First-turn TTFA with the prefix served from the cache.
        prefill_ms_per_token: Provider prefill time per uncached prompt token.
        shared_prefix: One prefix for every call (else each call's prefix carries its own
            caller context, as in seed 001).
        source: Where the numbers come from.
    """

    name: str
    provider: str
    model: str
    prefix_tokens: int
    warm_first_turn_ms: float
    prefill_ms_per_token: float
    turn_tokens: int = 60
    warmup_user_tokens: int = 20
    shared_prefix: bool = False
    source: str = ""


@dataclass(frozen=True)
class Warmup:
    """How a warmup is sent (seed 001's recipe).

    Attributes:
        requests: Synthetic requests per warmed call (seed 001: two).
        hit_rate: Probability that a request reads a prefix that is in the cache (seed 000:
            "about 98%" of prewarm replies hit the cache).
    """

    requests: int = 2
    hit_rate: float = 0.98


@dataclass
class StrategyResult:
    """One strategy over one simulated day."""

    strategy: str
    warmed_calls: int = 0
    warmup_prompt_tokens: int = 0
    warmup_uncached_tokens: int = 0
    live_prompt_tokens: int = 0
    live_uncached_tokens: int = 0
    talking_calls: int = 0
    first_turn_ttfa_ms: list[float] = field(default_factory=list)
    skips: dict[str, int] = field(default_factory=dict)

    @property
    def prompt_tokens(self) -> int:
        """Every LLM prompt token of the day, warmups and live turns."""
        return self.warmup_prompt_tokens + self.live_prompt_tokens

    def summary(self) -> dict[str, float | int | str | dict[str, int]]:
        """The table row: tokens per answered conversation and first-turn TTFA."""
        n = max(self.talking_calls, 1)
        ttfa = sorted(self.first_turn_ttfa_ms)
        p95 = ttfa[min(len(ttfa) - 1, round(0.95 * (len(ttfa) - 1)))] if ttfa else 0.0
        return {
            "strategy": self.strategy,
            "warmed_calls": self.warmed_calls,
            "prompt_tokens_per_answered": round(self.prompt_tokens / n),
            "uncached_tokens_per_answered": round(
                (self.warmup_uncached_tokens + self.live_uncached_tokens) / n
            ),
            "warmup_share_pct": round(100.0 * self.warmup_prompt_tokens / self.prompt_tokens, 1)
            if self.prompt_tokens
            else 0.0,
            "first_turn_ttfa_p50_ms": round(statistics.median(ttfa)) if ttfa else 0,
            "first_turn_ttfa_p95_ms": round(p95),
            "first_turn_ttfa_mean_ms": round(statistics.fmean(ttfa)) if ttfa else 0,
            "skips": dict(sorted(self.skips.items())),
        }


@dataclass(frozen=True)
class _Call:
    at_s: float
    is_retry: bool
    turns: int  # 0: nobody talked
    prefix_id: str


def _calls(traffic: Traffic, prompt: Prompt, rng: random.Random) -> list[_Call]:
    """The day's calls: exact counts from the shares, arrival times and order at random."""
    talking_first = traffic.talking - traffic.talking_retries
    kinds = [(True, True)] * traffic.talking_retries + [(True, False)] * traffic.dead_retries
    kinds += [(False, True)] * talking_first
    kinds += [(False, False)] * (traffic.calls - traffic.retries - talking_first)
    total = sum(w for _, w in traffic.turns)
    counts = [round(traffic.talking * w / total) for _, w in traffic.turns]
    counts[0] += traffic.talking - sum(counts)
    turn_draws = [n for (n, _), c in zip(traffic.turns, counts, strict=True) for _ in range(c)]
    rng.shuffle(turn_draws)
    rng.shuffle(kinds)
    times = sorted(rng.uniform(0.0, traffic.day_s) for _ in kinds)
    calls = []
    for i, ((is_retry, talks), at) in enumerate(zip(kinds, times, strict=True)):
        turns = turn_draws.pop() if talks else 0
        prefix_id = "shared" if prompt.shared_prefix else f"call-{i}"
        calls.append(_Call(at_s=at, is_retry=is_retry, turns=turns, prefix_id=prefix_id))
    return calls


def simulate(
    strategy: str,
    prompt: Prompt,
    traffic: Traffic = Traffic(),
    warmup: Warmup = Warmup(),
    *,
    seed: int = 0,
) -> StrategyResult:
    """One day of ``traffic`` through ``strategy`` (``"always"``, ``"never"``, ``"policy"``).

    Raises:
        ValueError: For an unknown strategy.
    """
    if strategy not in ("always", "never", "policy"):
        raise ValueError(f"unknown strategy {strategy!r}")
    rng = random.Random(seed)
    calls = _calls(traffic, prompt, rng)
    floor = prefix_minimum(prompt.provider, prompt.model)
    ttl = cache_facts(prompt.provider).ttl_s
    policy = PrewarmPolicy()
    result = StrategyResult(strategy=strategy)
    last_seen: dict[str, float] = {}  # prefix -> last request time (the cache's clock)

    def warm_at(prefix: str, t: float) -> bool:
        seen = last_seen.get(prefix)
        return seen is not None and (ttl is None or t - seen <= ttl)

    def cacheable(tokens: int) -> int:
        return floor.cacheable(tokens)

    # Every request of the day in time order: (time, order, kind, call).
    events: list[tuple[float, int, str, _Call, int]] = []
    for call in calls:
        events.append((call.at_s, 0, "ring", call, 0))
        for k in range(1, call.turns + 1):
            at = call.at_s + traffic.wait_s + (k - 1) * traffic.turn_gap_s
            events.append((at, 1, "turn", call, k))
    events.sort(key=lambda e: (e[0], e[1]))
    for at, _, kind, call, k in events:
        prefix = call.prefix_id
        if kind == "ring":
            if strategy == "never":
                continue
            if strategy == "policy":
                target = WarmupTarget(
                    provider=prompt.provider,
                    model=prompt.model,
                    prefix_tokens=prompt.prefix_tokens,
                    prefix_hash=prefix,
                    is_retry=call.is_retry,
                    expected_wait_s=traffic.wait_s,
                )
                decision = policy.decide(target, at)
                if not decision.warm:
                    result.skips[str(decision.reason)] = result.skips.get(decision.reason, 0) + 1
                    continue
            result.warmed_calls += 1
            tokens = prompt.prefix_tokens + prompt.warmup_user_tokens
            hot = warm_at(prefix, at)
            for _ in range(warmup.requests):
                hit = hot and rng.random() < warmup.hit_rate
                cached = cacheable(prompt.prefix_tokens) if hit else 0
                result.warmup_prompt_tokens += tokens
                result.warmup_uncached_tokens += tokens - cached
                hot = cacheable(prompt.prefix_tokens) > 0
            last_seen[prefix] = at
            policy.record(prefix, at)
            continue
        # a live turn
        tokens = prompt.prefix_tokens + k * prompt.turn_tokens
        if k == 1:
            result.talking_calls += 1
            hot = warm_at(prefix, at) and rng.random() < warmup.hit_rate
            cached = cacheable(prompt.prefix_tokens) if hot else 0
            uncached_prefix = prompt.prefix_tokens - cached
            result.first_turn_ttfa_ms.append(
                prompt.warm_first_turn_ms + uncached_prefix * prompt.prefill_ms_per_token
            )
        else:  # the previous turn of this call wrote everything up to its own end
            cached = cacheable(prompt.prefix_tokens + (k - 1) * prompt.turn_tokens)
        result.live_prompt_tokens += tokens
        result.live_uncached_tokens += tokens - cached
        last_seen[prefix] = at
        policy.record(prefix, at)
    return result


# -- the scenarios of docs/warmup.md ---------------------------------------------------------

SEED000 = Prompt(
    name="seed 000's fleet (OpenAI, 4k-token prefix)",
    provider="openai",
    model="gpt-5.1",
    prefix_tokens=4_000,
    warm_first_turn_ms=1_163.0,
    prefill_ms_per_token=72.0 / 4_000,
    source="seed 000: first-turn p50 1,163 ms with prewarm, 1,235 ms without (72 ms of prefill); "
    "the prefix size is our assumption (seed 000 gives none; its prewarms hit the cache, so it "
    "is above OpenAI's 1,024-token minimum)",
)
SEED001 = Prompt(
    name="seed 001's prompt (30k tokens)",
    provider="openai",
    model="gpt-4.1",
    prefix_tokens=30_000,
    warm_first_turn_ms=900.0,
    prefill_ms_per_token=2_500.0 / 30_000,
    source="seed 001: ~30,000-token prompt, first reply ~3.4 s cold and ~0.9 s warmed",
)
SMALL = Prompt(
    name="a workflow bot's prompt (800 tokens, below OpenAI's minimum)",
    provider="openai",
    model="gpt-4.1-mini",
    prefix_tokens=800,
    warm_first_turn_ms=1_163.0,
    prefill_ms_per_token=72.0 / 4_000,
    source="seed 001: 'workflow bots ... run tiny prompts'; prefill rate as seed 000's row",
)
SCENARIOS: tuple[Prompt, ...] = (
    SEED000,
    SEED001,
    SMALL,
    replace(SEED000, name="seed 000's fleet, one prompt shared by every call", shared_prefix=True),
)
STRATEGIES = ("never", "always", "policy")


def table(
    scenarios: Sequence[Prompt] = SCENARIOS,
    traffic: Traffic = Traffic(),
    warmup: Warmup = Warmup(),
    seed: int = 0,
) -> list[dict]:
    """One row per scenario and strategy (:meth:`StrategyResult.summary` plus the scenario)."""
    rows = []
    for prompt in scenarios:
        for strategy in STRATEGIES:
            row = simulate(strategy, prompt, traffic, warmup, seed=seed).summary()
            rows.append({"scenario": prompt.name, **row})
    return rows


def markdown(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    head = (
        "| scenario | strategy | warmed calls | prompt tokens / answered call | uncached tokens / "
        "answered call | warmup share of prompt tokens | first-turn TTFA p50 / p95 / mean ms |"
    )
    lines = [head, "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['strategy']} | {r['warmed_calls']:,} | "
            f"{r['prompt_tokens_per_answered']:,} | {r['uncached_tokens_per_answered']:,} | "
            f"{r['warmup_share_pct']} % | {r['first_turn_ttfa_p50_ms']:,} / "
            f"{r['first_turn_ttfa_p95_ms']:,} / {r['first_turn_ttfa_mean_ms']:,} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Print the docs table: ``python -m pipecat_fast.warmup.traffic [--json]``."""
    parser = argparse.ArgumentParser(description="Seed 000's day of calls through 3 strategies.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="rows and parameters as JSON")
    args = parser.parse_args(argv)
    rows = table(seed=args.seed)
    if args.json:
        import json

        params = {
            "traffic": asdict(Traffic()),
            "warmup": asdict(Warmup()),
            "scenarios": [asdict(s) for s in SCENARIOS],
        }
        print(json.dumps({"parameters": params, "rows": rows}, indent=2))
    else:
        print(markdown(rows))
        for r in rows:
            if r["skips"]:
                print(f"{r['scenario']} / {r['strategy']}: skipped {r['skips']}")


if __name__ == "__main__":
    main()
