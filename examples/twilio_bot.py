"""A Twilio phone bot with every pipecat-fast lever: ``python examples/twilio_bot.py``.

Set your Twilio number's voice webhook to ``https://<your host>/twilio`` (and, for outbound
calls, the call's status callback to ``https://<your host>/twilio/status`` with the
``initiated`` and ``ringing`` events). The call's audio arrives over Twilio Media Streams
(``<Connect><Stream>``, 8 kHz mu-law) through Pipecat's FastAPI WebSocket transport and Twilio
frame serializer.

While the phone rings — from the status callback of an outbound call, or the voice webhook of
an inbound one — the call's session warmup fills the LLM's prompt cache and the TTS warm-pool
dials the TTS socket; when the media stream starts, the pipeline adopts both. Keys: see
``bot_common.py``; ``TWILIO_ACCOUNT_SID`` + ``TWILIO_AUTH_TOKEN`` let the bot hang the call up
when it ends. ``--offline`` runs against pipecat-fast's loopback emulators instead, and
``python -m pipecat_fast.testing.twilio_caller http://127.0.0.1:7860/twilio`` calls it as
Twilio would. Needs ``pip install "pipecat-fast[examples]"``.
"""

from __future__ import annotations

import argparse
import os
from contextlib import asynccontextmanager
from xml.sax.saxutils import quoteattr

import uvicorn
from bot_common import (
    MODEL,
    Providers,
    add_arguments,
    levers_for,
    lint_system_prompt,
    run_call,
)
from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import Response
from loguru import logger
from pipecat.runner.utils import parse_telephony_websocket
from pipecat.serializers.twilio import TwilioFrameSerializer
from pipecat.transports.websocket.fastapi import (
    FastAPIWebsocketParams,
    FastAPIWebsocketTransport,
)

from pipecat_fast.compose import TELEPHONY_PLAYOUT_DELAY_S, CallBook, FastCall, Levers
from pipecat_fast.ttspool import TTSWarmPool

TWILIO_RATE = 8000
ENDED = {"completed", "busy", "no-answer", "failed", "canceled"}


def create_app(args: argparse.Namespace) -> FastAPI:
    """The bot server: the voice webhook, the status callback and the media stream."""
    providers = Providers.from_args(args)
    default_levers = Levers.parse(
        args.levers, playout_delay_s=TELEPHONY_PLAYOUT_DELAY_S, patience=args.patience
    )
    book = CallBook(max_ring_s=120.0)  # calls that rang and were not answered yet
    pool = TTSWarmPool()  # one per process: the TTS sockets dialled while phones ring

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        lint_system_prompt()
        async with providers:
            logger.info(
                f"Twilio bot on {args.host}:{args.port}, levers {default_levers.describe()}"
            )
            yield
            await book.aclose()
            await pool.aclose()

    app = FastAPI(lifespan=lifespan)

    def new_call(call_sid: str, request: Request) -> FastCall:
        query = request.query_params
        services = providers.services(call_sid, script=query.get("script"))
        return FastCall(
            call_sid,
            **services,
            levers=levers_for(query.get("levers"), default_levers),
            pool=pool,
            audio_out_sample_rate=TWILIO_RATE,
            model=MODEL,
        )

    @app.post("/twilio/status")
    async def status(request: Request):
        """Status callback: ringing starts the call's levers; an ending before answer closes."""
        form = await request.form()
        call_sid, state = str(form.get("CallSid", "")), str(form.get("CallStatus", ""))
        if not call_sid:
            return Response("CallSid missing", status_code=400)
        if state in ("initiated", "ringing") and call_sid not in book:
            book.ring(new_call(call_sid, request))
        elif state in ENDED:
            await book.hang_up(call_sid)  # never answered: nothing was used, all is closed
        return Response(status_code=204)

    @app.post("/twilio")
    async def voice(request: Request):
        """Voice webhook: start the call's levers (if the status callback did not) and answer
        with TwiML that connects the call's audio to the media stream."""
        form = await request.form()
        call_sid = str(form.get("CallSid", ""))
        if not call_sid:
            return Response("CallSid missing", status_code=400)
        if call_sid not in book:
            book.ring(new_call(call_sid, request))
        host = args.public_host or request.headers.get("host", f"{args.host}:{args.port}")
        https = request.headers.get("x-forwarded-proto", request.url.scheme) == "https"
        stream_url = f"{'wss' if https else 'ws'}://{host}/twilio/stream"
        twiml = (
            '<?xml version="1.0" encoding="UTF-8"?>'
            f"<Response><Connect><Stream url={quoteattr(stream_url)} /></Connect></Response>"
        )
        return Response(twiml, media_type="application/xml")

    @app.websocket("/twilio/stream")
    async def stream(websocket: WebSocket):
        """Media stream: the answered call's pipeline, with what was warmed while it rang."""
        await websocket.accept()
        transport_type, call_data = await parse_telephony_websocket(websocket)
        if transport_type != "twilio":
            logger.warning(f"not a Twilio media stream ({transport_type}): closing")
            await websocket.close()
            return
        call_sid = call_data.call_id
        call = book.answer(call_sid)
        if call is None:  # no webhook reached this server first: run without ring-time work
            call = FastCall(
                call_sid,
                **providers.services(call_sid, script=call_data.body.get("script")),
                levers=default_levers,
                pool=pool,
                audio_out_sample_rate=TWILIO_RATE,
                model=MODEL,
            )
            call.ring()
        account_sid = os.environ.get("TWILIO_ACCOUNT_SID")
        auth_token = os.environ.get("TWILIO_AUTH_TOKEN")
        serializer = TwilioFrameSerializer(
            stream_sid=call_data.stream_id,
            call_sid=call_sid,
            account_sid=account_sid,
            auth_token=auth_token,
            params=TwilioFrameSerializer.InputParams(auto_hang_up=bool(account_sid and auth_token)),
        )
        transport = FastAPIWebsocketTransport(
            websocket=websocket,
            params=FastAPIWebsocketParams(
                audio_in_enabled=True,
                audio_out_enabled=True,
                add_wav_header=False,
                serializer=serializer,
            ),
        )
        await run_call(call, transport, sample_rate=TWILIO_RATE, report_dir=args.report_dir)

    return app


def main(argv: list[str] | None = None) -> None:
    """Parse the options and serve."""
    parser = argparse.ArgumentParser(description="A Twilio bot with every pipecat-fast lever.")
    add_arguments(parser)
    parser.add_argument(
        "--public-host", default=None, help="the host Twilio reaches (default: the request's)"
    )
    args = parser.parse_args(argv)
    uvicorn.run(create_app(args), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
