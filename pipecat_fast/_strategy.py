"""A user turn stop strategy that wraps another one and re-emits what it does.

Draft-and-hold and the end-of-turn confirmation each put a decision around a stop strategy that
decides the end of turn (by default Pipecat's Smart Turn strategy) and may be nested
(``DraftAndHoldUserTurnStopStrategy(CompleteTranscriptUserTurnStopStrategy(...))``). What every
such wrapper does the same way lives here: the wrapped strategy is set up, cleaned up and told
about turn boundaries with the wrapper, and each of its events
(``_pipecat.STOP_STRATEGY_EVENTS``, all inline) comes back out of the wrapper through the
public triggers, after the wrapper's hook has had its say.
"""

from __future__ import annotations

from typing import Any

from pipecat.frames.frames import Frame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessorSetup
from pipecat.turns.types import ProcessFrameResult, UserTurnSpeculation
from pipecat.turns.user_stop.base_user_turn_stop_strategy import (
    BaseUserTurnStopStrategy,
    UserTurnStoppedParams,
)

from pipecat_fast._pipecat import listen_to_stop_strategy


class WrappingUserTurnStopStrategy(BaseUserTurnStopStrategy):
    """Base for a stop strategy around another one (see the module docstring).

    Subclasses override the ``_on_inner_*`` hooks; the defaults pass each event on unchanged.

    Args:
        inner: The wrapped strategy.
        **kwargs: Passed to ``BaseUserTurnStopStrategy``.
    """

    def __init__(self, inner: BaseUserTurnStopStrategy, **kwargs: Any):
        super().__init__(**kwargs)
        self._wrapped = inner
        listen_to_stop_strategy(
            inner,
            on_push_frame=self._on_inner_push,
            on_broadcast_frame=self._on_inner_broadcast,
            on_inference_triggered=self._on_inner_inference,
            on_speculation_cancelled=self._on_inner_withdrawal,
            on_stopped=self._on_inner_stopped,
        )

    @property
    def inner(self) -> BaseUserTurnStopStrategy:
        """The wrapped strategy."""
        return self._wrapped

    @property
    def resolves_proposed_turn_stop_frames(self) -> bool:
        """Whatever the wrapped strategy does with proposals."""
        return self._wrapped.resolves_proposed_turn_stop_frames

    async def setup(self, setup: FrameProcessorSetup):
        """Set up the wrapped strategy too."""
        await super().setup(setup)
        await self._wrapped.setup(setup)

    async def cleanup(self):
        """Clean up the wrapped strategy."""
        await super().cleanup()
        await self._wrapped.cleanup()

    async def handle_user_turn_started(self):
        """Tell the wrapped strategy a turn started."""
        await self._wrapped.handle_user_turn_started()

    async def handle_user_turn_stopped(self):
        """Tell the wrapped strategy the turn stopped."""
        await self._wrapped.handle_user_turn_stopped()

    async def process_frame(self, frame: Frame) -> ProcessFrameResult | None:
        """Let the wrapped strategy see the frame."""
        return await self._wrapped.process_frame(frame)

    # -- the wrapped strategy's events (override to decide) -------------------------------

    async def _on_inner_push(self, _inner, frame: Frame, direction=FrameDirection.DOWNSTREAM):
        await self.push_frame(frame, direction)

    async def _on_inner_broadcast(self, _inner, frame_cls: type[Frame], **kwargs):
        await self.broadcast_frame(frame_cls, **kwargs)

    async def _on_inner_inference(self, _inner, speculation: UserTurnSpeculation | None = None):
        await self.trigger_user_turn_inference_triggered(speculation=speculation)

    async def _on_inner_withdrawal(self, _inner):
        await self.trigger_user_turn_speculation_cancelled()

    async def _on_inner_stopped(self, _inner, params: UserTurnStoppedParams):
        await self.trigger_user_turn_finalized(
            enable_user_speaking_frames=params.enable_user_speaking_frames,
            confirms_speculation=params.confirms_speculation,
        )
