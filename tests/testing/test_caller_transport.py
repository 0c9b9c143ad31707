"""The scripted caller waits for a reply to its own utterance, not the one it talked over."""

import asyncio

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndFrame,
    InputAudioRawFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineParams, PipelineTask
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from pipecat_fast.testing.caller_transport import CallerTransport

RATE = 16000
UTTERANCE = b"\x01\x00" * (RATE * 3 // 10)  # 0.3 s


class _SlowToStopBot(FrameProcessor):
    """Speaks after each utterance, and stops the talked-over reply only after the caller
    has finished the utterance that talked over it (a bot slow to take the interruption).

    It acts on the caller's own 20 ms audio frames, so its timing follows the line's clock.
    """

    def __init__(self, caller: CallerTransport):
        super().__init__()
        self.caller = caller
        self.script: list[str] = []
        self.stop_in = None  # frames until the talked-over reply stops

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if not isinstance(frame, InputAudioRawFrame):
            return
        ended = len(self.caller.timeline.utterance_ended)
        if ended == 1 and not self.script:
            await self._say("start")  # the reply to utterance 0, talked over later
        elif ended == 2 and self.script == ["start"]:
            self.stop_in = 10  # still playing 200 ms after utterance 1 ended
            self.script.append("late")
        elif self.stop_in is not None:
            self.stop_in -= 1
            if self.stop_in == 0:
                await self._say("stop")
                await self._say("start")  # the reply to utterance 1
                self.stop_in = None

    async def _say(self, what: str):
        self.script.append(what)
        frame = BotStartedSpeakingFrame() if what == "start" else BotStoppedSpeakingFrame()
        await self.push_frame(frame, FrameDirection.UPSTREAM)


async def test_the_caller_does_not_take_the_reply_it_talked_over_for_its_answer():
    caller = CallerTransport(
        [UTTERANCE, UTTERANCE],
        sample_rate=RATE,
        lead_silence_s=0.1,
        reply_gap_s=0.1,
        reply_timeout_s=3.0,
        barge_in_after_s=[None, 0.1],
    )
    bot = _SlowToStopBot(caller)
    task = PipelineTask(
        Pipeline([caller.input(), bot, caller.output()]),
        params=PipelineParams(audio_in_sample_rate=RATE),
        idle_timeout_secs=None,
    )
    runner = asyncio.create_task(PipelineRunner(handle_sigint=False).run(task))
    await asyncio.wait_for(caller.finished.wait(), 10)
    await task.queue_frame(EndFrame())
    await asyncio.wait_for(runner, 10)
    timeline = caller.timeline
    # Two replies started: the talked-over one, then the answer to utterance 1; the caller
    # took the second as its answer, not the first one still playing when it stopped talking.
    assert len(timeline.bot_started) == 2
    assert timeline.reply_started[1] is not None
    assert timeline.reply_started[1] >= timeline.bot_started[1]
