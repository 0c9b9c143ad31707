"""Draft-and-hold's state machine: plain events in, decisions out (no frames, tasks or clocks).

:class:`DraftHold` is fed what happens in one caller turn — the VAD's speech start and stop, the
STT's final transcripts, the stabiliser's stable words, and the verdicts of the wrapped stop
strategy that decides the end of turn — and answers each event with the decisions to carry out,
in order. :class:`~pipecat_fast.prefill.DraftAndHoldUserTurnStopStrategy` only turns events into
calls and decisions into Pipecat events.

The rules:

- **Draft** when the caller is silent (the VAD stopped, or a pause inside its stop window was
  reported) and their words are known: the final transcripts so far, else the stable words
  (``use_stable_words``). At most ``max_drafts`` per turn, one held at a time.
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
- **Account** each confirmed turn: ``none`` (no draft), ``reused``, or ``discarded``, with the
  drafts started and withdrawn.

Extending it (issue 11): a confirmation on a provably complete transcript is one more event that
returns :class:`Confirm`; drafting earlier inside the VAD's stop window is :meth:`caller_paused`;
holding the first audio ready follows :class:`StartDraft` / :class:`Withdraw` / a releasing
:class:`Confirm`.
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

    def fields(self) -> dict[str, object]:
        """The TTFA report's fields for this turn."""
        return {
            "speculation": self.outcome,
            "drafts": self.drafts,
            "drafts_discarded": self.drafts_discarded,
        }


Decision = StartDraft | Withdraw | PassInference | PassWithdrawal | Confirm | Settled


# -- the state machine ----------------------------------------------------------------------


@dataclass
class _Turn:
    finals: list[str] = field(default_factory=list)
    stable: str = ""
    held: str | None = None
    drafts: int = 0
    discarded: int = 0
    silent: bool = False


class DraftHold:
    """One session's draft-and-hold decisions.

    Args:
        match: Whether the final transcript (second argument) still says the drafted words
            (first); default :func:`pipecat_fast.textnorm.same_words`.
        max_drafts: Drafts one turn may start.
        use_stable_words: Draft from the stable words when no final transcript has come yet.

    Attributes:
        outcomes: Per confirmed turn: ``"none"``, ``"reused"`` or ``"discarded"``.

    Raises:
        ValueError: If ``max_drafts`` < 1.
    """

    def __init__(
        self,
        *,
        match: Callable[[str, str], bool] = same_words,
        max_drafts: int = 2,
        use_stable_words: bool = True,
    ):
        if not isinstance(max_drafts, int) or isinstance(max_drafts, bool) or max_drafts < 1:
            raise ValueError(f"max_drafts_per_turn must be an integer >= 1, got {max_drafts!r}")
        self._match = match
        self.max_drafts = max_drafts
        self.use_stable_words = use_stable_words
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
        return self._withdraw("the caller is speaking again")

    def caller_silent(self) -> list[Decision]:
        """The VAD's stop window ended (the caller stopped): draft now if the words are known."""
        self._turn.silent = True
        return self._maybe_draft()

    def caller_paused(self) -> list[Decision]:
        """The caller paused inside the VAD's stop window: the same chance to draft, earlier.

        A pause that turns out to be mid-sentence is answered by :meth:`caller_speaking`
        (the draft is withdrawn).
        """
        return self.caller_silent()

    def stable_words(self, text: str) -> list[Decision]:
        """The stabiliser's stable words of this turn so far."""
        self._turn.stable = text
        return []

    def final_transcript(self, text: str) -> list[Decision]:
        """A final transcript segment of this turn (segments add up)."""
        self._turn.finals.append(text)
        decisions: list[Decision] = []
        held = self._turn.held
        if held is not None and not self._still_says(held):
            decisions += self._withdraw("the final transcript moved on")
        if self._turn.silent:
            # A final that lands after the VAD stop (a slow STT) can still be drafted.
            decisions += self._maybe_draft()
        return decisions

    def withdrawn_elsewhere(self) -> list[Decision]:
        """Someone else withdrew the speculation.

        The LLM service does when a draft wants a tool call: the confirmed turn must then run
        the normal request.
        """
        if self._turn.held is not None:
            self._turn.held = None
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
        return [*self._withdraw("the final transcript differs"), PassInference(None)]

    def inner_withdrawal(self) -> list[Decision]:
        """The wrapped strategy withdrew a speculation of its own."""
        return [PassWithdrawal()]

    def inner_confirmed(
        self, *, enable_user_speaking_frames: bool = True, confirms_speculation: bool = False
    ) -> list[Decision]:
        """The wrapped strategy confirmed the end of the turn."""
        held = self._turn.held
        reused = held is not None and self._still_says(held)
        decisions: list[Decision] = [self._settle(reused)]
        self._turn.held = None
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

    def _maybe_draft(self) -> list[Decision]:
        turn = self._turn
        text = self.caller_text
        if turn.held is not None or not text or turn.drafts >= self.max_drafts:
            return []
        turn.held = text
        turn.drafts += 1
        return [StartDraft(text)]

    def _withdraw(self, why: str) -> list[Decision]:
        if self._turn.held is None:
            return []
        self._turn.held = None
        self._turn.discarded += 1
        return [Withdraw(why)]

    def _settle(self, reused: bool) -> Settled:
        turn = self._turn
        outcome = "reused" if reused else ("discarded" if turn.drafts else "none")
        self.outcomes.append(outcome)
        return Settled(outcome, turn.drafts, turn.discarded)
