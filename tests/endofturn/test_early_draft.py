"""Drafting at a pause inside the VAD's stop window, from the VAD's own per-frame confidence.

Pipecat's real user aggregator runs its real VAD controller on a scripted analyzer behind a
``PauseTap``: the VAD's start and stop frames are Pipecat's own; the draft must start after
``early_silence_s`` of low confidence, before the VAD's stop, and be withdrawn by the next
speech frame — which, inside the stop window, makes no VAD frame at all.
"""

import pytest
from pipecat.audio.vad.vad_analyzer import VADAnalyzer, VADParams
from pipecat.frames.frames import (
    EagerEndOfTurnCancelFrame,
    InputAudioRawFrame,
    LLMContextFrame,
    UserStoppedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)

from pipecat_fast.endofturn import PauseTap
from pipecat_fast.frames import TTFAAnnotationFrame
from pipecat_fast.prefill import DraftAndHoldUserTurnStopStrategy
from tests.endofturn.helpers import RATE, UserSide, analyzer_strategy, final, p99
from tests.pacing import Until

FRAME = 512  # samples per VAD analysis frame (32 ms at 16 kHz), as Silero's


class ScriptedVAD(VADAnalyzer):
    """Voice confidence per analysis frame from a script (speech 0.9, silence 0.1)."""

    def __init__(self, script):
        super().__init__()
        self.script = list(script)

    def num_frames_required(self):
        return FRAME

    def voice_confidence(self, buffer):
        return self.script.pop(0) if self.script else 0.1


def vad_frames(n):
    return [InputAudioRawFrame(b"\x01\x00" * FRAME, RATE, 1) for _ in range(n)]


def tap(script):
    return PauseTap(ScriptedVAD(script), params=VADParams(min_volume=0.0))


def index_of(seen, cls, **where):
    for i, f in enumerate(seen):
        if isinstance(f, cls) and all(getattr(f, k) == v for k, v in where.items()):
            return i
    return None


async def test_a_pause_drafts_before_the_vads_stop():
    speech, silence = 10, 8  # the VAD stops after 7 silent frames (0.2 s)
    vad = tap([0.9] * speech + [0.1] * silence)
    draft = DraftAndHoldUserTurnStopStrategy(analyzer_strategy(), pauses=vad, early_silence_s=0.1)
    side = UserSide(draft, vad_analyzer=vad)
    frames = [p99(0.35), *vad_frames(speech - 2), final("Book it for Tuesday."), *vad_frames(2)]
    frames += vad_frames(silence)
    frames += [Until(lambda: draft.outcomes, what="the turn ended")]
    await side.run(*frames)
    seen = side.recorder.seen
    drafted = index_of(seen, LLMContextFrame, speculation=True)
    stopped = index_of(seen, VADUserStoppedSpeakingFrame)
    assert drafted is not None and stopped is not None and drafted < stopped
    assert draft.outcomes == ["reused"]
    assert draft._draft_core.outcomes == ["reused"]


async def test_speech_after_the_pause_withdraws_the_early_draft_without_any_vad_frame():
    vad = tap([0.9] * 10 + [0.1] * 4 + [0.9] * 6 + [0.1] * 8)
    draft = DraftAndHoldUserTurnStopStrategy(analyzer_strategy(), pauses=vad, early_silence_s=0.1)
    side = UserSide(draft, vad_analyzer=vad)
    frames = [p99(0.35), *vad_frames(8), final("I want"), *vad_frames(2), *vad_frames(4)]
    frames += [Until(lambda: draft.held_draft == "I want", what="drafted at the pause")]
    frames += vad_frames(1)  # speech again, 0.128 s into the pause: the VAD only resumes
    frames += [Until(lambda: draft.held_draft is None, what="withdrawn")]
    frames += [*vad_frames(5), final("to book a cleaning."), *vad_frames(8)]
    frames += [Until(lambda: draft.outcomes, what="the turn ended")]
    await side.run(*frames)
    seen = side.recorder.seen
    withdrawn = index_of(seen, EagerEndOfTurnCancelFrame)
    stopped = index_of(seen, VADUserStoppedSpeakingFrame)
    assert withdrawn is not None and stopped is not None and withdrawn < stopped
    # The VAD never stopped at the short pause: one stop, at the real end.
    assert sum(isinstance(f, VADUserStoppedSpeakingFrame) for f in seen) == 1
    assert draft.outcomes == ["reused"]  # the second draft, of every word, answered
    assert side.user_messages() == ["I want to book a cleaning."]


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"early_silence_s": 0.1}, ValueError),
        ({"pauses": "vad", "early_silence_s": 0.1}, TypeError),
        ({"pauses": None, "early_silence_s": None}, None),
        ({"early_silence_s": 0.25, "pauses": "tap"}, ValueError),  # at/after the VAD's stop
        ({"early_silence_s": -1, "pauses": "tap"}, ValueError),
    ],
)
def test_pause_settings_are_checked(kwargs, error):
    if kwargs.get("pauses") == "tap":
        kwargs = {**kwargs, "pauses": tap([])}
    if error is None:
        DraftAndHoldUserTurnStopStrategy(analyzer_strategy(), **kwargs)
        return
    with pytest.raises(error):
        DraftAndHoldUserTurnStopStrategy(analyzer_strategy(), **kwargs)


def test_the_tap_passes_the_inner_analyzers_confidence_through_and_counts_silence():
    vad = tap([0.9, 0.1, 0.2])
    vad.set_sample_rate(RATE)
    assert [vad.voice_confidence(b"") for _ in range(3)] == [0.9, 0.1, 0.2]
    assert vad.silence_s == pytest.approx(2 * FRAME / RATE)
    assert vad.num_frames_required() == FRAME and vad.sample_rate == RATE
    with pytest.raises(TypeError):
        PauseTap("silero")


def test_the_tap_reads_silero_shaped_confidences_and_never_breaks_the_vad():
    """Silero returns a one-element array; something unreadable stops the tracking only."""
    import numpy as np

    vad = tap([np.array([[0.9]], dtype=np.float32), np.array([[0.1]], dtype=np.float32)])
    vad.set_sample_rate(RATE)
    assert float(vad.voice_confidence(b"")[0][0]) == pytest.approx(0.9)
    vad.voice_confidence(b"")
    assert vad.silence_s == pytest.approx(FRAME / RATE)
    broken = tap([object(), 0.2])
    broken.set_sample_rate(RATE)
    first = broken.voice_confidence(b"")  # passed through untouched
    assert not isinstance(first, float)
    assert broken.voice_confidence(b"") == 0.2 and broken.silence_s == 0.0


def test_the_tap_tracks_pauses_behind_pipecats_silero_vad():
    from pipecat.audio.vad.silero import SileroVADAnalyzer

    vad = PauseTap(SileroVADAnalyzer())
    vad.set_sample_rate(RATE)
    for _ in range(5):
        vad.voice_confidence(b"\x00\x00" * vad.num_frames_required())
    assert vad.silence_s == pytest.approx(5 * vad.num_frames_required() / RATE)
    assert vad.params.stop_secs == SileroVADAnalyzer().params.stop_secs


class ScriptedTurnModel:
    """An early analyzer: Smart Turn's predict hook, scripted (and what it was asked)."""

    def __init__(self, complete=True):
        self.complete = complete
        self.audio = []

    def _predict_endpoint(self, audio):
        self.audio.append(audio)
        return {"prediction": 1 if self.complete else 0, "probability": 0.97}


async def test_a_complete_verdict_at_the_pause_confirms_at_the_vad_stop_without_the_model():
    from pipecat_fast.endofturn import CompleteTranscriptUserTurnStopStrategy

    vad = tap([0.9] * 10 + [0.1] * 8)
    model = ScriptedTurnModel()
    inner = analyzer_strategy()
    confirm = CompleteTranscriptUserTurnStopStrategy(
        inner, pauses=vad, early_analyzer=model, early_silence_s=0.1
    )
    side = UserSide(confirm, vad_analyzer=vad)
    frames = [p99(30.0), *vad_frames(8), final("Book it for Tuesday.", 0.0, 0.26)]
    frames += [*vad_frames(2), *vad_frames(4)]
    frames += [Until(lambda: model.audio, what="the early verdict was taken")]
    frames += [*vad_frames(4), Until(lambda: side.recorder.stops(), what="confirmed")]
    await side.run(*frames)
    assert confirm.core.early_verdicts == 1
    assert inner._turn_analyzer.asked == 0  # the stop did not wait for the model again
    # The model saw the turn's audio from before the speech started to the pause.
    assert len(model.audio[0]) >= 10 * FRAME
    seen = side.recorder.seen
    assert index_of(seen, VADUserStoppedSpeakingFrame) < index_of(seen, UserStoppedSpeakingFrame)


async def test_an_incomplete_early_verdict_leaves_the_stop_to_the_wrapped_analyzer():
    from pipecat_fast.endofturn import CompleteTranscriptUserTurnStopStrategy

    vad = tap([0.9] * 10 + [0.1] * 8)
    model = ScriptedTurnModel(complete=False)
    inner = analyzer_strategy()
    confirm = CompleteTranscriptUserTurnStopStrategy(
        inner, pauses=vad, early_analyzer=model, early_silence_s=0.1
    )
    side = UserSide(confirm, vad_analyzer=vad)
    frames = [p99(30.0), *vad_frames(8), final("Book it for Tuesday.", 0.0, 0.26)]
    frames += [*vad_frames(6), Until(lambda: model.audio, what="asked early")]
    frames += [*vad_frames(4), Until(lambda: side.recorder.stops(), what="confirmed")]
    await side.run(*frames)
    assert inner._turn_analyzer.asked == 1 and confirm.core.early_verdicts == 0


def test_early_verdict_settings_are_checked():
    from pipecat_fast.endofturn import CompleteTranscriptUserTurnStopStrategy

    with pytest.raises(ValueError):
        CompleteTranscriptUserTurnStopStrategy(analyzer_strategy(), early_silence_s=0.1)
    with pytest.raises(TypeError):
        CompleteTranscriptUserTurnStopStrategy(
            analyzer_strategy(), pauses=tap([]), early_analyzer=object(), early_silence_s=0.1
        )
    with pytest.raises(ValueError):
        CompleteTranscriptUserTurnStopStrategy(
            analyzer_strategy(),
            pauses=tap([]),
            early_analyzer=ScriptedTurnModel(),
            early_silence_s=0.3,
        )


class HeldTurnModel(ScriptedTurnModel):
    """An early analyzer whose inference runs until the test lets it finish."""

    def __init__(self, complete=True):
        super().__init__(complete)
        import threading

        self.release = threading.Event()

    def _predict_endpoint(self, audio):
        self.audio.append(audio)
        assert self.release.wait(10.0), "never released"
        return {"prediction": 1 if self.complete else 0, "probability": 0.97}


def _let_go(model):
    def condition():
        model.release.set()
        return True

    return Until(condition, what="the inference finished")


@pytest.mark.parametrize("complete", [True, False])
async def test_the_vads_stop_waits_for_the_early_verdict_in_flight_instead_of_asking_again(
    complete,
):
    """One inference, not two: the verdict asked at the first silent frame is still running at
    the VAD's stop. The stop waits for it; complete, it confirms and the wrapped analyzer is
    never asked; incomplete, the wrapped analyzer is asked then (once), as Pipecat would."""
    from pipecat_fast.endofturn import CompleteTranscriptUserTurnStopStrategy

    vad = tap([0.9] * 10 + [0.1] * 8)  # the VAD stops on the 7th silent frame
    model = HeldTurnModel(complete=complete)
    inner = analyzer_strategy()
    confirm = CompleteTranscriptUserTurnStopStrategy(
        inner, pauses=vad, early_analyzer=model, early_silence_s=0.032
    )
    side = UserSide(confirm, vad_analyzer=vad)
    frames = [p99(30.0), *vad_frames(8), final("Book it for Tuesday.", 0.0, 0.26)]
    frames += [*vad_frames(3), Until(lambda: model.audio, what="asked at the first silent frame")]
    frames += [*vad_frames(5), Until(lambda: confirm.waiting_at_stop, what="the stop waits")]
    frames += [_let_go(model), *vad_frames(1)]
    frames += [Until(lambda: side.recorder.stops(), what="confirmed")]
    await side.run(*frames)
    assert len(model.audio) == 1 and confirm.early_asks == 1
    assert inner._turn_analyzer.asked == (0 if complete else 1)
    assert confirm.core.early_verdicts == (1 if complete else 0)
    seen = side.recorder.seen
    assert index_of(seen, VADUserStoppedSpeakingFrame) < index_of(seen, UserStoppedSpeakingFrame)


async def test_speech_while_the_early_verdict_runs_voids_it_and_the_next_pause_waits_its_turn():
    """At most one inference in flight: a verdict for a pause the caller talked through is
    discarded, and the next pause is asked only once it returned."""
    from pipecat_fast.endofturn import CompleteTranscriptUserTurnStopStrategy

    vad = tap([0.9] * 8 + [0.1] * 2 + [0.9] * 4 + [0.1] * 8)
    model = HeldTurnModel(complete=True)
    inner = analyzer_strategy([False])
    confirm = CompleteTranscriptUserTurnStopStrategy(
        inner, pauses=vad, early_analyzer=model, early_silence_s=0.032
    )
    side = UserSide(confirm, vad_analyzer=vad)
    frames = [p99(30.0), *vad_frames(8), final("I want", 0.0, 0.2)]
    frames += [*vad_frames(1), Until(lambda: model.audio, what="asked at the short pause")]
    frames += [*vad_frames(5), final("to book it.", 0.2, 0.45), *vad_frames(1)]  # silent again
    frames += [Until(lambda: confirm.early_asks == 1, what="no second inference yet")]
    frames += [_let_go(model), Until(lambda: confirm.early_asks == 2, what="asked again")]
    frames += [*vad_frames(7), Until(lambda: side.recorder.stops(), what="confirmed")]
    await side.run(*frames)
    assert len(model.audio) == 2
    assert inner._turn_analyzer.asked == 0  # the second, complete verdict confirmed at the stop
    assert confirm.core.early_verdicts == 1
    assert side.user_messages() == ["I want to book it."]


# -- silence as the second update (pause_stable_s) ------------------------------------------


def drafted_texts(seen):
    """The caller's words each speculative request was drafted for, in order."""
    texts = []
    for f in seen:
        if isinstance(f, LLMContextFrame) and f.speculation:
            users = [m for m in f.context.get_messages() if m.get("role") == "user"]
            texts.append(users[-1]["content"])
    return texts


def interim_stream(draft, final_text):
    """Speech with one interim, the first silent frame, then the final during the pause."""
    from tests.endofturn.helpers import interim

    seen_at_pause = []
    frames = [p99(0.35), *vad_frames(8), interim("book it for tuesday"), *vad_frames(2)]
    frames += vad_frames(2)  # the first silent frames (32, 64 ms), no interim in them
    frames += [Until(lambda: seen_at_pause.append(draft.held_draft) or True, what="snapshot")]
    frames += [final(final_text), *vad_frames(6)]
    frames += [Until(lambda: draft.outcomes, what="the turn ended")]
    return frames, seen_at_pause


def interim_draft(vad, **kwargs):
    return DraftAndHoldUserTurnStopStrategy(
        analyzer_strategy(), pauses=vad, early_silence_s=0.032, **kwargs
    )


async def test_the_latest_interim_is_drafted_at_the_first_silent_frame_before_the_final():
    vad = tap([0.9] * 10 + [0.1] * 8)
    draft = interim_draft(vad, pause_stable_s=0.032)
    side = UserSide(draft, vad_analyzer=vad)
    frames, at_pause = interim_stream(draft, "Book it for Tuesday.")
    await side.run(*frames)
    seen = side.recorder.seen
    assert at_pause == ["book it for tuesday"]  # drafted on the interim, before the final
    assert drafted_texts(seen) == ["book it for tuesday"]
    assert index_of(seen, EagerEndOfTurnCancelFrame) is None
    assert draft.outcomes == ["reused"]  # the final says the same words: released
    assert side.user_messages() == ["Book it for Tuesday."]  # the context gets the final
    [note] = [f for f in seen if isinstance(f, TTFAAnnotationFrame) and "drafts" in f.fields]
    assert note.fields["drafts_interim"] == 1 and note.fields["drafts_interim_differed"] == 0


async def test_a_final_that_differs_from_the_drafted_interim_withdraws_and_redrafts():
    vad = tap([0.9] * 10 + [0.1] * 8)
    draft = interim_draft(vad, pause_stable_s=0.032)
    side = UserSide(draft, vad_analyzer=vad)
    frames, at_pause = interim_stream(draft, "Book it for Thursday.")
    await side.run(*frames)
    seen = side.recorder.seen
    assert at_pause == ["book it for tuesday"]
    assert drafted_texts(seen) == ["book it for tuesday", "Book it for Thursday."]
    withdrawn = index_of(seen, EagerEndOfTurnCancelFrame)
    assert withdrawn is not None and withdrawn < index_of(seen, UserStoppedSpeakingFrame)
    assert draft.outcomes == ["reused"]  # the redraft, on the final's words, answered
    assert side.user_messages() == ["Book it for Thursday."]
    [note] = [f for f in seen if isinstance(f, TTFAAnnotationFrame) and "drafts" in f.fields]
    assert note.fields["drafts_interim"] == 1 and note.fields["drafts_interim_differed"] == 1


async def test_without_pause_stable_the_same_stream_waits_for_the_final():
    vad = tap([0.9] * 10 + [0.1] * 8)
    draft = interim_draft(vad)
    side = UserSide(draft, vad_analyzer=vad)
    frames, at_pause = interim_stream(draft, "Book it for Tuesday.")
    await side.run(*frames)
    assert at_pause == [None]  # one update of the last words: not in hand
    assert drafted_texts(side.recorder.seen) == ["Book it for Tuesday."]
    [note] = [
        f for f in side.recorder.seen if isinstance(f, TTFAAnnotationFrame) and "drafts" in f.fields
    ]
    assert "drafts_interim" not in note.fields


def test_pause_stable_settings_are_checked():
    vad = tap([])
    with pytest.raises(ValueError, match="pause_stable_s"):
        DraftAndHoldUserTurnStopStrategy(analyzer_strategy(), pause_stable_s=0.032)
    with pytest.raises(ValueError, match="pause_stable_s"):
        interim_draft(vad, pause_stable_s=0.2)  # the VAD's stop_secs: never inside a pause
    with pytest.raises(ValueError, match="pause_stable_s"):
        interim_draft(vad, pause_stable_s=0)
    with pytest.raises(ValueError, match="max_drafts_per_turn"):
        interim_draft(vad, pause_stable_s=0.032, max_drafts_per_turn=1)
