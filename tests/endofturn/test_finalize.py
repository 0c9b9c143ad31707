"""report_finalize_answers: Deepgram's empty answer to Finalize, pushed as a frame, through
Pipecat's real DeepgramSTTService and the Deepgram emulator (both orders)."""

import pytest
from pipecat.frames.frames import TranscriptionFrame, VADUserStoppedSpeakingFrame
from pipecat.services.deepgram.stt import DeepgramSTTService
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_fast.endofturn import read_frame, report_finalize_answers
from pipecat_fast.frames import STTFinalizeAnswerFrame
from pipecat_fast.testing.deepgram_server import DeepgramEmulator
from tests.testing.test_deepgram_server import FAST, RATE, audio_frames, scripted, silence


def stt(emulator, **settings):
    service = DeepgramSTTService(
        api_key="k",
        base_url=emulator.base_url,
        tag="c",
        settings=DeepgramSTTService.Settings(**settings) if settings else None,
    )
    return report_finalize_answers(service)


async def test_the_empty_answer_after_the_final_is_pushed_and_reads_as_covering():
    utterance, audio = scripted("Cancel my appointment please.")
    async with DeepgramEmulator(FAST, scripts={"c": [utterance]}) as emulator:
        frames = [*audio_frames(silence(0.2) + audio + silence(0.2)), SleepFrame(0.3)]
        frames += [VADUserStoppedSpeakingFrame(stop_secs=0.2), SleepFrame(0.3)]
        down, _ = await run_test(stt(emulator), frames_to_send=frames)
    kinds = [
        type(f).__name__ for f in down if isinstance(f, TranscriptionFrame | STTFinalizeAnswerFrame)
    ]
    assert kinds == ["TranscriptionFrame", "STTFinalizeAnswerFrame"]
    [answer] = [f for f in down if isinstance(f, STTFinalizeAnswerFrame)]
    read = read_frame(answer)
    # It covers the audio up to the moment Pipecat asked, past the end of speech.
    speech_end = 0.2 + utterance.duration_s
    assert read.finalize_answer and read.text == "" and read.end_s >= speech_end


async def test_an_answer_with_words_stays_pipecats_finalized_transcript():
    utterance, audio = scripted("Cancel my appointment please.")
    speech = audio[: int(utterance.duration_s * RATE) * 2]
    async with DeepgramEmulator(FAST, scripts={"c": [utterance]}) as emulator:
        frames = [*audio_frames(silence(0.2) + speech + silence(0.2)), SleepFrame(0.2)]
        frames += [VADUserStoppedSpeakingFrame(stop_secs=0.2), SleepFrame(0.3)]
        down, _ = await run_test(stt(emulator, endpointing=300), frames_to_send=frames)
    assert not [f for f in down if isinstance(f, STTFinalizeAnswerFrame)]
    [final] = [f for f in down if isinstance(f, TranscriptionFrame)]
    assert final.finalized and read_frame(final).finalized


def test_only_deepgram_is_followed():
    with pytest.raises(TypeError, match="DeepgramSTTService"):
        report_finalize_answers(object())
