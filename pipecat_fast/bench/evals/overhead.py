"""``pipecat-fast bench overhead``: the CPU each lever adds per frame, against a no-op.

Every row times one hot-path call (a lever's core or hook) over a fixed input and, in the same
repetition, a no-op stand-in called the same way over the same input; the row's figure is the
difference per unit (per interim, per token, per push, per request). Clock: CPU time of this
process (``time.process_time_ns``), so another job on a shared machine does not count.
Repetitions are interleaved: each one runs every row, the rows in a rotating order, a row's
no-op and item back to back (forwards in even repetitions, backwards in odd ones), and each
item is paired with the no-op of its own repetition. The table gives the median over
repetitions and the min–max; the min is closest to the uncontended cost.

Goal (issue 10): at most 50 µs per frame on a hot path, and nothing on the turn's critical
path. Each row checks its own output (the stabiliser ends on the final transcript, the
aggregators give back every character, the meter measures every turn), so a fast wrong
implementation does not pass as a fast one.

Rows are built by the functions in :data:`GROUPS`; a lever adds its rows by adding a group
(a function of :class:`Input` that returns its rows).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

cpu_ns = time.process_time_ns

Measure = Callable[[], Awaitable[tuple[int, int]]]
"""One timed pass: returns ``(cpu_ns, units)``, e.g. the CPU time of 2,800 interims and 2,800."""


@dataclass
class Row:
    """One line of the table: an item timed against its no-op, per unit.

    Parameters:
        group: Which lever (``stabilizer``, ``aggregator``, ``ttfa``, ``guard``).
        name: What is timed (``"PartialStabilizer.feed, 30-word utterances"``).
        unit: Per what (``"interim"``, ``"token"``, ``"push"``, ``"request"``).
        item: The timed pass.
        baseline: The no-op pass over the same input.
        goal_us: The budget per unit, if the issue set one.
        note: One line on the input or method.
        check: Filled by ``item`` passes with what they verified (shown in the JSON).
    """

    group: str
    name: str
    unit: str
    item: Measure
    baseline: Measure
    goal_us: float | None = None
    note: str = ""
    check: dict[str, Any] = field(default_factory=dict)


@dataclass
class Ratio:
    """A derived line: one row's overhead over another's, repetition by repetition."""

    group: str
    name: str
    numerator: str
    denominator: str
    goal: float | None = None


@dataclass
class Input:
    """Sizes of the inputs (``--quick`` shrinks them for a smoke run)."""

    utterances: int = 40
    reply_tokens: int = 6000
    turns: int = 4
    worst_pushes: int = 40000
    guard_prompts: tuple[int, ...] = (3000, 30000)  # system prompt sizes, o200k tokens


def _stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


# ============================================================================ inputs

# Callers of a voice agent, 60+ words each (the rows cut them to 10, 30 or 60 words).
CALLER_UTTERANCES = (
    "Hello there, I am calling because my washing machine stopped draining last night and the "
    "drum is still full of water, so I would like somebody to come and look at it, ideally "
    "tomorrow morning before ten because I start work at eleven and my partner is away all week "
    "on a training course in another city until next Friday.",
    "Yes so the order number should be seven seven three one nine and it was meant to arrive on "
    "Monday but the tracking page has said out for delivery for three days now and nobody has "
    "called me, and I really need those shoes for a wedding this Saturday afternoon otherwise I "
    "will have to buy another pair somewhere else.",
    "I'd like to move my dentist appointment from Thursday at four to any time next week, "
    "preferably early in the morning or late in the afternoon because I can't leave the office "
    "during lunch, and could you also tell me whether the cleaning is covered by my insurance "
    "plan or whether I have to pay for it myself this year?",
    "Could you check whether my flight to Lisbon on the twelfth still has seats by the window, "
    "and how much it would cost to add a second checked bag and priority boarding, because I am "
    "travelling with my two kids and a stroller and last time the queue at the gate took almost "
    "forty minutes which was a nightmare for all of us.",
)

# Replies of a voice agent (numbers, abbreviations, prices, times: what a segmenter must get
# right), streamed as o200k tokens.
AGENT_REPLIES = (
    "Of course. I've found a technician who can come tomorrow at 8:30 a.m., and the visit is "
    "free under your warranty. She'll call about 20 minutes before she arrives. Please leave the "
    "machine switched off until then, and if you can, put a towel under the door. Is there "
    "anything else I can help with?",
    "Thanks for your patience. Your parcel, order no. 77319, is at the local depot in St. Albans; "
    "the driver missed the 2nd floor entrance. I've booked a new delivery for Thursday between "
    "9 and 11 a.m., and I've refunded the $6.95 shipping fee. You'll get a text with a one-hour "
    "window on the day.",
    "Sure. Dr. Okafor has openings next Tuesday at 7:45 a.m. and Wednesday at 5:15 p.m. Your plan "
    "covers two cleanings a year at 100%, and you've used one, so this one costs you nothing. "
    "Which of the two times works better for you? I can also send a reminder the day before.",
    "I checked flight TP 1357 to Lisbon on the 12th. There are three window seats left, all in "
    "row 21 or behind. A second checked bag is €45 each way, and priority boarding is €12 per "
    "person, so about €126 for the three of you. Strollers are checked free at the gate. Shall I "
    "add those now?",
)


def interim_stream(words: list[str], rng: random.Random) -> list[str]:
    """Growing interims of one utterance, revised as an STT revises them.

    Each interim shows one more word (two in 20 % of them); 30 % end in a wrong last word (cut
    in half or replaced by another word of the utterance) and 5 % in two wrong last words, put
    right by the next interim; 8 % repeat the previous interim.
    """
    out: list[str] = []
    shown = 0
    while shown < len(words):
        if out and rng.random() < 0.08:
            out.append(out[-1])
            continue
        shown = min(len(words), shown + (2 if rng.random() < 0.2 else 1))
        hyp = list(words[:shown])
        r = rng.random()
        if shown < len(words) and r < 0.35:
            wrong = 2 if r < 0.05 and shown >= 2 else 1
            for j in range(shown - wrong, shown):
                w = hyp[j]
                hyp[j] = w[: max(1, len(w) // 2)] if rng.random() < 0.5 else rng.choice(words)
        out.append(" ".join(hyp))
    return out


def stabilizer_turns(n_utterances: int, n_words: int, seed: int = 7) -> list[list[str]]:
    """``n_utterances`` turns: interims of the first ``n_words`` words, then the final."""
    rng = random.Random(seed)
    turns = []
    for i in range(n_utterances):
        words = CALLER_UTTERANCES[i % len(CALLER_UTTERANCES)].split()[:n_words]
        assert len(words) == n_words
        turns.append([*interim_stream(words, rng), " ".join(words)])
    return turns


def token_stream(text: str) -> list[str]:
    """``text`` as the o200k tokens an OpenAI model streams (each decoded to text)."""
    from pipecat_fast import tokens

    enc = tokens.get_encoding()
    pieces = [enc.decode([t]) for t in tokens.encode(text)]
    assert "".join(pieces) == text
    return pieces


def reply_streams(n_tokens: int) -> list[list[str]]:
    """Agent replies as token streams, cycling :data:`AGENT_REPLIES`, ``n_tokens`` or more."""
    out, n, i = [], 0, 0
    while n < n_tokens:
        out.append(token_stream(AGENT_REPLIES[i % len(AGENT_REPLIES)]))
        n += len(out[-1])
        i += 1
    return out


# ============================================================================ rows


def _timed_sync(fn: Callable[[], int]) -> Measure:
    async def measure() -> tuple[int, int]:
        gc.collect()
        t = cpu_ns()
        units = fn()
        return cpu_ns() - t, units

    return measure


class _NullStabilizer:
    def feed(self, text: str, *, final: bool = False, at: float | None = None) -> None:
        return None

    def reset(self) -> None:
        return None


def stabilizer_rows(size: Input) -> list[Row]:
    """``PartialStabilizer.feed`` per interim, default settings (two updates, o200k tokens)."""
    from pipecat_fast.stabilizer import PartialStabilizer

    rows = []
    for n_words in (10, 30, 60):
        turns = stabilizer_turns(size.utterances, n_words)
        n_interims = sum(len(t) - 1 for t in turns)
        check: dict[str, Any] = {}

        def make(factory, turns=turns, n_interims=n_interims, check=None) -> Measure:
            def run() -> int:
                s = factory()
                last = None
                for hyps in turns:
                    for text in hyps[:-1]:
                        s.feed(text)
                    last = s.feed(hyps[-1], final=True)
                    s.reset()
                if check is not None:
                    check["last_stable_is_final"] = last.text == turns[-1][-1]
                    assert check["last_stable_is_final"], "the stabiliser lost the final"
                return n_interims

            return _timed_sync(run)

        rows.append(
            Row(
                group="stabilizer",
                name=f"PartialStabilizer.feed, {n_words}-word utterances",
                unit="interim",
                item=make(PartialStabilizer, check=check),
                baseline=make(_NullStabilizer),
                goal_us=20.0 if n_words == 30 else None,
                note=f"{len(turns)} utterances, {n_interims} interims (35 % end in a wrong "
                "word); finals amortised in",
                check=check,
            )
        )
    return rows


def aggregator_rows(size: Input) -> list[Row]:
    """Our ``FastTextAggregator`` and Pipecat's ``SimpleTextAggregator`` per o200k token."""
    from pipecat.utils.text.base_text_aggregator import BaseTextAggregator, TextType
    from pipecat.utils.text.simple_text_aggregator import SimpleTextAggregator

    from pipecat_fast.aggregator import FastTextAggregator

    class NullAggregator(BaseTextAggregator):
        def __init__(self):
            super().__init__(aggregation_type=TextType.SENTENCE)

        @property
        def text(self):
            return None

        async def aggregate(self, text):
            return
            yield  # an async generator, like the real ones

        async def flush(self):
            return None

        async def handle_interruption(self):
            return None

        async def reset(self):
            return None

    replies = reply_streams(size.reply_tokens)
    n_tokens = sum(map(len, replies))
    expected = ["".join(r).split() for r in replies]

    def make(factory, check: dict[str, Any] | None, name: str = "") -> Measure:
        async def measure() -> tuple[int, int]:
            agg = factory()
            outs: list[list[str]] = []
            gc.collect()
            t = cpu_ns()
            for toks in replies:
                chunks = []
                for tok in toks:
                    async for a in agg.aggregate(tok):
                        chunks.append(a.text)
                rest = await agg.flush()
                if rest is not None and rest.text:
                    chunks.append(rest.text)
                outs.append(chunks)
            ns = cpu_ns() - t
            if check is not None:
                check["every_word_back"] = [" ".join(c).split() for c in outs] == expected
                check["chunks"] = sum(map(len, outs))
                assert check["every_word_back"], f"{name} lost or changed text"
            return ns, n_tokens

        return measure

    note = f"{len(replies)} agent replies, {n_tokens} o200k tokens, flush per reply"
    rows = []
    for name, factory in (
        ("FastTextAggregator (ours)", FastTextAggregator),
        ("SimpleTextAggregator (Pipecat)", SimpleTextAggregator),
    ):
        check: dict[str, Any] = {}
        item, baseline = make(factory, check, name), make(NullAggregator, None)
        rows.append(Row("aggregator", name, "token", item, baseline, note=note, check=check))
    return rows


def aggregator_ratios() -> list[Ratio]:
    """Ours over Pipecat's, per token (the issue's goal: within 2x)."""
    return [
        Ratio(
            "aggregator",
            "FastTextAggregator ÷ SimpleTextAggregator",
            "FastTextAggregator (ours)",
            "SimpleTextAggregator (Pipecat)",
            goal=2.0,
        )
    ]


def _ttfa_pushes(n_turns: int):
    """``FramePushed`` events of ``n_turns`` exchanges through a nine-processor pipeline.

    transport in, STT, stabiliser, user aggregator, LLM, text processor, TTS, transport out,
    assistant aggregator; a frame is observed at every hop it travels (``first_push`` at its
    first). Per turn: 2.6 s of caller audio in 20 ms frames (all hops), interims, VAD and user
    start/stop, a final, the context, 80 LLM tokens, five sentences, 4 s of TTS audio in 20 ms
    chunks, bot-speaking ticks and the usage metrics.
    """
    from pipecat.frames.frames import (
        AggregatedTextFrame,
        BotSpeakingFrame,
        BotStartedSpeakingFrame,
        BotStoppedSpeakingFrame,
        InputAudioRawFrame,
        InterimTranscriptionFrame,
        LLMContextFrame,
        LLMFullResponseEndFrame,
        LLMFullResponseStartFrame,
        LLMTextFrame,
        MetricsFrame,
        TranscriptionFrame,
        TTSAudioRawFrame,
        TTSStartedFrame,
        TTSStoppedFrame,
        UserStartedSpeakingFrame,
        UserStoppedSpeakingFrame,
        VADUserStartedSpeakingFrame,
        VADUserStoppedSpeakingFrame,
    )
    from pipecat.metrics.metrics import LLMTokenUsage, LLMUsageMetricsData
    from pipecat.observers.base_observer import FramePushed
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.services.llm_service import LLMService
    from pipecat.services.tts_service import TTSService
    from pipecat.utils.text.base_text_aggregator import TextType

    class LLM(LLMService):
        pass

    class TTS(TTSService):
        async def run_tts(self, text, context_id):  # pragma: no cover - never run
            yield None

    procs = [FrameProcessor(name=n) for n in ("in", "stt", "stab", "user", "llm")]
    procs[4] = LLM()
    procs += [FrameProcessor(name="text"), TTS(sample_rate=16000)]
    procs += [FrameProcessor(name=n) for n in ("out", "assistant")]
    down, up = FrameDirection.DOWNSTREAM, FrameDirection.UPSTREAM
    pushes: list = []
    clock = [0]

    def travel(frame, start, end, direction=down):
        step = 1 if direction == down else -1
        for j, i in enumerate(range(start, end, step)):
            clock[0] += 50_000  # 50 µs a hop on the pipeline clock
            dst = procs[i + step]
            pushes.append(FramePushed(procs[i], dst, frame, direction, clock[0], j == 0))

    audio = InputAudioRawFrame(b"\x00" * 640, 16000, 1)
    tts_audio = TTSAudioRawFrame(b"\x00" * 640, 16000, 1, context_id="c")
    usage = MetricsFrame(
        data=[
            LLMUsageMetricsData(
                processor="llm",
                value=LLMTokenUsage(
                    prompt_tokens=3000,
                    completion_tokens=80,
                    total_tokens=3080,
                    cache_read_input_tokens=2944,
                ),
            )
        ]
    )
    tokens = token_stream(AGENT_REPLIES[0])[:80]
    for _ in range(n_turns):
        travel(VADUserStartedSpeakingFrame(), 0, 8)
        travel(UserStartedSpeakingFrame(), 3, 8)
        travel(UserStartedSpeakingFrame(), 3, 0, up)
        for k in range(120):
            travel(audio, 0, 8)
            if k % 8 == 4:
                travel(InterimTranscriptionFrame("my washing machine", "caller", "t"), 1, 3)
        travel(VADUserStoppedSpeakingFrame(stop_secs=0.2), 0, 8)
        travel(TranscriptionFrame("My washing machine stopped.", "caller", "t"), 1, 3)
        for _k in range(10):
            travel(audio, 0, 8)
        travel(UserStoppedSpeakingFrame(), 3, 8)
        travel(UserStoppedSpeakingFrame(), 3, 0, up)
        travel(LLMContextFrame(LLMContext()), 3, 4)
        travel(LLMFullResponseStartFrame(), 4, 8)
        for j, tok in enumerate(tokens):
            travel(LLMTextFrame(tok), 4, 5)
            if j % 16 == 15:
                travel(AggregatedTextFrame("A sentence.", TextType.SENTENCE), 5, 6)
            if j % 4 == 0:
                travel(audio, 0, 8)
        travel(LLMFullResponseEndFrame(), 4, 8)
        travel(TTSStartedFrame(), 6, 8)
        travel(BotStartedSpeakingFrame(), 7, 8)
        travel(BotStartedSpeakingFrame(), 7, 0, up)
        for k in range(200):
            travel(tts_audio, 6, 8)
            if k % 2 == 0:
                travel(audio, 0, 8)
            if k % 10 == 0:
                travel(BotSpeakingFrame(), 7, 0, up)
        travel(usage, 4, 8)
        travel(TTSStoppedFrame(), 6, 8)
        travel(BotStoppedSpeakingFrame(), 7, 8)
        travel(BotStoppedSpeakingFrame(), 7, 0, up)
    return pushes


def ttfa_rows(size: Input) -> list[Row]:
    """``TTFAObserver.on_push_frame`` per push: a call's mix, and its slowest common case."""
    from pipecat.frames.frames import InputAudioRawFrame, VADUserStoppedSpeakingFrame
    from pipecat.observers.base_observer import BaseObserver, FramePushed
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

    from pipecat_fast.ttfa import TTFAObserver

    pushes = _ttfa_pushes(size.turns)

    def make(factory, check: dict[str, Any] | None, passes: int = 3) -> Measure:
        async def measure() -> tuple[int, int]:
            observers = [factory() for _ in range(passes)]
            gc.collect()
            t = cpu_ns()
            for o in observers:
                for d in pushes:
                    await o.on_push_frame(d)
            ns = cpu_ns() - t
            if check is not None:
                check["turns_measured"] = len(observers[0].turns)
                assert check["turns_measured"] == size.turns, "the meter missed turns"
            return ns, passes * len(pushes)

        return measure

    check: dict[str, Any] = {}
    mix = Row(
        "ttfa",
        "TTFAObserver.on_push_frame, a call's mix",
        "push",
        make(TTFAObserver, check),
        make(BaseObserver, None),
        note=f"{len(pushes) // size.turns} pushes a turn, mostly audio, every hop observed",
        check=check,
    )

    src, dst = FrameProcessor(name="a"), FrameProcessor(name="b")
    down = FrameDirection.DOWNSTREAM
    opener = FramePushed(src, dst, VADUserStoppedSpeakingFrame(stop_secs=0.2), down, 1, True)
    audio = FramePushed(src, dst, InputAudioRawFrame(b"\x00" * 640, 16000, 1), down, 2, False)

    def worst(factory) -> Measure:
        async def measure() -> tuple[int, int]:
            o = factory()
            await o.on_push_frame(opener)
            gc.collect()
            t = cpu_ns()
            for _ in range(size.worst_pushes):
                await o.on_push_frame(audio)
            return cpu_ns() - t, size.worst_pushes

        return measure

    worst_row = Row(
        "ttfa",
        "TTFAObserver.on_push_frame, audio in an open turn",
        "push",
        worst(TTFAObserver),
        worst(BaseObserver),
        note="the most frequent push while a turn is being measured",
    )
    return [mix, worst_row]


def system_prompt(n_tokens: int) -> str:
    """A voice agent's system prompt of about ``n_tokens`` o200k tokens (rules, then FAQ)."""
    from pipecat_fast import tokens

    rng = random.Random(n_tokens)
    topics = ("bookings", "refunds", "opening hours", "deliveries", "insurance", "parking")
    lines = ["You are Mia, the phone assistant of a chain of dental clinics. Speak briefly."]
    total = tokens.count_tokens(lines[0])
    i = 0
    while total < n_tokens:
        i += 1
        line = (
            f"Rule {i}: when the caller asks about {rng.choice(topics)}, answer in at most "
            f"{rng.randint(2, 4)} short sentences, confirm names and times back, and offer to "
            "send the details by text message."
        )
        lines.append(line)
        total += tokens.count_tokens("\n" + line)
    return "\n".join(lines)


def guard_context(system: str) -> list[dict]:
    """The messages of a request 8 exchanges into a call (the system prompt apart)."""
    messages = []
    for i in range(8):
        messages.append({"role": "user", "content": CALLER_UTTERANCES[i % 4]})
        messages.append({"role": "assistant", "content": AGENT_REPLIES[i % 4]})
    messages.append({"role": "user", "content": "And can you text me that, please?"})
    return messages


def guard_rows(size: Input) -> list[Row]:
    """``CacheBustGuard``'s comparison per LLM request, through its public core.

    The guard takes a shallow snapshot on the request path and compares it with the previous
    request after the response ends (``PrefixTracker.observe_request``): these rows time that
    comparison per request, for a 3k- and a 30k-token system prompt, unchanged from request to
    request or with its last line changing on every one (a clock at the end of the prompt).
    The snapshot on the request path is timed by :func:`guard_request_path_rows`.
    """
    from pipecat_fast.lint.guard_core import PrefixTracker

    class NullTracker:
        def observe_request(self, tools, system, messages):
            return []

    rows = []
    for n_tokens in size.guard_prompts:
        n_requests = max(4, size.turns * (60 if n_tokens <= 5000 else 8))
        prompt = system_prompt(n_tokens)
        messages = guard_context(prompt)
        steady = [prompt]
        busting = [prompt + "\nThe time is 14:03:21.", prompt + "\nThe time is 14:03:22."]
        for case, systems in (("unchanged", steady), ("its end changing each request", busting)):
            check: dict[str, Any] = {}

            def make(
                factory, systems=systems, check=None, n_requests=n_requests, messages=messages
            ) -> Measure:
                async def measure() -> tuple[int, int]:
                    tracker = factory()
                    tracker.observe_request(None, systems[-1], messages)  # a session under way
                    warned = 0
                    gc.collect()
                    t = cpu_ns()
                    for r in range(n_requests):
                        found = tracker.observe_request(None, systems[r % len(systems)], messages)
                        warned += len(found)
                    ns = cpu_ns() - t
                    if check is not None:
                        check["warnings"] = warned
                        expected = 0 if len(systems) == 1 else n_requests
                        assert warned == expected, "the guard missed or invented a change"
                    return ns, n_requests

                return measure

            rows.append(
                Row(
                    group="guard",
                    name=f"PrefixTracker.observe_request, {n_tokens / 1000:g}k-token system "
                    f"prompt, {case}",
                    unit="request",
                    item=make(PrefixTracker, check=check),
                    baseline=make(NullTracker),
                    note=f"{n_requests} requests, 16 history messages; after the response ends "
                    "(off the request path)",
                    check=check,
                )
            )
    return rows + guard_request_path_rows(size)


def guard_request_path_rows(size: Input) -> list[Row]:
    """What ``CacheBustGuard`` does on the request path: the snapshot, per LLM request.

    The guard's inline hooks run in the LLM service's task when the context frame arrives
    and when the service pushes ``LLMFullResponseStartFrame``, just before it sends the
    request: they convert the tools, read the system instruction and copy the message dicts
    (the comparison waits for the response's end, the rows above). Timed by calling the
    guard's own hooks on a real ``OpenAILLMService`` (no request sent), against hooks that do
    nothing, with the context of the comparison rows.
    """
    from pipecat.frames.frames import LLMContextFrame, LLMFullResponseStartFrame
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.services.openai.llm import OpenAILLMService

    from pipecat_fast.lint.guard import CacheBustGuard

    class NullHooks:
        def _cbg_before_process(self, service, frame):
            return None

        def _cbg_before_push(self, service, frame):
            return None

    rows = []
    for n_tokens in size.guard_prompts:
        n_requests = max(4, size.turns * 100)
        prompt = system_prompt(n_tokens)
        settings = OpenAILLMService.Settings(system_instruction=prompt)
        llm = OpenAILLMService(api_key="not-used", settings=settings)
        frame = LLMContextFrame(LLMContext(messages=guard_context(prompt)))
        start = LLMFullResponseStartFrame()
        check: dict[str, Any] = {}

        def make(
            factory, check=None, llm=llm, frame=frame, start=start, n_requests=n_requests
        ) -> Measure:
            async def measure() -> tuple[int, int]:
                hooks = factory()
                gc.collect()
                t = cpu_ns()
                for _ in range(n_requests):
                    hooks._cbg_before_process(llm, frame)
                    hooks._cbg_before_push(llm, start)
                ns = cpu_ns() - t
                if check is not None:
                    queued = sum(len(q) for _s, q in hooks._cbg_queue.values())
                    check["snapshots"] = queued
                    assert queued == n_requests, "the guard missed a request"
                return ns, n_requests

            return measure

        rows.append(
            Row(
                group="guard",
                name=f"CacheBustGuard snapshot on the request path, {n_tokens / 1000:g}k-token "
                "system prompt",
                unit="request",
                item=make(lambda llm=llm: CacheBustGuard(provider="openai"), check=check),
                baseline=make(NullHooks),
                goal_us=50,
                note=f"{n_requests} requests, 16 history messages; on the request path",
                check=check,
            )
        )
    return rows


GROUPS: dict[str, Callable[[Input], list[Row]]] = {
    "stabilizer": stabilizer_rows,
    "aggregator": aggregator_rows,
    "ttfa": ttfa_rows,
    "guard": guard_rows,
}
RATIOS: dict[str, Callable[[], list[Ratio]]] = {"aggregator": aggregator_ratios}


# ============================================================================ driver


@dataclass
class RowResult:
    """A row's per-unit CPU, one value per repetition, item and no-op."""

    row: Row
    item_us: list[float] = field(default_factory=list)  # per unit, per repetition
    base_us: list[float] = field(default_factory=list)

    @property
    def overhead_us(self) -> list[float]:
        """Item minus its own repetition's no-op, per repetition (µs per unit)."""
        return [a - b for a, b in zip(self.item_us, self.base_us, strict=True)]


async def measure(rows: list[Row], reps: int, progress: Callable[[str], None] | None = None):
    """Run every row ``reps`` times, interleaved; one untimed warm-up pass first."""
    results = [RowResult(r) for r in rows]
    for r in rows:
        await r.baseline()
        await r.item()
    for rep in range(reps):
        k = (rep * 3) % max(1, len(results))
        for res in results[k:] + results[:k]:
            pair = [("base", res.row.baseline), ("item", res.row.item)]
            for which, fn in pair if rep % 2 == 0 else pair[::-1]:
                ns, units = await fn()
                (res.base_us if which == "base" else res.item_us).append(ns / units / 1000)
        if progress is not None:
            progress(f"repetition {rep + 1}/{reps} done, load {os.getloadavg()[0]:.2f}")
    return results


def build_report(results: list[RowResult], ratios: list[Ratio], **meta: Any) -> dict[str, Any]:
    """The suite's JSON: one entry per row (overhead per unit) and per ratio."""
    by_name = {r.row.name: r for r in results}
    rows = []
    for res in results:
        over = _stats(res.overhead_us)
        goal = res.row.goal_us
        rows.append(
            {
                "group": res.row.group,
                "name": res.row.name,
                "unit": res.row.unit,
                "overhead_us": over,
                "item_us": _stats(res.item_us),
                "baseline_us": _stats(res.base_us),
                "goal_us": goal,
                "within_goal": None if goal is None else over["median"] <= goal,
                "note": res.row.note,
                "check": res.row.check,
            }
        )
    derived = []
    for ratio in ratios:
        num, den = by_name.get(ratio.numerator), by_name.get(ratio.denominator)
        if num is None or den is None:
            continue
        values = [a / b for a, b in zip(num.overhead_us, den.overhead_us, strict=True) if b > 0]
        if not values:
            continue
        stats = _stats(values)
        derived.append(
            {
                "group": ratio.group,
                "name": ratio.name,
                "ratio": stats,
                "goal": ratio.goal,
                "within_goal": None if ratio.goal is None else stats["median"] <= ratio.goal,
            }
        )
    return {"rows": rows, "ratios": derived, "meta": meta}


def _fmt(stats: dict[str, float], digits: int = 1) -> str:
    return f"{stats['median']:.{digits}f} [{stats['min']:.{digits}f}–{stats['max']:.{digits}f}]"


def markdown(report: dict[str, Any]) -> str:
    """The table as Markdown (what docs/ quote)."""
    lines = [
        "| lever | what | per | overhead µs, median [min–max] | goal |",
        "|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        goal = "" if r["goal_us"] is None else f"≤ {r['goal_us']:g} µs"
        lines.append(
            f"| {r['group']} | {r['name']} | {r['unit']} | {_fmt(r['overhead_us'])} | {goal} |"
        )
    for r in report["ratios"]:
        goal = "" if r["goal"] is None else f"≤ {r['goal']:g}×"
        lines.append(f"| {r['group']} | {r['name']} | | {_fmt(r['ratio'], 2)}× | {goal} |")
    for group in report["meta"].get("unmeasured", []):
        lines.append(f"| {group} | not measured yet | | | |")
    return "\n".join(lines)


def _table(report: dict[str, Any]):
    from rich.table import Table

    table = Table(title="CPU added per unit, against a no-op in the same repetition")
    for name, justify in (
        ("lever", "left"),
        ("what", "left"),
        ("per", "left"),
        ("overhead µs", "right"),
        ("goal", "right"),
        ("", "left"),
    ):
        table.add_column(name, justify=justify)
    for r in report["rows"]:
        goal = "" if r["goal_us"] is None else f"≤ {r['goal_us']:g}"
        verdict = {None: "", True: "[green]ok[/green]", False: "[red]over[/red]"}[r["within_goal"]]
        table.add_row(r["group"], r["name"], r["unit"], _fmt(r["overhead_us"]), goal, verdict)
    for r in report["ratios"]:
        goal = "" if r["goal"] is None else f"≤ {r['goal']:g}×"
        verdict = {None: "", True: "[green]ok[/green]", False: "[red]over[/red]"}[r["within_goal"]]
        table.add_row(r["group"], r["name"], "ratio", _fmt(r["ratio"], 2) + "×", goal, verdict)
    for group in report["meta"].get("unmeasured", []):
        table.add_row(group, "[yellow]not measured yet[/yellow]", "", "", "", "")
    return table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``pipecat-fast bench overhead``."""
    parser.add_argument("--reps", type=int, default=7, help="interleaved repetitions (>= 2)")
    parser.add_argument(
        "--only", default=",".join(GROUPS), help=f"comma-separated groups of {', '.join(GROUPS)}"
    )
    parser.add_argument("--quick", action="store_true", help="small inputs (a smoke run)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    parser.add_argument("--markdown", action="store_true", help="also print the Markdown table")


def run(args: argparse.Namespace) -> int:
    """Measure, print the table, optionally write JSON; returns the exit code."""
    from loguru import logger
    from rich.console import Console

    console = Console(width=None if Console().is_terminal else 132)
    groups = [g.strip() for g in str(args.only).split(",") if g.strip()]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown or not groups:
        console.print(f"[red]--only takes groups of {', '.join(GROUPS)}; got {args.only!r}[/red]")
        return 2
    if args.reps < 2:
        console.print(f"[red]--reps must be >= 2 (a median needs a spread), got {args.reps}[/red]")
        return 2
    quick = Input(utterances=4, reply_tokens=300, turns=1, worst_pushes=2000, guard_prompts=(1500,))
    size = quick if args.quick else Input()
    logger.remove()  # no per-frame debug sink in the timed loops
    logger.add(sys.stderr, level="WARNING")
    rows: list[Row] = []
    ratios: list[Ratio] = []
    unmeasured = []
    for g in groups:
        built = GROUPS[g](size)
        rows += built
        ratios += RATIOS.get(g, list)()
        if not built:
            unmeasured.append(g)
    started = time.perf_counter()
    load = os.getloadavg()[0]
    results = asyncio.run(measure(rows, args.reps, lambda m: console.print(f"[dim]{m}[/dim]")))
    import pipecat

    report = build_report(
        results,
        ratios,
        reps=args.reps,
        clock="time.process_time_ns",
        python=platform.python_version(),
        pipecat=getattr(pipecat, "__version__", "?"),
        platform=platform.platform(),
        cpus=os.cpu_count(),
        loadavg_start=round(load, 2),
        loadavg_end=round(os.getloadavg()[0], 2),
        wall_s=round(time.perf_counter() - started, 1),
        quick=bool(args.quick),
        unmeasured=unmeasured,
    )
    console.print(_table(report))
    if args.markdown:
        console.print(markdown(report), markup=False, highlight=False)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
        console.print(f"wrote {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m pipecat_fast.bench.evals.overhead``: the suite without the CLI around it.

    It also runs on a checkout whose CLI does not list it (to time older code).
    """
    parser = argparse.ArgumentParser(prog="pipecat-fast bench overhead", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
