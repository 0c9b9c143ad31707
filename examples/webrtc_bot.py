"""A WebRTC bot with every pipecat-fast lever: ``python examples/webrtc_bot.py``.

Open http://127.0.0.1:7860 and talk (the page is ``webrtc_client.html`` beside this file),
or point any SmallWebRTC client (Pipecat's JS/React clients, aiortc) at ``POST /api/offer``.
The audio runs over Pipecat's SmallWebRTC transport (aiortc, Opus).

There is no ring on WebRTC, but there is a wait: between the offer and the connection ICE and
DTLS take a few round trips, and the caller has not spoken yet. The call's levers start at the
offer: the session warmup fills the LLM's prompt cache and the TTS warm-pool dials the TTS
socket while the connection comes up. Keys: see ``bot_common.py``. ``--offline`` runs against
pipecat-fast's loopback emulators instead (and keeps ICE on 127.0.0.1), and
``python -m pipecat_fast.testing.webrtc_caller http://127.0.0.1:7860/api/offer`` calls it.
Needs ``pip install "pipecat-fast[examples]"``.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from contextlib import asynccontextmanager
from pathlib import Path

import uvicorn
from bot_common import MODEL, Providers, add_arguments, levers_for, lint_system_prompt, run_call
from fastapi import FastAPI
from fastapi.responses import FileResponse
from loguru import logger
from pipecat.transports.base_transport import TransportParams
from pipecat.transports.smallwebrtc.request_handler import (
    SmallWebRTCPatchRequest,
    SmallWebRTCRequest,
    SmallWebRTCRequestHandler,
)
from pipecat.transports.smallwebrtc.transport import SmallWebRTCTransport

from pipecat_fast.compose import WEBRTC_PLAYOUT_DELAY_S, FastCall, Levers
from pipecat_fast.ttspool import TTSWarmPool

SAMPLE_RATE = 16000
PAGE = Path(__file__).with_name("webrtc_client.html")


def create_app(args: argparse.Namespace) -> FastAPI:
    """The bot server: the client page, the offer endpoint and its ICE patches."""
    providers = Providers.from_args(args)
    default_levers = Levers.parse(
        args.levers, playout_delay_s=WEBRTC_PLAYOUT_DELAY_S, patience=args.patience
    )
    pool = TTSWarmPool()  # one per process
    handler = SmallWebRTCRequestHandler()
    sessions: set[asyncio.Task] = set()
    if args.offline:
        from pipecat_fast.testing.webrtc_caller import loopback_ice

        loopback_ice()  # a closed machine: ICE on 127.0.0.1 only

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        lint_system_prompt()
        async with providers:
            levers = default_levers.describe()
            logger.info(f"WebRTC bot on http://{args.host}:{args.port}, levers {levers}")
            yield
            for task in list(sessions):
                task.cancel()
            await asyncio.gather(*sessions, return_exceptions=True)
            await handler.close()
            await pool.aclose()

    app = FastAPI(lifespan=lifespan)

    @app.get("/")
    async def page():
        return FileResponse(PAGE, media_type="text/html")

    @app.post("/api/offer")
    async def offer(request: SmallWebRTCRequest):
        """A new session: start its levers now, then answer; the pipeline runs on connect."""
        data = request.request_data if isinstance(request.request_data, dict) else {}
        if request.pc_id:  # a renegotiation of a running session
            return await handler.handle_web_request(request, lambda connection: _none())
        session_id = str(data.get("session_id") or uuid.uuid4())
        call = FastCall(
            session_id,
            **providers.services(session_id, script=data.get("script")),
            levers=levers_for(data.get("levers"), default_levers),
            pool=pool,
            audio_out_sample_rate=SAMPLE_RATE,
            model=MODEL,
        )
        call.ring()  # warmup and TTS dial while ICE and DTLS come up

        async def on_connection(connection):
            transport = SmallWebRTCTransport(
                webrtc_connection=connection,
                params=TransportParams(audio_in_enabled=True, audio_out_enabled=True),
            )
            task = asyncio.create_task(
                run_call(call, transport, sample_rate=SAMPLE_RATE, report_dir=args.report_dir)
            )
            sessions.add(task)
            task.add_done_callback(sessions.discard)

        try:
            return await handler.handle_web_request(request, on_connection)
        except Exception:
            await call.hang_up()  # no session after all: close what the call holds
            raise

    @app.patch("/api/offer")
    async def ice_candidate(request: SmallWebRTCPatchRequest):
        await handler.handle_patch_request(request)
        return {"status": "success"}

    return app


async def _none() -> None:
    return None


def main(argv: list[str] | None = None) -> None:
    """Parse the options and serve."""
    parser = argparse.ArgumentParser(description="A WebRTC bot with every pipecat-fast lever.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    uvicorn.run(create_app(args), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
