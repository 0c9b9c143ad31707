"""Pipecat wiring for the streaming segmenter: a ``BaseTextAggregator`` and the processor around it.

Where it goes: between the LLM service and the TTS service, ::

    Pipeline([..., user_aggregator, llm, make_text_processor(), tts, transport.output(),
              assistant_aggregator])

Pipecat 1.14 hard-wires its own ``SimpleTextAggregator`` inside ``TTSService``; the clean hook it
offers is ``LLMTextProcessor(text_aggregator=...)``, which turns ``LLMTextFrame`` tokens into
``AggregatedTextFrame`` chunks. ``TTSService`` speaks an ``AggregatedTextFrame`` as it is, without
running its own aggregator over it, as long as the TTS keeps its default sentence mode: do not
set ``text_aggregation_mode=TextAggregationMode.TOKEN`` on the TTS, which would regroup tokens.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import lru_cache, partial

from loguru import logger
from pipecat.frames.frames import (
    CancelFrame,
    DataFrame,
    EndFrame,
    Frame,
    StartFrame,
)
from pipecat.processors.aggregators.llm_text_processor import LLMTextProcessor
from pipecat.processors.frame_processor import FrameDirection
from pipecat.utils.text.base_text_aggregator import Aggregation, BaseTextAggregator, TextType

from pipecat_fast._pipecat import text_processor_frame, text_processor_skip_tts
from pipecat_fast.aggregator.core import Chunk, ChunkKind, SegmenterConfig, StreamSegmenter
from pipecat_fast.aggregator.langdata import RULES
from pipecat_fast.aggregator.rules import is_unspaced_script


class FastTextAggregator(BaseTextAggregator):
    """Pipecat text aggregator backed by ``StreamSegmenter``.

    Yields ``TextType.SENTENCE`` aggregations (a first phrase cut at a clause mark is a sentence
    for Pipecat's purposes), stripped of surrounding whitespace as ``BaseTextAggregator``
    requires. Accepts ``str``; bytes reach the segmenter only through ``push_bytes``.

    Args:
        config: Segmenter settings; ``language`` defaults to the ``language`` argument.
        language: Language code for abbreviations (``"en"``, ``"de-DE"``); None means English.
        trailing_space: End every chunk of a spaced script with one space (also after a split
            where the reply had none, "it.Your"), for a TTS that concatenates the pieces of one
            turn verbatim and has no ``append_trailing_space`` of its own. Off by default:
            Pipecat's aggregators strip chunks and its TTS services add the space they need.
    """

    def __init__(
        self,
        config: SegmenterConfig | None = None,
        *,
        language: str | None = None,
        trailing_space: bool = False,
    ) -> None:
        if config is not None and not isinstance(config, SegmenterConfig):
            raise TypeError(f"config must be a SegmenterConfig, got {type(config).__name__}")
        if not isinstance(trailing_space, bool):
            raise TypeError(f"trailing_space must be True or False, got {trailing_space!r}")
        check_language(language, type(self).__name__)
        super().__init__(aggregation_type=TextType.SENTENCE, language=language)
        cfg = config or SegmenterConfig()
        if config is not None and language is None:
            check_language(cfg.language, type(self).__name__)
        if cfg.language is None and language is not None:
            cfg = SegmenterConfig(**{**cfg.__dict__, "language": language})
        self._pf_segmenter = StreamSegmenter(cfg)
        self._pf_trailing_space = trailing_space
        self._pf_clock = time.monotonic

    @property
    def segmenter(self) -> StreamSegmenter:
        """The pure segmenter inside (for inspection and tests)."""
        return self._pf_segmenter

    @property
    def text(self) -> Aggregation:
        """Text received and not yet released."""
        return Aggregation(text=self._pf_segmenter.pending_text.strip(), type=TextType.SENTENCE)

    def set_language(self, language: str | None) -> None:
        """Switch abbreviation rules without discarding buffered text."""
        check_language(language, type(self).__name__)
        super().set_language(language)
        self._pf_segmenter.set_language(language)

    async def aggregate(self, text: str) -> AsyncIterator[Aggregation]:
        """Add one piece of LLM text; yield each chunk it completes."""
        push = partial(self._pf_segmenter.push, text, now=self._pf_clock())
        for chunk in self._pf_safe(push, text):
            agg = self._pf_aggregation(chunk)
            if agg is not None:
                yield agg

    def push_bytes(self, data: bytes) -> list[Aggregation]:
        """Add raw UTF-8 bytes (a self-hosted server's byte tokens); return completed chunks."""
        push = partial(self._pf_segmenter.push, data, now=self._pf_clock())
        chunks = self._pf_safe(push, data.decode("utf-8", "replace"))
        return [a for a in map(self._pf_aggregation, chunks) if a is not None]

    def poll(self, now: float | None = None) -> list[Aggregation]:
        """Release what is safe to say when the reply stalled (``stall_flush_s``)."""
        t = self._pf_clock() if now is None else now
        chunks = self._pf_safe(partial(self._pf_segmenter.poll, t))
        return [a for a in map(self._pf_aggregation, chunks) if a is not None]

    async def flush(self) -> Aggregation | None:
        """End of the reply: everything still held, as one aggregation (or None)."""
        chunks = self._pf_safe(self._pf_segmenter.flush)
        if not chunks:
            return None
        text = "".join(c.text for c in chunks)
        return self._pf_aggregation(Chunk(text, ChunkKind.END, 0, len(text), len(text)))

    async def handle_interruption(self):
        """Barge-in: drop the buffered text of the interrupted reply."""
        self._pf_segmenter.reset()

    async def reset(self):
        """Forget everything buffered."""
        self._pf_segmenter.reset()

    def _pf_aggregation(self, chunk: Chunk) -> Aggregation | None:
        text = chunk.text.strip()
        if not text:
            return None
        if self._pf_trailing_space and chunk.kind is not ChunkKind.END:
            if not (is_unspaced_script(text[-1]) or text[-1] in "。！？｡．"):
                text += " "
        return Aggregation(text=text, type=TextType.SENTENCE)

    def _pf_safe(self, call, incoming: str = "") -> list[Chunk]:
        """Fail open: a segmenter bug must not lose text or crash the pipeline.

        On an exception the text held so far, plus ``incoming`` if the failing call had not
        taken it in yet, is released as one chunk and the segmenter starts over.
        """
        try:
            return call()
        except Exception as e:
            logger.exception(f"{self}: segmenter failed ({e}); releasing the buffered text as is")
            text = self._pf_segmenter.pending_text
            if incoming and not text.endswith(incoming):
                text += incoming
            self._pf_segmenter.reset()
            return [Chunk(text, ChunkKind.END, 0, len(text), len(text))] if text else []


class FastTextProcessor(LLMTextProcessor):
    """``LLMTextProcessor`` with a ``FastTextAggregator``, plus the stall timer it needs.

    Turns the LLM's ``LLMTextFrame`` tokens into ``AggregatedTextFrame`` chunks. With
    ``stall_flush_s`` set, a timer releases what is safe to say when no token has arrived for
    that long (a slow model, a network hiccup); the end of the reply flushes the rest.

    Args:
        aggregator: The aggregator to use; built from ``**kwargs`` when None.
        stall_flush_s: Seconds without LLM text before a pending chunk is released; None
            disables the timer.
        **kwargs: Passed to ``LLMTextProcessor`` (``text_transforms``, ``name``, ...).
    """

    def __init__(
        self,
        *,
        aggregator: FastTextAggregator | None = None,
        stall_flush_s: float | None = None,
        **kwargs,
    ) -> None:
        agg = aggregator or FastTextAggregator(SegmenterConfig(stall_flush_s=stall_flush_s))
        super().__init__(text_aggregator=agg, **kwargs)
        self._pf_aggregator = agg
        self._pf_stall_s = stall_flush_s or agg.segmenter.config.stall_flush_s
        self._pf_stall_task: asyncio.Task | None = None

    @property
    def aggregator(self) -> FastTextAggregator:
        """The aggregator in use."""
        return self._pf_aggregator

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Stock processing, the stall ticks in order with the other frames, and the timer."""
        if isinstance(frame, _StallTick):
            # In the processor's own queue, after whatever text arrived before it: an
            # interruption or the end of the reply already flushed or dropped that text.
            await self._pf_release_stalled()
            return
        await super().process_frame(frame, direction)
        if isinstance(frame, StartFrame) and self._pf_stall_s and not self._pf_stall_task:
            self._pf_stall_task = self.create_task(self._pf_stall_loop(), name="pf_stall")
        elif isinstance(frame, (EndFrame, CancelFrame)):
            await self._pf_stop_timer()

    async def cleanup(self):
        """Stop the stall timer."""
        await self._pf_stop_timer()
        await super().cleanup()

    async def _pf_stop_timer(self) -> None:
        if self._pf_stall_task:
            task, self._pf_stall_task = self._pf_stall_task, None
            await self.cancel_task(task)

    async def _pf_stall_loop(self) -> None:
        period = max(0.01, float(self._pf_stall_s or 1.0) / 4)
        while True:
            await asyncio.sleep(period)
            await self.queue_frame(_StallTick())

    async def _pf_release_stalled(self) -> None:
        """Push what the segmenter releases for a stalled reply, through the text transforms."""
        for aggregation in self._pf_aggregator.poll():
            frame = await text_processor_frame(self, aggregation)
            if frame is not None:
                frame.append_to_context = True
                frame.skip_tts = text_processor_skip_tts(self)
                await self.push_frame(frame)


def check_language(language: object, who: str) -> None:
    """A clear word on a ``language`` the aggregator cannot use as given.

    Raises:
        TypeError: ``language`` is not a string (a Pipecat ``Language`` is one).

    A language with no rules of its own gets the English abbreviation rules: a debug line for
    a real language (Pipecat knows it), a warning naming the fallback for anything else.
    """
    if language is None:
        return
    if not isinstance(language, str):
        raise TypeError(
            f"{who}: language must be a language code such as 'en' or 'de-DE' (or a Pipecat "
            f"Language), got {type(language).__name__}"
        )
    code = language.strip().lower().replace("_", "-")
    base = code.split("-")[0]
    if not code or code == "auto" or base in RULES:
        return
    if base in _pipecat_languages():
        logger.debug(
            f"{who}: no abbreviation rules for {language!r}; using the English ones (the "
            "script's own terminators apply)"
        )
        return
    logger.warning(
        f"{who}: unknown language {language!r}; falling back to the English rules for "
        "abbreviations and ordinals (every script's own terminators still apply). Languages "
        f"with rules of their own: {', '.join(sorted(RULES))}"
    )


@lru_cache(maxsize=1)
def _pipecat_languages() -> frozenset[str]:
    from pipecat.transcriptions.language import Language

    return frozenset(str(v.value).lower().split("-")[0] for v in Language)


@lru_cache(maxsize=1)
def _text_processor_keywords() -> frozenset[str]:
    """Keywords ``LLMTextProcessor`` and its bases take by name (they swallow the others)."""
    names: set[str] = set()
    for cls in LLMTextProcessor.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        for p in inspect.signature(init).parameters.values():
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self":
                names.add(p.name)
    return frozenset(names - {"text_aggregator"})


def _check_text_transforms(transforms: object) -> None:
    if transforms is None:
        return
    ok = isinstance(transforms, (list, tuple)) and all(
        isinstance(t, tuple) and len(t) == 2 and callable(t[1]) for t in transforms
    )
    if not ok:
        raise TypeError(
            "text_transforms must be a list of (text type or '*', transform) pairs, the "
            f"transform callable; got {transforms!r}"
        )


@dataclass
class _StallTick(DataFrame):
    """Queued by the stall timer: release what a stalled reply holds (never leaves)."""


def make_text_processor(
    *,
    first_phrase: bool = True,
    language: str | None = None,
    first_phrase_min_chars: int = 20,
    max_chars: int = 300,
    stall_flush_s: float | None = None,
    trailing_space: bool = False,
    **kwargs,
) -> FastTextProcessor:
    """Build the processor to insert between the LLM service and the TTS service.

    ``Pipeline([..., llm, make_text_processor(), tts, ...])``. Keep the TTS in its default
    sentence mode (``TextAggregationMode.SENTENCE``): it then speaks each chunk as it comes.

    Args:
        first_phrase: Let the first chunk of each reply end at a clause mark once it is
            ``first_phrase_min_chars`` long (earlier first audio; see docs/aggregator.md).
        language: Language code for abbreviation rules (``"en"``, ``"de"``); None is English.
        first_phrase_min_chars: Shortest first phrase, in grapheme clusters.
        max_chars: Longest chunk, in code points.
        stall_flush_s: Release a pending chunk after this many seconds without LLM text; None
            (default) never does.
        trailing_space: End chunks with one space, for a TTS that concatenates them verbatim.
        **kwargs: Passed to ``LLMTextProcessor`` (``text_transforms``, ``name``, ...).

    Returns:
        The processor.

    Raises:
        TypeError: A setting of the wrong type, or a keyword ``LLMTextProcessor`` does not
            take (Pipecat would ignore it silently).
        ValueError: A setting out of range (``max_chars`` < 16, ...).

    An unknown ``language`` (``"klingon"``) is no error: a warning names the fallback, the
    English abbreviation rules (every script's own terminators still apply).
    """
    unknown = sorted(set(kwargs) - _text_processor_keywords())
    if unknown:
        raise TypeError(
            f"make_text_processor() got unexpected keyword argument(s) {', '.join(unknown)}; "
            f"LLMTextProcessor takes {', '.join(sorted(_text_processor_keywords()))}"
        )
    _check_text_transforms(kwargs.get("text_transforms"))
    cfg = SegmenterConfig(
        language=language,
        first_phrase=first_phrase,
        first_phrase_min_chars=first_phrase_min_chars,
        max_chars=max_chars,
        stall_flush_s=stall_flush_s,
    )
    agg = FastTextAggregator(cfg, language=language, trailing_space=trailing_space)
    return FastTextProcessor(aggregator=agg, stall_flush_s=stall_flush_s, **kwargs)
