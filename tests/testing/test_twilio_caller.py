"""The Twilio caller speaks Twilio's webhook and Media Streams protocol, checked against a
minimal bot on loopback that records every message and answers with audio."""

import array
import base64
import json
import math
import time

import pytest
from aiohttp import WSMsgType, web
from pipecat.audio.utils import create_stream_resampler, pcm_to_ulaw, ulaw_to_pcm

from pipecat_fast.testing.remote_caller import rms
from pipecat_fast.testing.twilio_caller import TwilioCaller, parse_twiml, twilio_sid


def test_parse_twiml_reads_the_stream_url_and_its_parameters():
    stream = parse_twiml(
        '<?xml version="1.0"?><Response><Connect><Stream url="wss://bot/stream">'
        '<Parameter name="script" value="ask_prices"/></Stream></Connect></Response>'
    )
    assert stream.url == "wss://bot/stream" and stream.parameters == {"script": "ask_prices"}


def test_parse_twiml_without_a_stream_says_so():
    with pytest.raises(ValueError, match="Connect><Stream"):
        parse_twiml("<Response><Say>hello</Say></Response>")


def test_twilio_sids_have_twilios_shape():
    sid = twilio_sid("CA")
    assert sid.startswith("CA") and len(sid) == 34 and int(sid[2:], 16) >= 0


def tone(seconds: float, rate: int = 16000) -> bytes:
    n = int(seconds * rate)
    return array.array("h", (int(8000 * math.sin(i * 0.2)) for i in range(n))).tobytes()


async def test_a_call_posts_the_webhook_and_streams_twilios_messages(unused_tcp_port):
    forms, messages = [], []
    state = {"loud": 0}

    async def voice(request):
        forms.append(dict(await request.post()))
        twiml = (
            '<Response><Connect><Stream url="/stream"><Parameter name="script" value="x"/>'
            "</Stream></Connect></Response>"
        )
        return web.Response(text=twiml, content_type="application/xml")

    async def stream(request):
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        reply = await pcm_to_ulaw(tone(0.5, 8000), 8000, 8000, create_stream_resampler())
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            messages.append(data)
            if data["event"] == "media":
                ulaw = base64.b64decode(data["media"]["payload"])
                pcm = await ulaw_to_pcm(ulaw, 8000, 8000, create_stream_resampler())
                if rms(pcm) > 1000:  # the tone, not silence
                    state["loud"] += 1
                    if state["loud"] == 20:  # the utterance's last chunk: answer at once
                        sid = data["streamSid"]
                        for i in range(0, len(reply), 160):
                            payload = base64.b64encode(reply[i : i + 160]).decode()
                            media = {
                                "event": "media",
                                "streamSid": sid,
                                "media": {"payload": payload},
                            }
                            await ws.send_str(json.dumps(media))
                        mark = {"event": "mark", "streamSid": sid, "mark": {"name": "reply"}}
                        await ws.send_str(json.dumps(mark))
                        state["mark_sent"] = time.monotonic()
            if data["event"] == "mark":
                state["mark_answered"] = time.monotonic()
            if data["event"] == "stop":
                await ws.close()
        return ws

    app = web.Application()
    app.router.add_post("/twilio", voice)
    app.router.add_get("/stream", stream)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", unused_tcp_port).start()
    try:
        caller = TwilioCaller(
            f"http://127.0.0.1:{unused_tcp_port}/twilio",
            [tone(0.4)],
            [400],
            await_greeting=False,
            patience_s=3.0,
            timeout_s=20.0,
        )
        result = await caller.run()
    finally:
        await runner.cleanup()

    assert result.error is None
    assert forms[0]["CallSid"] == caller.call_sid and forms[0]["AccountSid"].startswith("AC")
    events = [m["event"] for m in messages]
    assert events[0] == "connected" and messages[0]["protocol"] == "Call"
    assert events[1] == "start" and events[-1] == "stop" and set(events[2:-1]) == {"media", "mark"}
    start = messages[1]["start"]
    assert start["callSid"] == caller.call_sid and start["customParameters"] == {"script": "x"}
    assert start["mediaFormat"] == {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}
    media = [m for m in messages if m["event"] == "media"]
    assert all(len(base64.b64decode(m["media"]["payload"])) == 160 for m in media)  # 20 ms
    assert [int(m["media"]["chunk"]) for m in media] == list(range(1, len(media) + 1))
    sequence = [int(m["sequenceNumber"]) for m in messages[1:]]
    assert sequence == list(range(1, len(messages)))
    assert state["loud"] == 20  # 0.4 s of tone, 20 ms a message
    (turn,) = result.turns
    # Answered on receipt of the last chunk: heard within a few chunks of the end of speech.
    assert turn.ttfa_ms is not None and -30 < turn.ttfa_ms < 200
    assert result.bot_audio_s == pytest.approx(0.5)
    # The mark is answered once the 0.5 s of audio queued before it has played, not before.
    assert [m["mark"]["name"] for m in messages if m["event"] == "mark"] == ["reply"]
    assert 0.4 < state["mark_answered"] - state["mark_sent"] < 1.0
