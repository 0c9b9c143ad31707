"""The voice agent both example bots run: stock Pipecat plus every pipecat-fast lever.

Set DEEPGRAM_API_KEY, OPENAI_API_KEY and CARTESIA_API_KEY (and optionally CARTESIA_VOICE_ID).
Each lever is one line; remove it and the bot still works (every lever fails open).
"""

import os

from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.frames.frames import LLMRunFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.services.deepgram.stt import DeepgramSTTService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.transports.base_transport import BaseTransport
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from pipecat_fast.aggregator import make_text_processor
from pipecat_fast.lint import CacheBustGuard
from pipecat_fast.prefill import DraftAndHoldUserTurnStopStrategy, SpeculativePrefill
from pipecat_fast.stabilizer import TwoUpdateStabilizer
from pipecat_fast.ttfa import TTFAObserver

# Static instructions first, per-call details last: the prefix stays byte-identical across
# calls and turns, so the provider's prompt cache can serve it (see `pipecat-fast lint`).
SYSTEM_PROMPT = (
    "You are Maya, the phone receptionist of a dental clinic. Speak in short, friendly "
    "sentences without lists or markdown; they are read aloud. Help callers book, move or "
    "cancel visits and answer questions about the clinic."
)


async def run_bot(transport: BaseTransport, *, call_id: str, handle_sigint: bool = False):
    """Run one call on ``transport`` until the caller hangs up."""
    stt = DeepgramSTTService(api_key=os.environ["DEEPGRAM_API_KEY"])
    llm = OpenAILLMService(
        api_key=os.environ["OPENAI_API_KEY"],
        settings=OpenAILLMService.Settings(
            model="gpt-4.1-mini",
            system_instruction=SYSTEM_PROMPT,
            # A per-call key keeps this call's prefix together on OpenAI's cache routing.
            extra={"prompt_cache_key": call_id},
        ),
    )
    tts = CartesiaTTSService(
        api_key=os.environ["CARTESIA_API_KEY"],
        settings=CartesiaTTSService.Settings(
            voice=os.environ.get("CARTESIA_VOICE_ID", "71a7ad14-091c-4e8e-a314-022ece01c121")
        ),
    )
    context = LLMContext()
    pair = LLMContextAggregatorPair(
        context,
        user_params=LLMUserAggregatorParams(
            vad_analyzer=SileroVADAnalyzer(),
            user_turn_strategies=UserTurnStrategies(stop=[DraftAndHoldUserTurnStopStrategy()]),
        ),
    )
    pipeline = Pipeline(
        [
            transport.input(),
            stt,
            TwoUpdateStabilizer(),
            pair.user(),
            SpeculativePrefill(llm, context=context),
            llm,
            make_text_processor(),
            tts,
            transport.output(),
            pair.assistant(),
        ]
    )
    ttfa = TTFAObserver()
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(enable_metrics=True, enable_usage_metrics=True),
        observers=[ttfa, CacheBustGuard(provider="openai", model="gpt-4.1-mini")],
    )

    @ttfa.event_handler("on_turn_measured")
    async def on_turn_measured(observer, turn):
        print(f"turn {turn.turn}: TTFA {turn.ttfa_ms:.0f} ms {turn.stages_ms()}")

    @transport.event_handler("on_client_connected")
    async def on_client_connected(transport, client):
        context.add_message({"role": "user", "content": "(The caller just picked up.)"})
        await worker.queue_frames([LLMRunFrame()])

    @transport.event_handler("on_client_disconnected")
    async def on_client_disconnected(transport, client):
        await worker.cancel()

    await PipelineRunner(handle_sigint=handle_sigint).run(worker)
    print("TTFA over the call:", ttfa.summary())
