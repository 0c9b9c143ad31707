"""200 sessions in one process: start, talk, end; afterwards nothing of them is left.

Each session is a real Pipecat pipeline with the levers on (tests/load/sessions.py: stabiliser,
draft-and-hold, speculative prefill, sentence aggregator, session warmup, TTFA meter, the
shared load probe) against the loopback emulators with zero latency, and a scripted caller that
plays two short turns as frames (no real-time audio: a turn takes milliseconds), so 200 calls
fit in seconds. One in twenty sessions hangs up in the middle of its first turn, with its
speculative prefill still in flight at a slow engine: the prefill is cancelled and counted.

Counted before and after (after a garbage collection): asyncio tasks, open file descriptors
(``/proc/self/fd``: sockets included), and live objects of the session's kinds (frame
processors, observers, turn strategies, pipeline workers, contexts, frames, the levers' cores).
Memory per idle session is the resident-set growth with every session started and waiting,
over the number of sessions.
"""

import asyncio
import gc
import os
import sys
import time
from collections import Counter
from dataclasses import replace

import pytest
from pipecat.frames.frames import Frame
from pipecat.observers.base_observer import BaseObserver
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.turns.user_start.base_user_turn_start_strategy import BaseUserTurnStartStrategy
from pipecat.turns.user_stop.base_user_turn_stop_strategy import BaseUserTurnStopStrategy

from pipecat_fast.load import EngineLoad, YieldConfig
from pipecat_fast.prefill import DraftHold, PrefillPlanner
from pipecat_fast.testing.capacity import EngineCapacity
from pipecat_fast.testing.cartesia_server import CartesiaEmulator
from pipecat_fast.testing.openai_server import OpenAIEmulator
from pipecat_fast.testing.profiles import SAME_REGION
from pipecat_fast.warmup import SessionWarmup
from tests.load.sessions import Turn, build_session, end, start

NEVER_YIELD = YieldConfig(enabled=False)
SESSIONS = int(os.environ.get("PIPECAT_FAST_SESSIONS", "200"))
ABANDON_EVERY = 20
WAVE = 25  # sessions per wave (all of them are started and idle before the first talks)
WAVES_AT_ONCE = 2  # waves talking at a time: one wave's tail (its last replies) overlaps the next

FAST = replace(
    SAME_REGION,
    name="zero",
    rtt_ms=0.0,
    stt_final_ms=0.0,
    llm_queue_ms=0.0,
    llm_prefill_ms_per_token=0.0,
    llm_first_token_ms=0.0,
    llm_decode_tokens_per_s=100_000.0,
    tts_ttfb_ms=0.0,
    tts_handshake_rtts=0,
)
SLOW = replace(FAST, name="slow", llm_queue_ms=30_000.0)  # a prefill there is still in flight

# Short turns (each word is an interim, a stabiliser update and a prefill decision) and replies
# of one short word without a closing pause: a reply's audio is 5-6 chunks of 40 ms, so 200
# calls' frames stay cheap. The first turn has the words a quitter needs for its prefill.
TURNS = [Turn("Book a cleaning please."), Turn("Tuesday works.")]
REPLIES = [(TURNS[0].final, "Ok"), (TURNS[1].final, "Done")]
# Above OpenAI's 1,024-token cacheable minimum (the emulator's model is gpt-4.1-mini), so the
# prefill sends; one shared prompt, as a bot fleet's would be.
PROMPT = "You are the receptionist of a dental practice. Be brief and kind. " * 90

KINDS = (
    FrameProcessor,
    BaseObserver,
    BaseUserTurnStartStrategy,
    BaseUserTurnStopStrategy,
    PipelineWorker,
    LLMContext,
    Frame,
    SessionWarmup,
    PrefillPlanner,
    DraftHold,
)


def census() -> Counter:
    gc.collect()
    kinds: dict[type, bool] = {}  # isinstance on ABCs per object is slow: once per type
    counts: Counter = Counter()
    for o in gc.get_objects():
        t = type(o)
        hit = kinds.get(t)
        if hit is None:
            hit = kinds[t] = issubclass(t, KINDS)
        if hit:
            counts[t.__name__] += 1
    return counts


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def describe(task: asyncio.Task) -> str:
    coro = task.get_coro()
    return f"{task.get_name()} ({getattr(coro, '__qualname__', coro)})"


async def settle() -> None:
    """Let closing transports and finished tasks go (loop turns around one collection).

    A full collection takes a few hundred ms with Pipecat loaded; the census collects again.
    """
    for _ in range(3):
        await asyncio.sleep(0.05)
    gc.collect()
    for _ in range(2):
        await asyncio.sleep(0.05)


async def run_sessions(n, llm, slow, tts, load, slow_load, abandon_every=ABANDON_EVERY):
    """Start ``n`` sessions, let them all sit idle (measured), then talk in waves of ``WAVE``."""
    waves = [asyncio.Event() for _ in range(0, n, WAVE)]
    sessions = []
    for i in range(n):
        abandon = i % abandon_every == abandon_every - 1
        sessions.append(
            build_session(
                llm_url=(slow if abandon else llm).base_url,
                tts_url=tts.url,
                system_prompt=PROMPT,
                turns=TURNS,
                go=waves[i // WAVE],
                load=slow_load if abandon else load,
                # The quitter's own warmup runs at the slow engine: a cold prefill would yield
                # to it; this one must be in flight when the caller hangs up.
                yield_config=NEVER_YIELD if abandon else None,
                abandon=abandon,
            )
        )
    try:
        for s in sessions:
            await start(s)
        await asyncio.wait_for(asyncio.gather(*(s.caller.started.wait() for s in sessions)), 60)
        idle_rss = rss_bytes()
        at_once = asyncio.Semaphore(WAVES_AT_ONCE)

        async def talk(w: int, go: asyncio.Event) -> None:
            async with at_once:
                wave = sessions[w * WAVE : (w + 1) * WAVE]
                talkers = [s for s in wave if not s.caller._sc_abandon]
                quitters = [s for s in wave if s.caller._sc_abandon]
                go.set()
                # Each quitter hangs up once its first prefill is in flight.
                await asyncio.wait_for(
                    asyncio.gather(*(s.caller.abandoned.wait() for s in quitters)), 30
                )
                await asyncio.wait_for(
                    _until(lambda q=quitters: all(s.prefill.in_flight for s in q)), 30
                )
                await asyncio.gather(*(end(s, cancel=True) for s in quitters))
                await asyncio.wait_for(
                    asyncio.gather(*(s.caller.finished.wait() for s in talkers)), 60
                )
                await asyncio.gather(*(end(s) for s in talkers))

        await asyncio.gather(*(talk(w, go) for w, go in enumerate(waves)))
    except BaseException:
        # A failed wait must not leave 200 pipelines running past the emulators' close.
        for s in sessions:
            if s.task is not None and not s.task.done():
                s.task.cancel()
        raise
    return sessions, idle_rss


async def _until(condition):
    while not condition():
        await asyncio.sleep(0.01)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/self/fd")
async def test_sessions_start_and_end_leaving_no_task_socket_fd_or_pipeline_object():
    capacity = EngineCapacity(slots=64, prefill_tokens_per_s=1e7)
    slow_engine = OpenAIEmulator(SLOW, replies=REPLIES)
    # Its handlers still sleep out the queue of the requests the quitters hung up on: at the
    # end they are cancelled at once, not waited for (up to 30 s).
    slow_engine.shutdown_timeout_s = 0.1
    async with (
        OpenAIEmulator(FAST, replies=REPLIES, capacity=capacity) as llm,
        slow_engine as slow,
        CartesiaEmulator(FAST) as tts,
    ):
        load = EngineLoad(llm.base_url, interval_s=0.05)
        slow_load = EngineLoad(slow.base_url, interval_s=0.05)
        # One throwaway round first (a talker and a quitter): lazy imports, tokenizers and SDK
        # clients built once per process are not a session's.
        await run_sessions(2, llm, slow, tts, load, slow_load, abandon_every=2)
        await settle()
        tasks = set(asyncio.all_tasks())
        fds = open_fds()
        objects = census()
        rss = rss_bytes()
        started, cpu = time.monotonic(), time.process_time()
        sessions, idle_rss = await run_sessions(SESSIONS, llm, slow, tts, load, slow_load)
        took, took_cpu = time.monotonic() - started, time.process_time() - cpu
        talkers = [s for s in sessions if not s.caller._sc_abandon]
        quitters = [s for s in sessions if s.caller._sc_abandon]
        # Every talker's two turns were answered; every quitter's prefill was cancelled.
        assert [s.caller.timed_out for s in sessions if s.caller.timed_out] == []
        assert sum(s.caller.answered for s in talkers) == len(talkers) * len(TURNS)
        cancelled = sum(t.prefill_cancelled for s in quitters for t in s.prefill.turns)
        assert cancelled == len(quitters)
        answered = sum(s.caller.answered for s in talkers)
        del sessions, talkers, quitters
        await settle()
        # The slow emulator's server side still sleeps out its queue for the requests the
        # quitters hung up on: aiohttp's request handlers are the engine's, not a session's.
        left_tasks = [
            describe(t)
            for t in set(asyncio.all_tasks()) - tasks
            if not describe(t).endswith("(RequestHandler._handle_request)")
            and not describe(t).endswith("(RequestHandler.start)")
        ]
        left_fds = open_fds() - fds
        left_objects = {k: v for k, v in (census() - objects).items() if v}
        assert not load.polling and not slow_load.polling  # the probes stopped with the last
        assert load.speculative_in_flight == 0 and slow_load.speculative_in_flight == 0
    per_session_kib = (idle_rss - rss) / SESSIONS / 1024
    print(
        f"\n{SESSIONS} sessions in {took:.1f} s ({took_cpu:.1f} s CPU); {answered} turns "
        f"answered, {cancelled} "
        f"prefills cancelled; memory per idle session {per_session_kib:.0f} KiB; "
        f"left: tasks {left_tasks}, fds {left_fds}, objects {left_objects}"
    )
    assert left_tasks == []
    assert left_fds <= 0
    assert left_objects == {}
