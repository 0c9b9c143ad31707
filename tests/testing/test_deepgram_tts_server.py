"""The Deepgram TTS emulator: WebSocket and REST ``/v1/speak``, driven by Pipecat's real services
and by hand for the wire details."""

import asyncio
import json

import aiohttp
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
from pipecat.services.deepgram.tts import DeepgramHttpTTSService, DeepgramTTSService
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_fast.testing.deepgram_tts_server import MAX_TEXT_CHARS, DeepgramTTSEmulator
from pipecat_fast.testing.profiles import LatencyProfile
from pipecat_fast.testing.synth import plan_speech

FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)
REPLY = ["Sure, I can do that. ", "Your appointment is at 9:30."]
AUTH = {"Authorization": "Token test-key"}


def llm_frames():
    return [LLMFullResponseStartFrame(), *map(LLMTextFrame, REPLY), LLMFullResponseEndFrame()]


def expected_s():
    return sum(plan_speech(s.strip())[1] for s in REPLY)


async def test_pipecat_websocket_service_gets_audio_text_and_a_flushed_stop():
    async with DeepgramTTSEmulator(FAST) as emulator:
        tts = DeepgramTTSService(api_key="test-key", base_url=emulator.ws_url)
        down, _ = await run_test(
            tts,
            frames_to_send=[*llm_frames(), SleepFrame(1.5)],
            pipeline_params=PipelineParams(audio_out_sample_rate=16000),
        )
    audio = b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))
    assert len(audio) / 2 / 16000 == pytest.approx(expected_s(), abs=0.05)
    text = " ".join(f.text for f in down if isinstance(f, TTSTextFrame))
    assert text.split() == "".join(REPLY).split()
    assert any(isinstance(f, TTSStoppedFrame) for f in down)  # from the Flushed message
    (stream,) = emulator.streams
    assert stream.kind == "websocket" and stream.flushes == 1
    assert [w.text for w in stream.words] == "".join(REPLY).split()


async def test_pipecat_http_service_streams_each_sentence():
    async with DeepgramTTSEmulator(FAST) as emulator, aiohttp.ClientSession() as http:
        tts = DeepgramHttpTTSService(
            api_key="test-key", base_url=emulator.http_url, aiohttp_session=http
        )
        down, _ = await run_test(
            tts,
            frames_to_send=[*llm_frames(), SleepFrame(0.5)],
            pipeline_params=PipelineParams(audio_out_sample_rate=16000),
        )
    audio = b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))
    assert len(audio) / 2 / 16000 == pytest.approx(expected_s(), abs=0.05)
    assert [s.kind for s in emulator.streams] == ["http", "http"]
    assert [s.texts[0].strip() for s in emulator.streams] == [r.strip() for r in REPLY]


async def ws_connect(emulator, query="model=aura-2-helena-en&encoding=linear16&sample_rate=16000"):
    return await websockets.connect(f"{emulator.ws_url}/v1/speak?{query}", additional_headers=AUTH)


async def test_websocket_metadata_flush_clear_close_and_warnings():
    async with DeepgramTTSEmulator(FAST) as emulator:
        ws = await ws_connect(emulator)
        meta = json.loads(await ws.recv())
        assert meta["type"] == "Metadata" and meta["model_name"] == "aura-2-helena-en"
        assert {"request_id", "model_version", "model_uuid"} <= set(meta)
        for bad in ("not json", json.dumps({"type": "Dance"}), json.dumps({"type": "Speak"}),
                    json.dumps({"type": "Speak", "text": "x" * (MAX_TEXT_CHARS + 1)})):  # fmt: skip
            await ws.send(bad)
            warning = json.loads(await ws.recv())
            assert warning["type"] == "Warning" and warning["description"] and warning["code"]
        await ws.send(json.dumps({"type": "Speak", "text": "Hello there."}))
        await ws.send(json.dumps({"type": "Flush"}))
        got_audio, flushed = 0, None
        while flushed is None:
            msg = await ws.recv()
            if isinstance(msg, bytes):
                got_audio += len(msg)
            else:
                flushed = json.loads(msg)
        assert flushed == {"type": "Flushed", "sequence_id": 0}
        assert got_audio / 2 / 16000 == pytest.approx(plan_speech("Hello there.")[1], abs=0.05)
        await ws.send(json.dumps({"type": "Speak", "text": "A long sentence to cut short. " * 5}))
        await ws.recv()  # some audio
        await ws.send(json.dumps({"type": "Clear"}))
        while True:
            msg = await ws.recv()
            if isinstance(msg, str):
                assert json.loads(msg) == {"type": "Cleared", "sequence_id": 1}
                break
        await ws.send(json.dumps({"type": "Close"}))
        with pytest.raises(websockets.ConnectionClosed):
            while True:
                await asyncio.wait_for(ws.recv(), 2)
    assert emulator.streams[0].clears == 1


@pytest.mark.parametrize(
    "query, headers, status",
    [
        ("encoding=linear16&sample_rate=16000", {}, 401),
        ("encoding=mulaw&sample_rate=16000", AUTH, 400),
        ("encoding=linear16&sample_rate=100", AUTH, 400),
        ("encoding=linear16&sample_rate=abc", AUTH, 400),
        ("encoding=linear16&sample_rate=16000&container=ogg", AUTH, 400),
    ],
)
async def test_rest_rejects_bad_requests_in_deepgrams_error_shape(query, headers, status):
    async with DeepgramTTSEmulator(FAST) as emulator, aiohttp.ClientSession() as http:
        url = f"{emulator.http_url}/v1/speak?{query}"
        async with http.post(url, json={"text": "hi"}, headers=headers) as response:
            body = await response.json()
    assert response.status == status
    assert set(body) == {"err_code", "err_msg", "request_id"}


@pytest.mark.parametrize("payload", [b"{not json", b'{"text": 5}', b'{"text": "   "}', b"[]"])
async def test_rest_rejects_bad_bodies(payload):
    async with DeepgramTTSEmulator(FAST) as emulator, aiohttp.ClientSession() as http:
        url = f"{emulator.http_url}/v1/speak?sample_rate=16000"
        async with http.post(url, data=payload, headers=AUTH) as response:
            assert response.status == 400
            assert "err_msg" in await response.json()
    assert emulator.streams == []


async def test_websocket_handshake_without_a_key_is_refused():
    async with DeepgramTTSEmulator(FAST) as emulator:
        with pytest.raises(websockets.InvalidStatus) as e:
            await websockets.connect(f"{emulator.ws_url}/v1/speak")
    assert e.value.response.status_code == 401


async def test_a_socket_that_dies_mid_reply_drops_without_a_close():
    async with DeepgramTTSEmulator(FAST) as emulator:
        emulator.fail_after_s = 0.3
        ws = await ws_connect(emulator)
        await ws.recv()  # Metadata
        await ws.send(json.dumps({"type": "Speak", "text": "This will not finish at all."}))
        received = 0
        with pytest.raises(websockets.ConnectionClosed) as e:
            while True:
                msg = await asyncio.wait_for(ws.recv(), 2)
                received += len(msg) if isinstance(msg, bytes) else 0
        assert e.value.rcvd is None  # no close frame: the connection just died
    assert 0.25 <= received / 2 / 16000 <= 0.4
