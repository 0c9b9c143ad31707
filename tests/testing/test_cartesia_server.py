"""The Cartesia emulator, driven by Pipecat's real CartesiaTTSService."""

import asyncio
import json
import time
import tracemalloc

import pytest
import websockets
from pipecat.frames.frames import (
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.worker import PipelineParams
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_fast.testing.cartesia_server import CartesiaEmulator
from pipecat_fast.testing.profiles import SAME_REGION, LatencyProfile
from pipecat_fast.testing.synth import plan_speech, render_pcm, render_pcm_chunks

FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)


def tts(emulator):
    return CartesiaTTSService(
        api_key="test-key",
        url=emulator.url,
        settings=CartesiaTTSService.Settings(voice="test-voice"),
    )


async def test_pipecat_cartesia_service_gets_audio_word_timestamps_and_done():
    reply = ["Sure, I can do that. ", "Your appointment is at 9:30."]
    async with CartesiaEmulator(FAST) as emulator:
        frames = [LLMFullResponseStartFrame(), *map(LLMTextFrame, reply), LLMFullResponseEndFrame()]
        down, _ = await run_test(
            tts(emulator),
            frames_to_send=[*frames, SleepFrame(1.5)],
            pipeline_params=PipelineParams(audio_out_sample_rate=16000),
        )
    audio = b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))
    expected_s = sum(plan_speech(s.strip())[1] for s in reply)
    assert len(audio) / 2 / 16000 == pytest.approx(expected_s, abs=0.05)
    spoken = " ".join(f.text for f in down if isinstance(f, TTSTextFrame))
    assert spoken.split() == "Sure, I can do that. Your appointment is at 9:30.".split()
    assert any(isinstance(f, TTSStoppedFrame) for f in down)
    assert emulator.connections == 1
    [context] = emulator.contexts.values()
    assert [t.strip() for t in context.transcripts] == [s.strip() for s in reply]


async def test_handshake_and_first_byte_follow_the_profile():
    profile = LatencyProfile("slow", 50, 0, 100, 0, 0.0, 0, 1000, 30, tts_handshake_rtts=3)
    async with CartesiaEmulator(profile) as emulator:
        started = time.monotonic()
        async with websockets.connect(emulator.url, additional_headers={"X-API-Key": "k"}) as ws:
            handshake_s = time.monotonic() - started
            await ws.send(json.dumps(_request("c1", "Hello.", cont=False)))
            kinds = [json.loads(await ws.recv())["type"] for _ in range(3)]
    # Behaviour, not a timing assertion on the machine: the server waited at least the modelled
    # handshake (3 x 50 ms) and reports the modelled first byte (RTT 50 + TTFB 30) or more.
    assert handshake_s >= 0.15
    assert emulator.contexts["c1"].ttfb_ms >= 80
    assert kinds[0] == "timestamps" and kinds[1] == "chunk"


async def test_missing_api_key_is_rejected_at_the_handshake():
    async with CartesiaEmulator(FAST) as emulator:
        with pytest.raises(websockets.exceptions.InvalidStatus) as info:
            async with websockets.connect(emulator.url):
                pass
    assert info.value.response.status_code == 401


@pytest.mark.parametrize(
    "message, expected",
    [
        ("{not json", "invalid JSON"),
        (json.dumps({"transcript": "hi"}), "context_id"),
        (json.dumps({"context_id": "c", "transcript": 5}), "transcript"),
        (json.dumps({"context_id": "c", "transcript": "hi", "output_format": {}}), "pcm_s16le"),
    ],
)
async def test_malformed_messages_get_a_cartesia_error_message(message, expected):
    async with CartesiaEmulator(FAST) as emulator:
        async with websockets.connect(emulator.url, additional_headers={"X-API-Key": "k"}) as ws:
            await ws.send(message)
            reply = json.loads(await ws.recv())
    assert reply["type"] == "error" and reply["done"] is True
    assert expected in reply["error"]


async def test_cancel_stops_a_context():
    async with CartesiaEmulator(SAME_REGION) as emulator:
        async with websockets.connect(emulator.url, additional_headers={"X-API-Key": "k"}) as ws:
            await ws.send(json.dumps(_request("c1", "A long sentence to speak. " * 20)))
            await ws.send(json.dumps({"context_id": "c1", "cancel": True}))
            await ws.send(json.dumps(_request("c2", "Short.", cont=False)))
            seen = set()
            while "done" not in seen:
                msg = json.loads(await ws.recv())
                seen.add(msg["type"])
                assert msg["context_id"] == "c2"
    assert emulator.contexts["c1"].cancelled


def _request(context_id, text, cont=True):
    return {
        "transcript": text,
        "continue": cont,
        "context_id": context_id,
        "model_id": "sonic-3",
        "voice": {"mode": "id", "id": "v"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 16000},
        "add_timestamps": True,
    }


def _with_output(**output):
    return json.dumps({**_request("c", "Hello there.", cont=False), "output_format": output})


@pytest.mark.parametrize(
    "message, expected",
    [
        (_with_output(encoding="pcm_s16le", sample_rate=0), "sample_rate"),
        (_with_output(encoding="pcm_s16le", sample_rate=True), "sample_rate"),
        (_with_output(encoding="pcm_s16le", sample_rate=-16000), "sample_rate"),
        (_with_output(encoding="pcm_s16le", sample_rate=10_000_000), "sample_rate"),
        (json.dumps({**_request("c", "Hi.", cont=False), "output_format": "pcm"}), "pcm_s16le"),
        ("[" * 100_000 + "]" * 100_000, "invalid JSON"),
        (json.dumps(_request("c", "Hi \ud800 there.", cont=False)), "invalid JSON"),
        (json.dumps(_request("c", "word " * 2_000, cont=False)), "transcript"),
    ],
    ids=[
        "rate-0",
        "rate-true",
        "rate-negative",
        "rate-10MHz",
        "format-str",
        "deep",
        "surrogate",
        "long",
    ],
)
async def test_bad_requests_get_an_error_message_not_audio_a_hang_or_a_close(message, expected):
    async with CartesiaEmulator(FAST) as emulator:
        async with websockets.connect(emulator.url, additional_headers={"X-API-Key": "k"}) as ws:
            await ws.send(message)
            reply = json.loads(await asyncio.wait_for(ws.recv(), 2.0))
            assert reply["type"] == "error" and reply["status_code"] == 400, reply
            assert expected in reply["error"]
            # The connection is still usable.
            await ws.send(json.dumps(_request("ok", "Fine.", cont=False)))
            assert json.loads(await asyncio.wait_for(ws.recv(), 2.0))["type"] == "timestamps"
    assert "c" not in emulator.contexts


async def test_long_speech_is_rendered_chunk_by_chunk_not_whole():
    # ~5 minutes of speech at 48 kHz would be ~30 MB of PCM (and twice that while rendering).
    text = "Thank you for calling, how can I help? " * 120
    tracemalloc.start()
    try:
        async with CartesiaEmulator(FAST) as emulator:
            async with websockets.connect(
                emulator.url, additional_headers={"X-API-Key": "k"}
            ) as ws:
                request = _request("c", text, cont=False)
                request["output_format"] = {**request["output_format"], "sample_rate": 48000}
                await ws.send(json.dumps(request))
                kinds = [
                    json.loads(await asyncio.wait_for(ws.recv(), 5.0))["type"] for _ in range(3)
                ]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kinds == ["timestamps", "chunk", "chunk"]
    assert peak < 10 * 1024 * 1024, f"peak {peak / 1e6:.0f} MB"


@pytest.mark.parametrize("rate", [8000, 22050, 48000])
def test_chunked_rendering_is_the_whole_rendering_cut_in_chunks(rate):
    words, duration = plan_speech("Sure, I can do that. Your appointment is at 9:30.")
    step = rate * 40 // 1000
    chunks = list(render_pcm_chunks(words, duration, rate, step))
    assert b"".join(chunks) == render_pcm(words, duration, rate)
    assert all(len(c) == 2 * step for c in chunks[:-1]) and 0 < len(chunks[-1]) <= 2 * step
