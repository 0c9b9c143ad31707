"""``CacheBustGuard``: a Pipecat observer that watches each LLM request's cached prefix.

Add it to a worker's observers::

    guard = CacheBustGuard(provider="openai", model="gpt-4o")
    worker = PipelineWorker(pipeline, observers=[guard],
                            params=PipelineParams(enable_metrics=True,
                                                  enable_usage_metrics=True))
    ...
    for w in guard.warnings: ...

When an ``LLMContextFrame`` reaches an ``LLMService`` it snapshots what that service sends:
tools (``adapter.from_standard_tools``, which includes Pipecat's built-in cancel tools),
the service's composed ``system_instruction`` and the context messages. The first time a
request's prefix stops extending the previous one's, it logs a warning saying where the
diff starts and why (tools swapped, Pipecat appended its async-tool or cancellation
instructions on tool registration, history rewritten); repeats are logged at debug level.
It also reads ``LLMUsageMetricsData`` from ``MetricsFrame`` (needs
``enable_usage_metrics=True``) and warns when cache reads stay at zero on a prefix past
the provider's minimum. Everything it finds is also in :attr:`CacheBustGuard.warnings`.

It fails open: any error while snapshotting is logged once and the pipeline is untouched.
"""

from __future__ import annotations

from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    MetricsFrame,
)
from pipecat.metrics.metrics import LLMUsageMetricsData
from pipecat.observers.base_observer import BaseObserver, FrameProcessed, ProcessorSetUp
from pipecat.services.llm_service import LLMService

from pipecat_fast._pipecat import add_inline_frame_hooks, llm_provider
from pipecat_fast.lint.guard_core import GuardWarning, PrefixTracker
from pipecat_fast.providers import cache_facts, prefix_minimum


def pipecat_addons() -> dict[str, str]:
    """Texts Pipecat 1.14 composes into the system instruction, by name."""
    addons: dict[str, str] = {}
    try:
        from pipecat.processors.aggregators.async_tool_messages import ASYNC_TOOL_INSTRUCTIONS

        addons[
            "the async-tool instructions (a tool registered with cancel_on_interruption=False)"
        ] = ASYNC_TOOL_INSTRUCTIONS
    except ImportError:  # pragma: no cover - older/newer Pipecat
        pass
    try:
        from pipecat.utils.async_tool_cancellation import ASYNC_TOOL_CANCELLATION_INSTRUCTIONS

        addons["the async-tool cancellation instructions (a cancellable_by_llm tool)"] = (
            ASYNC_TOOL_CANCELLATION_INSTRUCTIONS
        )
    except ImportError:  # pragma: no cover
        pass
    return addons


def _messages(adapter: Any, context: Any) -> list[dict]:
    """The context's messages, each dict copied shallowly (cheap: on the request path).

    A shallow copy is a complete copy of a plain chat message; the tracker serializes
    nested ones (tool calls, multimodal parts) afresh when it compares.
    """
    out = []
    for m in adapter.get_messages(context):
        if type(m) is dict:
            out.append(m.copy())
            continue
        inner = getattr(m, "message", m)  # LLMSpecificMessage carries the provider's dict
        out.append(inner.copy() if isinstance(inner, dict) else {"role": "?", "content": inner})
    return out


class CacheBustGuard(BaseObserver):
    """Warns when a session's LLM prefix stops being reusable from the prompt cache.

    Args:
        provider: Provider for the minimum cacheable prefix (``"openai"``, ``"anthropic"``,
            ``"gemini"``, ``"vllm"``...); ``None`` uses ``minimum_tokens``.
        model: Model id for the minimum table.
        minimum_tokens: Explicit minimum prefix in tokens (overrides the table); 1024 when
            neither this nor ``provider`` is given (OpenAI's documented floor).
        after_turns: Warn about zero cache reads after this many eligible requests.
        llm: Watch only this service; ``None`` watches every ``LLMService``.
        net_of_cache: Whether the service's ``prompt_tokens`` exclude cached tokens;
            ``None`` takes it from the provider registry (Anthropic/Bedrock: net).
        **kwargs: Passed to :class:`BaseObserver`.

    Raises:
        TypeError: If ``llm`` is not a Pipecat ``LLMService`` (a TTS or STT service...).
        ValueError: If ``provider`` is not in the minimum table.
    """

    def __init__(
        self,
        *,
        provider: str | None = None,
        model: str | None = None,
        minimum_tokens: int | None = None,
        after_turns: int = 2,
        llm: LLMService | None = None,
        net_of_cache: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if llm is not None and not isinstance(llm, LLMService):
            raise TypeError(
                f"CacheBustGuard(llm=...) takes the pipeline's LLM service (a Pipecat "
                f"LLMService such as OpenAILLMService), got {type(llm).__name__}; leave llm "
                "out to watch every LLM service in the pipeline"
            )
        super().__init__(observe_every_push=False, **kwargs)
        if minimum_tokens is None:
            # No provider given: OpenAI's documented floor, from the same table.
            minimum_tokens = prefix_minimum(provider or "openai", model).tokens
        self._cbg_minimum = minimum_tokens
        self._cbg_after_turns = after_turns
        self._cbg_llm = llm
        self._cbg_net = net_of_cache
        self._cbg_addons = pipecat_addons()
        self._cbg_trackers: dict[int, PrefixTracker] = {}
        self._cbg_failed = False
        self._cbg_attached: set[int] = set()
        self._cbg_pending: dict[int, Any] = {}
        self._cbg_queue: dict[int, tuple[Any, list[tuple]]] = {}
        self.warnings: list[GuardWarning] = []
        """Every warning so far, in order (prefix changes and zero cache reads)."""
        if llm is not None:
            self.attach(llm)

    def _cbg_tracker(self, service: Any) -> PrefixTracker:
        key = id(service)
        if key not in self._cbg_trackers:
            self._cbg_trackers[key] = PrefixTracker(
                minimum_tokens=self._cbg_minimum,
                after_turns=self._cbg_after_turns,
                known_addons=self._cbg_addons,
            )
        return self._cbg_trackers[key]

    def _cbg_watch(self, processor: Any) -> bool:
        if self._cbg_llm is not None:
            return processor is self._cbg_llm
        return isinstance(processor, LLMService)

    def attach(self, service: LLMService) -> None:
        """Hook into ``service``'s synchronous frame events (idempotent).

        The snapshot has to be taken inline, in the service's own task, right after it has
        synced its tools and recomposed its system instruction and before it sends the
        request; observer callbacks run later, from a queue. Called for you for ``llm=``
        at construction, and for any other ``LLMService`` when the observer first sees it
        (its setup or its first frame).
        """
        if id(service) in self._cbg_attached:
            return
        self._cbg_attached.add(id(service))
        try:
            add_inline_frame_hooks(
                service,
                before_process=self._cbg_before_process,
                before_push=self._cbg_before_push,
                after_process=self._cbg_after_process,
            )
        except RuntimeError as e:  # fail open: a Pipecat that runs these hooks in a task
            self._cbg_fail("hook into the LLM service", e)

    def _cbg_report(self, service: Any, found: list[GuardWarning]) -> None:
        for w in found:
            self.warnings.append(w)
            text = f"CacheBustGuard {service}: {w.message}"
            if w.first:
                logger.warning(text)
            else:
                logger.debug(text)

    def _cbg_fail(self, what: str, e: Exception) -> None:
        if not self._cbg_failed:
            self._cbg_failed = True
            logger.warning(f"CacheBustGuard: could not {what}, skipping it ({e!r})")

    def _cbg_snapshot(self, service: Any, context: Any) -> tuple | None:
        """What the service is about to send, taken cheaply (on the request path).

        Tools are converted as the service converts them (its built-in tools depend on
        its state at this moment); the system instruction is an immutable string; message
        dicts are copied shallowly (a complete copy of a plain chat message), so the
        context can grow or be edited afterwards without changing the snapshot (only a
        nested part edited in place before the response ends would show). Serializing
        and comparing wait for :meth:`_cbg_drain`, after the request is sent.
        """
        try:
            adapter = service.get_llm_adapter()
            tools = adapter.from_standard_tools(context.tools)
            system = getattr(service.settings, "system_instruction", None)
            return (
                tools if isinstance(tools, list) else None,
                system if isinstance(system, str) else None,
                _messages(adapter, context),
            )
        except Exception as e:  # fail open: the guard must never break a call
            self._cbg_fail("snapshot an LLM request", e)
            return None

    def _cbg_enqueue(self, service: Any, snapshot: tuple | None) -> None:
        if snapshot is not None:
            self._cbg_queue.setdefault(id(service), (service, []))[1].append(snapshot)

    def _cbg_drain(self, service: Any) -> None:
        """Compare the queued requests of ``service`` with their predecessors, in order."""
        entry = self._cbg_queue.get(id(service))
        if not entry or not entry[1]:
            return
        queued = entry[1][:]
        entry[1].clear()
        tracker = self._cbg_tracker(service)
        for snapshot in queued:
            try:
                found = tracker.observe_request(*snapshot)
            except Exception as e:  # fail open
                self._cbg_fail("compare LLM request prefixes", e)
                continue
            self._cbg_report(service, found)

    def flush(self) -> None:
        """Compare every request seen so far now (normally done when each response ends).

        :attr:`warnings` is complete after a response's ``LLMFullResponseEndFrame`` and at
        the end of the pipeline; call this to read it in between.
        """
        for service, _queued in list(self._cbg_queue.values()):
            self._cbg_drain(service)

    # -- the service's synchronous events (run inline in its task) ----------------------

    def _cbg_before_process(self, service: Any, frame: Any) -> None:
        if isinstance(frame, LLMContextFrame) and self._cbg_watch(service):
            # Only remembered here; the snapshot waits for the response start (tools
            # synced, system instruction recomposed), or the end of processing if the
            # service never announces one.
            self._cbg_pending[id(service)] = frame.context
        elif isinstance(frame, (EndFrame, CancelFrame)) and self._cbg_watch(service):
            self._cbg_drain(service)

    def _cbg_before_push(self, service: Any, frame: Any) -> None:
        if isinstance(frame, LLMFullResponseStartFrame):
            context = self._cbg_pending.pop(id(service), None)
            if context is not None:
                self._cbg_enqueue(service, self._cbg_snapshot(service, context))
        elif isinstance(frame, LLMFullResponseEndFrame):
            # The request went out and its response is over: the comparison costs the
            # turn nothing now.
            self._cbg_drain(service)
        elif isinstance(frame, MetricsFrame) and self._cbg_watch(service):
            self._cbg_usage(service, frame)

    def _cbg_after_process(self, service: Any, frame: Any) -> None:
        if isinstance(frame, LLMContextFrame):
            context = self._cbg_pending.pop(id(service), None)
            if context is not None:
                # No response start was seen (a held speculative response): the request
                # as it stands now, after the service processed it.
                self._cbg_enqueue(service, self._cbg_snapshot(service, context))
            self._cbg_drain(service)

    def _cbg_usage(self, service: Any, frame: MetricsFrame) -> None:
        net = self._cbg_net
        if net is None:
            # Anthropic/Bedrock count input tokens net of cache reads and writes (registry).
            name = llm_provider(service)
            net = cache_facts(name).net_of_cache if name else False
        for item in frame.data:
            if not isinstance(item, LLMUsageMetricsData):
                continue
            try:
                usage = item.value
                found = self._cbg_tracker(service).observe_usage(
                    usage.prompt_tokens,
                    usage.cache_read_input_tokens,
                    usage.cache_creation_input_tokens,
                    net_of_cache=net,
                )
            except Exception as e:  # fail open
                self._cbg_fail("read LLM usage", e)
                continue
            self._cbg_report(service, found)

    # -- observer callbacks: only used to discover LLM services ---------------------------

    async def on_processor_setup(self, data: ProcessorSetUp) -> None:
        """Attach to an LLM service as soon as the pipeline sets it up."""
        if self._cbg_watch(data.processor):
            self.attach(data.processor)

    async def on_process_frame(self, data: FrameProcessed) -> None:
        """Attach to an LLM service the first time it processes a frame."""
        if self._cbg_watch(data.processor):
            self.attach(data.processor)
