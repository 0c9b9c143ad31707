"""``SessionWarmup``: warm the LLM's prompt cache for one call while its phone rings.

Usable before the pipeline exists — from the telephony webhook that announces the call::

    warmup = SessionWarmup(llm, context, is_retry=call.is_retry, expected_wait_s=8)
    warmup.start()                        # returns at once; runs while the phone rings
    ...
    pipeline = Pipeline([..., pair.user(), warmup.checker(), llm, ...])
    ...
    await warmup.cancel()                 # the caller hung up: nothing leaks

It builds the first request the session will send — the same system prompt bytes, tools in
the same order, model and settings, rendered by the LLM service's own adapter (the renderer
the speculative prefill uses, :mod:`pipecat_fast.prefill.backends`) and sent through the
service's own client, so base URL, keys, headers and ``prompt_cache_key`` are the live
request's — with a throwaway user message, asks :class:`~.policy.PrewarmPolicy` whether it can
pay, and sends ``requests`` synthetic requests (default 2, one after the other: the second
reads what the first wrote, so its cached tokens prove the prefix was committed), each capped
at ``max_tokens`` (default 8) output tokens, all under one shared deadline (default 12 s), with
no retries. Streams are drained to the end, so the provider finishes and commits the prefix;
answers are thrown away and tool calls in them are drained and never executed (the warmup
talks to the client directly: no function handler can run).

Fails open: a skipped, failed, timed-out or cancelled warmup leaves the call exactly as stock
Pipecat would run it, with one log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from loguru import logger
from pipecat.frames.frames import Frame, LLMContextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService

from pipecat_fast._pipecat import is_anthropic_messages, llm_client, llm_identity, llm_provider
from pipecat_fast.frames import TTFAAnnotationFrame
from pipecat_fast.prefill.backends import AnthropicPrefill, OpenAIPrefill, backend_for
from pipecat_fast.warmup.core import (
    RequestUsage,
    WarmupReport,
    changed_parts,
    part_hashes,
    prefix_hash,
)
from pipecat_fast.warmup.policy import Decision, DecisionLog, PrewarmPolicy, Reason, WarmupTarget

DEFAULT_USER_MESSAGE = "This is a cache warmup, not a caller. Do not do the task; reply only: OK"
"""The throwaway user message of a warmup request."""

_DEFAULT_POLICY = PrewarmPolicy()  # shared across sessions: "same prefix still warm" needs it
_DEFAULT_LOG = DecisionLog()


class SessionWarmup:
    """Warms one session's LLM prompt cache before its first turn.

    Args:
        llm: The session's LLM service (OpenAI-compatible, including vLLM, SGLang and
            llama.cpp, or Anthropic with ``enable_prompt_caching``), configured exactly as the
            pipeline will use it.
        context: The session's context as it will be at the first turn (tools, any initial
            messages); not modified.
        policy: Decides whether to warm; the module default is shared by every session in
            the process, so a prefix another call just warmed is not warmed again.
        is_retry: This call is a retry of an earlier attempt (the policy skips retries).
        expected_wait_s: Expected seconds from now to the first turn's request (the rest of
            the ring, a greeting, the caller's first words); ``None`` if unknown.
        requests: Synthetic requests to send (K), one after the other.
        max_tokens: Output cap per request.
        deadline_s: One deadline for all requests together; past it the warmup is abandoned.
        user_message: The throwaway user message.
        provider: Provider registry name when the service does not identify it
            (``"vllm"``, ``"llama.cpp"``...).
        decision_log: Where decisions are logged (first few per reason, then summaries).
        clock: Wall clock for the policy (s); tests pass a fake one.

    Attributes:
        report: What the warmup did (:class:`~.core.WarmupReport`), filled in as it runs.
    """

    def __init__(
        self,
        llm: LLMService,
        context: LLMContext | None = None,
        *,
        policy: PrewarmPolicy | None = None,
        is_retry: bool = False,
        expected_wait_s: float | None = None,
        requests: int = 2,
        max_tokens: int = 8,
        deadline_s: float = 12.0,
        user_message: str = DEFAULT_USER_MESSAGE,
        provider: str | None = None,
        decision_log: Callable[..., None] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        if requests < 1 or max_tokens < 1 or deadline_s <= 0:
            raise ValueError("requests and max_tokens must be >= 1 and deadline_s > 0")
        self.llm = llm
        self.context = context if context is not None else LLMContext()
        self.policy = policy if policy is not None else _DEFAULT_POLICY
        self.is_retry = is_retry
        self.expected_wait_s = expected_wait_s
        self.requests = requests
        self.max_tokens = max_tokens
        self.deadline_s = deadline_s
        self.user_message = user_message
        self._warm_provider_name = provider
        self._warm_log = decision_log or _DEFAULT_LOG
        self._warm_clock = clock
        self._warm_task: asyncio.Task | None = None
        self._warm_backend: OpenAIPrefill | AnthropicPrefill | None = None
        self.report = WarmupReport()

    # -- running --------------------------------------------------------------------------

    def start(self) -> asyncio.Task:
        """Run the warmup in the background (idempotent); returns its task."""
        if self._warm_task is None:
            self._warm_task = asyncio.get_running_loop().create_task(
                self.run(), name="pipecat-fast-session-warmup"
            )
        return self._warm_task

    @property
    def running(self) -> bool:
        """Whether the warmup was started and has not finished (its prefix is being computed)."""
        return self._warm_task is not None and not self._warm_task.done()

    async def wait(self, timeout_s: float | None = None) -> WarmupReport:
        """Wait for a started warmup (at most ``timeout_s``; it goes on past that)."""
        if self._warm_task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._warm_task), timeout_s)
        return self.report

    async def cancel(self) -> None:
        """Stop the warmup (the caller hung up): open streams are closed, nothing leaks."""
        task = self._warm_task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> SessionWarmup:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.cancel()

    async def run(self) -> WarmupReport:
        """Decide, then send the warmup requests; never raises except on cancellation.

        Returns:
            The report (also in :attr:`report`).
        """
        report = self.report
        if is_anthropic_messages(self.llm) and not _anthropic_caching_on(self.llm):
            report.provider, report.reason = "anthropic", str(Reason.CACHING_OFF)
            report.detail = (
                "enable_prompt_caching is off: without Pipecat's cache_control markers Anthropic "
                "caches nothing (AnthropicLLMService.Settings(enable_prompt_caching=True))"
            )
            self._warm_log(Decision(False, report.reason, report.detail), f"{self.llm} warmup")
            return report
        try:
            backend = self._backend()
            params = await backend.render(self.context, self.user_message)
            report.provider = self._provider()
            report.prefix_hash = prefix_hash(params)
            report.part_hashes = part_hashes(params)
            report.prefix_tokens = await backend.estimate_tokens(self.context, self.user_message)
        except asyncio.CancelledError:
            report.cancelled = True
            raise
        except Exception as e:  # fail open: the call runs cold
            report.reason, report.error = "error", f"{type(e).__name__}: {e}"
            logger.warning(f"{self.llm}: session warmup could not render the request: {e}")
            return report
        target = WarmupTarget(
            service="llm",
            provider=report.provider,
            model=llm_identity(self.llm).model,
            prefix_tokens=report.prefix_tokens,
            prefix_hash=report.prefix_hash,
            is_retry=self.is_retry,
            expected_wait_s=self.expected_wait_s,
        )
        decision = self.policy.decide(target, self._warm_clock())
        report.reason, report.detail = str(decision.reason), decision.detail
        self._warm_log(decision, f"{self.llm} session warmup")
        if not decision.warm:
            return report
        report.warmed = True
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.deadline_s):
                for _ in range(self.requests):
                    usage = RequestUsage()
                    report.requests.append(usage)
                    await self._send(backend, params, usage, time.monotonic())
                    if usage.error is not None:
                        report.error = usage.error
                        logger.warning(
                            f"{self.llm}: session warmup request failed, not retried "
                            f"(the call goes on cold if nothing was cached): {usage.error}"
                        )
                        break
                    self.policy.record(report.prefix_hash, self._warm_clock())
        except TimeoutError:
            report.deadline_hit = True
            report.error = report.error or f"deadline of {self.deadline_s:g} s hit"
            if report.requests and report.requests[-1].error is None:
                report.requests[-1].error = "deadline"
            logger.warning(
                f"{self.llm}: session warmup abandoned at its {self.deadline_s:g} s deadline "
                f"({report.completed} of {self.requests} requests done)"
            )
        except asyncio.CancelledError:
            report.cancelled = True
            if report.requests and report.requests[-1].error is None:
                report.requests[-1].error = "cancelled"
            raise
        finally:
            report.elapsed_s = time.monotonic() - started
        return report

    def _backend(self) -> OpenAIPrefill | AnthropicPrefill:
        if self._warm_backend is None:
            backend = backend_for(self.llm)
            if self._warm_provider_name and isinstance(backend, OpenAIPrefill):
                backend = OpenAIPrefill(self.llm, provider=self._warm_provider_name)
            self._warm_backend = backend
        return self._warm_backend

    def _provider(self) -> str | None:
        if isinstance(self._backend(), AnthropicPrefill):
            return "anthropic"
        return llm_provider(self.llm, self._warm_provider_name)

    async def _send(
        self, backend: Any, params: dict[str, Any], usage: RequestUsage, t0: float
    ) -> None:
        """One request, drained to its end; errors are recorded in ``usage``, never raised."""
        client = llm_client(self.llm)
        try:
            if client is None:
                raise TypeError(f"{self.llm} has no SDK client")
            client = client.with_options(max_retries=0)
            if isinstance(backend, AnthropicPrefill):
                await _drain_anthropic(client, params, self.max_tokens, usage)
            else:
                await _drain_openai(client, params, self.max_tokens, backend.hosted_openai, usage)
        except (asyncio.CancelledError, TimeoutError):
            raise
        except Exception as e:
            status = getattr(e, "status_code", None)
            usage.error = f"HTTP {status}: {type(e).__name__}" if status else f"{e!r}"[:200]
        finally:
            usage.elapsed_s = time.monotonic() - t0

    # -- the first live turn ----------------------------------------------------------------

    async def check_first_turn(self, context: LLMContext) -> bool | None:
        """Compare the first live request's cacheable prefix with the warmed one.

        Returns:
            ``True`` when they match, ``False`` when the prompt, tools, model or cache key
            changed since the warmup (logged as a warning: the warmup was wasted), ``None``
            when nothing was warmed.
        """
        if not self.report.warmed or not self.report.prefix_hash:
            return None
        try:
            params = await self._backend().render(context, "")
        except Exception as e:  # never break the turn
            logger.debug(f"session warmup: could not render the first turn: {e}")
            return None
        if prefix_hash(params) == self.report.prefix_hash:
            return True
        changed = changed_parts(self.report.part_hashes, part_hashes(params))
        logger.warning(
            f"{self.llm}: {', '.join(changed) or 'the prefix'} changed between the session "
            "warmup and the first turn: the warmup was wasted "
            f"({self.report.prompt_tokens} prompt tokens)"
        )
        return False

    def checker(self, **kwargs: Any) -> WarmupCheck:
        """A processor to place just before the LLM service (see :class:`WarmupCheck`)."""
        return WarmupCheck(self, **kwargs)


class WarmupCheck(FrameProcessor):
    """Checks the first live request against the session warmup and reports the warmup.

    Place it just before the LLM service. On the first ``LLMContextFrame`` it compares the
    request's cacheable prefix with the warmed one (a mismatch logs a warning), and pushes
    ``TTFAAnnotationFrame``s with the warmup's accounting: the ``warmup_*`` fields on the first
    turn, and the warmup's token counts added to the session's account
    (``TTFAObserver.session``), beside the live turns' own ``prompt_tokens``,
    ``cached_tokens`` and ``cache_write_tokens``. Frames are never held beyond that one check.
    """

    def __init__(self, warmup: SessionWarmup, **kwargs: Any):
        super().__init__(**kwargs)
        self._warm_session = warmup
        self._warm_checked = False

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Check the first context frame, pass every frame on."""
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame) and not self._warm_checked:
            self._warm_checked = True
            matched = await self._warm_session.check_first_turn(frame.context)
            report = self._warm_session.report
            fields = warmup_annotation(report, matched)
            await self.push_frame(TTFAAnnotationFrame(fields=fields), direction)
            # The session's account: warmup tokens beside the live turns' own usage.
            await self.push_frame(
                TTFAAnnotationFrame(
                    fields={"warmup": fields["warmup"]},
                    add={k: fields[k] for k in _SESSION_KEYS},
                    target="session",
                ),
                direction,
            )
        await self.push_frame(frame, direction)


_SESSION_KEYS = (
    "warmup_requests",
    "warmup_prompt_tokens",
    "warmup_cached_tokens",
    "warmup_cache_write_tokens",
)


def _anthropic_caching_on(llm: LLMService) -> bool:
    settings = getattr(llm, "settings", None)  # public in Pipecat 1.14
    return getattr(settings, "enable_prompt_caching", False) is True


def warmup_annotation(report: WarmupReport, matched: bool | None) -> dict[str, Any]:
    """The ``warmup_*`` fields a TTFA turn gets from a session's warmup."""
    return {
        "warmup": report.reason or "none",
        "warmup_requests": len(report.requests),
        "warmup_prompt_tokens": report.prompt_tokens,
        "warmup_cached_tokens": report.cached_tokens,
        "warmup_cache_write_tokens": report.cache_write_tokens,
        "warmup_elapsed_ms": round(report.elapsed_s * 1000.0, 1),
        "warmup_prefix_matched": matched,
        "warmup_error": report.error,
    }


async def _drain_openai(
    client: Any, params: dict[str, Any], max_tokens: int, hosted: bool, usage: RequestUsage
) -> None:
    body = dict(params)
    body.pop("max_tokens", None)
    body.pop("max_completion_tokens", None)
    # OpenAI's reasoning models reject max_tokens; engines read only max_tokens.
    body["max_completion_tokens" if hosted else "max_tokens"] = max_tokens
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    stream = await client.chat.completions.create(**body)
    tool_calls: set[tuple[int, int]] = set()  # (choice, call index): a call streams in pieces
    try:
        async for chunk in stream:
            for choice in chunk.choices or ():
                delta = choice.delta
                if delta is None:
                    continue
                if delta.content:
                    usage.output_tokens += 1
                for call in delta.tool_calls or ():
                    tool_calls.add((choice.index, call.index))
            if chunk.usage is not None:
                _openai_usage(chunk.usage, usage)
            timings = (getattr(chunk, "model_extra", None) or {}).get("timings")
            if isinstance(timings, dict) and "cache_n" in timings and not usage.cached_tokens:
                usage.cached_tokens = int(timings.get("cache_n") or 0)  # llama.cpp's server
                if usage.prompt_tokens is None:
                    usage.prompt_tokens = usage.cached_tokens + int(timings.get("prompt_n") or 0)
    finally:
        await stream.close()
    usage.tool_calls = len(tool_calls)


def _openai_usage(data: Any, usage: RequestUsage) -> None:
    usage.prompt_tokens = data.prompt_tokens
    if data.completion_tokens is not None:
        usage.output_tokens = data.completion_tokens
    details = getattr(data, "prompt_tokens_details", None)
    usage.cached_tokens = getattr(details, "cached_tokens", None) or 0
    extra = getattr(details, "model_extra", None) or {}
    usage.cache_write_tokens = int(
        getattr(details, "cache_write_tokens", None) or extra.get("cache_write_tokens") or 0
    )


async def _drain_anthropic(
    client: Any, params: dict[str, Any], max_tokens: int, usage: RequestUsage
) -> None:
    body = {**params, "max_tokens": max_tokens, "stream": True}
    stream = await client.messages.create(**body)
    try:
        async for event in stream:
            kind = getattr(event, "type", "")
            if kind == "message_start":
                u = event.message.usage
                read = getattr(u, "cache_read_input_tokens", 0) or 0
                written = getattr(u, "cache_creation_input_tokens", 0) or 0
                usage.prompt_tokens = (u.input_tokens or 0) + read + written
                usage.cached_tokens, usage.cache_write_tokens = read, written
            elif kind == "content_block_start":
                if getattr(event.content_block, "type", "") == "tool_use":
                    usage.tool_calls += 1
            elif kind == "message_delta":
                usage.output_tokens = getattr(event.usage, "output_tokens", 0) or 0
    finally:
        await stream.close()
