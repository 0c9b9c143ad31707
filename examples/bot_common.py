"""The voice agent both example bots run: stock Pipecat plus every pipecat-fast lever.

Set DEEPGRAM_API_KEY, OPENAI_API_KEY and CARTESIA_API_KEY (and optionally CARTESIA_VOICE_ID).
Each lever is one line and fails open: remove one and the bot still works. Two depend on
another: SpeculativePrefill acts only on TwoUpdateStabilizer's stable words (it warns once if it
sees none), and DraftAndHoldUserTurnStopStrategy drafts from the final transcript or, sooner,
from those stable words.
"""

import os
from importlib.resources import files

from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.frames.frames import LLMRunFrame
from pipecat.pipeline.pipeline import Pipeline
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
from pipecat.workers.runner import WorkerRunner

from pipecat_fast.aggregator import make_text_processor
from pipecat_fast.lint import CacheBustGuard
from pipecat_fast.prefill import DraftAndHoldUserTurnStopStrategy, SpeculativePrefill
from pipecat_fast.stabilizer import TwoUpdateStabilizer
from pipecat_fast.ttfa import TTFAObserver

# A real-sized receptionist prompt (the bench's, ~3,200 tokens). Prompt caching, and so the
# speculative prefill, needs at least 1,024 tokens on OpenAI: with a shorter prompt
# SpeculativePrefill says so at start-up and sends nothing. Static instructions come first and
# per-call details (none here) would go last, so the prefix stays byte-identical from turn to
# turn of a call and the provider's cache serves it.
SYSTEM_PROMPT = (
    files("pipecat_fast.bench").joinpath("data/prompts/dental_receptionist.md").read_text("utf-8")
)


async def run_bot(transport: BaseTransport, *, call_id: str, handle_sigint: bool = False):
    """Run one call on ``transport`` until the caller hangs up."""
    stt = DeepgramSTTService(api_key=os.environ["DEEPGRAM_API_KEY"])
    llm = OpenAILLMService(
        api_key=os.environ["OPENAI_API_KEY"],
        settings=OpenAILLMService.Settings(
            model="gpt-4.1-mini",
            system_instruction=SYSTEM_PROMPT,
            # OpenAI's prompt-caching guide: reuse one prompt_cache_key for requests that share
            # a long prefix. Every turn of this call shares the prompt and the history so far,
            # so the key is the call's id.
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

    runner = WorkerRunner(handle_sigint=handle_sigint)
    await runner.add_workers(worker)
    await runner.run()
    print("TTFA over the call:", ttfa.summary())
