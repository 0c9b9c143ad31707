"""Every Pipecat assumption ``pipecat_fast._pipecat`` makes, checked by name.

When a Pipecat upgrade moves one of these, the failing test says which attribute or event
went missing and which adapter function needs a new way to reach it.
"""

import inspect

import pytest
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_text_processor import LLMTextProcessor
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.anthropic.llm import AnthropicLLMService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.turns.user_stop.base_user_turn_stop_strategy import (
    BaseUserTurnStopStrategy,
    UserTurnStoppedParams,
)

from pipecat_fast import _pipecat


def require(condition, what, used_by):
    assert condition, f"Pipecat changed: {what} (needed by pipecat_fast._pipecat.{used_by})"


def params_of(fn):
    return set(inspect.signature(fn).parameters)


@pytest.fixture
def openai_llm():
    return OpenAILLMService(
        api_key="k",
        base_url="http://127.0.0.1:9/v1",
        settings=OpenAILLMService.Settings(model="gpt-4.1-mini", system_instruction="S"),
    )


@pytest.fixture
def anthropic_llm():
    return AnthropicLLMService(
        api_key="k",
        settings=AnthropicLLMService.Settings(
            model="claude-sonnet-4-5", enable_prompt_caching=True
        ),
    )


def test_openai_service_client(openai_llm):
    client = _pipecat.llm_client(openai_llm)
    require(client is not None, "BaseOpenAILLMService._client is gone", "llm_client")
    require(
        "127.0.0.1:9" in str(getattr(client, "base_url", "")),
        "the OpenAI client no longer carries base_url",
        "llm_identity",
    )
    require(callable(getattr(client, "with_options", None)), "client.with_options", "llm_client")
    require(
        _pipecat.is_openai_compatible(openai_llm), "OpenAI service shape", "is_openai_compatible"
    )
    assert _pipecat.llm_identity(openai_llm).model == "gpt-4.1-mini"


def test_anthropic_service_client(anthropic_llm):
    client = _pipecat.llm_client(anthropic_llm)
    require(client is not None, "AnthropicLLMService._client is gone", "llm_client")
    require(
        callable(getattr(client, "with_options", None)),
        "Anthropic client.with_options",
        "llm_client",
    )
    require(
        _pipecat.is_anthropic_messages(anthropic_llm),
        "the Anthropic client lost messages.create",
        "is_anthropic_messages",
    )
    assert not _pipecat.is_openai_compatible(anthropic_llm)
    assert not _pipecat.is_anthropic_messages(object())


def test_public_settings_carry_what_prefill_reads(openai_llm, anthropic_llm):
    for name in ("model", "system_instruction", "extra"):
        require(hasattr(openai_llm.settings, name), f"OpenAI settings.{name}", "(prefill)")
    for name in ("model", "system_instruction", "enable_prompt_caching", "system_prompt_cache_ttl"):
        require(hasattr(anthropic_llm.settings, name), f"Anthropic settings.{name}", "(prefill)")
    require(
        callable(getattr(openai_llm, "build_chat_completion_params", None)),
        "BaseOpenAILLMService.build_chat_completion_params",
        "is_openai_compatible",
    )
    require(hasattr(openai_llm, "supports_developer_role"), "supports_developer_role", "(prefill)")


def test_adapters_take_the_arguments_prefill_passes(openai_llm, anthropic_llm):
    openai = params_of(openai_llm.get_llm_adapter().get_llm_invocation_params)
    require(
        {"context", "system_instruction", "convert_developer_to_user"} <= openai,
        f"OpenAI adapter get_llm_invocation_params arguments are now {sorted(openai)}",
        "(prefill backends)",
    )
    anthropic = params_of(anthropic_llm.get_llm_adapter().get_llm_invocation_params)
    wanted = {
        "context",
        "enable_prompt_caching",
        "system_instruction",
        "ensure_last_message_is_user",
        "system_prompt_cache_ttl",
    }
    require(
        wanted <= anthropic,
        f"Anthropic adapter get_llm_invocation_params arguments are now {sorted(anthropic)}",
        "(prefill backends)",
    )


async def test_anthropic_not_given_sentinel(anthropic_llm):
    params = await anthropic_llm.get_llm_adapter().get_llm_invocation_params(
        LLMContext(messages=[{"role": "user", "content": "hi"}]), enable_prompt_caching=False
    )
    require(not _pipecat.anthropic_given(params["system"]), "anthropic_is_given", "anthropic_given")
    assert _pipecat.anthropic_given("a system prompt")


def test_stop_strategy_events_are_registered_and_run_inline():
    strategy = BaseUserTurnStopStrategy()
    for name in _pipecat.STOP_STRATEGY_EVENTS:
        require(
            _pipecat.event_runs_inline(strategy, name) is True,
            f"BaseUserTurnStopStrategy no longer emits {name} inline",
            "STOP_STRATEGY_EVENTS",
        )
    for method, kwargs in [
        ("trigger_user_turn_finalized", {"enable_user_speaking_frames", "confirms_speculation"}),
        ("trigger_user_turn_inference_triggered", {"speculation"}),
        ("trigger_user_turn_speculation_cancelled", set()),
        ("push_frame", {"frame", "direction"}),
        ("broadcast_frame", {"frame_cls"}),
    ]:
        fn = getattr(strategy, method, None)
        require(callable(fn), f"BaseUserTurnStopStrategy.{method}", "(draft-and-hold)")
        require(kwargs <= params_of(fn), f"{method} arguments", "(draft-and-hold)")
    fields = set(UserTurnStoppedParams.__dataclass_fields__)
    require(
        {"enable_user_speaking_frames", "confirms_speculation"} <= fields,
        f"UserTurnStoppedParams fields are now {sorted(fields)}",
        "(draft-and-hold)",
    )


def test_frame_hooks_run_inline():
    processor = FrameProcessor()
    for name in _pipecat.FRAME_HOOK_EVENTS:
        require(
            _pipecat.event_runs_inline(processor, name) is True,
            f"FrameProcessor no longer runs {name} inline",
            "add_inline_frame_hooks",
        )
    assert _pipecat.event_runs_inline(processor, "on_no_such_event") is None
    seen = []
    _pipecat.add_inline_frame_hooks(processor, before_push=lambda p, f: seen.append(f))
    assert _pipecat.event_runs_inline(processor, "on_before_push_frame")
    with pytest.raises(RuntimeError, match="no longer runs inline"):
        _pipecat.add_inline_frame_hooks(object(), before_process=print)


def test_llm_text_processor_internals():
    processor = LLMTextProcessor()
    require(
        inspect.iscoroutinefunction(getattr(processor, "_aggregated_text_frame", None)),
        "LLMTextProcessor._aggregated_text_frame",
        "text_processor_frame",
    )
    require(
        hasattr(processor, "_skip_tts"), "LLMTextProcessor._skip_tts", "text_processor_skip_tts"
    )
    assert _pipecat.text_processor_skip_tts(processor) is None


async def test_text_processor_frame_applies_the_processor():
    from pipecat.utils.text.base_text_aggregator import Aggregation, TextType

    frame = await _pipecat.text_processor_frame(
        LLMTextProcessor(), Aggregation(text="Hello there.", type=TextType.SENTENCE)
    )
    require(
        frame is not None and frame.text == "Hello there.",
        "aggregated frame",
        "text_processor_frame",
    )


# -- TTS connections (the warm-pool) --------------------------------------------------------


def _tts_services(url: str):
    """One of each Pipecat TTS service the pool has a dial adapter for, pointed at ``url``."""
    from pipecat.services.cartesia.tts import CartesiaTTSService
    from pipecat.services.deepgram.tts import DeepgramTTSService
    from pipecat.services.elevenlabs.tts import ElevenLabsTTSService
    from pipecat.services.rime.tts import RimeNonJsonTTSService, RimeTTSService
    from pipecat.services.sarvam.tts import SarvamTTSService
    from pipecat.services.soniox.tts import SonioxTTSService

    return [
        CartesiaTTSService(
            api_key="k", url=f"{url}/tts/websocket", settings=CartesiaTTSService.Settings(voice="v")
        ),
        ElevenLabsTTSService(
            api_key="k", url=url, settings=ElevenLabsTTSService.Settings(voice="v")
        ),
        DeepgramTTSService(api_key="k", base_url=url),
        RimeTTSService(api_key="k", url=f"{url}/ws2", settings=RimeTTSService.Settings(voice="v")),
        RimeNonJsonTTSService(
            api_key="k", url=f"{url}/ws", settings=RimeNonJsonTTSService.Settings(voice="v")
        ),
        SonioxTTSService(api_key="k", url=f"{url}/tts-websocket"),
        SarvamTTSService(api_key="k", url=f"{url}/text-to-speech/ws"),
    ]


@pytest.fixture
async def accepting_server():
    """A WebSocket server that accepts anything and reads until the client goes."""
    from websockets.asyncio.server import serve

    async def handler(connection):
        async for _ in connection:
            pass

    async with serve(handler, "127.0.0.1", 0) as server:
        yield f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"


@pytest.mark.parametrize("index", range(7))
async def test_tts_dial_spec_is_what_the_service_dials(accepting_server, index):
    """Each dial adapter predicts the service's real first dial at the pipeline's rate."""
    from pipecat.pipeline.worker import PipelineParams
    from pipecat.tests.utils import run_test

    service = _tts_services(accepting_server)[index]
    name = type(service).__name__
    predicted = _pipecat.tts_dial_spec(service, sample_rate=16000)
    require(predicted is not None, f"no dial adapter for {name}", "tts_dial_spec")
    dialled = []

    async def capture(uri, kwargs, dial):
        dialled.append((uri, kwargs))
        return await dial(uri, **kwargs)

    _pipecat.install_connect_hook(service, capture)
    await run_test(
        service,
        frames_to_send=[],
        pipeline_params=PipelineParams(audio_out_sample_rate=16000),
        start_timeout=5,
    )
    require(dialled, f"{name} no longer dials through _websocket_connect", "install_connect_hook")
    uri, kwargs = dialled[0]
    require(
        predicted.matches(uri, kwargs),
        f"{name} now dials {uri} with {sorted(kwargs)}; the adapter predicted {predicted.uri} "
        f"with {sorted(predicted.kwargs)}",
        "tts_dial_spec",
    )


async def test_tts_dial_uses_pipecats_bounded_connection(accepting_server):
    from pipecat.services.websocket_service import _BoundedConnection

    service = _tts_services(accepting_server)[0]
    connection = await _pipecat.tts_dial(service, _pipecat.tts_dial_spec(service))
    try:
        require(
            isinstance(connection, _BoundedConnection)
            and connection.send_timeout == service._ws_send_timeout,
            "WebsocketService._websocket_connect no longer applies the bounded connection",
            "tts_dial",
        )
        assert _pipecat.connection_is_open(connection)
    finally:
        await connection.close()
    assert not _pipecat.connection_is_open(connection)


def test_tts_identity_and_hook_install():
    from pipecat.services.openai.tts import OpenAITTSService

    cartesia, _, _, _, rime_raw, *_ = _tts_services("ws://127.0.0.1:9")
    ident = _pipecat.tts_identity(cartesia)
    assert ident.websocket and not ident.reconnects_on_interruption
    assert _pipecat.tts_provider(cartesia) == "cartesia"
    require(
        _pipecat.tts_identity(rime_raw).reconnects_on_interruption,
        "RimeNonJsonTTSService is no longer an InterruptibleTTSService",
        "tts_identity",
    )
    openai = OpenAITTSService(api_key="k")
    ident = _pipecat.tts_identity(openai)
    assert not ident.websocket and ident.http_client == "httpx"
    assert _pipecat.tts_provider(openai) == "openai"
    assert _pipecat.tts_dial_spec(openai) is None
    with pytest.raises(TypeError, match="not a Pipecat WebsocketService"):
        _pipecat.install_connect_hook(openai, None)
    _pipecat.install_connect_hook(cartesia, None)
    assert "_websocket_connect" in vars(cartesia)
    _pipecat.remove_connect_hook(cartesia)
    assert "_websocket_connect" not in vars(cartesia)


# -- barge-in: word timing and synthesis order ----------------------------------------------------


def test_word_timestamp_tracker_baseline_and_pts_are_what_the_adapter_undoes():
    from pipecat.utils.context.word_timestamp_tracker import WordTimestampTracker

    tracker = WordTimestampTracker()
    tracker.last_pts = 5_000_000_000
    tracker.start(3_000_000_000)  # the clock is behind the last word: the baseline waits
    baseline = _pipecat.word_timing_baseline(5_000_000_000, 3_000_000_000)
    pts = tracker.pts(1.25)
    require(pts == baseline + 1_250_000_000, "WordTimestampTracker baseline/pts", "word_start_s")
    assert _pipecat.word_start_s(pts, baseline) == pytest.approx(1.25)
    fresh = WordTimestampTracker()
    fresh.start(7_000_000_000)
    require(
        fresh.pts(0.5) == _pipecat.word_timing_baseline(0, 7_000_000_000) + 500_000_000,
        "WordTimestampTracker.start(now) baseline",
        "word_timing_baseline",
    )


def test_tts_service_resets_the_last_word_pts_on_an_interruption():
    import pipecat.services.tts_service as tts_module

    source = inspect.getsource(tts_module.TTSService._interrupt_audio_contexts)
    flat = "".join(c for c in source if not c.isspace() and c not in "()")
    require(
        "last_pts=self._word_timestamp_tracker.uninterruptible_last_pts" in flat,
        "TTSService resets the word-timing baseline on an interruption",
        "word_timing_baseline (the before-output side resets its copy)",
    )


def test_http_tts_services_synthesize_sequentially_and_websocket_ones_do_not():
    import aiohttp
    from pipecat.services.cartesia.tts import CartesiaTTSService
    from pipecat.services.deepgram.tts import DeepgramHttpTTSService, DeepgramTTSService

    ws = DeepgramTTSService(api_key="k")
    cartesia = CartesiaTTSService(api_key="k", settings=CartesiaTTSService.Settings(voice="v"))
    http = DeepgramHttpTTSService(api_key="k", aiohttp_session=aiohttp.ClientSession.__new__(
        aiohttp.ClientSession))  # fmt: skip
    assert not _pipecat.tts_synthesizes_sequentially(ws)
    assert not _pipecat.tts_synthesizes_sequentially(cartesia)
    assert _pipecat.tts_synthesizes_sequentially(http)
    assert not _pipecat.tts_synthesizes_sequentially(FrameProcessor())
    import pipecat.services.tts_service as tts_module

    push = inspect.getsource(tts_module.TTSService._speak_text)
    require(
        push.index("_synthesize_text") < push.index("_push_spoken_text"),
        "TTSService queues a sentence's text frame after run_tts has yielded its audio",
        "tts_synthesizes_sequentially",
    )


async def test_background_close_connection_is_pipecats_bounded_one(accepting_server):
    from pipecat.services.websocket_service import _BoundedConnection

    service = _tts_services(accepting_server)[0]
    spec = _pipecat.tts_dial_spec(service)
    plain = await _pipecat.tts_dial(service, spec)
    assert not _pipecat.close_in_background(plain)  # not dialled for it
    await plain.close()
    connection = await _pipecat.tts_dial(service, spec, background_close=True)
    require(
        isinstance(connection, _BoundedConnection)
        and connection.send_timeout == service._ws_send_timeout,
        "the background-close connection lost Pipecat's bounded connection",
        "tts_dial",
    )
    assert _pipecat.close_in_background(connection)
    await connection.close()
    await _pipecat.wait_background_close(connection)
    assert not _pipecat.connection_is_open(connection)


async def test_listen_to_stop_strategy_attaches_one_handler_per_event():
    strategy = BaseUserTurnStopStrategy()
    heard = []

    def handler(name):
        return lambda *args, **kwargs: heard.append(name)

    _pipecat.listen_to_stop_strategy(
        strategy,
        on_push_frame=handler("push"),
        on_broadcast_frame=handler("broadcast"),
        on_inference_triggered=handler("inference"),
        on_speculation_cancelled=handler("cancelled"),
        on_stopped=handler("stopped"),
    )
    await strategy.trigger_user_turn_stopped()
    await strategy.trigger_user_turn_speculation_cancelled()
    require(
        heard == ["inference", "stopped", "cancelled"],
        f"trigger_user_turn_stopped/_speculation_cancelled now emit {heard}",
        "listen_to_stop_strategy",
    )


def test_inline_frame_hooks_can_be_removed():
    processor = FrameProcessor()
    hook = lambda p, f: None  # noqa: E731
    _pipecat.add_inline_frame_hooks(processor, after_process=hook)
    _pipecat.remove_inline_frame_hooks(processor, after_process=hook)
    _pipecat.remove_inline_frame_hooks(processor, after_process=hook)  # absent: ignored
    handlers = processor._event_handlers["on_after_process_frame"].handlers
    assert hook not in handlers


# -- end of turn and preemptive TTS ---------------------------------------------------------


def test_deepgram_handles_its_messages_in_an_instance_looked_up_on_message_handler():
    from pipecat.services.deepgram.stt import DeepgramSTTService

    source = inspect.getsource(DeepgramSTTService)
    require(
        callable(getattr(DeepgramSTTService, "_on_message", None)),
        "DeepgramSTTService._on_message is gone",
        "install_stt_message_hook",
    )
    require(
        "self._on_message" in source,
        "DeepgramSTTService no longer registers self._on_message on its connection",
        "install_stt_message_hook",
    )
    require(
        "from_finalize" in source,
        "DeepgramSTTService no longer reads from_finalize",
        "install_stt_message_hook",
    )
    stt = DeepgramSTTService(api_key="k", base_url="ws://127.0.0.1:9")
    seen = []

    async def after(message):
        seen.append(message)

    _pipecat.install_stt_message_hook(stt, after)
    assert stt._on_message is not DeepgramSTTService._on_message.__get__(stt)
    with pytest.raises(TypeError):
        _pipecat.install_stt_message_hook(object(), after)


def test_llm_services_hold_speculation_in_a_gate_with_process_and_state(openai_llm):
    from pipecat.frames.frames import LLMFullResponseStartFrame, LLMTextFrame
    from pipecat.processors.frame_processor import FrameDirection
    from pipecat.turns.speculation_gate import SpeculationGate, SpeculationState

    gate = _pipecat.speculation_gate(openai_llm)
    require(isinstance(gate, SpeculationGate), "LLMService._speculation_gate", "speculation_gate")
    require(
        params_of(SpeculationGate.process) >= {"frame", "direction"}
        and isinstance(SpeculationGate.state, property),
        "SpeculationGate.process(frame, direction) / .state",
        "tap_speculation_gate",
    )
    held = []
    _pipecat.tap_speculation_gate(openai_llm, held.append)
    gate.begin_speculation(True)
    start, text = LLMFullResponseStartFrame(), LLMTextFrame("Hi")
    assert gate.process(start, FrameDirection.DOWNSTREAM) == []
    assert gate.process(text, FrameDirection.DOWNSTREAM) == []
    assert gate.state is SpeculationState.HOLDING and held == [start, text]
    with pytest.raises(TypeError):
        _pipecat.speculation_gate(object())


def test_smart_turn_v3_decides_from_the_probability_its_predict_hook_returns():
    import numpy as np
    from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3

    require(
        "_predict_endpoint" in vars(LocalSmartTurnAnalyzerV3),
        "LocalSmartTurnAnalyzerV3._predict_endpoint",
        "smart_turn_v3_with_threshold",
    )
    stock = LocalSmartTurnAnalyzerV3()
    strict = _pipecat.smart_turn_v3_with_threshold(0.999)
    lenient = _pipecat.smart_turn_v3_with_threshold(0.001)
    audio = (np.sin(np.linspace(0, 800, 16000)) * 0.3).astype(np.float32)
    result = stock._predict_endpoint(audio)
    require(
        set(result) >= {"prediction", "probability"},
        "_predict_endpoint returns prediction and probability",
        "smart_turn_v3_with_threshold",
    )
    p = result["probability"]
    assert strict._predict_endpoint(audio)["prediction"] == (1 if p > 0.999 else 0)
    assert lenient._predict_endpoint(audio)["prediction"] == (1 if p > 0.001 else 0)
    assert isinstance(strict, LocalSmartTurnAnalyzerV3) and strict.turn_threshold == 0.999
    with pytest.raises(ValueError):
        _pipecat.smart_turn_v3_with_threshold(1.0)
