"""CacheBustGuard on fake frame streams through Pipecat's real OpenAILLMService.

Only the HTTP call is faked (``lint_fakes.PrefixCachingProvider`` caches like OpenAI
documents it), so the guard sees Pipecat's own tool registration and system-instruction
composition.
"""

import pytest
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import LLMContextFrame, LLMUpdateSettingsFrame
from pipecat.observers.base_observer import ProcessorSetUp
from pipecat.pipeline.worker import PipelineParams
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import run_test

from pipecat_fast.lint.guard import CacheBustGuard
from tests.lint.lint_fakes import FakeOpenAILLMService, PrefixCachingProvider

STATIC = " ".join(
    f"Rule {i}: keep answers short and friendly, and read details back." for i in range(150)
)
PARAMS = PipelineParams(enable_metrics=True, enable_usage_metrics=True)


def contexts(n, tools=None):
    msgs, out = [], []
    for t in range(n):
        msgs = msgs + [{"role": "user", "content": f"question {t}"}]
        ctx = LLMContext(messages=list(msgs), tools=tools) if tools else LLMContext(list(msgs))
        out.append(ctx)
        msgs = msgs + [{"role": "assistant", "content": "OK"}]
    return out


def service(system=None):
    provider = PrefixCachingProvider()
    settings = FakeOpenAILLMService.Settings(system_instruction=system) if system else None
    llm = FakeOpenAILLMService(provider, **({"settings": settings} if settings else {}))
    return llm, provider


async def test_stable_session_reads_from_cache_and_stays_quiet():
    llm, provider = service("You are a bot. " + STATIC)
    guard = CacheBustGuard(provider="openai", llm=llm)
    frames = [LLMContextFrame(c) for c in contexts(4)]
    await run_test(llm, frames_to_send=frames, observers=[guard], pipeline_params=PARAMS)
    assert provider.cached[0] == 0 and all(c > 0 for c in provider.cached[1:])
    assert guard.warnings == []


async def test_timestamp_first_busts_every_turn_and_cache_reads_stay_zero():
    # Regression (issue 5): "Current time is 14:03:22. You are ..." at run time.
    llm, provider = service()
    guard = CacheBustGuard(provider="openai", llm=llm)
    frames = []
    for t, ctx in enumerate(contexts(4)):
        system = f"Current time is 14:03:{22 + t}. You are a bot. " + STATIC
        frames.append(
            LLMUpdateSettingsFrame(delta=FakeOpenAILLMService.Settings(system_instruction=system))
        )
        frames.append(LLMContextFrame(ctx))
    await run_test(llm, frames_to_send=frames, observers=[guard], pipeline_params=PARAMS)
    assert provider.cached == [0, 0, 0, 0]
    changed = [w for w in guard.warnings if w.kind == "prefix-changed"]
    assert [w.request for w in changed] == [2, 3, 4]
    assert all(w.cause == "system" and w.token_offset < 12 for w in changed)
    assert [w.first for w in changed] == [True, False, False]
    assert any(w.kind == "no-cache-reads" for w in guard.warnings)


async def test_prefix_change_mid_session_is_caught_once_where_it_starts():
    llm, provider = service("You are a bot. " + STATIC)
    guard = CacheBustGuard(provider="openai", llm=llm)
    ctxs = contexts(4)
    new_prompt = "You are a bot. " + STATIC + " Also upsell the dessert menu."
    frames = [
        LLMContextFrame(ctxs[0]),
        LLMContextFrame(ctxs[1]),
        LLMUpdateSettingsFrame(delta=FakeOpenAILLMService.Settings(system_instruction=new_prompt)),
        LLMContextFrame(ctxs[2]),
        LLMContextFrame(ctxs[3]),
    ]
    await run_test(llm, frames_to_send=frames, observers=[guard], pipeline_params=PARAMS)
    (w,) = guard.warnings
    assert w.request == 3 and w.cause == "system"
    assert "upsell" in w.message
    assert w.char_offset == len("You are a bot. " + STATIC)


async def test_pipecat_tool_registration_recomposes_the_system_instruction():
    llm, provider = service("You are a bot. " + STATIC)
    weather = FunctionSchema(
        name="get_weather",
        description="Weather in a city.",
        properties={"city": {"type": "string"}},
        required=["city"],
    )

    async def handler(params):
        await params.result_callback("sunny")

    llm.register_function("get_weather", handler)

    def register_async_after_second_request(svc):
        if len(provider.requests) == 2:
            svc.register_function("get_weather", handler, cancel_on_interruption=False)

    llm.after_request.append(register_async_after_second_request)
    guard = CacheBustGuard(provider="openai", llm=llm)
    tools = ToolsSchema(standard_tools=[weather])
    frames = [LLMContextFrame(c) for c in contexts(4, tools)]
    await run_test(llm, frames_to_send=frames, observers=[guard], pipeline_params=PARAMS)
    (w,) = guard.warnings
    assert w.request == 3 and w.cause == "system"
    assert "async-tool instructions" in w.message
    # What Pipecat sent really changed there.
    sent = [r["messages"][0]["content"] for r in provider.requests]
    assert sent[0] == sent[1] and sent[2].startswith(sent[1]) and "ASYNC TOOLS" in sent[2]


async def test_cancellable_tool_registration_adds_a_cancel_tool_first():
    llm, provider = service("You are a bot. " + STATIC)
    weather = FunctionSchema(name="get_weather", description="Weather.", properties={}, required=[])

    async def handler(params):
        await params.result_callback("sunny")

    llm.register_function("get_weather", handler)
    llm.after_request.append(
        lambda svc: (
            len(provider.requests) == 1
            and svc.register_function(
                "get_weather", handler, cancel_on_interruption=False, cancellable_by_llm=True
            )
        )
    )
    guard = CacheBustGuard(provider="openai", llm=llm)
    frames = [LLMContextFrame(c) for c in contexts(3, ToolsSchema(standard_tools=[weather]))]
    await run_test(llm, frames_to_send=frames, observers=[guard], pipeline_params=PARAMS)
    (w,) = guard.warnings
    assert w.cause == "tools" and w.detail["added"] == ["cancel_get_weather"]
    assert "cancellation instructions" in w.message


async def test_tool_swap_between_turns_like_a_flows_node():
    llm, provider = service("You are a bot. " + STATIC)
    a = ToolsSchema(
        standard_tools=[
            FunctionSchema(name="choose_pizza", description="x", properties={}, required=[])
        ]
    )
    b = ToolsSchema(
        standard_tools=[
            FunctionSchema(name="select_size", description="y", properties={}, required=[])
        ]
    )
    ctxs = contexts(2, a) + contexts(3, b)[2:]
    guard = CacheBustGuard(provider="openai", llm=llm)
    await run_test(
        llm,
        frames_to_send=[LLMContextFrame(c) for c in ctxs],
        observers=[guard],
        pipeline_params=PARAMS,
    )
    (w,) = guard.warnings
    assert w.cause == "tools" and w.detail == {
        "added": ["select_size"],
        "removed": ["choose_pizza"],
    }


async def test_guard_discovers_llm_services_and_fails_open():
    llm, _ = service("You are a bot.")
    guard = CacheBustGuard()
    await guard.on_processor_setup(ProcessorSetUp(processor=llm, started_at_ns=0, finished_at_ns=0))
    assert id(llm) in guard._cbg_attached

    def broken_adapter():
        raise RuntimeError("boom")

    llm.get_llm_adapter = broken_adapter
    frame = LLMContextFrame(LLMContext())
    guard._cbg_before_process(llm, frame)  # fails open: logged, nothing raised
    guard._cbg_after_process(llm, frame)
    assert guard._cbg_failed and guard.warnings == []


def test_unknown_provider_is_rejected():
    with pytest.raises(ValueError):
        CacheBustGuard(provider="acme")


def test_a_service_that_is_not_an_llm_is_a_type_error_naming_it():
    from pipecat.services.cartesia.tts import CartesiaTTSService

    tts = CartesiaTTSService(api_key="not-used", voice_id="v")
    with pytest.raises(TypeError, match=r"LLMService .*got CartesiaTTSService"):
        CacheBustGuard(provider="openai", llm=tts)
    with pytest.raises(TypeError, match="got str"):
        CacheBustGuard(llm="gpt-4o")


async def test_prefixes_are_compared_after_the_request_is_sent(monkeypatch):
    # Issue 10.7: nothing but a cheap snapshot may run before the request goes out.
    from pipecat_fast.lint import guard_core

    llm, provider = service()
    guard = CacheBustGuard(provider="openai", llm=llm)
    compared_at: list[int] = []  # requests the provider had received at each comparison
    real = guard_core.PrefixTracker.observe_request

    def spy(self, *args):
        compared_at.append(len(provider.requests))
        return real(self, *args)

    monkeypatch.setattr(guard_core.PrefixTracker, "observe_request", spy)
    frames = []
    for t, ctx in enumerate(contexts(3)):
        system = f"Current time is 14:03:{22 + t}. You are a bot. " + STATIC
        frames.append(
            LLMUpdateSettingsFrame(delta=FakeOpenAILLMService.Settings(system_instruction=system))
        )
        frames.append(LLMContextFrame(ctx))
    await run_test(llm, frames_to_send=frames, observers=[guard], pipeline_params=PARAMS)
    # Request N is compared only once the provider has it (and its response has ended).
    assert compared_at == [1, 2, 3]
    assert [w.request for w in guard.warnings if w.kind == "prefix-changed"] == [2, 3]


async def test_snapshot_is_the_request_as_sent_even_if_the_context_is_edited_later():
    llm, provider = service("You are a bot. " + STATIC)
    guard = CacheBustGuard(provider="openai", llm=llm)
    # Each context with its own message dicts, as a live context would hold them.
    ctxs = [LLMContext([dict(m) for m in c.get_messages()]) for c in contexts(3)]

    def edit_history_after_the_request(svc):
        # After request 2 is sent (before it is compared): rewrite its first message in
        # place, as a summariser editing the shared dicts would.
        if len(provider.requests) == 2:
            ctxs[1].get_messages()[0]["content"] = "summary of earlier turns"

    llm.after_request.append(edit_history_after_the_request)
    ctxs[2].get_messages()[0]["content"] = "summary of earlier turns"
    await run_test(
        llm,
        frames_to_send=[LLMContextFrame(c) for c in ctxs],
        observers=[guard],
        pipeline_params=PARAMS,
    )
    # Request 2 went out with "question 0" (its snapshot), request 3 with the summary: one
    # rewrite, at request 3; without the snapshot copy it would be blamed on request 2.
    (w,) = guard.warnings
    assert w.request == 3 and w.cause == "history" and "message 0" in w.message
