"""``SpeculativePrefill``: warm the LLM provider's prefix cache while the caller is talking.

Place it between the user context aggregator and the LLM service, after a
:class:`~pipecat_fast.stabilizer.TwoUpdateStabilizer` placed between the STT and the
aggregator::

    transport.input(), stt, TwoUpdateStabilizer(), user_aggregator,
    SpeculativePrefill(llm, context=context), llm, tts, transport.output(), assistant_aggregator

Every frame passes through unchanged: prefills run in their own task, and only sizing a prefill
against the provider's minimum (hosted APIs) renders the context once per turn.
Nothing speculative is spoken (a prefill asks for one token and its reply is discarded) and
nothing enters the conversation context. Failures are logged and backed off; the real request
always runs as stock Pipecat would send it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    Frame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService

from pipecat_fast.prefill.backends import PrefillBackend, backend_for
from pipecat_fast.prefill.core import PrefillConfig, PrefillPlanner, Skip, TurnAccount
from pipecat_fast.stabilizer.frames import StableTranscriptFrame
from pipecat_fast.tokens import count_tokens
from pipecat_fast.ttfa.observer import TTFAAnnotationFrame


class SpeculativePrefill(FrameProcessor):
    """Sends prefill-only requests carrying the caller's stable words while they speak.

    Args:
        llm: The pipeline's LLM service; its adapter, settings and client shape the requests
            (an OpenAI-compatible service unless ``backend`` is given).
        context: The conversation context the user aggregator writes (the same object).
        backend: How to send prefills; defaults to :class:`AnthropicPrefill` for an
            ``AnthropicLLMService``, else :class:`OpenAIPrefill`.
        config: The bet's rules (see :class:`~pipecat_fast.prefill.core.PrefillConfig`).
            When not given, ``min_prompt_tokens`` comes from the backend.
        timeout_s: Give up on a prefill after this long (s); counts as a failure.
        **kwargs: Passed to ``FrameProcessor``.

    Attributes:
        turns: Per-turn accounts of closed turns (requests, tokens), in order.
    """

    def __init__(
        self,
        llm: LLMService | None = None,
        *,
        context: LLMContext,
        backend: PrefillBackend | None = None,
        config: PrefillConfig | None = None,
        timeout_s: float = 10.0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if backend is None:
            if llm is None:
                raise ValueError("SpeculativePrefill needs an llm service or a backend")
            backend = backend_for(llm)
        if config is None:
            config = PrefillConfig(min_prompt_tokens=backend.min_prompt_tokens)
        self._prefill_backend = backend
        self._prefill_context = context
        self._prefill_planner = PrefillPlanner(config)
        self._prefill_timeout_s = timeout_s
        self._prefill_task: asyncio.Task | None = None
        self._prefill_turn: int | None = None
        self._prefill_warned_minimum = False
        self._prefill_static: tuple[int, int] | None = None
        self._prefill_static_tokens = 0
        self.turns: list[TurnAccount] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Watch the caller's turn; never holds a frame back."""
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        planner = self._prefill_planner
        if isinstance(frame, StableTranscriptFrame):
            await self._on_stable(frame)
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            planner.caller_silent()
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            planner.caller_speaking()
        elif isinstance(frame, UserStoppedSpeakingFrame) and direction == FrameDirection.DOWNSTREAM:
            # The turn is confirmed: the real request (or a held draft) answers it now.
            planner.stop_turn()
            await self._annotate(planner.turn)
        elif isinstance(frame, (EndFrame, CancelFrame)):
            await self._cancel_prefill()

    async def cleanup(self):
        """Cancel a prefill still in flight (no leaked task); close the last turn's account."""
        await super().cleanup()
        await self._cancel_prefill()
        if self._prefill_turn is not None:
            self.turns.append(self._prefill_planner.end_turn())
            self._prefill_turn = None

    async def _on_stable(self, frame: StableTranscriptFrame) -> None:
        planner = self._prefill_planner
        if frame.turn != self._prefill_turn:
            if self._prefill_turn is not None:
                self.turns.append(planner.end_turn())
            self._prefill_turn = frame.turn
        if not frame.text.strip() or frame.word_count <= 0:
            return
        now = time.monotonic()
        if planner.blocked(frame.word_count, now) is not None:
            planner.decide(frame.word_count, planner.config.min_prompt_tokens, now)  # counts it
            return
        tokens = planner.config.min_prompt_tokens
        if tokens > 0:
            try:
                tokens = await self._estimate_tokens(frame.text)
            except Exception as e:  # fail open: no prefill this time, the stock path runs
                logger.warning(f"{self}: could not size the prefill ({type(e).__name__}: {e})")
                return
        reason = planner.decide(frame.word_count, tokens, now)
        if reason is Skip.BELOW_MINIMUM and not self._prefill_warned_minimum:
            self._prefill_warned_minimum = True
            logger.info(
                f"{self}: prompt of ~{tokens} tokens is below the provider's minimum cacheable "
                f"prefix ({planner.config.min_prompt_tokens}); not sending prefills it can't cache"
            )
        if reason is None:
            account = planner.turn
            self._prefill_task = self.create_task(
                self._run_prefill(frame.text, account), f"prefill-turn{frame.turn}"
            )

    async def _estimate_tokens(self, user_text: str) -> int:
        """Prompt size of a prefill: the context's part is rendered once per context state."""
        context = self._prefill_context
        key = (len(context.get_messages()), id(context.tools))
        if self._prefill_static != key:
            base = await self._prefill_backend.estimate_tokens(context, "")
            self._prefill_static = key
            self._prefill_static_tokens = base
        return self._prefill_static_tokens + count_tokens(user_text)

    async def _run_prefill(self, text: str, account: TurnAccount) -> None:
        planner = self._prefill_planner
        try:
            result = await asyncio.wait_for(
                self._prefill_backend.prefill(self._prefill_context, text), self._prefill_timeout_s
            )
        except asyncio.CancelledError:
            planner.finished(False, time.monotonic())
            raise
        except Exception as e:  # fail open: the stock request is unaffected
            planner.finished(False, time.monotonic())
            logger.warning(
                f"{self}: speculative prefill failed ({type(e).__name__}: {e}); backing off"
            )
        else:
            planner.finished(True, time.monotonic(), result.prompt_tokens, result.cached_tokens)
        finally:
            self._prefill_task = None
        if planner.turn_over or account is not planner.turn:
            # The turn was already confirmed: bring its accounting up to date.
            await self._annotate(account)

    async def _annotate(self, account: TurnAccount) -> None:
        await self.push_frame(TTFAAnnotationFrame(fields=account.to_dict()))

    async def _cancel_prefill(self) -> None:
        task, self._prefill_task = self._prefill_task, None
        if task is not None and not task.done():
            await self.cancel_task(task)
