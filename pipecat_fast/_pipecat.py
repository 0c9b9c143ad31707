"""The one module that touches Pipecat internals.

Pipecat's public API does not expose everything a lever needs (an OpenAI-compatible
service's client and base URL, for one). Every such access lives here, each behind a small
function with a plain return value, so a Pipecat upgrade that moves something breaks one
function — and ``tests/test_pipecat_adapter.py``, which checks each assumption by name and
says which Pipecat attribute went missing.

Public API is used wherever it exists (``service.settings``, ``get_llm_adapter()``,
``build_chat_completion_params``, ``add_event_handler``, a strategy's ``trigger_*`` methods);
what is here is what is not public, or an event name / behaviour a lever relies on.

Sections: LLM services, user turn stop strategies, frame hooks, ``LLMTextProcessor``. A new
lever adds its function to the right section and its check to the adapter test.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pipecat_fast.providers import identify_provider

# -- LLM services -------------------------------------------------------------------------


@dataclass(frozen=True)
class LLMIdentity:
    """Plain facts about a Pipecat LLM service, for provider lookups.

    Attributes:
        modules: Module names of the service class and its bases, most derived first.
        base_url: The client's base URL, or ``None`` when the service has no such client.
        model: The model id in the service's settings, or ``None``.
    """

    modules: tuple[str, ...]
    base_url: str | None
    model: str | None


def llm_client(service: Any) -> Any | None:
    """The SDK client a Pipecat LLM service sends with (``_client``), or ``None``.

    Pipecat 1.14: ``BaseOpenAILLMService._client`` (an ``openai.AsyncOpenAI``) and
    ``AnthropicLLMService._client`` (an ``anthropic.AsyncAnthropic``); there is no public
    accessor.
    """
    return getattr(service, "_client", None)


def llm_identity(service: Any) -> LLMIdentity:
    """Module names, base URL and model of a Pipecat LLM service."""
    modules = tuple(cls.__module__ for cls in type(service).__mro__ if cls is not object)
    client = llm_client(service)
    base_url = getattr(client, "base_url", None) if client is not None else None
    settings = getattr(service, "settings", None)  # public in Pipecat 1.14
    model = getattr(settings, "model", None) if settings is not None else None
    return LLMIdentity(
        modules=modules,
        base_url=str(base_url) if base_url else None,
        model=str(model) if isinstance(model, str) and model else None,
    )


def llm_provider(service: Any, provider: str | None = None) -> str | None:
    """The canonical provider of a Pipecat LLM service (see ``identify_provider``).

    Args:
        service: The LLM service.
        provider: An explicit provider name, which wins (``ValueError`` if unknown).
    """
    if provider:
        from pipecat_fast.providers import cache_facts

        return cache_facts(provider).provider
    ident = llm_identity(service)
    return identify_provider(ident.modules, ident.base_url, ident.model)


def is_openai_compatible(service: Any) -> bool:
    """Whether ``service`` sends through an OpenAI SDK client (``BaseOpenAILLMService``).

    Checks the shape a prefill needs: the public ``build_chat_completion_params`` and
    ``get_llm_adapter``, and a client with ``chat.completions.create``.
    """
    client = llm_client(service)
    completions = getattr(getattr(client, "chat", None), "completions", None)
    return (
        callable(getattr(service, "build_chat_completion_params", None))
        and callable(getattr(service, "get_llm_adapter", None))
        and callable(getattr(completions, "create", None))
    )


def is_anthropic_messages(service: Any) -> bool:
    """Whether ``service`` sends through an Anthropic SDK client (``messages.create``)."""
    client = llm_client(service)
    messages = getattr(client, "messages", None)
    return callable(getattr(messages, "create", None)) and callable(
        getattr(service, "get_llm_adapter", None)
    )


def anthropic_given(value: Any) -> bool:
    """Whether a value from Pipecat's Anthropic adapter is set (not the SDK's ``NOT_GIVEN``)."""
    from pipecat.adapters.llm.services.anthropic_adapter import anthropic_is_given

    return bool(anthropic_is_given(value))


# -- user turn stop strategies ---------------------------------------------------------------

STOP_STRATEGY_EVENTS = (
    "on_push_frame",
    "on_broadcast_frame",
    "on_user_turn_inference_triggered",
    "on_user_turn_speculation_cancelled",
    "on_user_turn_stopped",
)
"""The events every ``BaseUserTurnStopStrategy`` emits (Pipecat 1.14; its class docstring),
all run inline (``sync=True``). A strategy that wraps another re-emits each of them."""


def listen_to_stop_strategy(
    strategy: Any,
    *,
    on_push_frame: Any,
    on_broadcast_frame: Any,
    on_inference_triggered: Any,
    on_speculation_cancelled: Any,
    on_stopped: Any,
) -> None:
    """Attach a handler to each of a stop strategy's :data:`STOP_STRATEGY_EVENTS`.

    Handlers get Pipecat's arguments: ``(strategy, frame, direction)``,
    ``(strategy, frame_cls, **kwargs)``, ``(strategy, speculation)``, ``(strategy)`` and
    ``(strategy, params)`` (a ``UserTurnStoppedParams``).
    """
    handlers = (
        on_push_frame,
        on_broadcast_frame,
        on_inference_triggered,
        on_speculation_cancelled,
        on_stopped,
    )
    for name, handler in zip(STOP_STRATEGY_EVENTS, handlers, strict=True):
        strategy.add_event_handler(name, handler)


# -- turn analyzers -------------------------------------------------------------------------


def smart_turn_v3_with_threshold(threshold: float, **kwargs: Any) -> Any:
    """Pipecat's ``LocalSmartTurnAnalyzerV3`` deciding *complete* above ``threshold``.

    Pipecat 1.14's analyzer calls a turn complete when the model's probability is above 0.5
    (``_predict_endpoint``, the hook its subclasses implement, returns ``prediction`` and
    ``probability``); this subclass re-decides ``prediction`` from the same probability.

    Raises:
        ValueError: If ``threshold`` is not in (0, 1).
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ValueError(f"turn threshold must be a number in (0, 1), got {threshold!r}")
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"turn threshold must be in (0, 1), got {threshold!r}")
    from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3

    class SmartTurnV3WithThreshold(LocalSmartTurnAnalyzerV3):
        def _predict_endpoint(self, audio_array: Any) -> dict[str, Any]:
            result = super()._predict_endpoint(audio_array)
            result["prediction"] = 1 if float(result["probability"]) > threshold else 0
            return result

    analyzer = SmartTurnV3WithThreshold(**kwargs)
    analyzer.turn_threshold = float(threshold)
    return analyzer


def smart_turn_predict(analyzer: Any, audio: Any) -> tuple[bool, float]:
    """Run a Smart Turn analyzer's model on ``audio`` (float32 mono at its rate).

    Through ``BaseSmartTurn._predict_endpoint`` (the model alone: none of the analyzer's
    buffering, so its own state is untouched). Returns ``(complete, probability)``. Blocking:
    run it in an executor.
    """
    result = analyzer._predict_endpoint(audio)
    return bool(result["prediction"] == 1), float(result["probability"])


# -- the LLM service's speculation gate --------------------------------------------------------


def speculation_gate(service: Any) -> Any:
    """The ``SpeculationGate`` a Pipecat LLM service holds speculative replies in.

    Pipecat 1.14: ``LLMService._speculation_gate`` (the gate's own API — ``process``,
    ``state`` — is public; the attribute is not).

    Raises:
        TypeError: If the service has no such gate.
    """
    from pipecat.turns.speculation_gate import SpeculationGate

    gate = getattr(service, "_speculation_gate", None)
    if not isinstance(gate, SpeculationGate):
        raise TypeError(f"{service} holds no SpeculationGate (_speculation_gate): no LLM service")
    return gate


def tap_speculation_gate(service: Any, on_held: Callable[[Any], None]) -> None:
    """Call ``on_held(frame)`` for every frame the LLM service's gate holds.

    Runs inline, inside the service's ``push_frame``, right after the gate decided (a frame is
    held when the gate is holding after it and did not emit it). ``on_held`` must not block.

    Raises:
        TypeError: If the service has no speculation gate.
    """
    from pipecat.turns.speculation_gate import SpeculationState

    gate = speculation_gate(service)
    decide = gate.process

    def process(frame: Any, direction: Any) -> list:
        emitted = decide(frame, direction)
        if gate.state is SpeculationState.HOLDING and not any(f is frame for f, _ in emitted):
            on_held(frame)
        return emitted

    gate.process = process


# -- STT services ---------------------------------------------------------------------------

STTMessageHook = Callable[[Any], Awaitable[None]]


def install_stt_message_hook(service: Any, after: STTMessageHook) -> None:
    """Call ``after(message)`` once the STT service has handled each provider message.

    Pipecat 1.14's ``DeepgramSTTService`` handles every message of its live connection in
    ``_on_message`` (registered on the connection when it connects, looked up on the
    instance), and pushes nothing for an empty ``from_finalize`` answer. Installed on the
    instance before the service connects, so it covers every connection it opens.

    Raises:
        TypeError: If the service has no ``_on_message`` handler to follow.
    """
    original = getattr(service, "_on_message", None)
    if not callable(original):
        raise TypeError(f"{service} has no provider message handler (_on_message) to follow")

    async def _on_message(message: Any) -> None:
        await original(message)
        await after(message)

    service._on_message = _on_message


# -- frame hooks ----------------------------------------------------------------------------

FRAME_HOOK_EVENTS = ("on_before_process_frame", "on_after_process_frame", "on_before_push_frame")
"""``FrameProcessor`` events that run inline in the processor's own task (``sync=True``)."""


def event_runs_inline(obj: Any, event_name: str) -> bool | None:
    """Whether ``obj``'s event runs its handlers inline, in a task, or is not registered.

    Returns ``True``, ``False`` or ``None``. Reads ``BaseObject._event_handlers``.
    """
    handler = getattr(obj, "_event_handlers", {}).get(event_name)
    if handler is None:
        return None
    return bool(getattr(handler, "is_sync", False))


def add_inline_frame_hooks(
    processor: Any,
    *,
    before_process: Any = None,
    after_process: Any = None,
    before_push: Any = None,
) -> None:
    """Attach handlers that run inline in ``processor``'s task, before/after it handles a frame.

    Each handler is called as ``handler(processor, frame)``.

    Raises:
        RuntimeError: If this Pipecat no longer runs one of those events inline (a handler
            would then run later, from a task, and see the processor's state too late).
    """
    hooks = {
        "on_before_process_frame": before_process,
        "on_after_process_frame": after_process,
        "on_before_push_frame": before_push,
    }
    for name, handler in hooks.items():
        if handler is None:
            continue
        if event_runs_inline(processor, name) is not True:
            raise RuntimeError(f"{processor}: Pipecat's {name} event no longer runs inline")
        processor.add_event_handler(name, handler)


def remove_inline_frame_hooks(
    processor: Any,
    *,
    before_process: Any = None,
    after_process: Any = None,
    before_push: Any = None,
) -> None:
    """Detach handlers added by :func:`add_inline_frame_hooks` (absent ones are ignored)."""
    hooks = {
        "on_before_process_frame": before_process,
        "on_after_process_frame": after_process,
        "on_before_push_frame": before_push,
    }
    for name, handler in hooks.items():
        if handler is not None:
            processor.remove_event_handler(name, handler)


# -- LLMTextProcessor -----------------------------------------------------------------------


async def text_processor_frame(processor: Any, aggregation: Any) -> Any | None:
    """The frame an ``LLMTextProcessor`` would push for ``aggregation``, or ``None``.

    Its text transforms applied. Calls ``_aggregated_text_frame``.
    """
    return await processor._aggregated_text_frame(aggregation)


def text_processor_skip_tts(processor: Any) -> bool | None:
    """The ``skip_tts`` of the reply an ``LLMTextProcessor`` is aggregating (``_skip_tts``)."""
    return processor._skip_tts


# -- TTS connections (the warm-pool) --------------------------------------------------------

PIPECAT_DEFAULT_OUT_RATE = 24000
"""``PipelineParams.audio_out_sample_rate``'s default in Pipecat 1.14: the rate a TTS service
takes at setup when neither it nor the pipeline names one."""


@dataclass(frozen=True)
class TTSIdentity:
    """Plain facts about a Pipecat TTS service, for the warm-pool.

    Attributes:
        modules: Module names of the service class and its bases, most derived first.
        url: The URL the service dials, when the service keeps it where the adapter knows.
        websocket: The service keeps a WebSocket (a ``WebsocketService``).
        reconnects_on_interruption: It closes and reopens its socket on every interruption
            (an ``InterruptibleTTSService``: Fish, Sarvam, Rime's raw WebSocket).
        http_client: For an HTTP service, its client library (``"httpx"``/``"aiohttp"``).
    """

    modules: tuple[str, ...]
    url: str | None
    websocket: bool
    reconnects_on_interruption: bool
    http_client: str | None


@dataclass(frozen=True)
class DialSpec:
    """What a WebSocket TTS service passes to ``_websocket_connect``: the URI and its options.

    Headers carry the API key: never log a spec; compare specs with :meth:`matches`.
    """

    uri: str
    kwargs: dict[str, Any]

    def matches(self, uri: str, kwargs: dict[str, Any]) -> bool:
        """Whether a connection dialled with this spec is what ``(uri, kwargs)`` asks for."""
        return self.uri == uri and _comparable(self.kwargs) == _comparable(kwargs)


def _comparable(kwargs: dict[str, Any]) -> dict[str, Any]:
    out = dict(kwargs)
    headers = out.get("additional_headers")
    if headers is not None:
        items = headers.items() if hasattr(headers, "items") else headers
        out["additional_headers"] = sorted((str(k), str(v)) for k, v in items)
    return out


def tts_identity(service: Any) -> TTSIdentity:
    """Module names, URL, transport and interruption behaviour of a Pipecat TTS service."""
    from pipecat.services.tts_service import InterruptibleTTSService
    from pipecat.services.websocket_service import WebsocketService

    modules = tuple(cls.__module__ for cls in type(service).__mro__ if cls is not object)
    url = None
    for attr in ("_url", "_base_url", "_websocket_url"):
        value = getattr(service, attr, None)
        if isinstance(value, str) and value:
            url = value
            break
    websocket = isinstance(service, WebsocketService)
    http_client = None
    if not websocket:
        http_client = "aiohttp" if getattr(service, "_session", None) is not None else "httpx"
    return TTSIdentity(
        modules=modules,
        url=url,
        websocket=websocket,
        reconnects_on_interruption=isinstance(service, InterruptibleTTSService),
        http_client=http_client,
    )


def tts_provider(service: Any) -> str | None:
    """The canonical TTS provider of a Pipecat TTS service (see ``identify_tts_provider``)."""
    from pipecat_fast.providers import identify_tts_provider

    ident = tts_identity(service)
    return identify_tts_provider(ident.modules, ident.url)


def _rate(service: Any, sample_rate: int | None) -> int:
    # TTSService.setup: ``self._sample_rate = self._init_sample_rate or audio_out_sample_rate``.
    return int(
        getattr(service, "_init_sample_rate", None) or sample_rate or PIPECAT_DEFAULT_OUT_RATE
    )


class _Temporarily:
    """Set attributes for the length of a block (what ``setup()`` would have set), then restore."""

    def __init__(self, obj: Any, **attrs: Any):
        self._obj, self._attrs, self._saved = obj, attrs, {}

    def __enter__(self):
        for name, value in self._attrs.items():
            self._saved[name] = getattr(self._obj, name)
            setattr(self._obj, name, value)
        return self._obj

    def __exit__(self, *exc: object) -> None:
        for name, value in self._saved.items():
            setattr(self._obj, name, value)


def _cartesia_spec(service: Any, rate: int) -> DialSpec:
    headers = {
        "X-API-Key": service._api_key,
        "Cartesia-Version": service._cartesia_version,
        **service._extra_headers,
    }
    return DialSpec(service._url, {"additional_headers": headers})


def _elevenlabs_spec(service: Any, rate: int) -> DialSpec:
    from pipecat.services.elevenlabs.tts_base import output_format_from_sample_rate

    with _Temporarily(service, _output_format=output_format_from_sample_rate(rate)):
        url = service._build_websocket_url()
    return DialSpec(
        url,
        {"max_size": 16 * 1024 * 1024, "additional_headers": {"xi-api-key": service._api_key}},
    )


def _deepgram_spec(service: Any, rate: int) -> DialSpec:
    # Mirrors DeepgramTTSService._connect_websocket (the URL is built inline there).
    params = [f"model={service._settings.voice}", f"encoding={service._encoding}"]
    params.append(f"sample_rate={rate}")
    if service._settings.speed is not None:
        params.append(f"speed={service._settings.speed}")
    if service._mip_opt_out is not None:
        params.append(f"mip_opt_out={str(service._mip_opt_out).lower()}")
    url = f"{service._base_url}/v1/speak?{'&'.join(params)}"
    return DialSpec(url, {"additional_headers": {"Authorization": f"Token {service._api_key}"}})


def _rime_spec(service: Any, rate: int) -> DialSpec:
    with _Temporarily(service, _sampling_rate=rate):
        ws_params = service._build_ws_params()
    params = "&".join(f"{k}={v}" for k, v in ws_params.items() if v is not None)
    headers = {"Authorization": f"Bearer {service._api_key}"}
    return DialSpec(f"{service._url}?{params}", {"additional_headers": headers})


def _rime_raw_spec(service: Any, rate: int) -> DialSpec:
    # Mirrors RimeNonJsonTTSService._connect_websocket (the URL is built inline there).
    s = service._settings
    values = {
        "speaker": s.voice,
        "modelId": s.model,
        "audioFormat": service._audio_format,
        "samplingRate": rate,
    }
    for name in ("language", "segment", "repetition_penalty", "temperature", "top_p"):
        value = getattr(s, name, None)
        if value is not None:
            values["lang" if name == "language" else name] = value
    values.update(s.extra)
    params = "&".join(f"{k}={v}" for k, v in values.items() if v is not None)
    return DialSpec(
        f"{service._url}?{params}",
        {
            "additional_headers": {"Authorization": f"Bearer {service._api_key}"},
            "max_size": 1024 * 1024 * 16,
        },
    )


def _soniox_spec(service: Any, rate: int) -> DialSpec:
    headers = {"Authorization": f"Bearer {service._api_key}"}
    return DialSpec(service._url, {"additional_headers": headers})


def _sarvam_spec(service: Any, rate: int) -> DialSpec:
    from pipecat.services.sarvam._sdk import sdk_headers

    return DialSpec(
        service._websocket_url,
        {
            "additional_headers": {"api-subscription-key": service._api_key},
            "user_agent_header": sdk_headers()["User-Agent"],
        },
    )


_DIAL_SPECS = {
    "pipecat.services.cartesia.tts.CartesiaTTSService": _cartesia_spec,
    "pipecat.services.elevenlabs.tts.ElevenLabsTTSService": _elevenlabs_spec,
    "pipecat.services.deepgram.tts.DeepgramTTSService": _deepgram_spec,
    "pipecat.services.rime.tts.RimeTTSService": _rime_spec,
    "pipecat.services.rime.tts.RimeNonJsonTTSService": _rime_raw_spec,
    "pipecat.services.soniox.tts.SonioxTTSService": _soniox_spec,
    "pipecat.services.sarvam.tts.SarvamTTSService": _sarvam_spec,
}
"""Pipecat 1.14 WebSocket TTS services whose first dial the pool can make ahead, by class.

Each function returns what the class's ``_connect_websocket`` passes to
``_websocket_connect`` once ``setup()`` has run at ``rate``. A subclass that changes what
it dials is not covered (exact class match); the pool checks every hand-over against what
the service actually asks for, so a wrong spec costs a fallback dial, never a wrong socket
(``tests/test_pipecat_adapter.py`` compares each with the service's real dial)."""


def tts_dial_spec(service: Any, sample_rate: int | None = None) -> DialSpec | None:
    """What ``service`` will dial at setup, or ``None`` when no adapter knows its class.

    Args:
        service: A Pipecat WebSocket TTS service, not yet set up.
        sample_rate: The pipeline's ``audio_out_sample_rate`` (the service's own
            ``sample_rate`` wins, as in ``TTSService.setup``; Pipecat's default otherwise).
    """
    cls = type(service)
    build = _DIAL_SPECS.get(f"{cls.__module__}.{cls.__qualname__}")
    if build is None:
        return None
    return build(service, _rate(service, sample_rate))


ConnectHook = Callable[[str, dict[str, Any], Callable[..., Awaitable[Any]]], Awaitable[Any]]


def install_connect_hook(service: Any, hook: ConnectHook) -> Any:
    """Route every socket the service opens through ``hook(uri, kwargs, dial)``.

    Every Pipecat 1.14 WebSocket service opens its sockets with
    ``WebsocketService._websocket_connect(uri, **kwargs)`` — at setup, on a reconnect after a
    close or an error, on every interruption (``InterruptibleTTSService``), on a settings
    change. The hook returns the connection to use: a pooled one, or ``await dial(uri,
    **kwargs)`` (the service's own dial). Installed on the instance, so the class and
    ``isinstance`` stay as they were.

    Returns:
        The installed callable (for :func:`remove_connect_hook`).

    Raises:
        TypeError: If the service is not a Pipecat ``WebsocketService``.
    """
    from pipecat.services.websocket_service import WebsocketService

    if not isinstance(service, WebsocketService):
        raise TypeError(f"{service} is not a Pipecat WebsocketService: no socket to pool")
    original = WebsocketService._websocket_connect.__get__(service)

    async def _connect(uri: str, **kwargs: Any) -> Any:
        return await hook(uri, kwargs, original)

    service._websocket_connect = _connect
    return _connect


def remove_connect_hook(service: Any, installed: Any = None) -> None:
    """Undo :func:`install_connect_hook` (the service dials for itself again).

    Args:
        service: The service.
        installed: What :func:`install_connect_hook` returned; when given, the hook is removed
            only if it is still that one (a later install stays).
    """
    current = service.__dict__.get("_websocket_connect")
    if current is not None and (installed is None or current is installed):
        del service.__dict__["_websocket_connect"]


async def tts_dial(service: Any, spec: DialSpec, *, background_close: bool = False) -> Any:
    """Open the socket ``spec`` describes the way the service itself would.

    Through ``WebsocketService._websocket_connect`` (the unhooked one), so the connection has
    the service's close and send timeouts (Pipecat's bounded connection class).

    Args:
        service: The Pipecat WebSocket service.
        spec: What to dial.
        background_close: Make the connection one whose ``close()`` can return at once once
            :func:`close_in_background` is set on it (see there).
    """
    from pipecat.services.websocket_service import WebsocketService

    kwargs = dict(spec.kwargs)
    if background_close:
        kwargs["create_connection"] = _background_close_class()
    return await WebsocketService._websocket_connect(service, spec.uri, **kwargs)


_BACKGROUND_CLOSES: set = set()


def _background_close_class() -> type:
    global _BackgroundCloseConnection
    if _BackgroundCloseConnection is None:
        import asyncio

        from pipecat.services.websocket_service import _BoundedConnection

        class _Connection(_BoundedConnection):
            """Pipecat's bounded connection; once marked, ``close()`` finishes in the background.

            The closing handshake waits a round trip for the peer's close frame. A service that
            closes its socket to dial a new one (an ``InterruptibleTTSService`` on every
            interruption) waits that round trip before its next sentence; the socket's
            remaining audio is discarded either way, so the handshake can finish on its own.
            """

            pf_background_close = False
            pf_close_task: asyncio.Task | None = None

            async def close(self, code: int = 1000, reason: str = "") -> None:
                if not self.pf_background_close:
                    await super().close(code, reason)
                    return
                if self.pf_close_task is None:
                    closing = super().close(code, reason)
                    self.pf_close_task = asyncio.get_running_loop().create_task(
                        closing, name="pf-ttspool-background-close"
                    )
                    _BACKGROUND_CLOSES.add(self.pf_close_task)
                    self.pf_close_task.add_done_callback(_BACKGROUND_CLOSES.discard)

        _BackgroundCloseConnection = _Connection
    return _BackgroundCloseConnection


_BackgroundCloseConnection: type | None = None


def close_in_background(connection: Any) -> bool:
    """Let ``connection.close()`` return at once (for a socket handed to a service).

    Returns:
        Whether the connection supports it (dialled with ``background_close=True``).
    """
    if hasattr(connection, "pf_background_close"):
        connection.pf_background_close = True
        return True
    return False


async def wait_background_close(connection: Any) -> None:
    """Wait for a background close of ``connection`` begun by :func:`close_in_background`."""
    task = getattr(connection, "pf_close_task", None)
    if task is not None:
        import asyncio

        await asyncio.gather(task, return_exceptions=True)


def connection_is_open(connection: Any) -> bool:
    """Whether a ``websockets`` connection is open (``state is State.OPEN``)."""
    from websockets.protocol import State

    return getattr(connection, "state", None) is State.OPEN


# --- TTS word timing and synthesis order (barge-in truncation) -----------------------------------
#
# Pipecat turns a TTS's word times (seconds from the start of an audio context's audio) into
# the PTS of word-level ``TTSTextFrame``s: ``WordTimestampTracker.start`` takes as baseline
# ``max(last word PTS, clock time)`` when the context's first audio is pushed, and each word's
# PTS is ``baseline + seconds`` (``WordTimestampTracker.pts``). The last word PTS is reset by
# an interruption. These two functions undo that, so a lever can read word times back off
# the frames.


def word_timing_baseline(last_word_pts: int, now_ns: int) -> int:
    """The PTS Pipecat counts an audio context's word times from (ns).

    Args:
        last_word_pts: PTS of the last word frame pushed since the last interruption (0 if
            none).
        now_ns: Pipecat's clock when the context's first audio (or first timed word) left
            the TTS.
    """
    return max(int(last_word_pts), int(now_ns))


def word_start_s(pts: int, baseline_ns: int) -> float:
    """A word frame's start in its audio context's audio (s), from its PTS and baseline."""
    return (int(pts) - int(baseline_ns)) / 1e9


def tts_synthesizes_sequentially(service: Any) -> bool:
    """Whether a TTS speaks one sentence at a time with its text frame after its audio.

    Pipecat's HTTP TTS services (a ``TTSService`` that is not a ``WebsocketService``) yield
    a sentence's audio inline from ``run_tts`` and queue its ``TTSTextFrame`` after it;
    WebSocket services send the text and queue its frame at once, and their audio arrives
    later from a receive task, for everything sent in the audio context together.
    """
    from pipecat.services.tts_service import TTSService
    from pipecat.services.websocket_service import WebsocketService

    return isinstance(service, TTSService) and not isinstance(service, WebsocketService)
