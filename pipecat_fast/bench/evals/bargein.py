"""``pipecat-fast bench bargein``: barge-in truncation accuracy against the TTS's own word times.

Every case is a reply spoken through Pipecat's real TTS service against its loopback emulator
(Cartesia with word timestamps; Deepgram's WebSocket and REST without), cut after a fraction
of its audio has been written by a real ``BaseOutputTransport``. The emulators time every word
they speak (:mod:`pipecat_fast.testing.synth`), which is the ground truth of what the caller
heard: the words whose audio had ended at the cut. Three ways of committing are compared on the
same cases: the lever with word timestamps (Cartesia), the lever's estimate (Deepgram WebSocket
and REST), and stock Pipecat (no lever, each service). For each, the words committed to the
assistant context are compared with the words heard: words kept that were never heard, and
words heard but lost.

The transport writes audio as fast as the TTS delivers it (the caller's barge-in is scripted on
the audio position, not on a clock), which leaves the estimate the least audio ahead of the cut:
its worst case. Cases: the bench's scripted replies (``dev``, used while building the lever) and
English multi-sentence texts from pySBD's golden rules (``held-out``, public material nobody on
this project wrote, from ``../shared/data/sbd/``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    OutputAudioRawFrame,
    StartFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.services.deepgram.tts import DeepgramHttpTTSService, DeepgramTTSService
from pipecat.services.tts_service import TextAggregationMode
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams
from pipecat.workers.runner import WorkerRunner

from pipecat_fast.bargein import BargeInTruncator
from pipecat_fast.testing.cartesia_server import CartesiaEmulator
from pipecat_fast.testing.deepgram_tts_server import DeepgramTTSEmulator
from pipecat_fast.testing.profiles import LatencyProfile
from pipecat_fast.testing.shared_data import shared_data_dir
from pipecat_fast.testing.synth import plan_speech
from pipecat_fast.textnorm import normalize, normalize_words

RATE = 16_000


class GatedOutput(BaseOutputTransport):
    """A real output transport that holds its audio once the caller barges in.

    It writes audio at once until ``stop_after_s`` are written, then holds the next chunk in
    ``write_audio_frame``: the caller talks over it there.

    ``reached`` is set when it holds; ``gate`` lets it go on. With ``realtime`` it plays at
    real-time pace, like a sound card (otherwise as fast as audio comes).
    """

    def __init__(self, stop_after_s: float | None = None, *, realtime: bool = False):
        super().__init__(TransportParams(audio_out_enabled=True, audio_out_sample_rate=RATE))
        self.stop_after_s = stop_after_s
        self.realtime = realtime
        self._clock = 0.0
        self.written_s = 0.0
        self.reached = asyncio.Event()
        self.gate = asyncio.Event()

    async def start(self, frame: StartFrame):
        """Ready to write."""
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        """Write at once, or hold once the caller has barged in."""
        duration = len(frame.audio) / 2 / frame.sample_rate
        if self.stop_after_s is not None and self.written_s + duration > self.stop_after_s + 1e-6:
            self.reached.set()
            await self.gate.wait()
        self.written_s += duration
        if self.realtime:  # a sound card: each chunk returns once its turn to play comes
            now = time.monotonic()
            self._clock = max(self._clock, now)
            wait, self._clock = self._clock - now, self._clock + duration
            if wait > 0:
                await asyncio.sleep(wait)
        return True


@dataclass
class Outcome:
    """What the assistant context ended up with."""

    context: LLMContext
    truncator: BargeInTruncator
    transport: GatedOutput
    turn_messages: list = field(default_factory=list)

    @property
    def assistant_texts(self) -> list[str]:
        """The assistant messages' text, in order."""
        return [
            m["content"]
            for m in self.context.get_messages()
            if isinstance(m, dict) and m.get("role") == "assistant" and m.get("content")
        ]


async def run_reply(
    frames: Sequence[Frame],
    *,
    stop_after_s: float | None,
    truncator: BargeInTruncator | None = None,
    head: Sequence[FrameProcessor] = (),
    after_interruption: Sequence[Frame] = (),
    resumes: bool = True,
    context: LLMContext | None = None,
    timeout_s: float = 10.0,
    realtime: bool = False,
) -> Outcome:
    """Push ``frames`` through [head..., before, transport, after, aggregator].

    With ``stop_after_s``, the caller barges in once that much audio is written; without,
    the reply plays to the end. ``after_interruption`` frames follow the interruption (a
    reply that resumes; ``resumes=False`` when they end no assistant turn). With
    ``stop_after_s=None`` and no frames, the interruption comes at once.
    """
    truncator = truncator if truncator is not None else BargeInTruncator(playout_delay_s=0.0)
    context = context or LLMContext()
    pair = LLMContextAggregatorPair(context)
    transport = GatedOutput(stop_after_s, realtime=realtime)
    outcome = Outcome(context, truncator, transport)
    stopped = asyncio.Event()

    @pair.assistant().event_handler("on_assistant_turn_stopped")
    async def _on_stopped(_aggregator, message):
        outcome.turn_messages.append(message)
        stopped.set()

    pipeline = Pipeline(
        [*head, truncator.before_output(), transport, truncator.after_output(), pair.assistant()]
    )
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(audio_out_sample_rate=RATE),
        enable_rtvi=False,
        idle_timeout_secs=None,
    )
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())
    try:
        await worker.queue_frames(list(frames))
        if not frames:
            await worker.queue_frames([InterruptionFrame(), *after_interruption])
        elif stop_after_s is not None:
            await asyncio.wait_for(transport.reached.wait(), timeout_s)
            await worker.queue_frame(InterruptionFrame())
            await asyncio.wait_for(stopped.wait(), timeout_s)
            transport.gate.set()
            if after_interruption:
                stopped.clear()
                await worker.queue_frames(list(after_interruption))
                if resumes:
                    await asyncio.wait_for(stopped.wait(), timeout_s)
        else:
            await asyncio.wait_for(stopped.wait(), timeout_s)
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(running, timeout_s)
    finally:
        transport.gate.set()
        if not running.done():
            await worker.cancel()
            await asyncio.wait_for(running, timeout_s)
    return outcome


FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)

KINDS = ("cartesia", "deepgram-ws", "deepgram-http")
"""Word-timestamp WebSocket, sentence-level WebSocket without timestamps, HTTP."""


@dataclass
class Emulators:
    """The three TTS emulators and an HTTP session for the REST service."""

    cartesia: CartesiaEmulator
    deepgram: DeepgramTTSEmulator
    http: aiohttp.ClientSession

    def service(self, kind: str, mode: TextAggregationMode = TextAggregationMode.SENTENCE):
        """A fresh Pipecat TTS service of ``kind`` pointed at its emulator."""
        if kind == "cartesia":
            return CartesiaTTSService(
                api_key="test-key",
                url=self.cartesia.url,
                settings=CartesiaTTSService.Settings(voice="test-voice"),
                text_aggregation_mode=mode,
            )
        if kind == "deepgram-ws":
            return DeepgramTTSService(
                api_key="test-key", base_url=self.deepgram.ws_url, text_aggregation_mode=mode
            )
        if kind == "deepgram-http":
            return DeepgramHttpTTSService(
                api_key="test-key",
                base_url=self.deepgram.http_url,
                aiohttp_session=self.http,
                text_aggregation_mode=mode,
            )
        raise ValueError(kind)

    def spoken_words(self, kind: str) -> list[tuple[str, float, float]]:
        """Every word the emulator spoke for the last reply, timed in that reply's audio."""
        if kind == "cartesia":
            record = list(self.cartesia.contexts.values())[-1]
            words, offset = [], 0.0
            for piece in record.transcripts:
                timed, duration = plan_speech(piece)
                words += [(w.text, offset + w.start_s, offset + w.end_s) for w in timed]
                offset += duration
            return words
        wanted = "websocket" if kind == "deepgram-ws" else "http"
        streams = [s for s in self.deepgram.streams if s.kind == wanted]
        if kind == "deepgram-ws":
            stream = streams[-1]
            return [(w.text, w.start_s, w.end_s) for w in stream.words]
        # REST: one request per sentence, played one after another.
        words, offset = [], 0.0
        for stream in streams:
            words += [(w.text, offset + w.start_s, offset + w.end_s) for w in stream.words]
            offset += stream.audio_s
        return words

    def reset(self) -> None:
        """Forget what the emulators recorded."""
        self.cartesia.contexts.clear()
        self.deepgram.streams.clear()


@contextlib.asynccontextmanager
async def emulators() -> AsyncIterator[Emulators]:
    """The Cartesia and Deepgram TTS emulators on the fast test profile."""
    async with (
        CartesiaEmulator(FAST) as cartesia,
        DeepgramTTSEmulator(FAST) as deepgram,
        aiohttp.ClientSession() as http,
    ):
        yield Emulators(cartesia, deepgram, http)


def llm_reply(text: str, token_chars: int | None = None) -> list:
    """The LLM frames of ``text``: one frame per ~word (like a token stream)."""
    pieces = text.split(" ")
    tokens = [p + " " for p in pieces[:-1]] + [pieces[-1]]
    if token_chars:
        tokens = [text[i : i + token_chars] for i in range(0, len(text), token_chars)]
    return [LLMFullResponseStartFrame(), *map(LLMTextFrame, tokens), LLMFullResponseEndFrame()]


def heard_truth(words: list[tuple[str, float, float]], played_s: float) -> list[str]:
    """The words whose audio had ended by ``played_s``: what the caller heard."""
    return [w for w, _start, end in words if end <= played_s + 1e-6]


def word_diff(committed: list[str], heard: list[str]) -> tuple[int, int]:
    """``(kept but never heard, heard but lost)`` between two word lists of one reply.

    Words are compared normalized (:func:`pipecat_fast.textnorm.normalize_words`: case and
    punctuation aside), along their common prefix.
    """
    a = normalize_words(" ".join(committed).replace("—", " "))
    b = normalize_words(" ".join(heard))
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    return len(a) - common, len(b) - common


def barge_in_turns(call: Any, context: LLMContext, timeline: Any) -> list[dict[str, Any]]:
    """Per reply the caller talked over in a bench call: words played vs words kept.

    Args:
        call: The ``BenchCall`` (its scripted replies, in turn order).
        context: The call's LLM context after the call.
        timeline: The caller transport's timeline (``cut_audio_ms``: how much of each reply
            had played when the interruption reached the output).

    Returns:
        ``[{"turn", "played_ms", "words_played", "words_committed", "kept_unheard",
        "heard_lost"}]``; the words played are the scripted reply's words whose audio (the
        TTS emulator's timing) had ended when it was cut. Replies to turns the script pauses
        mid-utterance on purpose are left out (they may answer a partial transcript).
    """
    messages = [m for m in context.get_messages() if isinstance(m, dict)]
    out = []
    for turn, played_ms in sorted(timeline.cut_audio_ms.items()):
        if turn >= len(call.replies):
            continue
        pauses = getattr(call, "pauses_ms", None) or []
        if turn < len(pauses) and pauses[turn]:
            # A turn paused mid-utterance on purpose may be answered early, from a partial
            # transcript: that reply is not the scripted one this compares against.
            continue
        user_text, reply = call.replies[turn]
        words, _ = plan_speech(reply)
        played = [w.text for w in words if w.end_s * 1000.0 <= played_ms + 1e-6]
        committed = _assistant_text_after(messages, user_text).split()
        kept, lost = word_diff(committed, played)
        out.append(
            {
                "turn": turn,
                "played_ms": round(played_ms),
                "words_played": len(normalize_words(" ".join(played))),
                "words_committed": len(normalize_words(" ".join(committed).replace("—", " "))),
                "kept_unheard": kept,
                "heard_lost": lost,
            }
        )
    return out


def _assistant_text_after(messages: list[dict], user_text: str) -> str:
    """The assistant text between the user message saying ``user_text`` and the next one."""
    want = normalize(user_text)
    texts, inside = [], False
    for m in messages:
        role, content = m.get("role"), m.get("content")
        if role == "user":
            if inside:
                break
            inside = isinstance(content, str) and normalize(content).endswith(want)
        elif inside and role == "assistant" and isinstance(content, str):
            texts.append(content)
    return " ".join(texts)


def barge_in_summary(results: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Per configuration: replies talked over, words played, committed, kept unheard, lost."""
    out: dict[str, dict[str, Any]] = {}
    for r in results:
        if not r.bargein:
            continue
        agg = out.setdefault(
            r.config,
            {"interrupted_turns": 0, "words_played": 0, "words_committed": 0,
             "kept_unheard": 0, "heard_lost": 0, "exact_turns": 0},
        )  # fmt: skip
        for t in r.bargein:
            agg["interrupted_turns"] += 1
            for key in ("words_played", "words_committed", "kept_unheard", "heard_lost"):
                agg[key] += t[key]
            agg["exact_turns"] += int(t["kept_unheard"] == 0 and t["heard_lost"] == 0)
    return out


# --- the accuracy suite ---------------------------------------------------------------------------

CUT_FRACTIONS = (0.15, 0.4, 0.65, 0.9)
"""Where each reply is cut, as a fraction of its audio."""


class _Pass(FrameProcessor):
    """Passes every frame on: stands in for the lever in the stock runs."""

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)


class StockPipecat:
    """The lever's two slots left empty: Pipecat 1.14 as a user configures it."""

    def __init__(self):
        self.truncations: list = []
        self._a, self._b = _Pass(), _Pass()

    def before_output(self) -> FrameProcessor:
        """A pass-through."""
        return self._a

    def after_output(self) -> FrameProcessor:
        """A pass-through."""
        return self._b


@dataclass
class CaseResult:
    """One reply, one cut, one way of committing."""

    case: str
    set: str
    method: str
    kind: str
    cut_s: float
    heard: int
    committed: int
    kept_unheard: int
    heard_lost: int


def dev_replies() -> list[str]:
    """The bench calls' scripted replies (used while developing the lever)."""
    from pipecat_fast.bench.calls import load_calls

    return list(dict.fromkeys(t.reply for c in load_calls() for t in c.turns))


def held_out_replies(limit: int = 40) -> list[str]:
    """English multi-sentence texts from pySBD's golden rules (``../shared/data/sbd``)."""
    path = shared_data_dir() / "sbd" / "pysbd_golden_rules.jsonl"
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    texts = [
        r["text"]
        for r in rows
        if r["lang"] == "en" and len(r["expected"]) >= 2 and 80 <= len(r["text"]) <= 260
    ]
    return texts[:limit]


METHODS = (
    ("timestamps", "cartesia", True),
    ("estimate", "deepgram-ws", True),
    ("estimate", "deepgram-http", True),
    ("stock", "cartesia", False),
    ("stock", "deepgram-ws", False),
    ("stock", "deepgram-http", False),
)


async def run_case(
    emu: Emulators, text: str, kind: str, lever: bool, fraction: float, playout_delay_s: float
) -> tuple[list[str], list[str], float]:
    """Speak ``text`` through ``kind`` at real-time pace and cut it at ``fraction`` of its audio.

    Returns:
        The words committed, the words heard, and the cut (s of audio written).
    """
    _words, duration = plan_speech(text)
    cut = round(duration * fraction / 0.04) * 0.04  # on the transport's 40 ms chunks
    emu.reset()
    truncator = BargeInTruncator(playout_delay_s=playout_delay_s) if lever else StockPipecat()
    out = await run_reply(
        llm_reply(text),
        stop_after_s=cut,
        head=[emu.service(kind)],
        truncator=truncator,
        realtime=True,
        timeout_s=30.0,
    )
    committed = " ".join(out.assistant_texts).replace("—", " ").split()
    # The caller heard what played, less what the far end still buffered.
    heard = heard_truth(emu.spoken_words(kind), cut - playout_delay_s)
    return committed, heard, cut


async def run_suite(
    sets: Sequence[str], *, limit: int | None, playout_delay_s: float, progress=None
) -> list[CaseResult]:
    """Every case of ``sets`` through every method."""
    cases = []
    if "dev" in sets:
        cases += [("dev", t) for t in dev_replies()[:limit]]
    if "held-out" in sets:
        cases += [("held-out", t) for t in held_out_replies()[:limit]]
    results = []
    async with emulators() as emu:
        for set_name, text in cases:
            for fraction in CUT_FRACTIONS:
                # One at a time: Pipecat's word frames run on the clock, the audio on the
                # transport, and a loaded event loop would pull them apart.
                for method, kind, lever in METHODS:
                    committed, heard, cut = await run_case(
                        emu, text, kind, lever, fraction, playout_delay_s
                    )
                    kept, lost = word_diff(committed, heard)
                    results.append(
                        CaseResult(
                            case=text[:40],
                            set=set_name,
                            method=method,
                            kind=kind,
                            cut_s=round(cut, 2),
                            heard=len(heard),
                            committed=len(committed),
                            kept_unheard=kept,
                            heard_lost=lost,
                        )  # fmt: skip
                    )
                    if progress is not None:
                        progress(results[-1])
    return results


def summarize(results: Sequence[CaseResult]) -> list[dict[str, Any]]:
    """Per set, method and TTS kind: cases, exact share, words off (mean, p95), kept, lost."""
    rows = []
    keys = dict.fromkeys((r.set, r.method, r.kind) for r in results)
    for set_name, method, kind in keys:
        mine = [r for r in results if (r.set, r.method, r.kind) == (set_name, method, kind)]
        off = sorted(r.kept_unheard + r.heard_lost for r in mine)
        heard = sum(r.heard for r in mine)
        rows.append(
            {
                "set": set_name,
                "method": method,
                "tts": kind,
                "cases": len(mine),
                "exact_pct": round(100.0 * sum(1 for o in off if o == 0) / len(mine), 1),
                "within_one_pct": round(100.0 * sum(1 for o in off if o <= 1) / len(mine), 1),
                "words_off_mean": round(statistics.fmean(off), 2),
                "words_off_max": off[-1],
                "kept_unheard": sum(r.kept_unheard for r in mine),
                "heard_lost": sum(r.heard_lost for r in mine),
                "words_heard": heard,
            }
        )
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``pipecat-fast bench bargein``."""
    parser.add_argument(
        "--set", choices=("dev", "held-out", "all"), default="all", help="which cases"
    )
    parser.add_argument("--limit", type=int, default=None, help="at most N replies per set")
    parser.add_argument(
        "--playout-delay",
        type=float,
        default=0.0,
        help="far-end buffer (s): the lever subtracts it, and the caller hears that much less",
    )
    parser.add_argument("--out", type=Path, default=Path("reports/bargein_accuracy.json"))


def run(args: argparse.Namespace) -> int:
    """Run the accuracy suite and print its table."""
    from rich.table import Table

    from pipecat_fast.bench.output import console, quiet_logs

    quiet_logs(False)
    sets = ("dev", "held-out") if args.set == "all" else (args.set,)
    results = asyncio.run(run_suite(sets, limit=args.limit, playout_delay_s=args.playout_delay))
    rows = summarize(results)
    title = f"barge-in: words committed vs heard (playout delay {args.playout_delay} s)"
    table = Table(title=title)
    for col in ("set", "method", "tts", "cases", "exact %", "within 1 %", "off mean",
                "off max", "kept unheard", "heard lost", "heard"):  # fmt: skip
        table.add_column(col)
    for r in rows:
        table.add_row(*(str(v) for v in r.values()))
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"playout_delay_s": args.playout_delay, "cut_fractions": CUT_FRACTIONS,
             "summary": rows, "cases": [r.__dict__ for r in results]},
            indent=1, ensure_ascii=False,
        ),
        "utf-8",
    )  # fmt: skip
    console.print(f"wrote {args.out}")
    return 0
