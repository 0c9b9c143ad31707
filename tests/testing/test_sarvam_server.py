"""The Sarvam emulator: Pipecat's real SarvamTTSService, bad input, TLS and idle close."""

import asyncio
import base64
import json
import shutil
import ssl
import subprocess

import pytest
import websockets
from pipecat.services.sarvam.tts import SarvamTTSService

from pipecat_fast.testing.profiles import LatencyProfile
from pipecat_fast.testing.sarvam_server import SarvamEmulator
from pipecat_fast.testing.synth import plan_speech
from pipecat_fast.testing.tts_harness import TTSHarness

FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)


async def test_pipecat_sarvam_service_speaks_and_reconnects_on_interruption():
    async with SarvamEmulator(FAST) as emu:
        tts = SarvamTTSService(api_key="k", url=emu.url)
        async with TTSHarness(tts, sample_rate=24000) as run:
            await run.speak("Hello there.")
            await run.interrupt()
            await run.speak("Again.")
        assert emu.texts == ["Hello there.", "Again."]
        assert emu.connections == 2  # Pipecat's Sarvam service redials on the interruption
        assert emu.configs[0]["speech_sample_rate"] == "24000"
        assert run.sink.audio_frames >= 2 and not run.sink.errors


async def exchange(emu, messages, *, headers=None, query="?model=bulbul:v3"):
    url = emu.url + query
    async with websockets.connect(
        url, additional_headers=headers or {"api-subscription-key": "k"}
    ) as ws:
        replies = []
        for m in messages:
            await ws.send(m if isinstance(m, str) else json.dumps(m))
        for _ in range(len(messages)):
            try:
                replies.append(json.loads(await asyncio.wait_for(ws.recv(), 1.0)))
            except TimeoutError:
                break
        return replies


async def test_bad_messages_get_sarvams_error_and_the_socket_stays_open():
    config = {"type": "config", "data": {"speech_sample_rate": "16000"}}
    async with SarvamEmulator(FAST) as emu:
        replies = await exchange(
            emu,
            [
                {"type": "text", "data": {"text": "too early"}},
                "{not json",
                {"type": "config", "data": {"speech_sample_rate": "12345"}},
                config,
                {"type": "dance"},
                {"type": "ping"},
            ],
        )
        texts = [r["data"]["message"] for r in replies if r["type"] == "error"]
        assert "send a config message first" in texts[0]
        assert "invalid JSON" in texts[1]
        assert "speech_sample_rate must be one of" in texts[2]
        assert "unknown message type 'dance'" in texts[3]
        assert len(texts) == 4 and emu.texts == []


async def test_handshake_needs_a_key_and_a_model():
    async with SarvamEmulator(FAST) as emu:
        with pytest.raises(websockets.InvalidStatus, match="401"):
            await exchange(emu, [], headers={"x": "y"})
        with pytest.raises(websockets.InvalidStatus, match="400"):
            await exchange(emu, [], query="")


async def test_flush_ends_with_a_final_event_after_the_audio():
    async with SarvamEmulator(FAST) as emu:
        url = emu.url + "?model=bulbul:v3"
        async with websockets.connect(url, additional_headers={"api-subscription-key": "k"}) as ws:
            await ws.send(json.dumps({"type": "config", "data": {"speech_sample_rate": "8000"}}))
            await ws.send(json.dumps({"type": "text", "data": {"text": "One two."}}))
            await ws.send(json.dumps({"type": "flush"}))
            audio = b""
            while True:
                msg = json.loads(await asyncio.wait_for(ws.recv(), 2.0))
                if msg["type"] == "event":
                    assert msg["data"]["event_type"] == "final"
                    break
                audio += base64.b64decode(msg["data"]["audio"])
        assert len(audio) / 2 / 8000 == pytest.approx(plan_speech("One two.")[1], abs=0.05)


async def test_tls_and_idle_close(tmp_path):
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a test certificate")
    made = subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        capture_output=True,
    )
    if made.returncode != 0:
        pytest.skip(f"openssl could not make a test certificate: {made.stderr[-200:]!r}")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cafile=str(cert))
    async with SarvamEmulator(FAST, ssl=server_ctx, idle_close_s=0.2) as emu:
        assert emu.url.startswith("wss://")
        async with websockets.connect(
            emu.url + "?model=m", additional_headers={"api-subscription-key": "k"}, ssl=client_ctx
        ) as ws:
            with pytest.raises(websockets.ConnectionClosedOK):
                await asyncio.wait_for(ws.recv(), 2.0)
            assert ws.close_code == 1000 and ws.close_reason == "idle timeout"
        assert emu.idle_closes == 1


def test_emulator_connections_are_accepted_with_nodelay():
    """Nagle on the server side once held the TLS upgrade's response for a delayed ACK."""
    import socket

    from pipecat_fast.testing._loopback import bind_loopback

    sock = bind_loopback()
    try:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        sock.close()
