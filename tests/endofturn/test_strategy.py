"""CompleteTranscriptUserTurnStopStrategy in Pipecat's real user aggregator, on fake frame streams.

Frames reach the aggregator one at a time (``tests.pacing``); the STT's p99 time-to-final is set
to 30 s where a test shows the strategy does *not* wait for it, so a confirmation that came from
the wrapped strategy's fallback would time the test out instead of passing it.
"""

from loguru import logger
from pipecat.frames.frames import UserStoppedSpeakingFrame

from pipecat_fast.endofturn import CompleteTranscriptUserTurnStopStrategy
from pipecat_fast.frames import STTFinalizeAnswerFrame, TTFAAnnotationFrame
from tests.endofturn.helpers import (
    UserSide,
    analyzer_strategy,
    audio,
    dg,
    final,
    interim,
    p99,
    start,
    stop,
)
from tests.pacing import Until

NEVER = 30.0  # a p99 the test would time out waiting for


def confirmed(side, n=1, timeout_s=3.0):
    return Until(lambda: len(side.recorder.stops()) >= n, timeout_s=timeout_s, what="confirmed")


def notes(side):
    return [f for f in side.recorder.seen if isinstance(f, TTFAAnnotationFrame)]


async def test_a_final_covering_the_speech_confirms_without_waiting_for_the_p99():
    strategy = CompleteTranscriptUserTurnStopStrategy(analyzer_strategy())
    side = UserSide(strategy)
    # Deepgram's endpointing final lands inside the VAD's stop window (its Finalize answer,
    # empty, would come later and Pipecat would push nothing for it).
    frames = [p99(NEVER), start(), audio(1.5), final("Book it for Tuesday.", 0.0, 1.51)]
    frames += [audio(0.2), stop(), confirmed(side)]
    await side.run(*frames)
    assert strategy.confirmations == {"finalized": 0, "segment_end": 1}
    assert side.user_messages() == ["Book it for Tuesday."]
    assert any(n.fields.get("eot_proof") == "segment_end" for n in notes(side))


async def test_the_final_arriving_after_the_vad_stop_confirms_when_it_comes():
    strategy = CompleteTranscriptUserTurnStopStrategy(analyzer_strategy())
    side = UserSide(strategy)
    frames = [p99(NEVER), start(), audio(1.5), interim("Book it for", 0.0, 1.2), audio(0.2)]
    frames += [stop(), final("Book it for Tuesday.", 0.0, 1.51), confirmed(side)]
    await side.run(*frames)
    assert strategy.confirmations["segment_end"] == 1
    assert side.user_messages() == ["Book it for Tuesday."]


async def test_a_final_short_of_the_end_of_speech_waits_for_the_rest():
    strategy = CompleteTranscriptUserTurnStopStrategy(analyzer_strategy())
    side = UserSide(strategy)
    # "I'd like" was finalized at a 50 ms pause; "Tuesday" followed and is not final yet.
    frames = [p99(NEVER), start(), audio(1.0), final("I'd like", 0.0, 1.0), audio(0.4)]
    frames += [audio(0.2), stop()]
    frames += [Until(lambda: not side.recorder.stops(), what="not confirmed on half the words")]
    frames += [final("Tuesday.", 1.0, 1.41), confirmed(side)]
    await side.run(*frames)
    assert side.user_messages() == ["I'd like Tuesday."]  # every word reached the context


async def test_an_empty_finalize_answer_frame_proves_coverage():
    strategy = CompleteTranscriptUserTurnStopStrategy(analyzer_strategy(), tolerance_s=0.0)
    side = UserSide(strategy)
    answer = STTFinalizeAnswerFrame(result=dg("", 1.45, 0.25, from_finalize=True))
    frames = [p99(NEVER), start(), audio(1.5), final("Yes please.", 0.0, 1.45), audio(0.2)]
    frames += [stop(), answer, confirmed(side)]
    await side.run(*frames)
    assert strategy.confirmations["segment_end"] == 1


async def test_an_incomplete_verdict_is_left_to_the_wrapped_strategy():
    strategy = CompleteTranscriptUserTurnStopStrategy(analyzer_strategy(verdicts=[False, True]))
    side = UserSide(strategy)
    frames = [p99(NEVER), start(), audio(1.0), final("So I was", 0.0, 1.01), audio(0.2), stop()]
    frames += [Until(lambda: strategy.inner._turn_analyzer.asked == 1, what="asked")]
    frames += [start(), audio(0.6), final("thinking.", 1.01, 1.81), audio(0.2), stop()]
    frames += [confirmed(side)]
    await side.run(*frames)
    assert len(side.recorder.stops()) == 1  # once, on the complete verdict
    assert side.user_messages() == ["So I was thinking."]


async def test_an_stt_that_never_sends_speech_final_falls_back_to_the_stock_wait():
    """Bad input: no endpointing (no speech_final) and finals that stop short: no proof, no
    error; the wrapped strategy's p99 wait confirms the turn."""
    lines = []
    sink = logger.add(lambda m: lines.append(str(m)), level="WARNING")
    try:
        strategy = CompleteTranscriptUserTurnStopStrategy(analyzer_strategy())
        side = UserSide(strategy)
        frames = [p99(0.3), start(), audio(1.5)]
        frames += [final("Cancel it.", 0.0, 1.3, speech_final=False), audio(0.2), stop()]
        frames += [confirmed(side)]
        await side.run(*frames)
    finally:
        logger.remove(sink)
    assert strategy.confirmations == {"finalized": 0, "segment_end": 0}
    assert side.user_messages() == ["Cancel it."]
    assert not [line for line in lines if "CompleteTranscript" in line]


async def test_a_provider_without_an_audio_range_falls_back_too():
    strategy = CompleteTranscriptUserTurnStopStrategy(analyzer_strategy())
    side = UserSide(strategy)
    frames = [p99(0.3), start(), audio(1.5), final("Cancel it."), audio(0.2), stop()]
    await side.run(*frames, confirmed(side))
    assert strategy.confirmations == {"finalized": 0, "segment_end": 0}


async def test_a_late_final_after_an_early_confirmation_is_appended_logged_and_counted():
    """Bad input: a final that arrives after the turn was confirmed early reaches the context
    (as Pipecat handles a transcript after a turn ended: it starts the next turn), never lost,
    and is logged and counted."""
    lines = []
    sink = logger.add(lambda m: lines.append(str(m)), level="WARNING")
    try:
        strategy = CompleteTranscriptUserTurnStopStrategy(analyzer_strategy(), tolerance_s=0.2)
        side = UserSide(strategy)
        # The tolerance is too generous for this caller: "now" (short) was never interim'd.
        frames = [p99(0.3), start(), audio(1.0), final("Book it", 0.0, 1.0), audio(0.15)]
        frames += [audio(0.2), stop(), confirmed(side)]
        frames += [final("now.", 1.0, 1.16), confirmed(side, 2)]
        await side.run(*frames)
    finally:
        logger.remove(sink)
    assert strategy.late_finals == 1
    assert " ".join(side.user_messages()).split() == ["Book", "it", "now."]
    assert any("after an early confirmation" in line and "now." in line for line in lines)
    assert any(n.add.get("eot_late_finals") == 1 for n in notes(side))


async def test_an_stt_clock_ahead_of_the_strategys_disables_timing_proofs_once():
    lines = []
    sink = logger.add(lambda m: lines.append(str(m)), level="WARNING")
    try:
        strategy = CompleteTranscriptUserTurnStopStrategy(analyzer_strategy())
        side = UserSide(strategy)
        frames = [p99(0.3), start(), audio(1.0), final("Hello.", 0.0, 4.0), audio(0.2), stop()]
        await side.run(*frames, confirmed(side))
    finally:
        logger.remove(sink)
    assert strategy.confirmations["segment_end"] == 0  # confirmed by the stock wait
    assert len([line for line in lines if "cannot be trusted" in line]) == 1


async def test_composes_inside_draft_and_hold():
    from pipecat_fast.prefill import DraftAndHoldUserTurnStopStrategy

    eot = CompleteTranscriptUserTurnStopStrategy(analyzer_strategy())
    draft = DraftAndHoldUserTurnStopStrategy(eot)
    side = UserSide(draft)
    frames = [p99(NEVER), start(), audio(1.5), final("Yes, book it.", 0.0, 1.51), audio(0.2)]
    await side.run(*frames, stop(), confirmed(side))
    assert eot.confirmations["segment_end"] == 1
    assert draft.outcomes == ["reused"]  # the draft started at the VAD stop answers the turn
    stops = [f for f in side.recorder.seen if isinstance(f, UserStoppedSpeakingFrame)]
    assert len(stops) == 1
