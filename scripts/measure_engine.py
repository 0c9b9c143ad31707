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
    cut = False
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
    except aiohttp.ClientPayloadError:  # the server ended the stream early (interrupt_requests)
        cut = True
    finally:
        response.close()
    ttft = delta_times[0] if delta_times else None
    return {
        "ttft_s": ttft,
        "deltas": len(delta_times),
        "times": delta_times,
        "text": text,
        "cut": cut,
    }


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


async def measure(args: argparse.Namespace) -> dict:
    results: dict = {"size": args.size, "threads": args.threads, "runs": args.runs}
    results["load_average_before"] = [round(x, 2) for x in os.getloadavg()]
    async with (
        LlamaCppServer(size=args.size, n_threads=args.threads) as server,
        aiohttp.ClientSession() as session,
    ):
        system = await fit_system_prompt(session, server, args.prompt_tokens - 40)
        short = [{"role": "user", "content": "Hello there."}]

        async def ttft(user: str, nonce: str, max_tokens: int = 1, **kwargs) -> float:
            reply = await chat(
                session, server, messages(system, user, nonce), max_tokens=max_tokens, **kwargs
            )
            return reply["ttft_s"] or 0.0

        def fresh() -> str:
            return uuid.uuid4().hex

        await ttft(FINAL, fresh())  # first touch: page the weights in
        results["prompt_tokens"] = server.engine_log().timings[-1].prompt_eval_tokens

        # Interleaved so that every ratio compares figures taken a few seconds apart on a
        # machine shared with other work.
        samples: dict[str, list[float]] = {}

        def record(name: str, value: float) -> None:
            samples.setdefault(name, []).append(value)

        for _ in range(args.runs):
            cold = await ttft(FINAL, fresh())
            record("cold_ttft_ms", ms(cold))
            # (1) warmed by a max_tokens=1 request on the partial transcript, then the final
            nonce = fresh()
            await ttft(PARTIAL, nonce)
            record("warm_partial_ttft_ms", ms(await ttft(FINAL, nonce, max_tokens=20)))
            record(
                "warm_partial_remaining_tokens",
                server.engine_log().prefix_hits[-1].remaining_tokens,
            )
            # (1b) warmed by the exact same prompt
            nonce = fresh()
            await ttft(FINAL, nonce)
            record("warm_exact_ttft_ms", ms(await ttft(FINAL, nonce, max_tokens=20)))
            # (2) A warmed, then another session's request B, then A's final
            nonce = fresh()
            await ttft(PARTIAL, nonce)
            cold_b = await ttft(FINAL, fresh())
            a_after_b = await ttft(FINAL, nonce)
            record("a_after_b_ttft_ms", ms(a_after_b))
            record("a_after_b_over_cold", round(a_after_b / cold_b, 2))
            record("a_after_b_reused_tokens", server.engine_log().prefix_hits[-1].reused_tokens)
            # (3a) a cold request abandoned mid-prefill, then a short unrelated request
            alone = (await chat(session, server, short, max_tokens=1))["ttft_s"]
            await ttft(PARTIAL, fresh(), abort_after_s=args.abort_after_s)
            after = (await chat(session, server, short, max_tokens=1))["ttft_s"]
            record("short_alone_ttft_ms", ms(alone))
            record("short_after_abort_ttft_ms", ms(after))
            # share of a cold prefill the short request waited for after the hang-up
            record(
                "abandoned_prefill_share_waited",
                round((args.abort_after_s + after - alone) / cold, 2),
            )
            # (3b) the same session's final right after its abandoned partial prefill
            nonce = fresh()
            await ttft(PARTIAL, nonce, abort_after_s=args.abort_after_s)
            record("same_session_after_abort_ttft_ms", ms(await ttft(FINAL, nonce)))
            record(
                "same_session_after_abort_reused_tokens",
                server.engine_log().prefix_hits[-1].reused_tokens,
            )
        results["abort_after_s"] = args.abort_after_s
        results["medians"] = {name: statistics.median(values) for name, values in samples.items()}
        results["samples"] = samples
        results["prefill_tokens_per_s"] = round(
            results["prompt_tokens"] / (results["medians"]["cold_ttft_ms"] / 1000)
        )

        # (4) A request arriving while a reply streams (interrupt_requests off, as here).
        results["reply_deltas_of_200_when_another_arrives"] = await reply_with_intruder(
            session, server, short
        )

        # (5) Decode rate on a short prompt: content deltas per second on the client, and
        # llama.cpp's own decode timing.
        rates, engine_rates = [], []
        for _ in range(3):
            times = (await chat(session, server, short, max_tokens=args.decode_tokens))["times"]
            rates.append((len(times) - 1) / (times[-1] - times[0]))
            timing = server.engine_log().timings[-1]
            engine_rates.append(timing.eval_runs / timing.eval_ms * 1000)
        results["decode_deltas_per_s"] = round(statistics.median(rates), 1)
        results["decode_tokens_per_s_engine"] = round(statistics.median(engine_rates), 1)
        # (4b) The same with the server's own default, interrupt_requests on.
    async with (
        LlamaCppServer(size=args.size, n_threads=args.threads, interrupt_requests=True) as server,
        aiohttp.ClientSession() as session,
    ):
        results[
            "reply_deltas_of_200_when_another_arrives_interrupt_on"
        ] = await reply_with_intruder(session, server, short)
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return results


async def reply_with_intruder(session, server, short) -> dict:
    """A 200-token reply, and another request sent 0.3 s into it: how much of it arrives."""
    streaming = asyncio.create_task(chat(session, server, short, max_tokens=200))
    await asyncio.sleep(0.3)
    await chat(session, server, short, max_tokens=1)
    reply = await streaming
    return {"deltas": reply["deltas"], "transfer_cut": reply["cut"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="bench", help="model size: bench or small")
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (median taken)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for the engine")
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
