"""Turn-2 cache reuse of two-turn calls behind sglang-router, per policy, with and without a key.

Two real llama-servers (small generated model, 2 slots each) behind the real sglang-router; each
call has its own caller record at the start of its system prompt. Prints, per policy and key
mode, how many of the calls' second turns read their first turn from the cache, and the median
share of turn 2's prompt served from the cache (the engine's own cached_tokens).

    PYTHONPATH=$PWD python scripts/measure_affinity.py --calls 6
"""

import argparse
import asyncio
import statistics

from pipecat.frames.frames import LLMContextFrame
from pipecat.metrics.metrics import LLMUsageMetricsData
from pipecat.pipeline.worker import PipelineParams
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import run_test

from pipecat_fast.testing.gguf_model import corpus_text
from pipecat_fast.testing.llama_cpp_server import LlamaServer
from pipecat_fast.testing.sglang_router import SglangRouter
from pipecat_fast.warmup.affinity import affinity_extra

SYSTEM = corpus_text()[:2400]
CASES = [
    ("round_robin", False),
    ("random", False),
    ("consistent_hashing", False),
    ("consistent_hashing", True),
    ("manual", True),
    ("cache_aware", False),
]


async def turn(llm, context, text):
    context.add_message({"role": "user", "content": text})
    down, _ = await run_test(
        llm,
        frames_to_send=[LLMContextFrame(context)],
        pipeline_params=PipelineParams(enable_metrics=True, enable_usage_metrics=True),
    )
    usage = [
        d.value
        for f in down
        if hasattr(f, "data")
        for d in f.data
        if isinstance(d, LLMUsageMetricsData)
    ][-1]
    context.add_message({"role": "assistant", "content": "ok"})
    return usage.prompt_tokens, usage.cache_read_input_tokens or 0


async def predicted(server) -> int:
    """Tokens the replica generated so far (every request here generates 8)."""
    for line in (await server.metrics()).splitlines():
        if line.startswith("llamacpp:tokens_predicted_total"):
            return int(float(line.split()[-1]))
    return 0


async def main(calls: int) -> None:
    async with (
        LlamaServer(size="small", slots=2, n_threads=1) as a,
        LlamaServer(size="small", slots=2, n_threads=1) as b,
    ):
        settings = a.request_settings(max_tokens=8).openai_settings_fields()
        print(
            "| policy | key | turn-2 hits | median share of turn 2 read from cache "
            "| requests on replica A / B |"
        )
        print("|---|---|---|---|---|")
        for policy, keyed in CASES:
            before = [await predicted(r) for r in (a, b)]
            async with SglangRouter([a.root_url, b.root_url], policy=policy) as router:
                shares = []
                for i in range(calls):
                    call_id = f"{policy}-{keyed}-{i}"
                    extra = affinity_extra(call_id) if keyed else {}
                    llm = OpenAILLMService(
                        api_key="none",
                        base_url=router.base_url,
                        settings=OpenAILLMService.Settings(
                            model=a.model_name,
                            system_instruction=f"Caller record {call_id}.\n{SYSTEM}",
                            **{**settings, "extra": {**settings["extra"], **extra}},
                        ),
                    )
                    context = LLMContext()
                    p1, _ = await turn(llm, context, "I would like to book a cleaning.")
                    p2, c2 = await turn(llm, context, "Tuesday morning, please.")
                    shares.append(c2 / p2)
                hits = sum(s > 0.5 for s in shares)
                pairs = zip((a, b), before, strict=True)
                served = [(await predicted(r) - n) // 8 for r, n in pairs]
                key = "X-SMG-Routing-Key + prompt_cache_key" if keyed else "none"
                print(
                    f"| `{policy}` | {key} | {hits}/{calls} | "
                    f"{100 * statistics.median(shares):.0f} % | {served[0]} / {served[1]} |"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=6)
    asyncio.run(main(parser.parse_args().calls))
