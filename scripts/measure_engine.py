"""Measure the real llama.cpp engine's prefix-cache behaviour (figures for docs/engine.md).

Runs llama-cpp-python's server on the generated model and reports, as medians over --runs:
TTFT (request sent -> first content delta) of a ~3,200-token prompt cold and after a
max_tokens=1 request warmed its prefix; whether the KV cache keeps more than the previous
request; what a request abandoned mid-prefill costs the next one; the decode rate.

    python scripts/measure_engine.py --size bench --runs 5 --out reports/engine.json

CPU-heavy for a minute or two: run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid
from pathlib import Path

import aiohttp

from pipecat_fast.testing.gguf_model import corpus_text
from pipecat_fast.testing.llama_server import LlamaCppServer

PARTIAL = "Hi, I would like to book a table for"
FINAL = "Hi, I would like to book a table for two people tonight at eight, please."


async def count_tokens(session: aiohttp.ClientSession, server: LlamaCppServer, text: str) -> int:
    root = server.base_url.removesuffix("/v1")
    async with session.post(f"{root}/extras/tokenize/count", json={"input": text}) as response:
        return (await response.json())["count"]


async def fit_system_prompt(
    session: aiohttp.ClientSession, server: LlamaCppServer, target_tokens: int
) -> str:
    """A slice of the pydoc corpus whose token count is close to target_tokens."""
    corpus = corpus_text()
    low, high = 0, len(corpus)
    while high - low > 200:
        mid = (low + high) // 2
        if await count_tokens(session, server, corpus[:mid]) < target_tokens:
            low = mid
        else:
            high = mid
    return corpus[:low]


def messages(system: str, user: str, nonce: str) -> list[dict]:
    # The nonce opens the prompt, so a new nonce shares no prefix with earlier requests.
    return [
        {"role": "system", "content": f"Session {nonce}.\n{system}"},
        {"role": "user", "content": user},
    ]


async def chat(
    session: aiohttp.ClientSession,
    server: LlamaCppServer,
    msgs: list[dict],
    *,
    max_tokens: int,
    abort_after_s: float | None = None,
) -> dict:
    """One streamed request; returns TTFT, content deltas and their times (s)."""
    body = {"messages": msgs, "stream": True, **server.request_settings().request_params()}
    body["max_tokens"] = max_tokens
    started = time.perf_counter()
    delta_times: list[float] = []
    text = ""
    response = await session.post(f"{server.base_url}/chat/completions", json=body)
    try:
        async with asyncio.timeout(abort_after_s):
            async for raw in response.content:
                line = raw.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                delta = json.loads(line[6:])["choices"][0]["delta"]
                if delta.get("content"):
                    delta_times.append(time.perf_counter() - started)
                    text += delta["content"]
    except TimeoutError:
        pass
    finally:
        response.close()
    ttft = delta_times[0] if delta_times else None
    return {"ttft_s": ttft, "deltas": len(delta_times), "times": delta_times, "text": text}


def median_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 1)


async def measure(args: argparse.Namespace) -> dict:
    results: dict = {"size": args.size, "threads": args.threads, "runs": args.runs}
    async with (
        LlamaCppServer(size=args.size, n_threads=args.threads) as server,
        aiohttp.ClientSession() as session,
    ):
        system = await fit_system_prompt(session, server, args.prompt_tokens - 40)

        async def cold(user: str) -> dict:
            fresh = messages(system, user, uuid.uuid4().hex)
            return await chat(session, server, fresh, max_tokens=1)

        await cold(FINAL)  # first touch: page the weights in
        prompt_tokens = server.engine_log().timings[-1].prompt_eval_tokens
        results["prompt_tokens"] = prompt_tokens

        # 1. Cold vs warmed by a max_tokens=1 request on the partial transcript.
        cold_ttft, warm_ttft, warm_exact_ttft, remaining = [], [], [], []
        for _ in range(args.runs):
            cold_ttft.append((await cold(FINAL))["ttft_s"])
            nonce = uuid.uuid4().hex
            await chat(session, server, messages(system, PARTIAL, nonce), max_tokens=1)
            reply = await chat(session, server, messages(system, FINAL, nonce), max_tokens=20)
            warm_ttft.append(reply["ttft_s"])
            remaining.append(server.engine_log().prefix_hits[-1].remaining_tokens)
            nonce = uuid.uuid4().hex
            await chat(session, server, messages(system, FINAL, nonce), max_tokens=1)
            reply = await chat(session, server, messages(system, FINAL, nonce), max_tokens=20)
            warm_exact_ttft.append(reply["ttft_s"])
        results["cold_ttft_ms"] = median_ms(cold_ttft)
        results["warm_partial_ttft_ms"] = median_ms(warm_ttft)
        results["warm_partial_remaining_tokens"] = statistics.median(remaining)
        results["warm_exact_ttft_ms"] = median_ms(warm_exact_ttft)
        results["prefill_tokens_per_s"] = round(prompt_tokens / statistics.median(cold_ttft))

        # 2. Does the cache keep more than the previous request? Warm A, run B, then A.
        a_after_b, reused = [], []
        for _ in range(max(2, args.runs // 2)):
            nonce_a = uuid.uuid4().hex
            await chat(session, server, messages(system, PARTIAL, nonce_a), max_tokens=1)
            await cold(FINAL)  # B: another session's prompt
            reply = await chat(session, server, messages(system, FINAL, nonce_a), max_tokens=1)
            a_after_b.append(reply["ttft_s"])
            hits = server.engine_log().prefix_hits
            reused.append(hits[-1].reused_tokens if hits else 0)
        results["a_after_b_ttft_ms"] = median_ms(a_after_b)
        results["a_after_b_reused_tokens"] = statistics.median(reused)

        # 3. A cold request abandoned mid-prefill, then (a) a short unrelated request, or
        # (b) the same session's next request, sent right after the abandon.
        short = [{"role": "user", "content": "Hello there."}]
        alone, after_abort, same_session, same_reused = [], [], [], []
        for _ in range(max(2, args.runs // 2)):
            await cold(FINAL)
            alone.append((await chat(session, server, short, max_tokens=1))["ttft_s"])
            abandoned = messages(system, PARTIAL, uuid.uuid4().hex)
            await chat(session, server, abandoned, max_tokens=1, abort_after_s=args.abort_after_s)
            after_abort.append((await chat(session, server, short, max_tokens=1))["ttft_s"])
            nonce = uuid.uuid4().hex
            abandoned = messages(system, PARTIAL, nonce)
            await chat(session, server, abandoned, max_tokens=1, abort_after_s=args.abort_after_s)
            reply = await chat(session, server, messages(system, FINAL, nonce), max_tokens=1)
            same_session.append(reply["ttft_s"])
            same_reused.append(server.engine_log().prefix_hits[-1].reused_tokens)
        results["abort_after_s"] = args.abort_after_s
        results["short_alone_ttft_ms"] = median_ms(alone)
        results["short_after_abort_ttft_ms"] = median_ms(after_abort)
        results["same_session_after_abort_ttft_ms"] = median_ms(same_session)
        results["same_session_after_abort_reused_tokens"] = statistics.median(same_reused)

        # 4. Decode rate on a short prompt.
        rates = []
        for _ in range(3):
            reply = await chat(session, server, short, max_tokens=args.decode_tokens)
            times = reply["times"]
            rates.append((len(times) - 1) / (times[-1] - times[0]))
        results["decode_deltas_per_s"] = round(statistics.median(rates), 1)
        timing = server.engine_log().timings[-1]
        results["decode_tokens_per_s_engine"] = round(timing.eval_runs / timing.eval_ms * 1000, 1)
    results["load_average"] = os.getloadavg()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="bench", help="model size: bench or small")
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (median taken)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for the engine")
    parser.add_argument("--prompt-tokens", type=int, default=3200, help="prompt size (tokens)")
    parser.add_argument("--abort-after-s", type=float, default=1.0, help="abandon a prefill")
    parser.add_argument("--decode-tokens", type=int, default=100, help="tokens for decode rate")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    results = asyncio.run(measure(args))
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
