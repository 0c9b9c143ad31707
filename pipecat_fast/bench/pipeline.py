"""The bench's voice-agent pipeline, built from the real Pipecat services.

Frames flow: caller transport -> ``DeepgramSTTService`` -> [after_stt levers] -> user
context aggregator (Silero VAD + Smart Turn v3, Pipecat's defaults) -> [before_llm levers] ->
``OpenAILLMService``
-> [between_llm_tts levers] -> ``CartesiaTTSService`` (Pipecat's default sentence
aggregation) -> caller transport -> assistant context aggregator.

A named bench configuration receives the :class:`PipelineSpec` before it is assembled and
may insert processors into the lever slots, change service settings, or add observers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.observers.base_observer import BaseObserver
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.services.deepgram.stt import DeepgramSTTService
from pipecat.services.llm_service import LLMService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService
from pipecat.utils.types import NOT_GIVEN

from pipecat_fast.bench.calls import tools_schema
from pipecat_fast.testing.caller_transport import CallerTransport
from pipecat_fast.testing.deepgram_server import ScriptedUtterance

# Placeholder credential for the loopback emulators; never a real key.
EMULATOR_API_KEY = "emulator-key"


@dataclass
class BenchCall:
    """What one bench call needs: the agent's prompt and tools, and the scripted caller.

    Parameters:
        id: Call id; also the Deepgram ``tag`` that selects the STT emulator's script.
        system_prompt: The agent's system prompt.
        tools: OpenAI-format function tool schemas.
        utterances: The caller's audio per turn, 16-bit mono PCM at ``sample_rate``.
        stt_script: What the STT emulator transcribes for each utterance.
        replies: ``(user text, scripted reply)`` pairs for the LLM emulator.
        sample_rate: Caller audio rate (Hz).
        speech_end_ms: Per utterance, the caller's real end of speech (ms from its start).
        pauses_ms: Per utterance, its deliberate mid-utterance pauses ``(start, end)`` (ms
            from its start); empty for most.
        patience_s: How long the caller waits for a reply to start before it talks on
            (``CallerTransport(reply_timeout_s=...)``); the engine bench sizes it to the
            engine's measured prefill rate.
        barge_in_after_s: Per utterance, ``None`` (wait for the previous reply to end) or how
            long after the previous reply started the caller talks over it (s); empty: never.
        greeting: What the bot says first when the call is answered (a ``TTSSpeakFrame`` at
            pipeline start; the caller listens to it before speaking), or None.
        pause_before_s: Per utterance, extra silence before it (s) or None: a caller who goes
            quiet mid-call (an idle gap).
    """

    id: str
    system_prompt: str
    tools: list[dict[str, Any]]
    utterances: list[bytes]
    stt_script: list[ScriptedUtterance]
    replies: list[tuple[str, str]]
    sample_rate: int = 16000
    speech_end_ms: list[int] = field(default_factory=list)
    pauses_ms: list[tuple[tuple[int, int], ...]] = field(default_factory=list)
    patience_s: float = 15.0

    def only(self, indices: Sequence[int]) -> BenchCall:
        """The same call with only the utterances ``indices``, in that order."""
        pick = list(indices)
        return replace(
            self,
            utterances=[self.utterances[i] for i in pick],
            stt_script=[self.stt_script[i] for i in pick],
            speech_end_ms=[self.speech_end_ms[i] for i in pick] if self.speech_end_ms else [],
            pauses_ms=[self.pauses_ms[i] for i in pick] if self.pauses_ms else [],
        )

    barge_in_after_s: list[float | None] = field(default_factory=list)
    greeting: str | None = None
    pause_before_s: list[float | None] = field(default_factory=list)


@dataclass
class Endpoints:
    """Where the providers (emulated or real) listen, and how to authenticate.

    A URL of None means the provider's real service. Keys are kept out of ``repr``.
    """

    llm_base_url: str | None
    tts_url: str | None
    stt_base_url: str | None
    deepgram_tts_url: str | None = None
    sarvam_tts_url: str | None = None
    llm_model: str = "gpt-4.1-mini"
    llm_settings: dict[str, Any] = field(default_factory=dict)
    tts_voice: str = "emulated-voice"
    stt_api_key: str = field(default=EMULATOR_API_KEY, repr=False)
    llm_api_key: str = field(default=EMULATOR_API_KEY, repr=False)
    tts_api_key: str = field(default=EMULATOR_API_KEY, repr=False)

    @classmethod
    def real(
        cls, *, stt_api_key: str, llm_api_key: str, tts_api_key: str, tts_voice: str | None = None
    ) -> Endpoints:
        """The real Deepgram, OpenAI and Cartesia services."""
        return cls(
            llm_base_url=None,
            tts_url=None,
            stt_base_url=None,
            # A stock Cartesia voice ("British Reading Lady", Cartesia's public voice library).
            tts_voice=tts_voice or "71a7ad14-091c-4e8e-a314-022ece01c121",
            stt_api_key=stt_api_key,
            llm_api_key=llm_api_key,
            tts_api_key=tts_api_key,
        )


@dataclass
class PipelineSpec:
    """The pieces of one call's pipeline, before assembly.

    Configurations mutate it: the list slots take lever processors, and any service,
    the context or the user aggregator parameters may be replaced.
    """

    call: BenchCall
    context: LLMContext
    stt: STTService
    user_params: LLMUserAggregatorParams
    llm: LLMService
    tts: TTSService
    after_stt: list[FrameProcessor] = field(default_factory=list)
    before_llm: list[FrameProcessor] = field(default_factory=list)
    between_llm_tts: list[FrameProcessor] = field(default_factory=list)
    after_tts: list[FrameProcessor] = field(default_factory=list)
    """Right after the TTS service (e.g. the preemptive TTS's hold), before the output."""
    observers: list[BaseObserver] = field(default_factory=list)
    on_built: list[Callable[[Pipeline], None]] = field(default_factory=list)
    endpoints: Endpoints | None = None
    barge_in: Any = None
    """A lever around the output transport with ``before_output()`` / ``after_output()``
    processors (e.g. ``BargeInTruncator``), or None."""
    # While the phone rings (before the pipeline starts and the caller speaks): each hook is
    # called once, then the runner waits ring_s seconds. on_hangup hooks run when the call ends.
    ringing: list[Callable[[], object]] = field(default_factory=list)
    ring_s: float = 0.0
    on_hangup: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


def build_spec(call: BenchCall, endpoints: Endpoints) -> PipelineSpec:
    """The stock pipeline pieces for a call, talking to ``endpoints``."""
    context = LLMContext(tools=tools_schema(call.tools) if call.tools else NOT_GIVEN)
    stt = DeepgramSTTService(
        api_key=endpoints.stt_api_key, base_url=endpoints.stt_base_url or "", tag=call.id
    )
    llm = OpenAILLMService(
        api_key=endpoints.llm_api_key,
        base_url=endpoints.llm_base_url,
        settings=OpenAILLMService.Settings(
            model=endpoints.llm_model,
            system_instruction=call.system_prompt,
            **endpoints.llm_settings,
        ),
    )
    tts_kwargs = {"url": endpoints.tts_url} if endpoints.tts_url else {}
    tts = CartesiaTTSService(
        api_key=endpoints.tts_api_key,
        settings=CartesiaTTSService.Settings(voice=endpoints.tts_voice),
        **tts_kwargs,
    )
    user_params = LLMUserAggregatorParams(vad_analyzer=SileroVADAnalyzer())
    return PipelineSpec(
        # A copy: configurations set the call's per-run fields (barge-ins, a greeting) on
        # spec.call, and the next configuration or repeat of the same call must not inherit them.
        call=replace(call),
        context=context,
        stt=stt,
        user_params=user_params,
        llm=llm,
        tts=tts,
        endpoints=endpoints,
    )


def assemble(spec: PipelineSpec, transport: CallerTransport) -> Pipeline:
    """The pipeline in the order frames flow."""
    aggregators = LLMContextAggregatorPair(spec.context, user_params=spec.user_params)
    pipeline = Pipeline(
        [
            transport.input(),
            spec.stt,
            *spec.after_stt,
            aggregators.user(),
            *spec.before_llm,
            spec.llm,
            *spec.between_llm_tts,
            spec.tts,
            *spec.after_tts,
            *([spec.barge_in.before_output()] if spec.barge_in is not None else []),
            transport.output(),
            *([spec.barge_in.after_output()] if spec.barge_in is not None else []),
            aggregators.assistant(),
        ]
    )
    for hook in spec.on_built:
        hook(pipeline)
    return pipeline
