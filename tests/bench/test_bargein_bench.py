"""The barge-in bench: scripted barge-in moments and words played vs committed per reply."""

from types import SimpleNamespace

from pipecat.processors.aggregators.llm_context import LLMContext

from pipecat_fast.bench.configs import CONFIGS, barge_in_moments
from pipecat_fast.bench.evals.bargein import barge_in_summary, barge_in_turns
from pipecat_fast.testing.caller_transport import CallerTransport
from pipecat_fast.testing.synth import plan_speech

REPLY = "Your total is 42 dollars. Shall I proceed?"


def test_every_utterance_after_the_first_talks_over_the_reply():
    assert barge_in_moments(4) == [None, 0.8, 1.4, 2.0]
    caller = CallerTransport([b"", b"", b""], barge_in_after_s=[None, 1.0])
    assert [caller.barge_in_after(i) for i in range(4)] == [None, 1.0, None, None]
    assert {"stock-bargein", "bargein", "stock-bargein-deepgram", "bargein-deepgram"} <= set(
        CONFIGS
    )


def test_words_played_against_the_message_the_context_kept():
    words, _ = plan_speech(REPLY)
    played_ms = words[3].end_s * 1000 + 10  # "Your total is 42" played
    call = SimpleNamespace(replies=[("How much is it?", REPLY), ("Stop.", "Okay.")])
    context = LLMContext(
        messages=[
            {"role": "user", "content": "How much is it?"},
            {"role": "assistant", "content": "Your total is 42 dollars. —"},
            {"role": "user", "content": "Stop."},
            {"role": "assistant", "content": "Okay."},
        ]
    )
    timeline = SimpleNamespace(cut_audio_ms={0: played_ms})
    (turn,) = barge_in_turns(call, context, timeline)
    assert turn["words_played"] == 4 and turn["words_committed"] == 5
    assert (turn["kept_unheard"], turn["heard_lost"]) == (1, 0)
    summary = barge_in_summary([SimpleNamespace(config="x", bargein=[turn])])
    assert summary["x"]["interrupted_turns"] == 1 and summary["x"]["exact_turns"] == 0


def test_a_cut_reply_with_no_message_lost_every_word_played():
    words, _ = plan_speech(REPLY)
    call = SimpleNamespace(replies=[("How much is it?", REPLY)])
    context = LLMContext(messages=[{"role": "user", "content": "how much is it"}])
    (turn,) = barge_in_turns(call, context, SimpleNamespace(cut_audio_ms={0: 5000.0}))
    assert turn["words_committed"] == 0 and turn["heard_lost"] == turn["words_played"] == 8
