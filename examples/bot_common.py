"""What both example bots share: the agent, its services, and one call with every lever.

The agent is a dental clinic's receptionist with a real-sized prompt (~3,200 tokens: prompt
caching, and so the speculative prefill and the session warmup, need at least 1,024 tokens on
OpenAI). Its services are Deepgram (STT), OpenAI (LLM) and Cartesia (TTS):

- with ``DEEPGRAM_API_KEY``, ``OPENAI_API_KEY`` and ``CARTESIA_API_KEY`` set (and optionally
  ``CARTESIA_VOICE_ID``), the real providers; keys are read from the environment and never
  logged;
- with ``--offline``, pipecat-fast's loopback emulators of those three providers (the same
  Pipecat services, pointed at them), in a child process, serving the shipped call scripts.

Which levers run is ``--levers`` (``all`` by default, ``stock`` for none, or a list such as
``all,-bargein``; ``all,endofturn,preemptive`` adds the opt-in end-of-turn levers, whose dial is
``--patience``); a single call can ask for its own (``?levers=stock`` on the Twilio webhook,
``request_data.levers`` in a WebRTC offer), so one server can compare both on the same callers.
"""

from __future__ import annotations

import argparse
import json
import os
from importlib.resources import files
from pathlib import Path
from typing import Any

from loguru import logger
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.frames.frames import TTSSpeakFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.services.deepgram.stt import DeepgramSTTService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.workers.runner import WorkerRunner

from pipecat_fast.compose import FastCall, Levers
from pipecat_fast.lint import Severity, lint_prompt

SYSTEM_PROMPT = (
    files("pipecat_fast.bench").joinpath("data/prompts/dental_receptionist.md").read_text("utf-8")
)
"""Static instructions only: per-call details would go at the end, so the prefix stays
byte-identical from turn to turn and the provider's cache serves it."""

MODEL = "gpt-4.1-mini"
GREETING = "Thanks for calling Bright Smile Dental. How can I help you today?"
REAL_KEYS = ("DEEPGRAM_API_KEY", "OPENAI_API_KEY", "CARTESIA_API_KEY")
CARTESIA_VOICE = "71a7ad14-091c-4e8e-a314-022ece01c121"  # a stock voice of Cartesia's library


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options both bots take."""
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument(
        "--levers",
        default="all",
        help="all (default), stock, or a comma list (all,-draft_and_hold; stabilizer,prefill)",
    )
    parser.add_argument(
        "--patience",
        default="balanced",
        help="the end-of-turn patience dial: snappy, balanced (default) or patient",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="use pipecat-fast's loopback emulators of Deepgram, OpenAI and Cartesia (no keys)",
    )
    parser.add_argument(
        "--profile", default="same-region", help="--offline: the emulators' latency profile"
    )
    parser.add_argument(
        "--report-dir", type=Path, default=None, help="write each call's report here (JSON)"
    )


def lint_system_prompt() -> int:
    """Lint the agent's prompt for cache busters at start-up; returns the errors found."""
    findings = lint_prompt(SYSTEM_PROMPT, provider="openai", model=MODEL)
    for f in findings:
        logger.warning(f"system prompt line {f.line}: {f.rule} {f.message} (fix: {f.fix})")
    errors = sum(1 for f in findings if f.severity >= Severity.ERROR)
    logger.info(f"system prompt linted: {len(findings)} findings, {errors} errors")
    return errors


class Providers:
    """Where the call's services connect: the real providers, or the loopback emulators.

    ``async with Providers.from_args(args) as providers:`` checks the keys (real) or starts
    the emulators (``--offline``) and stops them on exit.
    """

    def __init__(self, offline: bool, profile: str = "same-region"):
        self.offline = offline
        self.profile = profile
        self.urls: dict[str, str] = {}
        self._emulators: Any = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Providers:
        """From the parsed options; without ``--offline`` every key must be set."""
        if not args.offline:
            missing = [k for k in REAL_KEYS if not os.environ.get(k)]
            if missing:
                raise SystemExit(
                    f"set {', '.join(missing)} for the real providers, or pass --offline"
                )
        return cls(args.offline, args.profile)

    async def __aenter__(self) -> Providers:
        if self.offline:
            # The shipped call scripts: what the emulated caller says and the LLM answers.
            from pipecat_fast.bench.emulator_process import EmulatorProcess
            from pipecat_fast.bench.material import bench_calls

            calls = bench_calls(revisions_interval_s=0.25)
            self._emulators = await EmulatorProcess(self.profile, calls).__aenter__()
            self.urls = self._emulators.urls
            logger.info(f"offline: emulators up ({', '.join(c.id for c in calls)})")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._emulators is not None:
            await self._emulators.__aexit__(*exc)

    def services(self, call_id: str, *, script: str | None = None) -> dict[str, Any]:
        """The call's ``stt``, ``llm``, ``tts`` and ``context``.

        Args:
            call_id: The call's id: the LLM's ``prompt_cache_key``, so every turn of the call
                (and its warmup and prefills) reads one cache entry.
            script: ``--offline`` only: which shipped call the emulated STT transcribes.
        """
        offline = self.offline
        key = (lambda name: "emulator-key") if offline else os.environ.__getitem__
        stt = DeepgramSTTService(
            api_key=key("DEEPGRAM_API_KEY"),
            **({"base_url": self.urls["stt_base_url"], "tag": script or ""} if offline else {}),
        )
        llm = OpenAILLMService(
            api_key=key("OPENAI_API_KEY"),
            base_url=self.urls["llm_base_url"] if offline else None,
            settings=OpenAILLMService.Settings(
                model=MODEL,
                system_instruction=SYSTEM_PROMPT,
                # OpenAI's prompt-caching guide: one prompt_cache_key for requests that share
                # a long prefix; every turn of this call shares the prompt and the history.
                extra={"prompt_cache_key": call_id},
            ),
        )
        voice = "emulated-voice" if offline else os.environ.get("CARTESIA_VOICE_ID", CARTESIA_VOICE)
        tts = CartesiaTTSService(
            api_key=key("CARTESIA_API_KEY"),
            settings=CartesiaTTSService.Settings(voice=voice),
            **({"url": self.urls["tts_url"]} if offline else {}),
        )
        return {"stt": stt, "llm": llm, "tts": tts, "context": LLMContext()}


def levers_for(requested: str | None, default: Levers) -> Levers:
    """A call's levers: its own request (``?levers=...``), else the server's ``--levers``."""
    if not requested:
        return default
    try:
        return Levers.parse(requested, **default.settings())
    except ValueError as e:
        logger.warning(f"ignoring the call's levers {requested!r}: {e}")
        return default


async def run_call(
    call: FastCall,
    transport: Any,
    *,
    sample_rate: int,
    report_dir: Path | None = None,
) -> dict[str, Any]:
    """Run one call on ``transport`` until the caller hangs up; returns the call's report."""
    pair = LLMContextAggregatorPair(
        call.context, user_params=call.user_params(vad_analyzer=SileroVADAnalyzer())
    )
    pipeline = Pipeline(
        [
            transport.input(),  # caller audio in
            call.stt,  # DeepgramSTTService
            *call.after_stt,  # TwoUpdateStabilizer: words that survived two interims
            pair.user(),  # VAD + Smart Turn (draft-and-hold around it): end of turn
            *call.before_llm,  # SpeculativePrefill; the warmup's first-turn check
            call.llm,  # OpenAILLMService
            *call.between_llm_tts,  # make_text_processor(): first phrase, then sentences
            call.tts,  # CartesiaTTSService (its socket dialled while the phone rang)
            *call.after_tts,
            *call.before_output,  # barge-in truncation: what the TTS sent
            transport.output(),  # bot audio out
            *call.after_output,  # barge-in truncation: only what was heard goes on
            pair.assistant(),
        ]
    )
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(
            audio_in_sample_rate=sample_rate,
            audio_out_sample_rate=sample_rate,
            enable_metrics=True,
            enable_usage_metrics=True,
        ),
        observers=call.observers,  # the TTFA meter; the cache-bust guard
        enable_rtvi=False,
    )

    @call.ttfa.event_handler("on_turn_measured")
    async def on_turn_measured(observer, record):
        logger.info(f"call {call.call_id} turn {record.turn}: TTFA {record.ttfa_ms:.0f} ms")

    @transport.event_handler("on_client_connected")
    async def on_client_connected(transport, client):
        await worker.queue_frames([TTSSpeakFrame(GREETING)])

    @transport.event_handler("on_client_disconnected")
    async def on_client_disconnected(transport, client):
        await worker.cancel()

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    try:
        await runner.run()
    finally:
        report = await call.hang_up()
        logger.info(f"call {call.call_id} ({report['levers']}): TTFA {report['ttfa']}")
        if report_dir is not None:
            report_dir.mkdir(parents=True, exist_ok=True)
            path = report_dir / f"{call.call_id}.json"
            path.write_text(json.dumps(report, default=str), "utf-8")
    return report
