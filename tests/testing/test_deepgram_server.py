"""The Deepgram emulator, driven by Pipecat's real DeepgramSTTService."""

import asyncio
import json
import time

import pytest
import websockets
from pipecat.frames.frames import (
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    TranscriptionFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.services.deepgram.stt import DeepgramSTTService
from pipecat.tests.utils import SleepFrame

from pipecat_fast.testing.deepgram_server import (
    DeepgramEmulator,
    OnsetDetector,
    ScriptedUtterance,
    interim_events,
    utterance_from_words,
)
from pipecat_fast.testing.profiles import LatencyProfile
from pipecat_fast.testing.synth import TimedWord, plan_speech, render_pcm
from tests.testing.drive import Until, drive

FAST = LatencyProfile("test", 0, 0, 250, 0, 0.0, 0, 10_000, 0)
RATE = 16000


def scripted(text: str) -> tuple[ScriptedUtterance, bytes]:
    """An utterance and matching audio: the synthetic speech's own word timings."""
    words, duration = plan_speech(text)
    utterance = utterance_from_words(text, [(w.text, w.start_s, w.end_s) for w in words])
    return utterance, render_pcm(words, duration, RATE)


def silence(seconds: float) -> bytes:
    return b"\x00\x00" * int(RATE * seconds)


def audio_frames(pcm: bytes, chunk_ms: int = 20):
    step = RATE * 2 * chunk_ms // 1000
    return [InputAudioRawFrame(pcm[i : i + step], RATE, 1) for i in range(0, len(pcm), step)]


def stt(emulator, tag):
    return DeepgramSTTService(api_key="test-key", base_url=emulator.base_url, tag=tag)


def finals_down(n: int) -> Until:
    """Until ``n`` final transcripts came out of the service."""
    return Until(
        lambda down: sum(isinstance(f, TranscriptionFrame) for f in down) >= n, f"{n} final(s)"
    )


def results(emulator, check, what: str) -> Until:
    """Until the emulator's sent results (``emulator.results``) satisfy ``check``."""
    return Until(lambda down: check(emulator.results), what)


def final_sent(emulator, *, from_finalize: bool) -> Until:
    return results(
        emulator,
        lambda rs: any(r.is_final and r.from_finalize is from_finalize for r in rs),
        f"a final with from_finalize={from_finalize}",
    )


async def test_pipecat_deepgram_service_gets_interims_then_the_final_per_utterance():
    first, first_audio = scripted("I would like to book a cleaning for next Tuesday.")
    second, second_audio = scripted("Yes, nine thirty works.")
    async with DeepgramEmulator(FAST, scripts={"call-1": [first, second]}) as emulator:
        pcm = silence(0.4) + first_audio + silence(1.0) + second_audio + silence(0.5)
        down = await drive(stt(emulator, "call-1"), [*audio_frames(pcm), finals_down(2)])
    finals = [f.text for f in down if isinstance(f, TranscriptionFrame)]
    interims = [f.text for f in down if isinstance(f, InterimTranscriptionFrame)]
    assert finals == [first.text, second.text]
    assert interims, "interim transcripts expected"
    assert interims[0] in first.text and len(interims) >= 4
    # Each interim of the first utterance extends the previous one (word by word).
    first_interims = interims[: interims.index(next(i for i in interims if "Yes" in i))]
    assert all(b.startswith(a) for a, b in zip(first_interims, first_interims[1:], strict=False))


async def test_finalize_after_the_final_answers_with_an_empty_from_finalize_result():
    utterance, audio = scripted("Cancel my appointment please.")
    async with DeepgramEmulator(FAST, scripts={"c": [utterance]}) as emulator:
        frames = [*audio_frames(silence(0.2) + audio + silence(0.4)), finals_down(1)]
        frames += [VADUserStoppedSpeakingFrame(stop_secs=0.2)]
        await drive(stt(emulator, "c"), [*frames, final_sent(emulator, from_finalize=True)])
    kinds = [(r.is_final, r.from_finalize, r.transcript) for r in emulator.results]
    assert (True, False, utterance.text) in kinds
    assert kinds[-1] == (True, True, "")


async def test_finalize_mid_utterance_finalizes_the_words_heard_so_far():
    utterance, audio = scripted("Please move my cleaning to Friday morning instead.")
    half = len(audio) // 2 // 2 * 2
    async with DeepgramEmulator(FAST, scripts={"c": [utterance]}) as emulator:
        interim = Until(
            lambda down: any(isinstance(f, InterimTranscriptionFrame) for f in down), "an interim"
        )
        frames = [*audio_frames(silence(0.2) + audio[:half]), interim]
        frames += [VADUserStoppedSpeakingFrame(stop_secs=0.2), finals_down(1)]
        frames += [*audio_frames(audio[half:] + silence(0.3)), finals_down(2)]
        down = await drive(stt(emulator, "c"), frames)
    finals = [f.text for f in down if isinstance(f, TranscriptionFrame)]
    assert len(finals) == 2
    assert " ".join(finals).split() == utterance.text.split()
    # After the Finalize, interims carry only words no final has covered, as Deepgram's do: an
    # interim repeating "Please move my" would read as the caller speaking again.
    texts = [f for f in down if isinstance(f, InterimTranscriptionFrame | TranscriptionFrame)]
    first_final = next(i for i, f in enumerate(texts) if isinstance(f, TranscriptionFrame))
    rest = finals[1].split()
    later = [
        f.text.split() for f in texts[first_final + 1 :] if not isinstance(f, TranscriptionFrame)
    ]
    assert later and all(words == rest[: len(words)] for words in later)


async def test_scripted_revising_partials_are_replayed_in_order():
    words, duration = plan_speech("book it for nine")
    partials = [
        (0.3, "look"),
        (0.5, "book it"),
        (0.8, "book it for mine"),
        (0.9, "book it for nine"),
    ]
    utterance = utterance_from_words(
        "Book it for nine.", [(w.text, w.start_s, w.end_s) for w in words], partials
    )
    async with DeepgramEmulator(FAST, scripts={"c": [utterance]}) as emulator:
        pcm = silence(0.2) + render_pcm(words, duration, RATE) + silence(0.4)
        # The final comes after every interim on the one socket: once it is out, all are.
        down = await drive(stt(emulator, "c"), [*audio_frames(pcm), finals_down(1)])
    interims = [f.text for f in down if isinstance(f, InterimTranscriptionFrame)]
    assert interims == [p for t, p in partials if t < duration]


@pytest.mark.parametrize(
    "query, status",
    [
        ("encoding=mulaw&sample_rate=16000", 400),
        ("encoding=linear16&sample_rate=abc", 400),
        ("encoding=linear16&sample_rate=16000&channels=2", 400),
    ],
)
async def test_bad_handshakes_are_rejected_like_deepgram(query, status):
    async with DeepgramEmulator(FAST) as emulator:
        url = f"{emulator.base_url}/v1/listen?{query}"
        with pytest.raises(websockets.exceptions.InvalidStatus) as info:
            async with websockets.connect(url, additional_headers={"Authorization": "Token k"}):
                pass
    assert info.value.response.status_code == status


@pytest.mark.parametrize(
    "control",
    ["{nope", "[" * 100_000 + "]" * 100_000, json.dumps({"type": [1]}), '"\\ud800"'],
    ids=["unparsable", "deep-nesting", "type-not-a-string", "lone-surrogate"],
)
async def test_malformed_control_message_gets_an_error_and_the_stream_continues(control):
    async with DeepgramEmulator(FAST) as emulator:
        url = f"{emulator.base_url}/v1/listen?encoding=linear16&sample_rate=16000"
        async with websockets.connect(url, additional_headers={"Authorization": "Token k"}) as ws:
            await ws.send(control)
            error = json.loads(await asyncio.wait_for(ws.recv(), 2.0))
            await ws.send(json.dumps({"type": "KeepAlive"}))
            await ws.send(json.dumps({"type": "CloseStream"}))
            closing = json.loads(await ws.recv())
    assert error["type"] == "Error"
    assert closing["type"] == "Metadata"


async def test_a_large_audio_message_does_not_stall_the_event_loop():
    stalls = []

    async def ticker(stop):
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            stalls.append(now - last - 0.01)
            last = now

    audio = silence(15 * 1024 * 1024 / 2 / RATE)  # 15 MiB, just under the 16 MiB frame limit
    async with DeepgramEmulator(FAST) as emulator:
        url = f"{emulator.base_url}/v1/listen?encoding=linear16&sample_rate=16000"
        async with websockets.connect(url, additional_headers={"Authorization": "Token k"}) as ws:
            stop = asyncio.Event()
            ticking = asyncio.create_task(ticker(stop))
            await ws.send(audio)
            await ws.send(json.dumps({"type": "CloseStream"}))
            metadata = json.loads(await asyncio.wait_for(ws.recv(), 10.0))
            stop.set()
            await ticking
    assert metadata["type"] == "Metadata"
    assert metadata["duration"] == pytest.approx(len(audio) / 2 / RATE, abs=0.02)
    # Linear work is tens of ms for 15 MiB; re-slicing the buffer per frame took seconds.
    assert max(stalls) < 1.0, f"event loop stalled {max(stalls):.2f} s"


def test_onset_detector_finds_speech_after_silence_in_any_chunking():
    _, audio = scripted("Hello there.")
    pcm = silence(0.5) + audio + silence(0.5) + audio
    for chunk in (320, 1234, len(pcm)):
        detector = OnsetDetector(RATE)
        onsets = [t for i in range(0, len(pcm), chunk) for t in detector.feed(pcm[i : i + chunk])]
        assert onsets[0] == pytest.approx(0.5, abs=0.03)
        assert len(onsets) >= 2


def test_interim_events_grow_word_by_word_and_skip_repeats():
    utterance, _ = scripted("one two three four five")
    events = interim_events(utterance, 0.1)
    texts = [t for _, t in events]
    assert texts[-1] in ("one two three four", "one two three four five")
    assert len(set(texts)) == len(texts)


async def test_a_service_without_tag_is_told_the_tag_is_missing_and_which_exist():
    from loguru import logger

    utterance, audio = scripted("Cancel my appointment please.")
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="WARNING")
    try:
        async with DeepgramEmulator(FAST, scripts={"book_cleaning": [utterance]}) as emulator:
            untagged = DeepgramSTTService(api_key="test-key", base_url=emulator.base_url)
            warned = Until(lambda down: any("not transcribed" in x for x in lines), "the warning")
            await drive(untagged, [*audio_frames(silence(0.2) + audio + silence(0.4)), warned])
    finally:
        logger.remove(sink)
    beyond = [line for line in lines if "not transcribed" in line]
    assert beyond, lines
    assert "the connection has no tag" in beyond[0] and "'book_cleaning'" in beyond[0]
    assert "DeepgramSTTService(tag=...)" in beyond[0]
    assert not emulator.results or all(not r.transcript for r in emulator.results)


def stt_with(emulator, tag, **settings):
    return DeepgramSTTService(
        api_key="test-key",
        base_url=emulator.base_url,
        tag=tag,
        settings=DeepgramSTTService.Settings(**settings),
    )


async def test_default_endpointing_sends_the_final_before_the_finalize_as_deepgram_does():
    """Deepgram's 10 ms endpointing finalizes ahead of the VAD's stop: Finalize gets ''."""
    utterance, audio = scripted("Cancel my appointment please.")
    async with DeepgramEmulator(FAST, scripts={"c": [utterance]}) as emulator:
        frames = [*audio_frames(silence(0.2) + audio + silence(0.2)), finals_down(1)]
        frames += [VADUserStoppedSpeakingFrame(stop_secs=0.2)]
        frames += [final_sent(emulator, from_finalize=True)]
        down = await drive(stt(emulator, "c"), frames)
    natural, answer = [r for r in emulator.results if r.is_final]
    assert (natural.transcript, natural.speech_final, natural.from_finalize) == (
        utterance.text,
        True,
        False,
    )
    assert (answer.transcript, answer.speech_final, answer.from_finalize) == ("", False, True)
    # The final covers the speech: its range ends 10 ms (the endpointing) after the last word.
    speech_end = 0.2 + utterance.duration_s
    assert natural.start_s + natural.duration_s == pytest.approx(speech_end + 0.01, abs=0.021)
    # Pipecat does not mark it finalized (the Finalize answer that would is empty).
    [final] = [f for f in down if isinstance(f, TranscriptionFrame)]
    assert final.finalized is False
    assert final.result.speech_final is True and final.result.from_finalize is False


def paused(text: str, after_word: int, pause_s: float) -> tuple[ScriptedUtterance, bytes]:
    """An utterance that pauses ``pause_s`` after its word ``after_word`` (0-based), and audio."""
    words, duration = plan_speech(text)
    words = [
        w if i <= after_word else TimedWord(w.text, w.start_s + pause_s, w.end_s + pause_s)
        for i, w in enumerate(words)
    ]
    utterance = utterance_from_words(text, [(w.text, w.start_s, w.end_s) for w in words])
    return utterance, render_pcm(words, duration + pause_s, RATE)


async def test_default_endpointing_finalizes_the_words_before_a_pause_inside_the_utterance():
    """A caller's 1.5 s pause is silence to Deepgram's endpointer: a final comes in the pause.

    Before: the emulator endpointed only at the script's utterance end, so the words before a
    pause reached Pipecat only as the answer to its Finalize, late enough for Pipecat's p99
    wait to end the turn without them (the bench's stock run lost "my birthday is the").
    """
    utterance, audio = paused("Maria Gonzalez, my birthday is the fourth of May.", 5, 1.5)
    pause_at = utterance.words[5].end_s
    lead = silence(0.2)
    cut = len(lead) + int((pause_at + 0.6) * RATE) * 2  # 0.6 s into the pause
    pcm = lead + audio + silence(0.3)
    async with DeepgramEmulator(FAST, scripts={"c": [utterance]}) as emulator:
        frames = [*audio_frames(pcm[:cut]), finals_down(1)]  # no Finalize: the endpointer's own
        frames += [*audio_frames(pcm[cut:]), finals_down(2)]
        down = await drive(stt(emulator, "c"), frames)
    finals = [f for f in down if isinstance(f, TranscriptionFrame)]
    assert [f.text for f in finals] == ["Maria Gonzalez, my birthday is the", "fourth of May."]
    assert all(f.result.speech_final and not f.result.from_finalize for f in finals)
    # The pause's final covers the audio up to 10 ms (the endpointing) after "the".
    first = [r for r in emulator.results if r.is_final][0]
    assert first.start_s + first.duration_s == pytest.approx(0.2 + pause_at + 0.01, abs=0.021)


async def test_a_finalize_after_a_pauses_final_is_answered_empty_and_no_word_comes_twice():
    utterance, audio = paused("Maria Gonzalez, my birthday is the fourth of May.", 5, 1.5)
    lead = silence(0.2)
    cut = len(lead) + int((utterance.words[5].end_s + 0.3) * RATE) * 2
    pcm = lead + audio + silence(0.3)
    async with DeepgramEmulator(FAST, scripts={"c": [utterance]}) as emulator:
        # The VAD's stop 0.3 s into the pause: the Finalize comes after the pause's endpoint.
        frames = [*audio_frames(pcm[:cut]), VADUserStoppedSpeakingFrame(stop_secs=0.2)]
        frames += [final_sent(emulator, from_finalize=True)]
        frames += [*audio_frames(pcm[cut:]), finals_down(2)]
        down = await drive(stt(emulator, "c"), frames)
    answers = [r for r in emulator.results if r.is_final and r.from_finalize]
    assert [r.transcript for r in answers] == [""]
    finals = [f.text for f in down if isinstance(f, TranscriptionFrame)]
    assert " ".join(finals).split() == utterance.text.split()


async def test_long_endpointing_answers_the_finalize_with_the_words_and_pipecat_marks_it():
    """endpointing=300 outlasts the VAD's 200 ms window: the Finalize comes first."""
    utterance, audio = scripted("Cancel my appointment please.")
    speech = audio[: int(utterance.duration_s * RATE) * 2]  # up to the last word's end
    async with DeepgramEmulator(FAST, scripts={"c": [utterance]}) as emulator:
        # Audio and the Finalize share one socket, so the Finalize is read after 200 ms of
        # silence, before the 300 ms endpointing could end the utterance by itself.
        frames = [*audio_frames(silence(0.2) + speech + silence(0.2))]
        frames += [VADUserStoppedSpeakingFrame(stop_secs=0.2), finals_down(1)]
        # More silence: no second final may follow (a bounded wait for something absent).
        frames += [*audio_frames(silence(0.5)), SleepFrame(0.3)]
        down = await drive(stt_with(emulator, "c", endpointing=300), frames)
    finals = [r for r in emulator.results if r.is_final]
    assert [(r.transcript, r.from_finalize, r.speech_final) for r in finals] == [
        (utterance.text, True, False)
    ]
    [final] = [f for f in down if isinstance(f, TranscriptionFrame)]
    assert final.finalized is True  # Pipecat's own fast path: from_finalize with the words


async def test_without_endpointing_no_final_is_speech_final():
    utterance, audio = scripted("Cancel my appointment please.")
    async with DeepgramEmulator(FAST, scripts={"c": [utterance]}) as emulator:
        pcm = silence(0.2) + audio + silence(1.3)
        down = await drive(
            stt_with(emulator, "c", endpointing=False), [*audio_frames(pcm), finals_down(1)]
        )
    [final] = [f for f in down if isinstance(f, TranscriptionFrame)]
    assert final.text == utterance.text
    assert final.result.speech_final is False and final.result.is_final is True


async def test_consecutive_results_tile_the_stream_with_start_and_duration():
    first, first_audio = scripted("I would like to book a cleaning.")
    second, second_audio = scripted("Next Tuesday works.")
    async with DeepgramEmulator(FAST, scripts={"c": [first, second]}) as emulator:
        pcm = silence(0.3) + first_audio + silence(0.8) + second_audio + silence(0.3)
        two = results(emulator, lambda rs: sum(r.is_final for r in rs) >= 2, "two finals")
        await drive(stt(emulator, "c"), [*audio_frames(pcm), two])
    finals = [r for r in emulator.results if r.is_final]
    assert [r.transcript for r in finals] == [first.text, second.text]
    assert finals[0].start_s == 0.0
    # Each final's range starts where the previous one ended (the silence between included).
    assert finals[1].start_s == pytest.approx(finals[0].start_s + finals[0].duration_s, abs=1e-3)
    interims = [r for r in emulator.results if not r.is_final]
    assert all(r.start_s in (finals[0].start_s, finals[1].start_s) for r in interims)


async def test_a_bad_endpointing_value_is_rejected():
    async with DeepgramEmulator(FAST) as emulator:
        url = f"{emulator.base_url}/v1/listen?encoding=linear16&sample_rate=16000&endpointing=x"
        with pytest.raises(websockets.exceptions.InvalidStatus) as info:
            async with websockets.connect(url, additional_headers={"Authorization": "Token k"}):
                pass
    assert info.value.response.status_code == 400
