"""ScriptedCall: the shipped recordings, your own WAVs or espeak-ng lines, ready for the emulators.

Also the scripted caller's connect/hang-up events, which end a bot's call as a real transport's do.
"""

import asyncio
import shutil
import statistics
import wave

import numpy as np
import pytest
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.workers.runner import WorkerRunner

from pipecat_fast.bench.calls import load_calls, read_pcm
from pipecat_fast.testing import CallerLine, DeepgramEmulator, ScriptedCall, words_from_audio
from pipecat_fast.testing.caller_transport import CALLER_CLIENT
from pipecat_fast.testing.profiles import LatencyProfile
from pipecat_fast.testing.scripted_call import SAMPLE_RATE, read_wav, write_wav
from pipecat_fast.testing.synth import plan_speech, render_pcm

FAST = LatencyProfile("test", 0, 0, 250, 0, 0.0, 0, 10_000, 0)


def silence(seconds: float, rate: int = SAMPLE_RATE) -> bytes:
    return b"\x00\x00" * int(rate * seconds)


def synthetic(text: str) -> tuple[bytes, list]:
    """Word-shaped tone bursts after 0.5 s of silence, and their true timings (s from onset)."""
    words, duration = plan_speech(text)
    return silence(0.5) + render_pcm(words, duration, SAMPLE_RATE) + silence(0.5), words


def test_shipped_call_carries_the_scripts_audio_timings_and_replies():
    script = load_calls(["book_cleaning"])[0]
    call = ScriptedCall.shipped("book_cleaning")
    assert call.id == "book_cleaning"
    assert [line.text for line in call.lines] == [t.user_text for t in script.turns]
    assert [line.reply for line in call.lines] == [t.reply for t in script.turns]
    turn = script.turns[0]
    assert call.lines[0].pcm == read_pcm(turn.audio_path)[0]
    # Word timings are relative to the utterance's speech onset (speech_start_ms).
    first, last = call.lines[0].utterance.words[0], call.lines[0].utterance.words[-1]
    assert first.start_s == (turn.words[0].start_ms - turn.speech_start_ms) / 1000
    assert last.end_s == (turn.words[-1].end_ms - turn.speech_start_ms) / 1000
    assert call.stt_scripts == {"book_cleaning": [line.utterance for line in call.lines]}
    assert call.replies == [(t.user_text, t.reply) for t in script.turns]
    assert len(ScriptedCall.shipped("book_cleaning", turns=2).lines) == 2


def test_unknown_shipped_call_names_the_known_ones():
    with pytest.raises(ValueError, match="book_cleaning"):
        ScriptedCall.shipped("book_clenaing")


def test_estimated_words_follow_synthetic_speech_whose_timings_are_known():
    text = "I would like to book a cleaning for next Tuesday, please. Nine thirty works."
    pcm, truth = synthetic(text)
    utterance = words_from_audio(text, pcm)
    onset = truth[0].start_s
    assert [w.text for w in utterance.words] == text.split()
    for got, want in zip(utterance.words, truth, strict=True):
        assert abs(got.start_s - (want.start_s - onset)) < 0.12, (got, want)
        assert abs(got.end_s - (want.end_s - onset)) < 0.12, (got, want)
    # The final transcript comes at the real end of speech (20 ms frames).
    assert abs(utterance.duration_s - (truth[-1].end_s - onset)) <= 0.021


def test_a_long_silence_inside_an_utterance_holds_no_word():
    a, _ = synthetic("Hello there.")
    b, _ = synthetic("Anybody home?")
    pcm = a + silence(1.0) + b  # 2 s of silence between the two halves
    utterance = words_from_audio("Hello there. Anybody home?", pcm)
    ends = {w.text: (w.start_s, w.end_s) for w in utterance.words}
    gap_start = ends["there."][1]
    assert ends["Anybody"][0] - gap_start > 1.8


def test_estimates_on_the_shipped_recordings_end_where_the_caller_stopped():
    errors, ends = [], []
    for script in load_calls():
        for turn in script.turns:
            pcm, _ = read_pcm(turn.audio_path)
            got = words_from_audio(turn.user_text, pcm).words
            truth = [
                (
                    (w.start_ms - turn.speech_start_ms) / 1000,
                    (w.end_ms - turn.speech_start_ms) / 1000,
                )
                for w in turn.words
            ]
            errors += [abs(g.start_s - t[0]) for g, t in zip(got, truth, strict=True)]
            ends.append(abs(got[-1].end_s - truth[-1][1]))
    assert max(ends) <= 0.06, ends
    assert statistics.median(errors) < 0.12


def test_no_speech_or_no_words_is_a_clear_error():
    with pytest.raises(ValueError, match="no speech the STT emulator would hear"):
        words_from_audio("hello", silence(1.0), where="quiet.wav")
    pcm, _ = synthetic("hello")
    with pytest.raises(ValueError, match="no words"):
        words_from_audio("   ", pcm)


def test_read_wav_mixes_stereo_and_converts_the_rate(tmp_path):
    t = np.arange(48_000) / 48_000
    tone = (8000 * np.sin(2 * np.pi * 220 * t)).astype("<i2")
    path = tmp_path / "stereo48k.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(48_000)
        w.writeframes(np.stack([tone, tone], axis=1).tobytes())
    pcm = read_wav(path)
    samples = np.frombuffer(pcm, dtype="<i2")
    assert abs(len(samples) - SAMPLE_RATE) <= 1  # one second at 16 kHz
    assert 4000 < np.sqrt(np.mean(samples.astype(float) ** 2)) < 7000  # 8000/sqrt(2), kept


def test_read_wav_refuses_what_it_cannot_play(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        read_wav(tmp_path / "missing.wav")
    eight = tmp_path / "eight.wav"
    with wave.open(str(eight), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(1)
        w.setframerate(8000)
        w.writeframes(b"\x80" * 800)
    with pytest.raises(ValueError, match="8-bit samples; 16-bit PCM is needed"):
        read_wav(eight)
    text = tmp_path / "notes.wav"
    text.write_text("not audio")
    with pytest.raises(ValueError, match="not a PCM WAV"):
        read_wav(text)


def test_from_wavs_builds_the_scripts_and_the_caller(tmp_path):
    pcm, _ = synthetic("I would like a table for two.")
    write_wav(tmp_path / "one.wav", pcm)
    call = ScriptedCall.from_wavs(
        "my-call", [("I would like a table for two.", tmp_path / "one.wav")], replies=["Sure."]
    )
    assert call.replies == [("I would like a table for two.", "Sure.")]
    assert list(call.stt_scripts) == ["my-call"]
    assert call.transport().utterances == [pcm]
    assert call.with_id("other").stt_scripts.keys() == {"other"}
    with pytest.raises(ValueError, match="at least one utterance"):
        call.first(0)
    with pytest.raises(ValueError, match="non-empty string"):
        ScriptedCall("", call.lines)


async def test_the_stt_emulator_transcribes_your_own_wav_at_its_end_of_speech(tmp_path):
    """A WAV with estimated timings: the final arrives once the audio of its last word did."""
    from pipecat.frames.frames import InputAudioRawFrame, TranscriptionFrame
    from pipecat.services.deepgram.stt import DeepgramSTTService
    from pipecat.tests.utils import SleepFrame, run_test

    text = "Could I move my appointment to Friday?"
    pcm, truth = synthetic(text)
    write_wav(tmp_path / "mine.wav", pcm)
    call = ScriptedCall.from_wavs("mine", [(text, tmp_path / "mine.wav")])
    step = SAMPLE_RATE * 2 * 20 // 1000
    frames = [
        InputAudioRawFrame(pcm[i : i + step], SAMPLE_RATE, 1) for i in range(0, len(pcm), step)
    ]
    async with DeepgramEmulator(FAST, scripts=call.stt_scripts) as emulator:
        stt = DeepgramSTTService(api_key="k", base_url=emulator.base_url, tag=call.id)
        down, _ = await run_test(stt, frames_to_send=[*frames, SleepFrame(0.5)])
    finals = [f.text for f in down if isinstance(f, TranscriptionFrame)]
    assert finals == [text]
    final = next(r for r in emulator.results if r.is_final)
    assert abs(final.audio_time_s - (0.5 + truth[-1].end_s)) <= 0.06


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_espeak_lines_are_synthesized_timed_and_kept(tmp_path):
    call = ScriptedCall.espeak(
        "spoken", ["Hello, is this the pizza place?", "Two large, please."], save_to=tmp_path
    )
    assert [len(line.utterance.words) for line in call.lines] == [6, 3]
    for i, line in enumerate(call.lines, start=1):
        assert read_wav(tmp_path / f"spoken_{i}.wav") == line.pcm  # saved at 16 kHz
        assert 0.5 < line.utterance.duration_s < line.duration_s


def test_espeak_missing_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="apt-get install espeak-ng"):
        ScriptedCall.espeak("x", ["hi"])


async def test_the_caller_connects_then_hangs_up_and_a_bot_ends_its_worker_on_it():
    pcm, _ = synthetic("Hi.")
    call = ScriptedCall("events", (CallerLine("Hi.", pcm, words_from_audio("Hi.", pcm)),))
    transport = call.transport(lead_silence_s=0.1, reply_timeout_s=0.2)
    events = []

    worker = PipelineWorker(
        Pipeline([transport.input(), transport.output()]),
        params=PipelineParams(audio_in_sample_rate=SAMPLE_RATE),
        enable_rtvi=False,
        idle_timeout_secs=None,
    )

    @transport.event_handler("on_client_connected")
    async def on_connected(_transport, client):
        events.append(("connected", client))

    @transport.event_handler("on_client_disconnected")
    async def on_disconnected(_transport, client):
        events.append(("disconnected", client, transport.finished.is_set()))
        await worker.cancel()

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.wait_for(runner.run(), 20)
    assert events == [("connected", CALLER_CLIENT), ("disconnected", CALLER_CLIENT, True)]
