"""One bench call, repeated, with the frames and the user aggregator's turns logged.

Looks for the stall of docs/bench.md ("A 5 s stall after a turn that ended early"): a turn
whose ``llm_dispatch`` exceeds a second. Runs one scripted call through one bench configuration
(the bench's own functions: emulators in their process, ``run_call``), ``ATTEMPTS`` times, and
writes per attempt, under ``OUT``:

- ``frames_N.jsonl``: every push of the turn-relevant frames (pipeline clock ``ts``, source,
  destination, text), every time the user aggregator *handled* a transcript (``handled``), and
  the aggregator's turn events (which start strategy opened a turn, stop timeouts);
- ``turns_N.json``: the TTFA records of the call's turns; ``context_N.json``: the final context.

    python scripts/repro_late_transcript.py \\
        cancel_spanish cross-region 6 /tmp/late pool

Usage: ``repro_late_transcript.py CALL PROFILE ATTEMPTS OUT [CONFIG]`` (CONFIG: a bench
configuration, default ``stock-pool``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from loguru import logger
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    InterimTranscriptionFrame,
    InterruptionFrame,
    LLMContextFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.observers.base_observer import BaseObserver, FrameProcessed, FramePushed
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator

from pipecat_fast.bench.configs import CONFIGS, BenchConfig
from pipecat_fast.bench.emulator_process import EmulatorProcess
from pipecat_fast.bench.material import bench_calls
from pipecat_fast.bench.pipeline import Endpoints
from pipecat_fast.bench.runner import run_call, warm_up
from pipecat_fast.testing.profiles import get_profile

WATCHED = (
    BotStartedSpeakingFrame,
    InterimTranscriptionFrame,
    InterruptionFrame,
    LLMContextFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)


class FrameLog(BaseObserver):
    """Writes first pushes downstream of the watched frames, and the aggregator's handling."""

    def __init__(self, out):
        super().__init__()
        self.out = out
        self.last_ts = 0.0

    def write(self, row: dict) -> None:
        self.out.write(json.dumps(row, ensure_ascii=False) + "\n")

    async def on_push_frame(self, data: FramePushed):
        frame = data.frame
        if not isinstance(frame, WATCHED) or data.direction.name != "DOWNSTREAM":
            return
        self.last_ts = data.timestamp / 1e9
        if not data.first_push and not isinstance(frame, LLMContextFrame):
            return
        row = {
            "ts": round(self.last_ts, 4),
            "frame": type(frame).__name__,
            "src": str(data.source),
            "dst": str(data.destination),
        }
        if isinstance(frame, (TranscriptionFrame, InterimTranscriptionFrame)):
            row.update(text=frame.text, finalized=getattr(frame, "finalized", None))
        self.write(row)

    async def on_process_frame(self, data: FrameProcessed):
        frame = data.frame
        if isinstance(data.processor, LLMUserAggregator) and isinstance(
            frame, (TranscriptionFrame, InterimTranscriptionFrame)
        ):
            # FrameProcessed.timestamp is when the processor began handling the frame.
            self.write(
                {
                    "ts": round(data.timestamp / 1e9, 4),
                    "handled": type(frame).__name__,
                    "text": frame.text,
                }
            )


def watch_turns(log: FrameLog):
    """An ``on_built`` hook: log the user aggregator's turn events (its public events)."""

    def hook(pipeline) -> None:
        for processor in pipeline.processors:
            if isinstance(processor, LLMUserAggregator):

                @processor.event_handler("on_user_turn_started")
                async def _started(_aggregator, strategy):
                    log.write({"ts": log.last_ts, "turn_started_by": type(strategy).__name__})

                @processor.event_handler("on_user_turn_stop_timeout")
                async def _timeout(_aggregator):
                    log.write({"ts": log.last_ts, "turn_stop_timeout": True})

    return hook


async def main(argv: list[str]) -> int:
    call_id, profile_name, attempts, out = argv[:4]
    base = CONFIGS[argv[4] if len(argv) > 4 else "stock-pool"]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    profile = get_profile(profile_name)
    calls = bench_calls(ids=[call_id], revisions_interval_s=profile.stt_interim_interval_ms / 1000)
    async with EmulatorProcess(profile.name, calls) as emulators:
        endpoints = Endpoints(**emulators.urls)
        await warm_up(endpoints)
        for attempt in range(int(attempts)):
            specs = []
            with open(out / f"frames_{attempt}.jsonl", "w") as frames:
                log = FrameLog(frames)

                def customize(spec, log=log, specs=specs):
                    base.customize(spec)
                    spec.observers.append(log)
                    spec.on_built.append(watch_turns(log))
                    specs.append(spec)

                await emulators.reset_llm()
                result = await run_call(
                    calls[0], BenchConfig(base.name, base.description, customize), endpoints
                )
            rows = [o.record.to_dict() if o.record else {"turn": o.index} for o in result.outcomes]
            (out / f"turns_{attempt}.json").write_text(json.dumps(rows, indent=1))
            messages = specs[0].context.get_messages() if specs else []
            (out / f"context_{attempt}.json").write_text(
                json.dumps(messages, indent=1, ensure_ascii=False, default=str)
            )
            stalls = [
                (r["turn"], r["stages_ms"]["llm_dispatch"])
                for r in rows
                if r.get("stages_ms", {}).get("llm_dispatch", 0) > 1000
            ]
            print(f"attempt {attempt}: error={result.error} llm_dispatch>1s={stalls}", flush=True)
    return 0


if __name__ == "__main__":
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    sys.exit(asyncio.run(main(sys.argv[1:])))
