"""The bench runner end to end: one short real-time call through the real Pipecat pipeline."""

import pytest

from pipecat_fast.bench.configs import CONFIGS, BenchConfig, get_configs, register
from pipecat_fast.bench.material import bench_calls
from pipecat_fast.bench.pipeline import Endpoints
from pipecat_fast.bench.runner import CallResult, build_report, run_call, run_interleaved
from pipecat_fast.testing.profiles import SAME_REGION
from pipecat_fast.testing.stack import EmulatorStack
from pipecat_fast.ttfa import MARKS, TurnRecord


def short_call(turns=2):
    call = bench_calls(ids=["reschedule"])[0]
    call.utterances = call.utterances[:turns]
    call.stt_script = call.stt_script[:turns]
    return call


def stack_for(call, profile=SAME_REGION):
    return EmulatorStack(profile, stt_scripts={call.id: call.stt_script}, replies=call.replies)


@pytest.mark.slow
async def test_one_short_call_end_to_end_measures_every_turn_and_stage():
    call = short_call(turns=2)
    async with stack_for(call) as stack:
        result = await run_call(call, CONFIGS["stock"], Endpoints(**stack.urls()))
    assert result.error is None
    # Each utterance was answered (a mid-utterance pause the turn detector took for an end
    # of turn would add an unanswered turn between them, not lose one).
    assert len(result.turns) == 2
    for turn in result.turns:
        assert set(turn.marks) >= set(MARKS) - {"final_transcript"}
        assert sum(turn.stages_ms().values()) == pytest.approx(turn.ttfa_ms)
    # The second request reads the first one's prompt from the emulated prefix cache.
    assert result.turns[0].cached_tokens == 0
    assert result.turns[1].cached_tokens > 3000
    assert result.turns[1].prompt_tokens > result.turns[0].prompt_tokens
    # The STT emulator transcribed exactly the scripted utterances, the LLM answered each. A
    # Finalize at a mid-utterance VAD stop may cut one utterance into two finals, as on Deepgram.
    finals = [r.transcript for r in stack.stt.results if r.is_final and r.transcript]
    assert " ".join(finals) == " ".join(u.text for u in call.stt_script)
    # On a loaded machine the turn detector may end a turn at a mid-utterance pause; the caller
    # resuming cancels that request, so only the answered ones run to the end.
    assert len([r for r in stack.llm.requests if not r.cancelled]) == 2


@pytest.mark.slow
async def test_a_broken_call_is_recorded_and_the_run_goes_on():
    call = short_call(turns=1)

    def broken(spec):
        raise RuntimeError("lever exploded")

    bad = BenchConfig("broken-for-test", "raises while building", broken)
    async with stack_for(call) as stack:
        results = await run_interleaved([call], [CONFIGS["stock"], bad], Endpoints(**stack.urls()))
    assert [r.config for r in results] == ["stock", "broken-for-test"]
    assert results[0].error is None and len(results[0].turns) == 1
    assert "lever exploded" in results[1].error and results[1].turns == []
    report = build_report(results, "stock")
    assert report["errors"] == [
        {"config": "broken-for-test", "call": call.id, "repeat": 0, "error": results[1].error}
    ]


def _result(config, ttfas):
    turns = [
        TurnRecord(turn=i, user_stopped_at=0.0, marks={"first_audio_out": v / 1000})
        for i, v in enumerate(ttfas)
    ]
    return CallResult(config=config, call="c", repeat=0, turns=turns)


def test_report_has_the_documented_shape_and_ratios_to_the_baseline():
    results = [_result("stock", [500, 700, 900]), _result("fast", [250, 350, 450])]
    report = build_report(results, "stock", profile="same-region")
    assert report["baseline"] == "stock"
    assert report["configs"] == ["stock", "fast"]
    assert report["summary"]["stock"]["ttfa_p50_ms"] == 700
    assert report["ratios"]["fast"] == {"p50": 0.5, "p95": 0.5}
    assert report["ratios"]["stock"] == {"p50": 1.0, "p95": 1.0}
    row = report["turns"][0]
    for key in ("config", "call", "turn", "ttfa_ms", "stages_ms", "prompt_tokens", "cached_tokens"):
        assert key in row
    assert report["profile"] == "same-region"


def test_configs_are_looked_up_by_name_with_a_clear_error():
    assert [c.name for c in get_configs(["stock-again", "stock"])] == ["stock-again", "stock"]
    with pytest.raises(ValueError, match="unknown bench configuration.*nope.*known: stock"):
        get_configs(["nope"])
    with pytest.raises(ValueError, match="already registered"):
        register(BenchConfig("stock", "dup", lambda spec: None))
