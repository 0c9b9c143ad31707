"""FastTextAggregator and FastTextProcessor in real Pipecat pipelines (run_test, a real TTS)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from loguru import logger
from pipecat.frames.frames import (
    AggregatedTextFrame,
    DataFrame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_text_processor import LLMTextProcessor
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TTSService
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.utils.text.base_text_aggregator import BaseTextAggregator, TextType

from pipecat_fast.aggregator.core import SegmenterConfig
from pipecat_fast.aggregator.processor import (
    FastTextAggregator,
    FastTextProcessor,
    make_text_processor,
)


class RecordingTTS(TTSService):
    """A real TTSService whose synthesis records the text it was asked to speak."""

    def __init__(self, **kwargs):
        super().__init__(
            sample_rate=16000,
            push_start_frame=True,
            push_stop_frames=True,
            settings=TTSSettings(model=None, voice=None, language=None),
            **kwargs,
        )
        self.requests: list[str] = []

    async def run_tts(self, text: str, context_id: str):
        self.requests.append(text)
        yield TTSAudioRawFrame(
            audio=b"\x00\x00" * 160, sample_rate=16000, num_channels=1, context_id=context_id
        )


def reply(*tokens: str) -> list:
    return [
        LLMFullResponseStartFrame(),
        *[LLMTextFrame(t) for t in tokens],
        LLMFullResponseEndFrame(),
    ]


def aggregated(frames) -> list[str]:
    return [f.text for f in frames if isinstance(f, AggregatedTextFrame)]


TOKENS = (
    "Your",
    " appointment",
    " is",
    " on",
    " Tuesday",
    ",",
    " March",
    " 4th",
    ",",
    " at",
    " 3",
    " p",
    ".m",
    ".",
    " Dr",
    ".",
    " Smith",
    " will",
    " call",
    ".",
    " Bring",
    " $29",
    ".",
    "99",
    ".",
)


async def test_processor_turns_llm_tokens_into_chunks():
    down, _ = await run_test(make_text_processor(first_phrase=False), frames_to_send=reply(*TOKENS))
    assert aggregated(down) == [
        "Your appointment is on Tuesday, March 4th, at 3 p.m.",
        "Dr. Smith will call.",
        "Bring $29.99.",
    ]
    assert all(f.text_type == TextType.SENTENCE for f in down if isinstance(f, AggregatedTextFrame))


async def test_first_phrase_reaches_a_real_tts_as_is_and_is_not_reaggregated():
    tts = RecordingTTS()
    await run_test(
        Pipeline([make_text_processor(first_phrase=True), tts]), frames_to_send=reply(*TOKENS)
    )
    # The TTS speaks exactly our chunks: the clause, then whole sentences; its own
    # SimpleTextAggregator never regroups them.
    assert tts.requests == [
        "Your appointment is on Tuesday,",
        "March 4th, at 3 p.m.",
        "Dr. Smith will call.",
        "Bring $29.99.",
    ]


async def test_stock_path_for_comparison_waits_for_the_whole_sentence():
    tts = RecordingTTS()
    await run_test(Pipeline([LLMTextProcessor(), tts]), frames_to_send=reply(*TOKENS))
    assert tts.requests[0].startswith("Your appointment is on Tuesday, March 4th")


async def test_missing_space_split_reaches_the_tts_as_two_requests():
    tts = RecordingTTS(append_trailing_space=True)
    tokens = ("Sure", ",", " I", " booked", " it", ".Your", " reference", " is", " ABC", ".")
    await run_test(
        Pipeline([make_text_processor(first_phrase=False), tts]), frames_to_send=reply(*tokens)
    )
    # Never "it.Your" (read "it dot your"); the TTS's own trailing space separates them.
    assert tts.requests == ["Sure, I booked it. ", "Your reference is ABC. "]


async def test_trailing_space_option_for_verbatim_concatenating_tts():
    tts = RecordingTTS()
    proc = make_text_processor(first_phrase=False, trailing_space=True)
    tokens = ("Hi", ".", " 本日", "は", "？", "ご", "注文", "。", " Bye", ".")
    await run_test(Pipeline([proc, tts]), frames_to_send=reply(*tokens))
    assert tts.requests == ["Hi. ", "本日は？", "ご注文。", "Bye."]


async def test_interruption_drops_the_buffered_sentence():
    frames = [
        LLMFullResponseStartFrame(),
        LLMTextFrame("I was saying that the weather"),
        InterruptionFrame(),
        LLMFullResponseStartFrame(),
        LLMTextFrame("New answer."),
        LLMFullResponseEndFrame(),
    ]
    # Direct mode: each frame is processed as it arrives, so the interruption (a system frame,
    # which would otherwise overtake the queued text) finds the text already buffered.
    proc = make_text_processor(first_phrase=False, enable_direct_mode=True)
    down, _ = await run_test(proc, frames_to_send=frames)
    assert aggregated(down) == ["New answer."]


@dataclass
class MarkerFrame(DataFrame):
    """Passes through the processor untouched; shows when the reply resumed."""


def order(frames) -> list[str]:
    return [
        f.text if isinstance(f, AggregatedTextFrame) else "<resume>"
        for f in frames
        if isinstance(f, (AggregatedTextFrame, MarkerFrame))
    ]


def stalled_reply() -> list:
    return [
        LLMFullResponseStartFrame(),
        LLMTextFrame("Let me check."),
        SleepFrame(sleep=0.5),  # the model stalls (e.g. a slow tool call)
        MarkerFrame(),
        LLMTextFrame(" Found it."),
        LLMFullResponseEndFrame(),
    ]


async def test_stall_timer_releases_a_pending_sentence_while_the_reply_stalls():
    proc = make_text_processor(first_phrase=False, stall_flush_s=0.05)
    down, _ = await run_test(proc, frames_to_send=stalled_reply())
    assert order(down) == ["Let me check.", "<resume>", "Found it."]


async def test_stall_flushed_chunks_go_through_the_text_transforms_too():
    async def shout(text: str, text_type) -> str:
        return text.upper()

    proc = make_text_processor(
        first_phrase=False, stall_flush_s=0.05, text_transforms=[(TextType.SENTENCE, shout)]
    )
    down, _ = await run_test(proc, frames_to_send=stalled_reply())
    assert order(down) == ["LET ME CHECK.", "<resume>", "FOUND IT."]


async def test_without_stall_timer_the_sentence_waits_for_lookahead():
    down, _ = await run_test(
        make_text_processor(first_phrase=False), frames_to_send=stalled_reply()
    )
    assert order(down) == ["<resume>", "Let me check.", "Found it."]


async def test_aggregator_contract():
    agg = FastTextAggregator(SegmenterConfig(first_phrase=False))
    assert isinstance(agg, BaseTextAggregator)
    assert await agg.flush() is None  # flush on an empty buffer
    out = [a.text async for a in agg.aggregate("Hello there. How")]
    assert out == ["Hello there."]
    assert agg.text.text == "How"
    await agg.handle_interruption()
    assert agg.text.text == "" and await agg.flush() is None
    out = [a.text async for a in agg.aggregate("Ok. ")]
    assert out == [] and (await agg.flush()).text == "Ok."


async def test_flush_returns_everything_held_as_one_aggregation():
    agg = FastTextAggregator(SegmenterConfig(first_phrase=False))
    assert [a async for a in agg.aggregate("It costs $29.")] == []
    assert (await agg.flush()).text == "It costs $29."


async def test_set_language_switches_abbreviation_rules():
    agg = FastTextAggregator(SegmenterConfig(first_phrase=False))
    agg.set_language("de")
    assert agg.language == "de"
    out = [a.text async for a in agg.aggregate("Wir treffen uns am 12. Juni. Bis dann")]
    assert out == ["Wir treffen uns am 12. Juni."]


async def test_push_bytes_accepts_tokens_split_inside_a_code_point():
    agg = FastTextAggregator(SegmenterConfig(first_phrase=False))
    data = "नमस्ते! ठीक है।".encode()
    out = [a.text for i in range(len(data)) for a in agg.push_bytes(data[i : i + 1])]
    assert out == ["नमस्ते!"]
    assert (await agg.flush()).text == "ठीक है।"


def test_factory_builds_an_llm_text_processor():
    proc = make_text_processor(first_phrase=False, language="de", max_chars=120)
    assert isinstance(proc, LLMTextProcessor) and isinstance(proc, FastTextProcessor)
    cfg = proc.aggregator.segmenter.config
    assert (cfg.first_phrase, cfg.language, cfg.max_chars) == (False, "de", 120)


async def test_aggregator_fails_open_when_the_segmenter_raises(monkeypatch):
    agg = FastTextAggregator(SegmenterConfig(first_phrase=False))
    [a async for a in agg.aggregate("Held text without an end")]

    def boom(*args, **kwargs):
        raise RuntimeError("bug")

    monkeypatch.setattr(agg.segmenter, "push", boom)
    out = [a.text async for a in agg.aggregate(" and more")]
    # Everything received is released as is (nothing lost, no crash) and the buffer resets.
    assert out == ["Held text without an end and more"]
    assert agg.text.text == ""


# ---------------------------------------------------------------- misuse, at construction


def warnings_of(build):
    lines = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="WARNING")
    try:
        build()
    finally:
        logger.remove(sink)
    return lines


def test_an_unknown_language_warns_once_naming_the_fallback():
    lines = warnings_of(lambda: make_text_processor(language="klingon"))
    assert len(lines) == 1
    assert "unknown language 'klingon'" in lines[0]
    assert "falling back to the English rules" in lines[0]
    assert "de, el, en" in lines[0]  # the languages that have rules of their own


def test_known_languages_and_languages_without_rules_of_their_own_do_not_warn():
    for language in ("de-DE", "pt_BR", "en", "ja", "hi", "auto", None):
        assert warnings_of(lambda lang=language: make_text_processor(language=lang)) == []


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"language": 5}, TypeError, "language must be a language code such as 'en'"),
        ({"max_chars": "300"}, TypeError, "max_chars must be an integer, got '300'"),
        ({"max_chars": 8}, ValueError, "max_chars must be >= 16, got 8"),
        ({"first_phrase": "yes"}, TypeError, "first_phrase must be True or False, got 'yes'"),
        ({"first_phrase_min_chars": 2.5}, TypeError, "first_phrase_min_chars must be an integer"),
        ({"first_phrase_min_chars": 0}, ValueError, "first_phrase_min_chars must be >= 1"),
        ({"stall_flush_s": "1"}, TypeError, "stall_flush_s must be a number of seconds or None"),
        ({"stall_flush_s": -1.0}, ValueError, "stall_flush_s must be > 0 or None, got -1.0"),
        ({"trailing_space": "no"}, TypeError, "trailing_space must be True or False"),
        ({"text_transforms": 5}, TypeError, "text_transforms must be a list of"),
        ({"text_transforms": [("*", "upper")]}, TypeError, "text_transforms must be a list of"),
        (
            {"lang": "de"},
            TypeError,
            "unexpected keyword argument\\(s\\) lang; LLMTextProcessor takes",
        ),
    ],
)
def test_bad_arguments_are_refused_at_construction(kwargs, error, message):
    with pytest.raises(error, match=message):
        make_text_processor(**kwargs)


def test_pipecat_keywords_still_pass_through():
    proc = make_text_processor(name="chunker", enable_direct_mode=True)
    assert proc.name == "chunker"


def test_a_config_that_is_not_a_segmenter_config_is_refused():
    with pytest.raises(TypeError, match="config must be a SegmenterConfig, got dict"):
        FastTextAggregator({"language": "de"})
