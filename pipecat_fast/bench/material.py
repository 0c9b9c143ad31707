"""Turn the shipped call scripts into what the bench runs (:class:`BenchCall`)."""

from __future__ import annotations

import zlib
from itertools import cycle, islice

from pipecat_fast.bench.calls import CallScript, call_ids, load_calls, read_pcm
from pipecat_fast.bench.pipeline import BenchCall
from pipecat_fast.testing.deepgram_server import utterance_from_words
from pipecat_fast.testing.revisions import with_revisions


def bench_call(script: CallScript) -> BenchCall:
    """The bench form of a call script: caller PCM, STT script and scripted replies."""
    utterances, stt_script, replies, ends, pauses = [], [], [], [], []
    rate = 16000
    for turn in script.turns:
        ends.append(turn.speech_end_ms)
        pauses.append(tuple((p.start_ms, p.end_ms) for p in turn.pauses))
        pcm, rate = read_pcm(turn.audio_path)
        utterances.append(pcm)
        onset = turn.speech_start_ms
        words = [
            (w.text, (w.start_ms - onset) / 1000, (w.end_ms - onset) / 1000) for w in turn.words
        ]
        stt_script.append(utterance_from_words(turn.user_text, words))
        replies.append((turn.user_text, turn.reply))
    return BenchCall(
        id=script.id,
        system_prompt=script.system_prompt,
        tools=script.tools,
        utterances=utterances,
        stt_script=stt_script,
        replies=replies,
        sample_rate=rate,
        speech_end_ms=ends,
        pauses_ms=pauses,
    )


def bench_calls(
    n: int | None = None,
    *,
    ids: list[str] | None = None,
    large_prompt: bool = False,
    revisions_interval_s: float | None = None,
) -> list[BenchCall]:
    """The first ``n`` calls, cycling through the shipped scripts (all of them if None).

    Args:
        n: How many calls; repeats scripts if more than exist.
        ids: Restrict to these call ids (in this order).
        large_prompt: Use the ~30k-token system prompt variant.
        revisions_interval_s: Give the STT emulator revising interim transcripts at this
            interval (s), with the revision structure of real streaming ASR
            (:mod:`pipecat_fast.testing.revisions`); None keeps word-by-word interims.

    Raises:
        CallScriptError: If a script or its audio is missing or malformed.
        ValueError: If ``n`` is not positive.
    """
    ids = ids or call_ids()
    if n is not None and n < 1:
        raise ValueError("the number of calls must be at least 1")
    scripts = load_calls(ids, large_prompt=large_prompt)
    chosen = list(islice(cycle(scripts), n)) if n is not None else scripts
    calls = [bench_call(s) for s in chosen]
    if revisions_interval_s is not None:
        for call in calls:
            call.stt_script = [
                with_revisions(u, revisions_interval_s, seed=zlib.crc32(f"{call.id}/{i}".encode()))
                for i, u in enumerate(call.stt_script)
            ]
    return calls
