"""The real llama.cpp engine (llama-cpp-python's server) on the small generated model.

Behaviour only, never timing: what streams, what the engine reports about its prefix cache,
what is deterministic, and that the server process never outlives its owner.
"""

import asyncio
import importlib.util
import json
import os
import sys

import aiohttp
import pytest
import pytest_asyncio

from pipecat_fast.testing.gguf_model import (
    CHATML_TEMPLATE,
    EOS_TOKEN_ID,
    corpus_text,
    ensure_model,
)
from pipecat_fast.testing.llama_server import (
    LlamaCppServer,
    LlamaServerError,
    engine_llm_settings,
    llama_cpp_available,
)

pytestmark = [
    pytest.mark.engine,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(
        not llama_cpp_available(),
        reason="llama_cpp is not importable: install llama-cpp-python[server] "
        "(the pipecat-fast 'llama' extra) to run the real-engine tests",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("gguf") is None or importlib.util.find_spec("tokenizers") is None,
        reason="gguf and tokenizers (the pipecat-fast 'bench' extra) are needed to build the model",
    ),
]

# ~500 tokens of shared instructions: big enough that a cache hit is unmistakable.
SYSTEM = corpus_text()[:2000]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server():
    """One engine for the module: each test reads only what its own requests logged."""
    async with LlamaCppServer(size="small") as running:
        yield running


async def complete(server, messages, **overrides):
    """One streamed chat completion; returns the content deltas."""
    body = {
        "messages": messages,
        "stream": True,
        **server.request_settings(**overrides).request_params(),
    }
    deltas = []
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{server.base_url}/chat/completions", json=body) as response:
            assert response.status == 200
            async for raw in response.content:
                line = raw.decode().strip()
                if line.startswith("data: {"):
                    delta = json.loads(line[6:])["choices"][0]["delta"]
                    if delta.get("content"):
                        deltas.append(delta["content"])
    return deltas


def chat(user, system=SYSTEM):
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@pytest.fixture(scope="module")
def tokenize():
    """Messages -> the token ids the engine prefills (ChatML rendering, model vocabulary)."""
    import llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    vocab = llama_cpp.Llama(str(ensure_model("small")), vocab_only=True, verbose=False)
    formatter = Jinja2ChatFormatter(CHATML_TEMPLATE, eos_token="<|im_end|>", bos_token="")

    def run(messages, tools=None):
        prompt = formatter(messages=messages, tools=tools).prompt
        return vocab.tokenize(prompt.encode(), add_bos=True, special=True)

    return run


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


# -- (a) Pipecat's real OpenAILLMService against the engine ----------------------------------


async def test_openai_llm_service_streams_text_frames(server):
    from pipecat.frames.frames import (
        LLMContextFrame,
        LLMFullResponseEndFrame,
        LLMFullResponseStartFrame,
        LLMTextFrame,
        MetricsFrame,
    )
    from pipecat.metrics.metrics import LLMUsageMetricsData, TTFBMetricsData
    from pipecat.pipeline.worker import PipelineParams
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.services.openai.llm import OpenAILLMService
    from pipecat.tests.utils import run_test

    settings = OpenAILLMService.Settings(
        model=server.model_name,
        system_instruction=SYSTEM,
        **engine_llm_settings(server, max_tokens=12),
    )
    llm = OpenAILLMService(base_url=server.base_url, api_key="none", settings=settings)
    context = LLMContext(messages=[{"role": "user", "content": "Book a table for two."}])
    down, _ = await run_test(
        llm,
        frames_to_send=[LLMContextFrame(context=context)],
        pipeline_params=PipelineParams(enable_metrics=True, enable_usage_metrics=True),
    )

    texts = [f.text for f in down if isinstance(f, LLMTextFrame)]
    assert texts and all(texts)
    kinds = [type(f) for f in down]
    assert kinds.index(LLMFullResponseStartFrame) < kinds.index(LLMTextFrame)
    assert kinds.index(LLMFullResponseEndFrame) > max(
        i for i, kind in enumerate(kinds) if kind is LLMTextFrame
    )
    metrics = [d for f in down if isinstance(f, MetricsFrame) for d in f.data]
    assert any(isinstance(d, TTFBMetricsData) and d.value > 0 for d in metrics)
    # The cap travelled: the engine generated at most max_tokens tokens.
    timing = server.engine_log().timings[-1]
    assert timing.eval_runs <= 12
    # The system instruction reached the engine: ~500 tokens were prefilled.
    assert timing.prompt_eval_tokens > 400
    # Fact pinned on purpose: llama-cpp-python 0.3.x streams no usage object (not even with
    # stream_options.include_usage, which Pipecat sends), so Pipecat reports no token usage;
    # cached tokens come from server.engine_log(). If this fails, the engine now reports usage.
    assert not [d for d in metrics if isinstance(d, LLMUsageMetricsData)]


async def test_openai_settings_carry_the_request_settings(server):
    settings = server.request_settings(max_tokens=7, seed=3)
    pipecat_settings = settings.openai_settings(system_instruction="Be brief.")
    assert pipecat_settings.max_tokens == 7 and pipecat_settings.seed == 3
    assert pipecat_settings.system_instruction == "Be brief."
    assert pipecat_settings.extra == {"logit_bias": settings.logit_bias()}
    # Control tokens and lone UTF-8 lead/continuation bytes are banned; words are not.
    banned = {int(token_id) for token_id in settings.logit_bias()}
    assert {0, 1, 2} <= banned and 128 < len(banned) < 200


# -- (b) prefix cache: proven by what the engine logs ----------------------------------------


async def test_request_sharing_a_long_prefix_is_served_from_the_cache(server, tokenize):
    first, second = chat("What time do you open on Sundays?"), chat("A table for four tonight?")
    await complete(server, first, max_tokens=1)
    await complete(server, second, max_tokens=1)
    hit = server.engine_log().prefix_hits[-1]
    timing = server.engine_log().timings[-1]

    shared = common_prefix(tokenize(first), tokenize(second))
    assert shared > 400  # the system prompt
    assert hit.reused_tokens == shared
    assert hit.remaining_tokens == len(tokenize(second)) - shared
    assert timing.prompt_eval_tokens == hit.remaining_tokens


async def test_max_tokens_1_request_warms_the_cache_for_the_full_turn(server, tokenize):
    # Speculative prefill: the partial transcript first, then the final one extending it.
    partial = chat("I would like to book a table for")
    final = chat("I would like to book a table for two people")
    await complete(server, partial, max_tokens=1)
    deltas = await complete(server, final)
    hit = server.engine_log().prefix_hits[-1]

    # Everything up to the partial text is reused; its closing markup is not.
    assert hit.reused_tokens == common_prefix(tokenize(partial), tokenize(final))
    assert hit.reused_tokens >= len(tokenize(partial)) - 8
    assert deltas


async def test_cache_keeps_only_the_previous_request(server, tokenize):
    first = chat("What time do you open?")
    other = chat("What time do you open?", system=corpus_text()[20000:22000])
    await complete(server, first, max_tokens=1)
    await complete(server, other, max_tokens=1)
    await complete(server, first, max_tokens=1)
    hit = server.engine_log().prefix_hits[-1]
    timing = server.engine_log().timings[-1]

    # The first prompt's KV was overwritten by the other one: only their shared ChatML
    # opening is reused and the rest of the first prompt is prefilled again.
    assert hit.reused_tokens == common_prefix(tokenize(other), tokenize(first)) < 10
    assert timing.prompt_eval_tokens == len(tokenize(first)) - hit.reused_tokens


async def test_abandoned_request_still_finishes_its_prefill(server, tokenize):
    # A first request leaves only the ChatML opening in the KV cache, so the abandoned one
    # logs "prefix-match hit" the moment its ~500-token prefill starts. The client hangs up
    # right then; the same session's next request still finds the whole abandoned prompt in
    # the KV cache: the prefill ran to the end although nobody was listening.
    await complete(server, chat("Hi", system="Short."), max_tokens=1)
    hits_before = len(server.engine_log().prefix_hits)
    abandoned = chat("I would like to book a table for")
    body = {"messages": abandoned, "stream": True, **server.request_settings().request_params()}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{server.base_url}/chat/completions", json=body) as response:
            assert response.status == 200
            while len(server.engine_log().prefix_hits) == hits_before:
                await asyncio.sleep(0.002)
    follow_up = chat("I would like to book a table for two")
    await complete(server, follow_up, max_tokens=1)
    hits = server.engine_log().prefix_hits
    assert len(hits) == hits_before + 2
    assert hits[-1].reused_tokens == common_prefix(tokenize(abandoned), tokenize(follow_up)) > 400


async def open_stream(session, server, messages, max_tokens):
    body = {
        "messages": messages,
        "stream": True,
        **server.request_settings(max_tokens=max_tokens).request_params(),
    }
    response = await session.post(f"{server.base_url}/chat/completions", json=body)
    assert response.status == 200
    return response


async def first_content_delta(response):
    async for raw in response.content:
        line = raw.decode().strip()
        if line.startswith("data: {") and json.loads(line[6:])["choices"][0]["delta"].get(
            "content"
        ):
            return


async def test_request_arriving_mid_reply_waits_and_does_not_cut_it(server):
    # interrupt_requests is off: the streaming reply runs to its cap, then the next request.
    done_before = len(server.engine_log().timings)
    async with aiohttp.ClientSession() as session:
        response = await open_stream(session, server, chat("Tell me more.", system="Hi."), 60)
        await first_content_delta(response)
        other = asyncio.create_task(complete(server, chat("Other.", system="Hi."), max_tokens=1))
        rest = (await response.read()).decode()
        await other
    assert '"finish_reason": "length"' in rest
    timings = server.engine_log().timings[done_before:]
    assert len(timings) == 2  # the reply, then the request that waited for it
    assert timings[0].eval_runs == 59  # all 60 tokens (the first is sampled after prefill)


async def test_reply_abandoned_mid_stream_stops_generating(server):
    done_before = len(server.engine_log().timings)
    async with aiohttp.ClientSession() as session:
        response = await open_stream(session, server, chat("Tell me more.", system="Hi."), 1000)
        await first_content_delta(response)
        response.close()
    await complete(server, chat("Next.", system="Hi."), max_tokens=1)
    # The abandoned reply logged no completed generation; only the next request did.
    assert len(server.engine_log().timings) == done_before + 1


async def test_request_cancelled_while_queued_never_runs(server, tokenize):
    # A reply streams (holding the engine); a second request queues behind it and is
    # abandoned there. It never runs: the next request finds none of its prompt cached.
    queued = chat("queued")
    async with aiohttp.ClientSession() as session:
        reply = await open_stream(session, server, chat("Tell me more.", system="Hi."), 300)
        await first_content_delta(reply)
        waiting = await open_stream(session, server, queued, 1)
        waiting.close()
        await reply.read()
    after = chat("next")
    await complete(server, after, max_tokens=1)
    hit = server.engine_log().prefix_hits[-1]
    assert common_prefix(tokenize(queued), tokenize(after)) > 400
    assert hit.reused_tokens < 10


# -- (c) determinism and the ChatML template ---------------------------------------------------


async def test_same_prompt_gives_same_reply_on_a_fresh_engine():
    messages = chat("Please book a table for two tonight.", system="You take bookings.")
    replies = []
    for _ in range(2):
        async with LlamaCppServer(size="small") as fresh:
            replies.append("".join(await complete(fresh, messages)))
    assert replies[0] and replies[0] == replies[1]


async def test_seed_changes_the_reply(server):
    messages = chat("Please book a table for two tonight.", system="You take bookings.")
    first = "".join(await complete(server, messages, seed=1))
    await complete(server, chat("unrelated", system="Something else."), max_tokens=1)
    second = "".join(await complete(server, messages, seed=2))
    assert first != second


async def test_engine_prompt_is_the_chatml_rendering_of_the_messages(server, tokenize):
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    tools = [
        {
            "type": "function",
            "function": {
                "name": "book_table",
                "description": "Book a table.",
                "parameters": {"type": "object", "properties": {"people": {"type": "integer"}}},
            },
        }
    ]
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Table for two."}]},
    ]
    formatter = Jinja2ChatFormatter(CHATML_TEMPLATE, eos_token="<|im_end|>", bos_token="")
    assert formatter(messages=messages, tools=tools).prompt == (
        "<|im_start|>system\nBe brief.\n\n# Tools\n\n"
        "Functions you may call, one JSON schema per line:\n<tools>\n"
        + json.dumps(tools[0])
        + "\n</tools>\nTo call one, reply with "
        '<tool_call>{"name": ..., "arguments": ...}</tool_call>.<|im_end|>\n'
        "<|im_start|>user\nTable for two.<|im_end|>\n<|im_start|>assistant\n"
    )
    tokens = tokenize(messages, tools)
    assert tokens[0] == 1  # <|im_start|> is one control token; no BOS is added
    assert tokens.count(EOS_TOKEN_ID) == 2

    # The server renders with the template stored in the GGUF: same prompt, same tokens.
    body = {"messages": messages, "tools": tools, "stream": False, "max_tokens": 1}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{server.base_url}/chat/completions", json=body) as response:
            reply = await response.json()
    assert reply["usage"]["prompt_tokens"] == len(tokens)


# -- the process: ready, stopped, never leaked ---------------------------------------------------


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped) still answers kill(0): read its state.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


async def test_server_exits_when_the_context_ends():
    async with LlamaCppServer(size="small") as running:
        pid = running.pid
        assert running.base_url.startswith("http://127.0.0.1:") and running.base_url.endswith("/v1")
        assert _alive(pid)
    assert running.pid is None
    assert not _alive(pid)


async def test_cancelled_start_leaves_no_server_behind():
    server = LlamaCppServer(size="small")
    task = asyncio.create_task(server.start())
    while server.pid is None and not task.done():
        await asyncio.sleep(0.005)
    pid = server.pid
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert server.pid is None
    for _ in range(200):  # the child watcher reaps it in the background
        if not _alive(pid):
            break
        await asyncio.sleep(0.01)
    assert not _alive(pid)


async def test_start_failure_reports_the_server_log(tmp_path):
    not_a_model = tmp_path / "broken.gguf"
    not_a_model.write_bytes(b"this is not a gguf file")
    with pytest.raises(LlamaServerError, match="exited with code") as raised:
        async with LlamaCppServer(not_a_model):
            pass
    assert "broken.gguf" in str(raised.value)


async def test_server_left_running_dies_with_its_owner_process():
    # An owner that starts a server and exits without stopping it: the atexit hook kills it.
    script = (
        "import asyncio\n"
        "from pipecat_fast.testing.llama_server import LlamaCppServer\n"
        "async def main():\n"
        "    server = LlamaCppServer(size='small')\n"
        "    await server.start()\n"
        "    print(server.pid, flush=True)\n"
        "asyncio.run(main())\n"
    )
    owner = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    out, _ = await owner.communicate()
    assert owner.returncode == 0
    pid = int(out.decode().split()[-1])
    for _ in range(200):  # SIGKILL is delivered asynchronously
        if not _alive(pid):
            break
        await asyncio.sleep(0.01)
    assert not _alive(pid)


# -- (d) the bench's accounting from the engine's log -------------------------------------------


async def test_engine_accounting_counts_speculation_reuse_and_abandoned_replies(server, tokenize):
    # What the bench reads after a call: a max_tokens=1 prefill, the real reply it warmed, and
    # a reply the caller talked over (abandoned mid-stream: no timing, but its prefill ran).
    from pipecat_fast.bench.runner import CallResult, prefill_compute

    await complete(server, chat("Hi", system="Short."), max_tokens=1)  # another caller
    before = len(server.engine_log().requests)
    partial, final = chat("I would like to book a table"), chat("I would like to book a table.")
    await complete(server, partial, max_tokens=1)
    await complete(server, final, max_tokens=20)
    async with aiohttp.ClientSession() as session:
        talked_over = await open_stream(session, server, chat("And for dessert?"), 1000)
        await first_content_delta(talked_over)
        talked_over.close()
    await complete(server, chat("Hi", system="Short."), max_tokens=1)  # closes the window
    spec, real, abandoned, _marker = server.engine_log().requests[before:]
    assert spec.speculative and spec.completed and spec.reused_tokens < 10
    assert spec.computed_tokens > 400  # the whole system prompt, cold
    assert not real.speculative and real.completed
    assert real.reused_tokens == common_prefix(tokenize(partial), tokenize(final)) > 400
    assert not abandoned.completed and abandoned.computed_tokens > 0
    records = [r.as_record() for r in (spec, real, abandoned)]
    result = CallResult(config="prefill", call="c", repeat=0, llm_requests=records)
    stats = prefill_compute([result], "prefill")["prefill"]
    assert stats["speculative_requests"] == 1 and stats["abandoned_requests"] == 1
    assert stats["warm_real_requests"] == 2  # the reply and the talked-over one: prompt cached
    assert (
        stats["cached_tokens"] == spec.reused_tokens + real.reused_tokens + abandoned.reused_tokens
    )
    # Counting completed generations only (the old accounting) misses the abandoned prefill.
    assert stats["computed_tokens"] == sum(r.computed_tokens for r in (spec, real, abandoned))


async def test_the_bench_sizes_the_callers_patience_to_the_engines_prefill_rate(server):
    from pipecat_fast.bench.pipeline_bench import DEFAULT_PATIENCE_S, size_to_engine

    sizing = await size_to_engine(server, SYSTEM)
    assert sizing["prompt_engine_tokens"] > 400  # the whole prompt, prefilled cold
    assert sizing["prefill_tokens_per_s"] > 0
    expected = sizing["prompt_engine_tokens"] / sizing["prefill_tokens_per_s"]
    assert sizing["predicted_cold_ttft_s"] == pytest.approx(expected, abs=0.01)
    assert sizing["caller_patience_s"] >= max(DEFAULT_PATIENCE_S, 2 * expected + 5)
