"""End-of-turn confirmation on a complete transcript: plain events in, decisions out.

No frames, tasks or clocks: times are numbers passed in (seconds of audio, on the strategy's own
audio clock: the audio frames it has seen), and every event returns the decisions to carry out.
:class:`~pipecat_fast.endofturn.CompleteTranscriptUserTurnStopStrategy` only turns Pipecat's
frames into these events.

**The rule.** Pipecat's ``TurnAnalyzerUserTurnStopStrategy`` confirms a turn when the turn
analyzer (Smart Turn) says it is complete *and* either a transcript marked ``finalized`` arrives
or the STT's p99 time-to-final has passed since the end of speech. For Deepgram the finalized
mark only comes when the answer to Pipecat's ``Finalize`` carries words; when Deepgram's own
endpointing final came first, the answer is empty and every such turn waits out the p99 fallback.
:class:`EarlyConfirm` confirms as soon as the analyzer said *complete* and the STT's results
prove that the final transcript covers the speech up to the VAD's end of speech:

- ``finalized``: a result Pipecat marked finalized (its own fast path; the wrapped strategy
  confirms on it too);
- ``segment_end``: the last final's audio range reaches the end of speech — Deepgram's ``start``
  + ``duration``, the audio it has finalized — within ``tolerance_s`` when the STT's endpointer
  cut it at a pause (``speech_final``), exactly otherwise; the answer to a ``Finalize`` (even an
  empty one) counts as a final covering the audio up to the moment it was asked;
- and in every case no interim with words after that final (an interim means the STT still has
  unfinalized words), and a final transcript with words in hand.

``speech_final`` alone is not proof: Deepgram's default endpointing (10 ms of silence) fires at
pauses far shorter than the VAD's stop window, so a word spoken after such a pause may not have
been transcribed yet when the VAD stops. Its range end tells how far the final reached.

**Unknown coverage falls back.** A provider that reports no audio range, or an audio clock that
cannot be trusted (a result claims audio beyond what the strategy has seen — the STT received
audio the strategy did not), gives no proof: the wrapped strategy's own wait decides.

**The verdict, early.** The analyzer may also be run at a pause inside the VAD's stop window
(:meth:`EarlyConfirm.early_verdict`, the same model on the audio so far). A *complete* verdict
then stands in for the one the VAD's stop would ask for, provided the caller stays silent until
that stop (speech again voids it): the turn is confirmed at the stop itself, the model's
inference off the critical path. An incomplete early verdict changes nothing (the stop asks the
analyzer as usual).

**A late final** — a final transcript with words after an early confirmation, before the caller
speaks again — means the proof was wrong or the STT corrected itself. It is reported
(:class:`LateFinal`) so it is logged and counted; its words reach the context the way Pipecat
handles any transcript that arrives after a turn ended (they start the next user turn), never
lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# -- what an STT result says ----------------------------------------------------------------


@dataclass(frozen=True)
class STTResult:
    """What one STT result says about coverage, as plain values.

    Attributes:
        text: Its transcript ("" for an empty answer).
        is_final: A final result (the last word on its audio range).
        end_s: End of the audio range it covers, in seconds of the STT's stream (Deepgram:
            ``start + duration``), or ``None`` when the provider says nothing about it.
        speech_final: The STT's endpointer cut it at a pause (Deepgram's ``speech_final``).
        finalize_answer: The answer to a finalize request (Deepgram's ``from_finalize``).
        finalized: Pipecat marked the transcript finalized (``TranscriptionFrame.finalized``).
    """

    text: str
    is_final: bool
    end_s: float | None = None
    speech_final: bool = False
    finalize_answer: bool = False
    finalized: bool = False


# -- decisions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Confirm:
    """Confirm the end of the turn now; ``proof`` says how coverage was shown."""

    proof: str


@dataclass(frozen=True)
class LateFinal:
    """A final transcript arrived after an early confirmation (``after_s`` of audio later)."""

    text: str
    after_s: float


@dataclass(frozen=True)
class ClockUnreliable:
    """A result claimed audio the strategy has not seen: timing proofs are off from now on."""

    reason: str


Decision = Confirm | LateFinal | ClockUnreliable

PROOFS = ("finalized", "segment_end")


# -- the state machine ----------------------------------------------------------------------


@dataclass
class _Turn:
    speech_end_s: float | None = None  # the VAD's end of speech (clock s), once it stopped
    complete: bool | None = None  # the analyzer's last verdict since the VAD stopped
    final_text: str = ""  # the finals' words since the turn started
    final_end_s: float | None = None  # audio range end of the last final (STT clock s)
    final_speech_final: bool = False
    final_is_answer: bool = False
    final_finalized: bool = False
    interim_after_final: bool = False  # an interim with words came after the last final
    confirmed_at: float | None = None  # clock s of our early confirmation
    late: list[str] = field(default_factory=list)
    pre_complete: bool | None = None  # the analyzer's verdict at a pause, before the VAD stop


class EarlyConfirm:
    """One session's early-confirmation decisions.

    Args:
        tolerance_s: How far short of the VAD's end of speech a final cut at a pause
            (``speech_final``) may end and still cover it: the VAD reports the end of speech a
            frame or two after the last word, the endpointer cuts right after it.
        clock_lead_s: How far beyond the strategy's audio clock a result's range may end before
            the clock is declared unreliable (rounding of the STT's timestamps).

    Attributes:
        confirmations: Per proof, how many turns this confirmed early.
        late_finals: Late finals reported (see :class:`LateFinal`).
        clock_reliable: Whether timing proofs are still used.

    Raises:
        ValueError: A negative ``tolerance_s`` or ``clock_lead_s``.
    """

    def __init__(self, *, tolerance_s: float = 0.12, clock_lead_s: float = 0.03):
        for name, value in (("tolerance_s", tolerance_s), ("clock_lead_s", clock_lead_s)):
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        self.tolerance_s = float(tolerance_s)
        self.clock_lead_s = float(clock_lead_s)
        self.clock_s = 0.0
        self.clock_reliable = True
        self.confirmations: dict[str, int] = {p: 0 for p in PROOFS}
        self.early_verdicts = 0  # confirmations on a verdict taken at a pause
        self.late_finals = 0
        self._turn = _Turn()
        self._after_early: _Turn | None = None  # the turn we confirmed early, until speech resumes

    # -- what the state is ---------------------------------------------------------------

    @property
    def speech_end_s(self) -> float | None:
        """The VAD's end of speech of this turn (clock s), once it stopped."""
        return self._turn.speech_end_s

    @property
    def final_text(self) -> str:
        """The final transcript's words of this turn so far."""
        return self._turn.final_text

    def proof(self) -> str | None:
        """How the final transcript provably covers the speech now, or ``None``."""
        turn = self._turn
        if turn.speech_end_s is None or not turn.final_text.strip():
            return None
        if turn.interim_after_final:
            return None
        if turn.final_finalized:
            return "finalized"
        if not self.clock_reliable or turn.final_end_s is None:
            return None
        slack = self.tolerance_s if (turn.final_speech_final or turn.final_is_answer) else 0.0
        if turn.final_end_s + slack >= turn.speech_end_s:
            return "segment_end"
        return None

    # -- events --------------------------------------------------------------------------

    def audio(self, seconds: float) -> None:
        """The strategy saw ``seconds`` more caller audio (or muted time, counted the same)."""
        if seconds > 0:
            self.clock_s += seconds

    def turn_started(self) -> None:
        """A new user turn: nothing of the last one's transcript counts."""
        self._turn = _Turn()

    def speech_started(self) -> None:
        """The VAD heard speech: an end of speech and a verdict seen before are void."""
        self._turn.speech_end_s = None
        self._turn.complete = None
        self._turn.pre_complete = None
        self._after_early = None

    def pause_ended(self) -> None:
        """Speech again after a pause the VAD never called a stop: its early verdict is void."""
        self._turn.pre_complete = None

    def speech_stopped(self, stop_secs: float) -> list[Decision]:
        """The VAD stopped, ``stop_secs`` of silence after the speech ended.

        A complete verdict taken at the pause that led here counts as the stop's verdict.
        """
        turn = self._turn
        turn.speech_end_s = max(0.0, self.clock_s - max(0.0, stop_secs))
        turn.complete = None
        if turn.pre_complete:
            turn.pre_complete = None
            turn.complete = True
            decisions = self._maybe_confirm()
            if decisions:
                self.early_verdicts += 1
            return decisions
        turn.pre_complete = None
        return []

    def early_verdict(self, complete: bool) -> list[Decision]:
        """The analyzer's verdict on the audio up to a pause inside the VAD's stop window.

        Before the VAD's stop it is kept for it (:meth:`speech_stopped`); after the stop it
        counts only if the analyzer's verdict for the stop has not come yet.
        """
        turn = self._turn
        if turn.speech_end_s is None:
            turn.pre_complete = bool(complete)
            return []
        if turn.complete is None and complete:
            decisions = self.verdict(True)
            if decisions:
                self.early_verdicts += 1
            return decisions
        return []

    def verdict(self, complete: bool) -> list[Decision]:
        """The turn analyzer's verdict on the speech so far."""
        if self._turn.speech_end_s is None:
            return []  # a verdict before the VAD stopped (a streaming analyzer): wait for it
        self._turn.complete = bool(complete)
        return self._maybe_confirm()

    def result(self, result: STTResult) -> list[Decision]:
        """An STT result of this turn (interim, final, or a finalize answer)."""
        decisions: list[Decision] = []
        if (
            self.clock_reliable
            and result.end_s is not None
            and result.end_s > self.clock_s + self.clock_lead_s
        ):
            self.clock_reliable = False
            decisions.append(
                ClockUnreliable(
                    f"an STT result ends at {result.end_s:.3f} s of audio, beyond the "
                    f"{self.clock_s:.3f} s this strategy has seen"
                )
            )
        words = bool(result.text.strip())
        late = self._after_early
        if late is not None and result.is_final and words:
            self.late_finals += 1
            late.late.append(result.text)
            assert late.confirmed_at is not None
            decisions.append(LateFinal(result.text, max(0.0, self.clock_s - late.confirmed_at)))
            return decisions
        turn = self._turn
        if not result.is_final:
            if words:
                turn.interim_after_final = True
            return decisions
        if words:
            turn.final_text = f"{turn.final_text} {result.text.strip()}".strip()
        if words or result.finalize_answer:
            turn.final_end_s = result.end_s
            turn.final_speech_final = result.speech_final
            turn.final_is_answer = result.finalize_answer
            turn.final_finalized = result.finalized and words
            turn.interim_after_final = False
        return decisions + self._maybe_confirm()

    def turn_stopped(self, *, by_us: bool) -> None:
        """The turn ended (``by_us``: this core's :class:`Confirm` ended it)."""
        turn = self._turn
        if by_us:
            turn.confirmed_at = self.clock_s
            self._after_early = turn
        else:
            self._after_early = None
        self._turn = _Turn()

    # -- the move ------------------------------------------------------------------------

    def _maybe_confirm(self) -> list[Decision]:
        if self._turn.complete is not True:
            return []
        proof = self.proof()
        if proof is None:
            return []
        self.confirmations[proof] += 1
        self._turn.complete = None  # one confirmation per verdict
        return [Confirm(proof)]


# -- the caller's pauses, from the VAD's per-frame confidence ---------------------------------


class PauseTracker:
    """How long the caller has been silent, from the VAD's own per-frame voice confidence.

    Fed every VAD analysis frame's confidence (the number the VAD compares with its own
    ``confidence`` threshold); a frame under the threshold is silence, one at or above it is
    speech. The VAD stops only after ``stop_secs`` of such silence; this reports the silence
    while it builds up, so a lever can act inside the stop window.

    Args:
        threshold: The VAD's confidence threshold (``VADParams.confidence``).

    Attributes:
        silence_s: Silence since the last speech frame (0 while speaking).
        heard_speech: Whether any speech frame was seen since :meth:`reset`.
    """

    def __init__(self, threshold: float):
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
        self.threshold = threshold
        self.silence_s = 0.0
        self.heard_speech = False

    def feed(self, confidence: float, frame_s: float) -> None:
        """One VAD frame of ``frame_s`` seconds with voice confidence ``confidence``."""
        if confidence >= self.threshold:
            self.silence_s = 0.0
            self.heard_speech = True
        else:
            self.silence_s += max(0.0, frame_s)

    def reset(self) -> None:
        """Forget everything (a new stream)."""
        self.silence_s = 0.0
        self.heard_speech = False


# -- when to ask the turn model early ---------------------------------------------------------


@dataclass(frozen=True)
class AskVerdict:
    """Run the turn model now on the audio so far, for pause number ``pause``."""

    pause: int


class EarlyVerdictSchedule:
    """When the early turn verdict is asked, and whether its answer still counts.

    The model is asked once per pause, as soon as the caller has been silent ``ask_at_s`` (the
    silence the VAD's per-frame confidence shows, inside its stop window), with **at most one
    inference in flight**: on a busy CPU a second one would only slow the first. A pause that
    reaches ``ask_at_s`` while an inference for an earlier, voided pause still runs is asked as
    soon as that one returns (if the caller is still silent). Speech again (any speech frame,
    with or without a VAD frame) voids the pause: an answer for it no longer counts.

    At the VAD's stop, an inference still running for the pause that led to it is **waited
    for rather than repeated** (:meth:`waits_at_stop`): it started earlier on the same speech
    and the caller has stayed silent since, so the wrapped analyzer asking the model again would
    only finish later and compete with it for the CPU. A complete answer confirms the turn; an
    incomplete one hands the stop to the wrapped analyzer, which asks the model again with the
    whole stop window of silence, as Pipecat does.

    Args:
        ask_at_s: The silence (s) at which the model is asked.

    Attributes:
        pause: The current pause's number (changes whenever the caller speaks again or the
            turn ends).
        asked: Inferences asked so far (the CPU this spends).
    """

    def __init__(self, ask_at_s: float):
        bad = isinstance(ask_at_s, bool) or not isinstance(ask_at_s, int | float)
        if bad or ask_at_s <= 0:
            raise ValueError(f"ask_at_s must be a number > 0, got {ask_at_s!r}")
        self.ask_at_s = float(ask_at_s)
        self.pause = 0
        self.asked = 0
        self._paused = False  # the silence reached ask_at_s in this pause
        self._asked_pause: int | None = None  # the pause the model was last asked for
        self._running: int | None = None  # the pause of the inference in flight

    @property
    def running(self) -> bool:
        """Whether an inference is in flight."""
        return self._running is not None

    def silence(self, silence_s: float) -> tuple[list[AskVerdict], bool]:
        """The caller has been silent ``silence_s`` (0 while speaking), while in a turn.

        Returns the asks to start now and whether a pause that had reached ``ask_at_s`` just
        ended (its verdict is void).
        """
        if silence_s <= 0.0:
            ended = self._paused
            if ended:
                self._paused = False
                self.pause += 1
            return [], ended
        if silence_s + 1e-9 < self.ask_at_s:
            return [], False
        self._paused = True
        if self._asked_pause == self.pause or self._running is not None:
            return [], False
        self._asked_pause = self._running = self.pause
        self.asked += 1
        return [AskVerdict(self.pause)], False

    def answered(self, pause: int) -> bool:
        """The inference for ``pause`` returned; whether its answer still counts."""
        if self._running == pause:
            self._running = None
        return pause == self.pause and self._paused

    def waits_at_stop(self) -> bool:
        """At the VAD's stop: wait for the inference in flight instead of asking again."""
        return self._running is not None and self._running == self.pause and self._paused

    def vad_stopped(self) -> None:
        """The VAD stopped: the wrapped analyzer answers for this pause from now on."""
        self._asked_pause = self.pause

    def speech_started(self) -> None:
        """The VAD heard speech (a new segment): what was asked before is void."""
        self._void()

    def turn_stopped(self) -> None:
        """The turn ended: an inference still running belongs to the ended turn."""
        self._void()

    def _void(self) -> None:
        self._paused = False
        self.pause += 1
