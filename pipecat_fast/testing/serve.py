"""Run the provider emulators in their own process.

``python -m pipecat_fast.testing.serve --profile same-region --script calls.json`` starts the
STT, LLM and TTS emulators on free loopback ports, prints one JSON line with their URLs, and
serves until its standard input closes (so it dies with its parent) or it is terminated.
Running them in a separate process keeps their work off the measured pipeline's event loop.

The script file holds what the emulators say::

    {"stt_scripts": {"<call id>": [{"text": "...", "words": [["Hi,", 0.0, 0.35], ...],
                                   "partials": [[0.3, "hi"], ...]}]},
     "replies": [["<user text>", "<reply>"], ...]}

with word and partial times in seconds after the utterance's speech onset.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pipecat_fast.testing.capacity import EngineCapacity
from pipecat_fast.testing.deepgram_server import ScriptedUtterance, utterance_from_words
from pipecat_fast.testing.profiles import PROFILES, get_profile
from pipecat_fast.testing.stack import EmulatorStack


def script_to_json(
    stt_scripts: dict[str, list[ScriptedUtterance]], replies: list[tuple[str, str]]
) -> dict[str, Any]:
    """The script-file form of the emulators' material."""
    return {
        "stt_scripts": {
            call_id: [
                {
                    "text": u.text,
                    "words": [[w.text, w.start_s, w.end_s] for w in u.words],
                    "partials": [list(p) for p in u.partials],
                }
                for u in utterances
            ]
            for call_id, utterances in stt_scripts.items()
        },
        "replies": [list(pair) for pair in replies],
    }


def script_from_json(data: dict[str, Any]) -> tuple[dict[str, list[ScriptedUtterance]], list]:
    """Parse a script file's content.

    Raises:
        ValueError: Naming the malformed field.
    """
    try:
        stt_scripts = {
            call_id: [
                utterance_from_words(u["text"], u["words"], u.get("partials", ()))
                for u in utterances
            ]
            for call_id, utterances in data.get("stt_scripts", {}).items()
        }
        replies = [(str(u), str(r)) for u, r in data.get("replies", [])]
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"malformed emulator script: {type(e).__name__}: {e}") from e
    return stt_scripts, replies


async def serve(
    profile_name: str, script_path: Path | None, llm_capacity: EngineCapacity | None = None
) -> None:
    """Serve until standard input closes."""
    stt_scripts, replies = {}, []
    if script_path is not None:
        stt_scripts, replies = script_from_json(json.loads(script_path.read_text("utf-8")))
    stack = EmulatorStack(
        get_profile(profile_name),
        stt_scripts=stt_scripts,
        replies=replies,
        llm_capacity=llm_capacity,
    )
    await stack.start()
    print(json.dumps(stack.urls()), flush=True)
    loop = asyncio.get_running_loop()
    try:
        # Returns at EOF: the parent closed our stdin or exited.
        await loop.run_in_executor(None, sys.stdin.read)
    finally:
        await stack.stop()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="same-region", choices=sorted(PROFILES))
    parser.add_argument("--script", type=Path, help="JSON file with stt_scripts and replies")
    parser.add_argument(
        "--llm-slots", type=int, default=None, help="the LLM as one shared engine with N slots"
    )
    parser.add_argument(
        "--llm-prefill-tokens-per-s",
        type=float,
        default=2000.0,
        help="with --llm-slots: the engine's prefill throughput, shared",
    )
    args = parser.parse_args(argv)
    capacity = (
        EngineCapacity(args.llm_slots, args.llm_prefill_tokens_per_s)
        if args.llm_slots is not None
        else None
    )
    try:
        asyncio.run(serve(args.profile, args.script, capacity))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
