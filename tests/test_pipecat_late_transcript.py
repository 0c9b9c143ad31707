"""Pipecat 1.14's user aggregator and a transcript it handles after the user turn ended.

What the pipeline bench's 5 s ``llm_dispatch`` stall is made of (docs/ttspool.md, "In the
pipeline bench"; docs/bench.md, "Reading the numbers"): an interim and a final that reach the
``LLMUserAggregator`` together after its turn ended. The interim opens a new user turn
(``TranscriptionUserTurnStartStrategy``), whose interruption empties the aggregator's own queue
of data frames, the final with it; the turn has no transcript, so no stop strategy ends it and
the controller's ``user_turn_stop_timeout`` (5 s by default) does, and the empty turn asks the
LLM to have the caller repeat. These tests pin that behaviour of Pipecat 1.14 with its real
aggregator: when Pipecat changes it, they fail, and the docs above are out of date.

Frames are ordered with Pipecat's queues (``tests.pacing``), never with sleeps; the only
wait is the controller's own timeout, shortened here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipecat.frames.frames import (
    DataFrame,
    Frame,
    InterimTranscriptionFrame,
    InterruptionFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMUserAggregator,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import run_test
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from tests.pacing import Pacer, Until, paced

STOP_TIMEOUT_S = 0.3  # the controller's user_turn_stop_timeout (Pipecat's default is 5.0)


class _Together(FrameProcessor):
    """On the marker frame, pushes its frames one after the other, without waiting in between.

    As the STT's results reach the aggregator while it is busy elsewhere (the end-of-turn
    model at the VAD's stop): both are queued before it handles the first.
    """

    def __init__(self, *frames: Frame):
        super().__init__()
        self._together_frames = frames

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if frame is _BURST:
            for late in self._together_frames:
                await self.push_frame(late)
            return
        await self.push_frame(frame, direction)


@dataclass
class _Burst(DataFrame):
    """Marks where :class:`_Together` pushes its frames."""

    interruptible: bool = field(default=False, init=False)


_BURST = _Burst()


class _Seen:
    def __init__(self, aggregator: LLMUserAggregator):
        self.started: list[str] = []
        self.stop_timeouts = 0

        @aggregator.event_handler("on_user_turn_started")
        async def _started(_aggregator, strategy):
            self.started.append(type(strategy).__name__)

        @aggregator.event_handler("on_user_turn_stop_timeout")
        async def _timeout(_aggregator):
            self.stop_timeouts += 1


async def _late_interim_and_final(final: TranscriptionFrame):
    context = LLMContext()
    aggregator = LLMUserAggregator(
        context,
        params=LLMUserAggregatorParams(
            user_turn_stop_timeout=STOP_TIMEOUT_S,
            user_turn_strategies=UserTurnStrategies(
                stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.05)]
            ),
        ),
    )
    seen = _Seen(aggregator)
    together = _Together(InterimTranscriptionFrame("voy a", "caller", "t"), final)
    pacer = Pacer(aggregator)

    def messages() -> int:
        return len(context.get_messages())

    frames = [
        *paced(
            VADUserStartedSpeakingFrame(start_secs=0.2),
            TranscriptionFrame("cancélela, por favor.", "caller", "t", finalized=True),
            VADUserStoppedSpeakingFrame(stop_secs=0.2),
        ),
        Until(lambda: messages() == 1, what="the first turn ended"),
        _BURST,  # not a Step: the pacer passes it on and goes on to the next condition
        Until(lambda: messages() == 2, what="the late turn ended"),
    ]
    down, _ = await run_test(
        Pipeline([pacer, together, aggregator]), frames_to_send=frames, start_timeout=5.0
    )
    assert not pacer.timed_out, pacer.timed_out
    return context.get_messages(), seen, down


async def test_a_late_interim_opens_a_turn_that_drops_its_final_and_times_out():
    messages, seen, down = await _late_interim_and_final(
        TranscriptionFrame("voy a estar de viaje.", "caller", "t")
    )
    # The interim opened a second user turn after the first had ended; it interrupts the reply
    # the first turn just asked for.
    assert seen.started == ["VADUserTurnStartStrategy", "TranscriptionUserTurnStartStrategy"]
    assert sum(isinstance(f, InterruptionFrame) for f in down) == 2
    # Its interruption emptied the aggregator's queue: the final never reached the context ...
    texts = " ".join(str(m.get("content")) for m in messages)
    assert "viaje" not in texts
    # ... so no stop strategy could end the turn: the controller's timeout did, and the empty
    # turn (it interrupted the bot) asks the LLM to have the caller repeat.
    assert seen.stop_timeouts == 1
    assert [m["role"] for m in messages] == ["user", "developer"]


async def test_an_uninterruptible_final_survives_the_late_turn_and_ends_it():
    final = TranscriptionFrame("voy a estar de viaje.", "caller", "t")
    final.interruptible = False
    messages, seen, _ = await _late_interim_and_final(final)
    # The same second turn, but the final outlives its interruption: the turn ends on it, not on
    # the timeout, and the words reach the context (as a turn of their own).
    assert seen.started == ["VADUserTurnStartStrategy", "TranscriptionUserTurnStartStrategy"]
    assert seen.stop_timeouts == 0
    assert [m["content"] for m in messages] == ["cancélela, por favor.", "voy a estar de viaje."]
