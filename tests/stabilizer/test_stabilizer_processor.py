"""TwoUpdateStabilizer on fake frame streams, alone and before the real user aggregator."""

import asyncio
from dataclasses import dataclass

from pipecat.frames.frames import (
    DataFrame,
    Frame,
    InterimTranscriptionFrame,
    InterruptionFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMUserAggregator,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.turns.user_start import TranscriptionUserTurnStartStrategy
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from pipecat_fast.stabilizer import StableTranscriptFrame, TwoUpdateStabilizer


def interim(text, ts="2026-01-01T00:00:00.000+00:00", user="caller"):
    return InterimTranscriptionFrame(text, user, ts)


def final(text, ts="2026-01-01T00:00:00.000+00:00", user="caller"):
    return TranscriptionFrame(text, user, ts)


def stable(frames):
    return [f for f in frames if isinstance(f, StableTranscriptFrame)]


async def run(processor, *frames):
    down, _ = await run_test(processor, frames_to_send=list(frames))
    return down


async def test_every_frame_passes_on_unchanged_and_stable_frames_follow_their_cause():
    sent = [interim("book"), interim("book a"), interim("book a table"), final("Book a table.")]
    down = await run(TwoUpdateStabilizer(), *sent)
    passed = [f for f in down if not isinstance(f, StableTranscriptFrame)]
    assert passed == sent  # the same objects, in order
    assert [type(f).__name__ for f in down] == [
        "InterimTranscriptionFrame",
        "InterimTranscriptionFrame",
        "StableTranscriptFrame",
        "InterimTranscriptionFrame",
        "StableTranscriptFrame",
        "TranscriptionFrame",
        "StableTranscriptFrame",
    ]
    frames = stable(down)
    assert [f.text for f in frames] == ["book", "book a", "Book a table."]
    assert [f.new_words for f in frames] == [1, 1, 1]
    assert [f.word_count for f in frames] == [1, 2, 3]
    assert [f.final for f in frames] == [False, False, True]
    assert {f.turn for f in frames} == {0}
    assert {f.user_id for f in frames} == {"caller"}


class Busy(FrameProcessor):
    """A processor that takes 10 ms per transcript, so frames queue up in front of it."""

    def __init__(self):
        super().__init__()
        self.order = []

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, (InterimTranscriptionFrame, StableTranscriptFrame)):
            self.order.append(type(frame).__name__)
            if isinstance(frame, InterimTranscriptionFrame):
                await asyncio.sleep(0.01)
        await self.push_frame(frame, direction)


async def test_a_stable_frame_never_overtakes_its_interim_in_a_busy_processor_after_it():
    """The stable frame is a data frame: Pipecat's queues keep it behind the interim that
    made it, even where frames queue up (a system frame would jump that queue)."""
    busy = Busy()
    sent = [interim("book"), interim("book a"), interim("book a table"), interim("book a table")]
    await run_test(Pipeline([TwoUpdateStabilizer(), busy]), frames_to_send=sent)
    assert busy.order == [
        "InterimTranscriptionFrame",
        "InterimTranscriptionFrame",
        "StableTranscriptFrame",
        "InterimTranscriptionFrame",
        "StableTranscriptFrame",
        "InterimTranscriptionFrame",
        "StableTranscriptFrame",
    ]


async def test_updates_is_configurable():
    down = await run(TwoUpdateStabilizer(updates=1), interim("book"), interim("book a"))
    assert [f.text for f in stable(down)] == ["book", "book a"]


async def test_empty_whitespace_and_punctuation_only_partials_add_nothing():
    proc = TwoUpdateStabilizer()
    down = await run(
        proc, interim("book a"), interim(""), interim("   "), interim("."), interim("book a table")
    )
    assert [f.text for f in stable(down)] == ["book a"]
    assert len([f for f in down if isinstance(f, InterimTranscriptionFrame)]) == 5
    assert proc.turn_counters.ignored == 3


async def test_a_partial_shorter_than_the_last_retracts():
    down = await run(
        TwoUpdateStabilizer(),
        interim("book a table for"),
        interim("book a table for four"),
        interim("book a"),
    )
    frames = stable(down)
    assert [(f.text, f.retracted) for f in frames] == [("book a table for", 0), ("book a", 2)]


async def test_out_of_order_timestamps_are_ignored():
    proc = TwoUpdateStabilizer()
    down = await run(
        proc,
        interim("book a", ts="2026-01-01T00:00:02.000+00:00"),
        interim("look", ts="2026-01-01T00:00:01.000+00:00"),  # older than the last: stale
        interim("book a table", ts="2026-01-01T00:00:03.000+00:00"),
    )
    assert [f.text for f in stable(down)] == ["book a"]
    assert proc.turn_counters.ignored == 1
    assert proc.turn_counters.retracted_words == 0


async def test_unparsable_timestamps_do_not_stop_the_stabiliser():
    down = await run(
        TwoUpdateStabilizer(), interim("book", ts="yesterday"), interim("book a", ts="")
    )
    assert [f.text for f in stable(down)] == ["book"]


async def test_a_final_with_no_interims_before_it():
    down = await run(TwoUpdateStabilizer(), final("Yes."))
    [frame] = stable(down)
    assert (frame.text, frame.final, frame.new_words, frame.retracted) == ("Yes.", True, 1, 0)


async def test_a_final_that_differs_completely_from_the_partials():
    proc = TwoUpdateStabilizer()
    down = await run(proc, interim("book a"), interim("book a table"), final("Cancel my order."))
    last = stable(down)[-1]
    assert (last.text, last.retracted, last.new_words, last.final) == (
        "Cancel my order.",
        2,
        3,
        True,
    )
    assert proc.turn_counters.retracted_words == 2
    assert proc.turn_counters.wasted_tokens > 0


async def test_separate_short_utterances_do_not_accumulate():
    # Direct mode: each frame is processed as it arrives, so the turn ends exactly where the
    # UserStoppedSpeakingFrame was sent (a system frame would otherwise overtake the queued
    # transcripts, which the aggregator-after-stabiliser placement avoids; see below).
    proc = TwoUpdateStabilizer(enable_direct_mode=True)
    down = await run(
        proc,
        final("Okay."),
        UserStoppedSpeakingFrame(),
        interim("mhm"),
        final("Mhm."),
        UserStoppedSpeakingFrame(),
        final("Yes."),
    )
    assert [(f.text, f.turn) for f in stable(down)] == [("Okay.", 0), ("Mhm.", 1), ("Yes.", 2)]
    assert proc.turn == 2
    assert [c.stable_words for c in proc.finished_turns] == [1, 1]
    assert proc.session_counters.stable_words == 3


async def test_segments_of_one_turn_accumulate_until_the_turn_ends():
    """Deepgram sends each is_final segment as its own TranscriptionFrame in one turn."""
    down = await run(
        TwoUpdateStabilizer(), final("Book a table."), interim("for"), interim("for four")
    )
    assert stable(down)[-1].text == "Book a table. for"


async def test_an_interruption_mid_turn_keeps_the_turn():
    proc = TwoUpdateStabilizer()
    down = await run(
        proc,
        interim("book a"),
        interim("book a table"),
        InterruptionFrame(),
        interim("book a table for"),
        interim("book a table for four"),
    )
    assert [f.text for f in stable(down)] == ["book a", "book a table", "book a table for"]
    assert {f.turn for f in stable(down)} == {0}


async def test_one_broadcast_ends_one_turn_and_a_stop_with_no_turn_is_a_no_op():
    proc = TwoUpdateStabilizer(enable_direct_mode=True)  # frames in the order sent, as above
    a, b = UserStoppedSpeakingFrame(), UserStoppedSpeakingFrame()
    a.broadcast_sibling_id, b.broadcast_sibling_id = b.id, a.id
    await run(proc, UserStoppedSpeakingFrame(), final("Okay."), a, b, final("Yes."))
    assert proc.turn == 1
    assert len(proc.finished_turns) == 1


async def test_odd_frames_are_logged_and_ignored():
    proc = TwoUpdateStabilizer()
    odd = interim("x")
    odd.text = None  # a broken STT
    upstream = interim("book a")
    down, up = await run_test(
        proc,
        frames_to_send=[upstream, interim("book a table")],
        frames_to_send_direction=FrameDirection.UPSTREAM,
    )
    assert upstream in up and not stable(up) and not stable(down)
    down = await run(proc, odd, interim("book"), interim("book a"))
    assert odd in down
    assert [f.text for f in stable(down)] == ["book"]


async def test_a_failing_core_fails_open(monkeypatch):
    proc = TwoUpdateStabilizer()

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(proc.stabilizer, "feed", boom)
    sent = [interim("book"), final("Book.")]
    down = await run(proc, *sent)
    assert down == sent


# --- with Pipecat's real user aggregator ---------------------------------------------------


@dataclass
class DataMarker(DataFrame):
    """A data-frame stand-in for the stable frame, to show what an interruption drops."""

    text: str = ""


class MarkAfterInterims(FrameProcessor):
    """Pushes a DataMarker right behind every interim, as a data-frame stabiliser would."""

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, InterimTranscriptionFrame):
            await self.push_frame(DataMarker(frame.text))


class Spy(FrameProcessor):
    """Records the user-turn frames that reach it, with their direction."""

    def __init__(self):
        super().__init__()
        self.seen = []

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, (UserStartedSpeakingFrame, UserStoppedSpeakingFrame)):
            self.seen.append((type(frame).__name__, direction))
        await self.push_frame(frame, direction)


STT_PACE = SleepFrame(0.05)


def user_aggregator():
    strategies = UserTurnStrategies(
        start=[TranscriptionUserTurnStartStrategy()],
        stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.05)],
    )
    return LLMUserAggregator(
        LLMContext(), params=LLMUserAggregatorParams(user_turn_strategies=strategies)
    )


async def test_stable_frames_survive_the_interruption_the_first_interim_triggers():
    """Pipecat 1.14: the first interim starts the user turn and the aggregator broadcasts an
    interruption that drops the data frames queued behind it; the stable frame (a data frame
    marked uninterruptible) survives. Both run in one pipeline, so the comparison is like for
    like."""
    pipeline = Pipeline([TwoUpdateStabilizer(updates=1), MarkAfterInterims(), user_aggregator()])
    down, _ = await run_test(pipeline, frames_to_send=[interim("book")])
    assert [f.text for f in stable(down)] == ["book"]
    assert any(isinstance(f, InterruptionFrame) for f in down)
    assert not [f for f in down if isinstance(f, DataMarker)]  # the data frame was dropped


async def test_with_the_real_aggregator_turns_reset_on_its_upstream_user_stopped_frame():
    spy, proc = Spy(), TwoUpdateStabilizer()
    pipeline = Pipeline([spy, proc, user_aggregator()])
    # The first interim of a turn makes the aggregator start the turn and broadcast an
    # interruption, which drops the transcripts already queued behind that interim (the
    # stable frames survive it, see above). A real STT sends its next result tens of ms
    # later; STT_PACE stands for that. It orders nothing: queues do.
    frames = [
        interim("book"),
        STT_PACE,
        interim("book a"),
        final("Book a table."),
        SleepFrame(0.3),  # the caller's pause: the stop strategy's 50 ms timeout ends the turn
        interim("at"),
        STT_PACE,
        interim("at eight"),
        final("At eight."),
        SleepFrame(0.3),
    ]
    down, up = await run_test(pipeline, frames_to_send=frames)
    assert [(f.text, f.turn) for f in stable(down)] == [
        ("book", 0),
        ("Book a table.", 0),
        ("at", 1),
        ("At eight.", 1),
    ]
    # The aggregator's user-turn frames reach a processor in front of it going upstream.
    assert ("UserStoppedSpeakingFrame", FrameDirection.UPSTREAM) in spy.seen
    assert ("UserStoppedSpeakingFrame", FrameDirection.DOWNSTREAM) not in spy.seen
    assert proc.turn == 2
    # The aggregator still wrote both user turns: nothing of the transcript was lost.
    written = [f.text for f in down if type(f).__name__ == "LLMContextUserTurnFrame"]
    assert written == ["Book a table.", "At eight."]
