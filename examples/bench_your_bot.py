"""Bench your own bot offline: the same bot, stock Pipecat against pipecat-fast's levers.

    python examples/bench_your_bot.py                      # 3 calls of 3 turns each way (~3 min)
    python examples/bench_your_bot.py --turns 1 --calls 1  # a quick look (~30 s)
    python examples/bench_your_bot.py --call reschedule --profile cross-region

Your bot is ``run_bot`` below: its own prompt (a dental practice's receptionist, ~1,500 tokens:
above OpenAI's 1,024-token minimum, so the prompt can be cached), its own services (Deepgram STT,
OpenAI, Deepgram's WebSocket TTS) and, with ``levers=True``, the five pipecat-fast lines. Only
``make_services`` knows about the emulators: point it at the real providers and the bot is the one
you deploy. A scripted caller (``ScriptedCall``: here one of the package's recorded calls) talks to
it in real time; each call runs once per configuration, interleaved (stock, levers, stock, ...),
with the LLM's prompt cache emptied before each, and the script prints each turn's time to first
audio (TTFA) and the ratio of the levers' to stock's. docs/bench-your-bot.md explains every step.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from collections.abc import Sequence

from loguru import logger
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.services.deepgram.stt import DeepgramSTTService
from pipecat.services.deepgram.tts import DeepgramTTSService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.workers.runner import WorkerRunner

from pipecat_fast.aggregator import make_text_processor
from pipecat_fast.lint import CacheBustGuard
from pipecat_fast.prefill import DraftAndHoldUserTurnStopStrategy, SpeculativePrefill
from pipecat_fast.stabilizer import TwoUpdateStabilizer
from pipecat_fast.testing import PROFILES, EmulatorStack, ScriptedCall
from pipecat_fast.ttfa import TTFAObserver, TurnRecord

MODEL = "gpt-4.1-mini"

SERVICES = [
    ("Check-up and cleaning (adults)", "45 minutes", "$140"),
    ("Check-up and cleaning (children under 14)", "30 minutes", "$85"),
    ("Deep cleaning, per quarter of the mouth", "60 minutes", "$210"),
    ("Emergency visit (pain, swelling, broken tooth)", "30 minutes", "$120"),
    ("White filling, one surface", "40 minutes", "$165"),
    ("Crown (two visits)", "90 minutes each", "$1,150"),
    ("Root canal, front tooth", "75 minutes", "$780"),
    ("Root canal, molar", "90 minutes", "$1,090"),
    ("Extraction, simple", "30 minutes", "$190"),
    ("Extraction, wisdom tooth", "60 minutes", "$340"),
    ("Take-home whitening trays", "two 20-minute visits", "$290"),
    ("In-office whitening", "90 minutes", "$480"),
    ("Night guard", "two 20-minute visits", "$420"),
    ("Sports mouth guard", "20 minutes", "$95"),
    ("Consultation for clear aligners", "30 minutes", "free"),
]

HOURS = [
    ("Monday", "8:00 to 17:00"),
    ("Tuesday", "8:00 to 19:00"),
    ("Wednesday", "8:00 to 17:00"),
    ("Thursday", "10:00 to 19:00"),
    ("Friday", "8:00 to 14:00"),
    ("Saturday", "9:00 to 13:00, every other week"),
    ("Sunday", "closed"),
]

STAFF = [
    ("Dr. Helen Marsh", "general dentistry, crowns, nervous patients; Monday to Thursday"),
    ("Dr. Samuel Otieno", "root canals and extractions; Tuesday, Thursday and Saturday"),
    ("Dr. Priya Raman", "children and clear aligners; Monday, Wednesday and Friday"),
    ("Jo Alvarez and Ben Cho", "hygienists: cleanings and deep cleanings, every open day"),
]

# Static first, per-call details (none here) last: the prefix is byte-identical on every turn of
# every call, so the provider's prompt cache can serve it (see docs/lint.md).
SYSTEM_PROMPT = "\n".join(
    [
        "# Who you are",
        "",
        "You are Robin, the phone receptionist of Maple Street Dental, a family dental practice "
        "with one office at 48 Maple Street, second floor, above the pharmacy. You answer calls "
        "from patients and people who want to become patients. You can book, move and cancel "
        "appointments, answer questions about treatments, prices, insurance and the office, and "
        "take messages for the dentists. You cannot give a diagnosis or medical advice.",
        "",
        "# How you speak",
        "",
        "Your words are read aloud by a speech synthesizer on a phone line, so:",
        "- Answer in one to three short sentences, then stop and let the caller talk.",
        "- Never use lists, bullet points, headings, emoji, tables or abbreviations a voice would "
        "stumble over. Say 'doctor', not 'Dr.', and 'dollars' after an amount.",
        "- Say times the way people do: 'half past nine', 'ten in the morning'.",
        "- Read phone numbers in groups of three and four digits.",
        "- Ask one question at a time. Confirm names, dates and times by repeating them back.",
        "- If you did not understand, say so briefly and ask the caller to repeat.",
        "- Answer in the language the caller speaks; the office can see patients in English, "
        "Spanish and Hindi, and has a Japanese-speaking hygienist on Tuesdays.",
        "- Be warm and calm. Many callers are nervous about the dentist; never rush them.",
        "",
        "# Treatments and prices",
        "",
        "Prices are before insurance. Quote the price and the length of the visit when asked:",
        *[f"- {name}: {length}, {price}." for name, length, price in SERVICES],
        "If a caller asks for something that is not on this list, say a dentist will advise at "
        "a check-up, and offer to book one.",
        "",
        "# Opening hours",
        "",
        *[f"- {day}: {hours}." for day, hours in HOURS],
        "The office is closed on public holidays. Outside opening hours, callers with severe "
        "pain, swelling of the face or a knocked-out tooth should call the emergency line, "
        "555 014 2290, or go to the hospital emergency department.",
        "",
        "# The team",
        "",
        *[f"- {name}: {what}." for name, what in STAFF],
        "Book a caller with the dentist they ask for when that dentist works that day; otherwise "
        "offer the first dentist who can do the treatment.",
        "",
        "# Booking rules",
        "",
        "- New patients: ask for their full name, date of birth, a phone number and whether they "
        "have dental insurance. Their first visit is a check-up and cleaning of 60 minutes.",
        "- Returning patients: ask for their full name and date of birth to find their record.",
        "- Offer at most two times at once, the earliest first.",
        "- Children under 16 come with a parent or guardian, who signs the consent form.",
        "- Cancellations and changes need 24 hours' notice. Later than that, or a missed visit, "
        "costs 40 dollars; waive it once a year for a patient who was unwell, and note why.",
        "- Patients arriving more than 15 minutes late may have to rebook.",
        "- Before you book a deep cleaning, a crown or a root canal, check that the patient had "
        "an exam in the last twelve months; if not, book the exam first.",
        "",
        "# Insurance and payment",
        "",
        "We bill Delta Dental, Cigna, MetLife, Aetna, Guardian and United Concordia directly; for "
        "other insurers the patient pays and we give them a receipt to claim. We take cards, "
        "cash and bank transfer, not cheques. For treatment over 600 dollars we offer a payment "
        "plan over three, six or twelve months without interest. Patients without insurance can "
        "join the practice plan: 29 dollars a month for two cleanings and exams a year and 15 "
        "percent off other treatment.",
        "",
        "# The office",
        "",
        "There is a lift from the street. Parking: two spaces behind the building for patients "
        "with a disability, otherwise the public car park on Elm Road, five minutes' walk; bus "
        "lines 4 and 19 stop outside. Ask new patients to arrive ten minutes early to fill in "
        "their forms, and to bring a list of the medicines they take and their insurance card.",
        "",
        "# Messages and escalation",
        "",
        "Take a message for a dentist when the caller asks about their own treatment, results or "
        "medicines: their name, date of birth, a phone number, and what it is about in one line. "
        "Tell them a dentist calls back on the same working day if the message comes before two "
        "in the afternoon, otherwise the next working day. If a caller describes trouble "
        "breathing or swallowing, or swelling spreading to the eye or neck, tell them to call "
        "the emergency services now.",
        "",
        "# Privacy",
        "",
        "Only discuss a patient's appointments with the patient, or with a parent or guardian for "
        "a child. Never read out a patient's address, date of birth or insurance number; ask "
        "the caller to say it and confirm it matches.",
        "",
        "# Ending the call",
        "",
        "Before you end, ask whether there is anything else. Then repeat any booked appointment "
        "in one sentence, thank the caller and say goodbye.",
    ]
)


def make_services(stack: EmulatorStack, call_id: str):
    """Your services, pointed at the emulators (drop the base URLs for the real providers)."""
    stt = DeepgramSTTService(
        api_key="emulator",  # any key: the emulators only check that there is one
        base_url=stack.stt.base_url,
        tag=call_id,  # which scripted call the STT emulator transcribes
    )
    llm = OpenAILLMService(
        api_key="emulator",
        base_url=stack.llm.base_url,
        settings=OpenAILLMService.Settings(
            model=MODEL,
            system_instruction=SYSTEM_PROMPT,
            extra={"prompt_cache_key": call_id},
        ),
    )
    tts = DeepgramTTSService(
        api_key="emulator",
        base_url=stack.deepgram_tts.ws_url,
        settings=DeepgramTTSService.Settings(voice="aura-2-thalia-en"),
    )
    return stt, llm, tts


async def run_bot(transport, stt, llm, tts, *, levers: bool) -> TTFAObserver:
    """Your bot: one call on ``transport``; ``levers`` adds pipecat-fast's five lines."""
    context = LLMContext()
    strategies = UserTurnStrategies(stop=[DraftAndHoldUserTurnStopStrategy()]) if levers else None
    pair = LLMContextAggregatorPair(
        context,
        user_params=LLMUserAggregatorParams(
            vad_analyzer=SileroVADAnalyzer(),
            **({"user_turn_strategies": strategies} if levers else {}),
        ),
    )
    pipeline = Pipeline(
        [
            transport.input(),
            stt,
            *([TwoUpdateStabilizer()] if levers else []),
            pair.user(),
            *([SpeculativePrefill(llm, context=context)] if levers else []),
            llm,
            *([make_text_processor()] if levers else []),
            tts,
            transport.output(),
            pair.assistant(),
        ]
    )
    ttfa = TTFAObserver()
    observers = [ttfa, CacheBustGuard(provider="openai", model=MODEL)] if levers else [ttfa]
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(enable_metrics=True, enable_usage_metrics=True),
        observers=observers,
    )

    @transport.event_handler("on_client_disconnected")
    async def on_client_disconnected(transport, client):
        await worker.cancel()  # the caller hung up

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await runner.run()
    return ttfa


async def bench(
    call: ScriptedCall, *, calls: int, profile: str, timeout_s: float = 300.0
) -> dict[str, list[dict]]:
    """Run ``call`` ``calls`` times per configuration, interleaved; per configuration, per call,
    ``{"turns": {turn: TurnRecord}, "computed_tokens": n, "prefills": n}``."""
    results: dict[str, list[dict]] = {"stock": [], "levers": []}
    async with EmulatorStack(
        PROFILES[profile], stt_scripts=call.stt_scripts, replies=call.replies
    ) as stack:
        for n in range(calls):
            for config in results:
                stack.llm.reset()  # a cold prompt cache for every call, whatever ran before
                stt, llm, tts = make_services(stack, call.id)
                ttfa = await asyncio.wait_for(
                    run_bot(call.transport(), stt, llm, tts, levers=config == "levers"), timeout_s
                )
                requests = list(stack.llm.requests)
                turns: dict[int, TurnRecord] = {t.turn: t for t in ttfa.turns}
                results[config].append(
                    {
                        "turns": turns,
                        "computed_tokens": sum(r.prompt_tokens - r.cached_tokens for r in requests),
                        "prefills": sum(1 for r in requests if r.max_tokens == 1),
                    }
                )
                answered = ", ".join(f"{t.ttfa_ms:.0f}" for t in turns.values()) or "none"
                print(f"call {n + 1}/{calls} {config:6}: TTFA ms per turn {answered}", flush=True)
    return results


def report(results: dict[str, list[dict]], n_turns: int) -> str:
    """Per-turn median TTFA of each configuration, their ratio, and the compute each spent."""

    def ttfas(config: str, turn: int | None) -> list[float]:
        return [
            rec.ttfa_ms
            for run in results[config]
            for t, rec in run["turns"].items()
            if turn is None or t == turn
        ]

    lines = [
        "",
        "turn | stock TTFA ms | levers TTFA ms | levers / stock",
        "-----|---------------|----------------|---------------",
    ]
    for turn in range(n_turns):
        stock, fast = ttfas("stock", turn), ttfas("levers", turn)
        if not stock or not fast:
            lines.append(f"{turn:4} | {'-':>13} | {'-':>14} | unanswered in a configuration")
            continue
        s, f = statistics.median(stock), statistics.median(fast)
        lines.append(f"{turn:4} | {s:13.0f} | {f:14.0f} | {f / s:14.2f}")
    stock, fast = ttfas("stock", None), ttfas("levers", None)
    if stock and fast:
        s, f = statistics.median(stock), statistics.median(fast)
        lines.append(f" all | {s:13.0f} | {f:14.0f} | {f / s:14.2f}   (p50 over every turn)")
    base = sum(r["computed_tokens"] for r in results["stock"])
    spent = sum(r["computed_tokens"] for r in results["levers"])
    prefills = sum(r["prefills"] for r in results["levers"])
    if base:
        lines.append(
            f"prompt tokens the LLM computed: stock {base}, levers {spent} "
            f"({100 * (spent - base) / base:+.1f} %, {prefills} prefill requests)"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--call", default="book_cleaning", choices=ScriptedCall.shipped_ids())
    parser.add_argument("--turns", type=int, default=3, help="utterances of the call to play")
    parser.add_argument("--calls", type=int, default=3, help="calls per configuration")
    parser.add_argument("--profile", default="same-region", choices=sorted(PROFILES))
    parser.add_argument("--verbose", action="store_true", help="Pipecat's debug log")
    args = parser.parse_args(argv)
    if args.turns < 1 or args.calls < 1:
        parser.error("--turns and --calls must be at least 1")
    logger.remove()
    logger.add(sys.stderr, level="DEBUG" if args.verbose else "WARNING")
    call = ScriptedCall.shipped(args.call, turns=args.turns)
    results = asyncio.run(bench(call, calls=args.calls, profile=args.profile))
    print(report(results, len(call.lines)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
