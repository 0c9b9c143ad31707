"""The processors on fake TTS frame streams with known audio durations, through a real
output transport and Pipecat's assistant aggregator."""

import pytest
from pipecat.frames.frames import (
    FunctionCallInProgressFrame,
    FunctionCallResultFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)

from pipecat_fast.bargein import BargeInTruncator
from pipecat_fast.bench.evals.bargein import StockPipecat, run_reply
from tests.bargein.harness import audio_frames, speech_seconds, word_end, ws_reply

COUNT = ", ".join(str(i) for i in range(1, 21)) + "."
TOTAL = "Your total is 42 dollars."
PROCEED = "Shall I proceed?"
CHUNK = 0.04  # the transport writes 40 ms chunks


def words(text):
    return text.replace("—", "").split()


async def test_counting_to_twenty_cut_after_five_numbers_keeps_about_five():
    out = await run_reply(ws_reply([COUNT]), stop_after_s=word_end(COUNT, 4) + 0.05)
    (text,) = out.assistant_texts
    kept = [w.strip(",.") for w in words(text)]
    assert kept[:4] == ["1", "2", "3", "4"] and 4 <= len(kept) <= 6
    assert text.endswith("—")  # marked as cut off


async def test_stock_aggregation_without_the_lever_keeps_all_twenty():
    """The same stream without the lever: Pipecat commits every number it was sent."""
    out = await run_reply(
        ws_reply([COUNT]),
        stop_after_s=word_end(COUNT, 4) + 0.05,
        truncator=StockPipecat(),
    )
    assert len(words(out.assistant_texts[0])) == 20


async def test_cut_before_the_first_audio_frame_leaves_no_message():
    out = await run_reply(ws_reply([TOTAL, PROCEED]), stop_after_s=0.0)
    assert out.assistant_texts == []
    assert out.turn_messages[-1].interrupted and out.turn_messages[-1].content == ""


async def test_cut_exactly_between_sentences_keeps_the_first_whole_and_none_of_the_second():
    # Each sentence its own context (as with reuse_context_id_within_turn=False).
    frames = [LLMFullResponseStartFrame()]
    for i, s in enumerate([TOTAL, PROCEED]):
        cid = f"c{i}"
        frames += [TTSStartedFrame(context_id=cid), TTSTextFrame(s, "sentence", context_id=cid)]
        frames += audio_frames(speech_seconds(s), cid) + [TTSStoppedFrame(context_id=cid)]
    frames.append(LLMFullResponseEndFrame())
    out = await run_reply(frames, stop_after_s=speech_seconds(TOTAL))
    assert out.assistant_texts == [TOTAL + " —"]


async def test_several_sentences_in_one_context_cut_in_the_second():
    at = speech_seconds(TOTAL) + word_end(PROCEED, 1) + 0.05
    out = await run_reply(ws_reply([TOTAL, PROCEED]), stop_after_s=at)
    (text,) = out.assistant_texts
    assert text.startswith(TOTAL) and "proceed" not in text


async def test_playout_delay_holds_back_the_last_words():
    at = word_end(COUNT, 9) + 0.05
    plain = await run_reply(ws_reply([COUNT]), stop_after_s=at)
    delayed = await run_reply(
        ws_reply([COUNT]),
        stop_after_s=at,
        truncator=BargeInTruncator(playout_delay_s=1.0),
    )
    assert len(words(delayed.assistant_texts[0])) <= len(words(plain.assistant_texts[0])) - 2


async def test_a_reply_played_to_the_end_is_committed_whole_without_marker():
    out = await run_reply(ws_reply([TOTAL, PROCEED]), stop_after_s=None)
    assert out.assistant_texts == [f"{TOTAL} {PROCEED}"]
    assert out.truncator.truncations == []


async def test_marker_can_be_turned_off_and_the_event_still_reports():
    reports = []
    truncator = BargeInTruncator(playout_delay_s=0.0, marker=None)

    @truncator.event_handler("on_reply_truncated")
    async def _on(_t, reply):
        reports.append(reply)

    out = await run_reply(
        ws_reply([COUNT]), stop_after_s=word_end(COUNT, 4) + 0.05, truncator=truncator
    )
    assert not out.assistant_texts[0].endswith("—")
    (reply,) = reports
    assert reply.words_sent == 20 and 4 <= reply.words_committed <= 6


async def test_a_false_interruption_that_resumes_starts_a_fresh_reply():
    """Noise cuts the reply; Pipecat's empty-turn recovery runs the LLM again."""
    resumed = ws_reply(["Sorry, as I was saying, shall I proceed?"], context_id="ctx-2")
    out = await run_reply(
        ws_reply([TOTAL, PROCEED]),
        stop_after_s=word_end(TOTAL, 2) + 0.05,
        after_interruption=resumed,
    )
    first, second = out.assistant_texts
    assert first.startswith("Your total") and "dollars" not in first and first.endswith("—")
    assert second == "Sorry, as I was saying, shall I proceed?"


async def test_function_call_messages_stay_paired_through_a_cut():
    frames = ws_reply(["Let me check that for you.", "One moment while I look."])
    call = FunctionCallInProgressFrame(
        function_name="check_availability", tool_call_id="call_1", arguments={"day": "friday"}
    )
    frames.insert(-1, call)  # queued behind the audio, as the TTS queues it
    result = FunctionCallResultFrame(
        function_name="check_availability",
        tool_call_id="call_1",
        arguments={"day": "friday"},
        result={"slots": ["9:00"]},
        run_llm=False,
    )
    cut = speech_seconds("Let me check that for you.") + 0.2
    out = await run_reply(frames, stop_after_s=cut, after_interruption=[result], resumes=False)
    messages = out.context.get_messages()
    calls = [m for m in messages if m.get("tool_calls")]
    tools = [m for m in messages if m.get("role") == "tool"]
    assert [c["tool_calls"][0]["id"] for c in calls] == ["call_1"]
    assert [t["tool_call_id"] for t in tools] == ["call_1"]
    assert "slots" in tools[0]["content"]
    assert out.assistant_texts[0].startswith("Let me check that for you.")


# --- bad input ---------------------------------------------------------------------------------


async def test_an_interruption_with_no_reply_in_progress_changes_nothing():
    out = await run_reply([], stop_after_s=None)
    assert out.assistant_texts == [] and out.truncator.truncations == []


async def test_repeated_interruptions_commit_once():
    truncator = BargeInTruncator(playout_delay_s=0.0)
    from pipecat.frames.frames import InterruptionFrame

    out = await run_reply(
        ws_reply([COUNT]),
        stop_after_s=word_end(COUNT, 4) + 0.05,
        truncator=truncator,
        after_interruption=[InterruptionFrame(), InterruptionFrame(), *ws_reply([PROCEED], "c2")],
    )
    assert len(out.assistant_texts) == 2 and out.assistant_texts[1] == PROCEED
    assert len(truncator.truncations) == 1


async def test_audio_frames_without_text_commit_nothing():
    frames = [LLMFullResponseStartFrame(), TTSStartedFrame(context_id="c")]
    frames += audio_frames(1.0, "c") + [TTSStoppedFrame(context_id="c"), LLMFullResponseEndFrame()]
    out = await run_reply(frames, stop_after_s=0.5)
    assert out.assistant_texts == []


async def test_a_tts_that_stops_mid_sentence_commits_only_what_its_audio_reached():
    """The TTS errored after a fifth of the sentence: the rest was never spoken."""
    text = "Your appointment on Friday the ninth at nine in the morning is confirmed."
    frames = [LLMFullResponseStartFrame(), TTSStartedFrame(context_id="c")]
    frames.append(TTSTextFrame(text, "sentence", context_id="c"))
    frames += audio_frames(speech_seconds(text) / 5, "c")
    frames += [TTSStoppedFrame(context_id="c"), LLMFullResponseEndFrame()]
    out = await run_reply(frames, stop_after_s=None)
    (kept,) = out.assistant_texts
    assert 0 < len(words(kept)) <= 4 and text.startswith(kept)


async def test_a_tts_socket_that_dies_with_text_queued_commits_none_of_it():
    """Text sent ahead, no audio ever comes, the context ends (Pipecat's timeout)."""
    frames = [LLMFullResponseStartFrame(), TTSStartedFrame(context_id="c")]
    frames += [TTSTextFrame(s, "sentence", context_id="c") for s in (TOTAL, PROCEED)]
    frames += [TTSStoppedFrame(context_id="c"), LLMFullResponseEndFrame()]
    out = await run_reply(frames, stop_after_s=None)
    assert out.assistant_texts == []


@pytest.mark.parametrize("delay", [-0.1, float("nan"), "0.1"])
def test_bad_playout_delay_is_an_error(delay):
    with pytest.raises(ValueError):
        BargeInTruncator(playout_delay_s=delay)


async def test_text_whose_audio_never_comes_and_never_stops_is_settled_unheard(monkeypatch):
    """A TTS that went quiet with no stop frame: after the stall the text goes, unheard."""
    import pipecat_fast.bargein.processor as processor

    monkeypatch.setattr(processor, "STALL_S", 0.3)
    frames = [LLMFullResponseStartFrame(), TTSStartedFrame(context_id="c")]
    frames += [TTSTextFrame(TOTAL, "sentence", context_id="c"), LLMFullResponseEndFrame()]
    out = await run_reply(frames, stop_after_s=None)
    assert out.assistant_texts == [] and out.turn_messages[-1].content == ""
