"""Draft-and-hold's state machine: plain events in, decisions out (no frames, tasks or clocks).

:class:`DraftHold` is fed what happens in one caller turn — the VAD's speech start and stop, the
STT's final transcripts, the stabiliser's stable words, and the verdicts of the wrapped stop
strategy that decides the end of turn — and answers each event with the decisions to carry out,
in order. :class:`~pipecat_fast.prefill.DraftAndHoldUserTurnStopStrategy` only turns events into
calls and decisions into Pipecat events.

The rules:

- **Draft** when the caller is silent (the VAD stopped) and their words are known: the final
  transcripts so far, else the stable words (``use_stable_words``). At most ``max_drafts`` per
  turn (the turn's speculation budget), one held at a time.
- **Draft earlier**, at a pause inside the VAD's stop window (:meth:`DraftHold.caller_paused`,
  reported from the VAD's own per-frame confidence), only when the words are *in hand*: the
  finals with no interim after them, or stable words that cover the latest interim. Otherwise
  the final's arrival during the pause starts the draft. The caller speaking again
  (:meth:`DraftHold.caller_resumed`, the next speech frame) withdraws it.
- **Silence as the second update** (``pause_stable_s``, off by default): once the caller has
  been silent that long (:meth:`DraftHold.caller_silence`, the VAD's silence so far) and no
  interim has arrived in that silence, the latest interim's words are in hand *for the early
  draft only* — the bet that the last interim at a pause is what the final will say. The final
  is compared with the drafted words as any final is: one that differs withdraws the draft and
  redrafts on the final — an interim draft never takes the turn's last draft, so that one is
  always left for the final's words (with a budget of one draft the interim is never drafted).
  Confirmation and the context are untouched: they only ever see the final transcript. Counted
  per turn: drafts on the interim, and those the final then contradicted (the bet lost: their
  prompt, decoded tokens and TTS characters).
- **Withdraw** a held draft when the caller speaks again, when a final transcript arrives that no
  longer says the drafted words, when the wrapped strategy wants inference for words that differ,
  when a new turn starts, or when the turn ends without the wrapped strategy confirming it (the
  stop watchdog, another strategy, the session ending).
- **Release** when the wrapped strategy confirms the turn and the final transcript says the
  drafted words (``match``, by default :func:`pipecat_fast.textnorm.same_words`: case,
  punctuation and spacing aside): the confirmation then tells the aggregator the held reply
  answers the turn (``confirms_speculation``), and no second inference runs. The context always
  gets the final transcript, never the drafted text.
- **Pass on** what the wrapped strategy does that is not about our draft: its own speculation,
  its withdrawal of it, an inference when no draft is held, its confirmation.
- **Yield** (``engine_busy``, asked only when a draft would otherwise start): while the engine's
  load says a draft would queue with other callers' real turns, no draft starts; the turn runs
  the normal request (:mod:`pipecat_fast.load`).
- **Account** each confirmed turn: ``none`` (no draft), ``reused``, or ``discarded``, with the
  drafts started and withdrawn, and the drafts held back for load.

A confirmation on a provably complete transcript comes from the wrapped strategy
(:class:`~pipecat_fast.endofturn.CompleteTranscriptUserTurnStopStrategy`) as any confirmation
does; holding the first audio ready (:mod:`pipecat_fast.preemptive`) follows the frames these
decisions become.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pipecat_fast.textnorm import same_words

# -- decisions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartDraft:
    """Start a speculative inference for ``text`` (its reply is held until confirmation)."""

    text: str


@dataclass(frozen=True)
class Withdraw:
    """Withdraw the held draft (its reply is dropped, never spoken)."""

    reason: str


@dataclass(frozen=True)
class PassInference:
    """Pass the wrapped strategy's inference request on (``speculation``: its own text)."""

    speculation: str | None = None


@dataclass(frozen=True)
class PassWithdrawal:
    """Pass the wrapped strategy's withdrawal of its own speculation on."""


@dataclass(frozen=True)
class Confirm:
    """Confirm the end of turn; ``confirms_speculation``: a held reply answers it."""

    enable_user_speaking_frames: bool
    confirms_speculation: bool


@dataclass(frozen=True)
class Settled:
    """The turn's outcome, for the accounting: ``none``, ``reused`` or ``discarded``."""

    outcome: str
    drafts: int
    drafts_discarded: int
    early_drafts: int = 0
    drafts_yielded: int = 0
    interim_drafts: int | None = None  # drafts on the interim at a pause (None: option off)
    interim_differed: int = 0  # of those, the ones the final transcript contradicted
    yielded_by: tuple[tuple[str, int], ...] = ()
    """Drafts held back for load, by the load rule (``("busy", 2), ...``; sorted)."""
    over_budget: int = 0
    """Drafts not started because the turn had started ``max_drafts`` already."""

    def fields(self) -> dict[str, object]:
        """The TTFA report's fields for this turn.

        ``drafts_yielded_<rule>`` per load rule that held a draft back, and
        ``drafts_over_budget`` when the turn's budget stopped one.
        """
        fields: dict[str, object] = {
            "speculation": self.outcome,
            "drafts": self.drafts,
            "drafts_discarded": self.drafts_discarded,
            "drafts_early": self.early_drafts,
            "drafts_yielded": self.drafts_yielded,
        }
        if self.interim_drafts is not None:
            fields["drafts_interim"] = self.interim_drafts
            fields["drafts_interim_differed"] = self.interim_differed
        for reason, count in self.yielded_by:
            fields[f"drafts_yielded_{reason}"] = count
        if self.over_budget:
            fields["drafts_over_budget"] = self.over_budget
        return fields


Decision = StartDraft | Withdraw | PassInference | PassWithdrawal | Confirm | Settled


# -- the state machine ----------------------------------------------------------------------


@dataclass
class _Turn:
    finals: list[str] = field(default_factory=list)
    stable: str = ""
    interim: str = ""  # the latest interim with words after the last final
    held: str | None = None
    drafts: int = 0
    discarded: int = 0
    early_drafts: int = 0  # drafts started at a pause inside the VAD's stop window
    yielded_by: dict[str, int] = field(default_factory=dict)  # drafts held back, by load rule
    over_budget: int = 0
    silent: bool = False
    paused: bool = False  # silent at a pause the VAD has not (yet) called a stop
    silence_s: float = 0.0  # the caller's silence so far (0 while speaking)
    interim_silence_s: float = 0.0  # the silence when the latest interim arrived
    held_on_interim: bool = False  # the held draft was drafted from the latest interim
    interim_drafts: int = 0
    interim_differed: int = 0


class DraftHold:
    """One session's draft-and-hold decisions.

    Args:
        match: Whether the final transcript (second argument) still says the drafted words
            (first); default :func:`pipecat_fast.textnorm.same_words`.
        max_drafts: Drafts one turn may start.
        use_stable_words: Draft from the stable words when no final transcript has come yet.
        engine_busy: Asked when a draft would start: the engine-load rule that holds it back
            (``"queue"``, ``"busy"``...; counted by rule in :class:`Settled`), or ``None`` to
            let it go. ``None`` (the default):
            drafts never yield.
        pause_stable_s: Silence (s) after which the latest interim's words count as in hand
            for an early draft, when no interim arrived in that silence (silence as the second
            update; never the turn's last draft); ``None`` (the default): only finals and
            stable words are in hand.

    Attributes:
        outcomes: Per confirmed turn: ``"none"``, ``"reused"`` or ``"discarded"``.

    Raises:
        ValueError: If ``max_drafts`` < 1 or ``pause_stable_s`` is not a number > 0.
    """

    def __init__(
        self,
        *,
        match: Callable[[str, str], bool] = same_words,
        max_drafts: int = 2,
        use_stable_words: bool = True,
        engine_busy: Callable[[], str | None] | None = None,
        pause_stable_s: float | None = None,
    ):
        if not isinstance(max_drafts, int) or isinstance(max_drafts, bool) or max_drafts < 1:
            raise ValueError(f"max_drafts_per_turn must be an integer >= 1, got {max_drafts!r}")
        if pause_stable_s is not None:
            bad = isinstance(pause_stable_s, bool) or not isinstance(pause_stable_s, int | float)
            if bad or pause_stable_s <= 0:
                raise ValueError(f"pause_stable_s must be a number > 0, got {pause_stable_s!r}")
        self.pause_stable_s = None if pause_stable_s is None else float(pause_stable_s)
        self._match = match
        self.max_drafts = max_drafts
        self.use_stable_words = use_stable_words
        self._engine_busy = engine_busy
        self._turn = _Turn()
        self.outcomes: list[str] = []

    # -- what the state is ---------------------------------------------------------------

    @property
    def held(self) -> str | None:
        """The words of the draft held now, or ``None``."""
        return self._turn.held

    @property
    def caller_text(self) -> str:
        """The caller's words so far: the finals, else (``use_stable_words``) the stable words."""
        finals = " ".join(t.strip() for t in self._turn.finals if t.strip())
        if finals or not self.use_stable_words:
            return finals
        return self._turn.stable.strip()

    def words_in_hand(self) -> str | None:
        """The caller's words if none can still be on their way, else ``None``.

        In hand: the finals, when no interim came after them (else, with no final yet, the
        stable words); or (``use_stable_words``) the stable words, when they say everything the
        finals and the latest interim say; or (``pause_stable_s``) the finals and the latest
        interim, once the caller has been silent that long with no interim in the silence.
        """
        return self._in_hand()[0]

    def interim_in_hand(self) -> bool:
        """Whether the silence has made the latest interim the second update (``pause_stable_s``).

        The caller has been silent ``pause_stable_s`` or more since the later of the silence's
        start and the latest interim's arrival.
        """
        turn = self._turn
        if self.pause_stable_s is None or not turn.interim or turn.silence_s <= 0.0:
            return False
        return turn.silence_s - turn.interim_silence_s + 1e-9 >= self.pause_stable_s

    def _in_hand(self) -> tuple[str | None, bool]:
        """The words in hand, and whether they rest on the latest interim."""
        turn = self._turn
        finals = " ".join(t.strip() for t in turn.finals if t.strip())
        if not turn.interim:
            if finals or not self.use_stable_words:
                return finals or None, False
            return turn.stable.strip() or None, False
        if self.use_stable_words and turn.stable.strip():
            if self._match(f"{finals} {turn.interim}".strip(), turn.stable):
                return turn.stable.strip(), False
        if self.interim_in_hand():
            return f"{finals} {turn.interim.strip()}".strip(), True
        return None, False

    def _final_text(self) -> str:
        return " ".join(self._turn.finals)

    def _still_says(self, drafted: str) -> bool:
        return bool(self._match(drafted, self._final_text()))

    # -- events: the caller --------------------------------------------------------------

    def turn_started(self) -> list[Decision]:
        """A new user turn: a draft still held belongs to the last one."""
        decisions = self._withdraw("a new turn started")
        self._turn = _Turn()
        return decisions

    def caller_speaking(self) -> list[Decision]:
        """The VAD reports speech (again): a held draft no longer answers the turn."""
        self._turn.silent = False
        self._turn.paused = False
        return self._withdraw("the caller is speaking again")

    def caller_silent(self) -> list[Decision]:
        """The VAD's stop window ended (the caller stopped): draft now if the words are known."""
        self._turn.silent = True
        self._turn.paused = False
        return self._maybe_draft()

    def caller_paused(self) -> list[Decision]:
        """The caller paused inside the VAD's stop window: draft now if the words are in hand.

        Words not yet in hand are drafted when their final arrives during the pause. A pause
        that turns out to be mid-sentence is answered by :meth:`caller_resumed` (the draft is
        withdrawn).
        """
        turn = self._turn
        if turn.silent:
            return []
        turn.silent = True
        turn.paused = True
        return self._maybe_draft(early=True)

    def caller_resumed(self) -> list[Decision]:
        """Speech again after a pause the VAD never called a stop: withdraw a draft of it."""
        if not self._turn.paused:
            return []
        return self.caller_speaking()

    def caller_silence(self, silence_s: float) -> list[Decision]:
        """The caller has been silent ``silence_s`` (0 while speaking), from the VAD's frames.

        Used only with ``pause_stable_s``: when the silence makes the latest interim the second
        update during a pause, the draft starts on it.
        """
        turn = self._turn
        silence_s = max(0.0, float(silence_s))
        was = self.interim_in_hand()
        if silence_s <= 0.0 or silence_s < turn.silence_s:
            turn.interim_silence_s = 0.0  # speech again: what came before precedes the silence
        turn.silence_s = silence_s
        if turn.paused and turn.held is None and not was and self.interim_in_hand():
            return self._maybe_draft(early=True)
        return []

    def stable_words(self, text: str) -> list[Decision]:
        """The stabiliser's stable words of this turn so far."""
        self._turn.stable = text
        return self._maybe_draft(early=True) if self._turn.paused else []

    def interim_transcript(self, text: str) -> list[Decision]:
        """An interim transcript: words the STT has not finalized yet."""
        if text.strip():
            self._turn.interim = text
            self._turn.interim_silence_s = self._turn.silence_s  # the silence starts over
        return []

    def final_transcript(self, text: str) -> list[Decision]:
        """A final transcript segment of this turn (segments add up)."""
        self._turn.finals.append(text)
        self._turn.interim = ""
        decisions: list[Decision] = []
        held = self._turn.held
        if held is not None and not self._still_says(held):
            decisions += self._withdraw("the final transcript moved on", differed=True)
        if self._turn.silent:
            # A final that lands after the VAD stop (a slow STT), or during a pause, can
            # still be drafted.
            decisions += self._maybe_draft(early=self._turn.paused)
        return decisions

    def withdrawal_requested(self, reason: str) -> list[Decision]:
        """A lever asked for the held draft to be withdrawn (its TTS failed, say)."""
        return self._withdraw(reason)

    def withdrawn_elsewhere(self) -> list[Decision]:
        """Someone else withdrew the speculation.

        The LLM service does when a draft wants a tool call: the confirmed turn must then run
        the normal request.
        """
        if self._turn.held is not None:
            self._turn.held = None
            self._turn.held_on_interim = False
            self._turn.discarded += 1
        return []

    # -- events: the wrapped strategy ----------------------------------------------------

    def inner_inference(self, speculation: str | None = None) -> list[Decision]:
        """The wrapped strategy wants inference (``speculation``: speculative, for that text)."""
        held = self._turn.held
        if speculation is not None or held is None:
            return [PassInference(speculation)]
        if self._still_says(held):
            return []  # the held draft answers this turn; confirmation releases it
        return [*self._withdraw("the final transcript differs", differed=True), PassInference(None)]

    def inner_withdrawal(self) -> list[Decision]:
        """The wrapped strategy withdrew a speculation of its own."""
        return [PassWithdrawal()]

    def inner_confirmed(
        self, *, enable_user_speaking_frames: bool = True, confirms_speculation: bool = False
    ) -> list[Decision]:
        """The wrapped strategy confirmed the end of the turn."""
        held = self._turn.held
        reused = held is not None and self._still_says(held)
        if held is not None and not reused and self._turn.held_on_interim:
            self._turn.interim_differed += 1  # confirmed on a final that says other words
        decisions: list[Decision] = [self._settle(reused)]
        self._turn.held = None
        self._turn.held_on_interim = False
        decisions.append(Confirm(enable_user_speaking_frames, confirms_speculation or reused))
        return decisions

    def turn_stopped(self) -> list[Decision]:
        """The turn ended, by whatever ended it; a draft still held was never confirmed."""
        decisions: list[Decision] = []
        if self._turn.held is not None:
            decisions += self._withdraw("the turn ended without the wrapped strategy confirming")
            decisions.append(self._settle(False))
        self._turn = _Turn()
        return decisions

    # -- the moves -----------------------------------------------------------------------

    def _maybe_draft(self, *, early: bool = False) -> list[Decision]:
        turn = self._turn
        if turn.held is not None:
            return []
        text, on_interim = self._in_hand() if early else (self.caller_text, False)
        if not text:
            return []
        if turn.drafts >= self.max_drafts:
            turn.over_budget += 1
            return []
        if on_interim and turn.drafts + 1 >= self.max_drafts:
            return []  # the bet never takes the last draft: the final's words may need it
        why = self._engine_busy() if self._engine_busy is not None else None
        if why:
            turn.yielded_by[str(why)] = turn.yielded_by.get(str(why), 0) + 1
            return []
        turn.held = text
        turn.held_on_interim = on_interim
        turn.drafts += 1
        if early:
            turn.early_drafts += 1
        if on_interim:
            turn.interim_drafts += 1
        return [StartDraft(text)]

    def _withdraw(self, why: str, *, differed: bool = False) -> list[Decision]:
        """Withdraw the held draft; ``differed``: because the final says other words."""
        turn = self._turn
        if turn.held is None:
            return []
        if differed and turn.held_on_interim:
            turn.interim_differed += 1
        turn.held = None
        turn.held_on_interim = False
        turn.discarded += 1
        return [Withdraw(why)]

    def _settle(self, reused: bool) -> Settled:
        turn = self._turn
        outcome = "reused" if reused else ("discarded" if turn.drafts else "none")
        self.outcomes.append(outcome)
        return Settled(
            outcome,
            turn.drafts,
            turn.discarded,
            turn.early_drafts,
            sum(turn.yielded_by.values()),
            None if self.pause_stable_s is None else turn.interim_drafts,
            turn.interim_differed,
            tuple(sorted(turn.yielded_by.items())),
            turn.over_budget,
        )
