"""The README's code runs as written: its bot runs a whole call against the emulators.

The first ``python`` block of README.md is executed unchanged; the test fills in only what a
user would — the transport (the scripted caller) and the three services, pointed at the loopback
emulators — and checks that the call ends by itself (the snippet's ``on_client_disconnected``
handler), that every turn was measured and announced, and that the levers in it acted.
"""

import asyncio
import re

import pytest

from tests.conftest import ROOT


def readme_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text("utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


def readme_snippet() -> str:
    return readme_blocks()[0]


def test_readme_snippet_keeps_a_handle_on_the_meter_and_uses_the_current_runner():
    code = readme_snippet()
    assert "ttfa = TTFAObserver()" in code and "observers=[ttfa" in code
    assert "from pipecat.workers.runner import WorkerRunner" in code
    assert "PipelineRunner" not in code
    assert '"on_turn_measured"' in code


def test_readme_real_services_block_builds_the_services():
    """The second block (real providers) constructs its services; fake keys, nothing is sent."""
    block = readme_blocks()[1]
    env = {"DEEPGRAM_API_KEY": "k1", "OPENAI_API_KEY": "k2", "CARTESIA_API_KEY": "k3"}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        namespace: dict = {}
        exec(compile(block, "README.md", "exec"), namespace)
    from pipecat.services.openai.llm import OpenAILLMService

    assert isinstance(namespace["llm"], OpenAILLMService)
    assert namespace["llm"].settings.system_instruction == namespace["SYSTEM_PROMPT"]


@pytest.mark.slow
async def test_readme_snippet_runs_a_call_end_to_end_against_the_emulators(capsys):
    from pipecat.services.cartesia.tts import CartesiaTTSService
    from pipecat.services.deepgram.stt import DeepgramSTTService
    from pipecat.services.openai.llm import OpenAILLMService

    from pipecat_fast.bench.calls import load_calls
    from pipecat_fast.testing import SAME_REGION, EmulatorStack, ScriptedCall

    namespace: dict = {}
    exec(compile(readme_snippet(), "README.md", "exec"), namespace)
    run_bot = namespace["run_bot"]

    call = ScriptedCall.shipped("book_cleaning", turns=2)
    prompt = load_calls(["book_cleaning"])[0].system_prompt  # ~3,150 tokens: cacheable
    replies = [(line.text, "Sure, I can help with that.") for line in call.lines]
    async with EmulatorStack(SAME_REGION, stt_scripts=call.stt_scripts, replies=replies) as stack:
        stt = DeepgramSTTService(api_key="emulator", base_url=stack.stt.base_url, tag=call.id)
        llm = OpenAILLMService(
            api_key="emulator",
            base_url=stack.llm.base_url,
            settings=OpenAILLMService.Settings(model="gpt-4.1-mini", system_instruction=prompt),
        )
        tts = CartesiaTTSService(
            api_key="emulator",
            url=stack.tts.url,
            settings=CartesiaTTSService.Settings(voice="emulated-voice"),
        )
        try:
            ttfa = await asyncio.wait_for(run_bot(call.transport(), stt, llm, tts), 120)
        except TimeoutError:
            pytest.fail("the README bot did not end the call when the caller hung up")
        requests = list(stack.llm.requests)

    summary = ttfa.summary()
    assert summary["n_turns"] == 2 and summary["n_unanswered"] == 0, summary
    out = capsys.readouterr().out
    assert re.search(r"^turn 0: TTFA \d+ ms", out, re.M), out[-2000:]
    assert re.search(r"^turn 1: TTFA \d+ ms", out, re.M), out[-2000:]
    assert "TTFA over the call: {'ttfa_p50_ms'" in out
    # The levers acted: prefill-only requests went out while the caller spoke, the second
    # turn's request read the cached prompt, and draft-and-hold drafted at end of speech.
    assert any(r.max_tokens == 1 for r in requests), [r.max_tokens for r in requests]
    assert (ttfa.turns[1].cached_tokens or 0) >= 3000
    assert all(t.extra.get("drafts", 0) >= 1 for t in ttfa.turns), [t.extra for t in ttfa.turns]
