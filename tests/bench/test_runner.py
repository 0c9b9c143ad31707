"""The bench runner end to end: one short real-time call through the real Pipecat pipeline."""

import pytest

from pipecat_fast.bench.configs import CONFIGS, BenchConfig, get_configs, register
from pipecat_fast.bench.material import bench_calls
from pipecat_fast.bench.pairing import TurnOutcome
from pipecat_fast.bench.pipeline import Endpoints
from pipecat_fast.bench.runner import (
    CallResult,
    build_report,
    prefill_compute,
    run_call,
    run_interleaved,
)
from pipecat_fast.testing.deepgram_server import utterance_from_words
from pipecat_fast.testing.profiles import SAME_REGION
from pipecat_fast.testing.stack import EmulatorStack
from pipecat_fast.ttfa import MARKS, TurnRecord


def short_call(turns=2):
    # reschedule's turns 0 and 2 (turn 1 pauses mid-utterance on purpose).
    return bench_calls(ids=["reschedule"])[0].only([0, 2][:turns])


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


def _result(config, ttfas, paused=()):
    outcomes = []
    for i, v in enumerate(ttfas):
        record = None
        if v is not None:
            record = TurnRecord(turn=i, user_stopped_at=0.0, marks={"first_audio_out": v / 1000})
        outcomes.append(TurnOutcome(i, record, deliberate_pause=i in paused))
    return CallResult(
        config=config,
        call="c",
        repeat=0,
        turns=[o.record for o in outcomes if o.record],
        unanswered=sum(1 for o in outcomes if o.record is None),
        outcomes=outcomes,
    )


def test_report_has_the_documented_shape_and_ratios_over_the_same_turns():
    results = [
        _result("stock", [500, 700, 900, 6000, 800], paused={4}),
        _result("fast", [250, 350, 450, None, 300], paused={4}),
    ]
    report = build_report(results, "stock", profile="same-region")
    assert report["baseline"] == "stock"
    assert report["configs"] == ["stock", "fast"]
    # Over the turns both answered (not the cold 6 s turn "fast" missed, nor the paused one).
    assert report["paired"]["n_paired"] == 3
    assert report["paired"]["configs"]["stock"]["ttfa_p50_ms"] == 700
    assert report["ratios"]["fast"] == {"p50": 0.5, "p95": 0.5}
    assert report["ratios"]["stock"] == {"p50": 1.0, "p95": 1.0}
    assert report["paired"]["answer_differences"][0]["unanswered_by"] == ["fast"]
    # Each configuration's own turns stay available, for reference.
    assert report["summary"]["stock"]["n_turns"] == 4
    rows = [t for t in report["turns"] if t["config"] == "fast"]
    assert [t["answered"] for t in rows] == [True, True, True, False, True]
    assert rows[3]["ttfa_ms"] is None and rows[4]["deliberate_pause"]
    for key in ("config", "call", "slot", "repeat", "turn", "ttfa_ms", "stages_ms"):
        assert key in rows[0]
    assert "prompt_tokens" in rows[0] and "false_cutoffs" in rows[0]
    assert report["profile"] == "same-region"


def test_prefill_compute_counts_speculation_and_reuse_the_same_way_for_every_provider():
    emulator = _result("prefill", [500])
    emulator.llm_requests = [
        {"prompt_tokens": 3000, "cached_tokens": 0, "max_tokens": 1},
        {"prompt_tokens": 3010, "cached_tokens": 2990, "max_tokens": 100},
    ]
    engine = _result("stock", [600])
    engine.llm_requests = [
        {"prompt_tokens": 3000, "cached_tokens": 0, "speculative": False},
        {"prompt_tokens": 3010, "cached_tokens": 2990, "speculative": False},
    ]
    compute = prefill_compute([engine, emulator], "stock")
    assert compute["prefill"]["speculative_requests"] == 1
    assert compute["stock"]["speculative_requests"] == 0
    for config in ("prefill", "stock"):
        assert compute[config]["cached_tokens"] == 2990
        assert compute[config]["computed_tokens"] == 3020
    assert compute["prefill"]["extra_compute_pct"] == 0.0


def test_configs_are_looked_up_by_name_with_a_clear_error():
    assert [c.name for c in get_configs(["stock-again", "stock"])] == ["stock-again", "stock"]
    with pytest.raises(ValueError, match="unknown bench configuration.*nope.*known: stock"):
        get_configs(["nope"])
    with pytest.raises(ValueError, match="already registered"):
        register(BenchConfig("stock", "dup", lambda spec: None))


def _record_matching(monkeypatch):
    """What the runner matched a call's turns from: said when an end-to-end assertion fails."""
    import pipecat_fast.bench.runner as runner

    seen = {}
    match = runner.match_turns

    def recording(spans, records, bot_starts):
        records, bot_starts = list(records), list(bot_starts)
        seen.update(
            spans=spans,
            bot_starts=bot_starts,
            records=[(r.user_stopped_at, r.marks) for r in records],
        )
        return match(spans, records, bot_starts)

    monkeypatch.setattr(runner, "match_turns", recording)
    return seen


def _with_longer_pause(call, extra_ms):
    """A one-utterance call whose deliberate pause is made ``extra_ms`` longer."""
    ((a, b),) = call.pauses_ms[0]
    mid_ms = (a + b) // 2
    pcm = call.utterances[0]
    call.utterances = [pcm[: mid_ms * 32] + b"\x00" * (extra_ms * 32) + pcm[mid_ms * 32 :]]
    onset_s = 0.150  # word times are relative to the speech onset

    def shift(t):
        return t + (extra_ms / 1000 if t + onset_s > mid_ms / 1000 else 0)

    words = [(w.text, shift(w.start_s), shift(w.end_s)) for w in call.stt_script[0].words]
    call.stt_script = [utterance_from_words(call.stt_script[0].text, words)]
    call.speech_end_ms = [call.speech_end_ms[0] + extra_ms]
    call.pauses_ms = [((a, b + extra_ms),)]
    return call


@pytest.mark.slow
async def test_a_pause_taken_for_an_end_of_turn_is_a_false_cutoff_and_the_real_end_answered(
    monkeypatch,
):
    # "Perfect. [pause] Do I need to bring anything?": Smart Turn v3 takes the pause for an end
    # (p 0.97). Made 5.3 s long, the stock pipeline answers inside it even on a loaded machine.
    call = _with_longer_pause(bench_calls(ids=["book_cleaning"])[0].only([3]), 4000)
    seen = _record_matching(monkeypatch)
    async with stack_for(call) as stack:
        result = await run_call(call, CONFIGS["stock"], Endpoints(**stack.urls()))
    assert result.error is None
    (outcome,) = result.outcomes
    assert outcome.deliberate_pause and outcome.false_cutoffs == 1 and outcome.talked_over == 0
    # The reply to the whole utterance is measured from the caller's real end of speech.
    assert outcome.answered and outcome.record.ttfa_ms > 0, seen
    assert result.turns == [outcome.record] and result.unanswered == 0
