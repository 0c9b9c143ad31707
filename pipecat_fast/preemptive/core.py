"""Preemptive TTS: the held draft's first phrase synthesized before confirmation, its audio held.

Two pure state machines (plain values in, decisions out; no frames, tasks or clocks):

- :class:`FeedCore` decides which frames of a held draft reply (held by the LLM service's
  ``SpeculationGate``) to hand the TTS early, as copies: the reply's start and its text up to the
  first phrase the TTS starts synthesizing (or ``max_chars``), and the end if the whole reply is
  in by then. When the turn is confirmed the gate releases the originals: those already handed
  over are dropped, the rest pass, so the TTS sees one continuous reply. When the draft is
  withdrawn (the caller went on, the final differed, a tool call) the TTS's synthesis of it is
  cancelled; a TTS error on the draft withdraws the draft itself.
- :class:`HoldCore` is the hold after the TTS: everything the TTS produces for the draft is held
  in order until the turn is confirmed (released as it is) or the draft withdrawn (dropped, with
  whatever the TTS still sends for it), so nothing of an unconfirmed turn reaches the transport.

The verdicts are the same frames Pipecat's ``SpeculationGate`` acts on: the turn's confirmation
(``UserStoppedSpeakingFrame``) releases, a withdrawal (``EagerEndOfTurnCancelFrame``) or an
interruption discards.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

HeldKind = Literal["start", "text", "end", "other"]

# -- FeedCore decisions ---------------------------------------------------------------------


@dataclass(frozen=True)
class Feed:
    """Hand the TTS a copy of the held frame ``frame_id`` now."""

    frame_id: int


@dataclass(frozen=True)
class CancelTTS:
    """Cancel the TTS's synthesis of the withdrawn draft (an interruption into the TTS)."""

    reason: str


@dataclass(frozen=True)
class WithdrawDraft:
    """Withdraw the draft itself (the TTS failed on it): the normal path answers the turn."""

    reason: str


@dataclass(frozen=True)
class Settle:
    """A draft handed to the TTS was released or discarded; what it cost."""

    outcome: Literal["released", "discarded"]
    chars_fed: int


FeedDecision = Feed | CancelTTS | WithdrawDraft | Settle


@dataclass
class FeedStats:
    """What preemptive synthesis did over a session.

    Attributes:
        drafts_fed: Drafts whose first phrase went to the TTS before confirmation.
        released: Of those, released on confirmation.
        discarded: Of those, withdrawn (their audio dropped, never played).
        chars_fed: Characters handed to the TTS before confirmation.
        chars_discarded: Of those, characters of withdrawn drafts.
        tts_errors: Drafts withdrawn because the TTS failed on them.
    """

    drafts_fed: int = 0
    released: int = 0
    discarded: int = 0
    chars_fed: int = 0
    chars_discarded: int = 0
    tts_errors: int = 0


class FeedCore:
    """Which frames of a held draft reply the TTS gets before confirmation.

    Args:
        max_chars: Text handed over at most before confirmation (the first phrase normally
            ends well before; this bounds a TTS that never starts on its own).

    Raises:
        ValueError: If ``max_chars`` < 1.
    """

    def __init__(self, *, max_chars: int = 200):
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise ValueError(f"max_chars must be an integer >= 1, got {max_chars!r}")
        self.max_chars = max_chars
        self.stats = FeedStats()
        self._state: Literal["idle", "feeding", "holding", "released"] = "idle"
        self._fed: set[int] = set()  # originals promised to the TTS as copies, or handed over
        self._pushed: set[int] = set()  # of those, the ones whose copy was handed over
        self._chars = 0

    @property
    def state(self) -> str:
        """Where the draft is.

        ``idle``, ``feeding`` (copies go to the TTS), ``holding`` (first phrase handed over,
        the rest waits for confirmation) or ``released`` (the originals flow).
        """
        return self._state

    @property
    def draft_in_tts(self) -> bool:
        """Whether the TTS has (or is about to get) text of an unconfirmed draft."""
        return self._state in ("feeding", "holding") and bool(self._fed)

    def held(self, frame_id: int, kind: HeldKind, text: str = "") -> list[FeedDecision]:
        """The LLM service's gate held this frame of a speculative reply."""
        decisions: list[FeedDecision] = []
        if kind == "start":
            if self.draft_in_tts:
                decisions += self.withdrawn("superseded by a new draft")
            self._state, self._fed, self._pushed, self._chars = "feeding", {frame_id}, set(), 0
            self.stats.drafts_fed += 1
            return [*decisions, Feed(frame_id)]
        if self._state != "feeding":
            return []
        if kind == "text":
            if self._chars and self._chars + len(text) > self.max_chars:
                self._state = "holding"
                return []
            self._fed.add(frame_id)
            self._chars += len(text)
            self.stats.chars_fed += len(text)
            return [Feed(frame_id)]
        if kind == "end":
            self._fed.add(frame_id)
            self._state = "holding"
            return [Feed(frame_id)]
        return []

    def tts_started(self) -> None:
        """The TTS started synthesizing the draft: its first phrase is in, stop handing over."""
        if self._state == "feeding":
            self._state = "holding"

    def original(self, frame_id: int) -> bool:
        """An original frame reached us (released by the gate, or never held).

        Returns:
            True to drop it (the TTS already got its copy); False to pass it on (a promised
            copy not handed over yet is then never handed over: the original is the frame).
        """
        if frame_id in self._pushed:
            self._pushed.discard(frame_id)
            self._fed.discard(frame_id)
            return True
        self._fed.discard(frame_id)
        return False

    def take_promise(self, frame_id: int) -> bool:
        """Whether the copy promised by :class:`Feed` is to be handed over now (it then is).

        False when the original already passed (it is the real frame now) or the draft was
        settled in between.
        """
        if frame_id not in self._fed or frame_id in self._pushed:
            return False
        self._pushed.add(frame_id)
        return True

    def confirmed(self) -> list[FeedDecision]:
        """The turn was confirmed: a draft in the TTS is released (the originals follow)."""
        if not self.draft_in_tts:
            self._state = "idle" if self._state != "released" else "released"
            return []
        self._state = "released"
        self.stats.released += 1
        return [Settle("released", self._chars)]

    def response_ended(self) -> None:
        """The released reply's end passed: the next reply starts afresh."""
        if self._state == "released":
            self._state, self._fed, self._pushed, self._chars = "idle", set(), set(), 0

    def withdrawn(self, reason: str = "withdrawn") -> list[FeedDecision]:
        """The draft was withdrawn (or the turn interrupted): cancel what the TTS has of it."""
        if not self.draft_in_tts:
            if self._state != "released":
                self._state, self._fed, self._pushed = "idle", set(), set()
            return []
        chars = self._chars
        self._state, self._fed, self._pushed, self._chars = "idle", set(), set(), 0
        self.stats.discarded += 1
        self.stats.chars_discarded += chars
        return [CancelTTS(reason), Settle("discarded", chars)]

    def tts_failed(self) -> list[FeedDecision]:
        """The TTS reported an error while it had the draft: withdraw the draft itself."""
        if not self.draft_in_tts:
            return []
        self.stats.tts_errors += 1
        return [WithdrawDraft("the TTS failed on the held draft"), *self.withdrawn("tts error")]


# -- HoldCore -------------------------------------------------------------------------------


@dataclass
class _Held:
    item: Any
    draft: bool
    interruptible: bool


class HoldCore:
    """The hold after the TTS: what of a draft's synthesis may reach the transport, and when.

    Two sides. The feeder (:class:`PreemptiveTTS`, in its own task, in the order it hands frames
    to the TTS) says which copy is a draft's start marker (:meth:`expect`), which copies are the
    draft's (:meth:`own`) and how each draft was settled (:meth:`settle`). The frames coming out
    of the TTS (:meth:`frame`, in the hold's task, later) are judged against that: a draft's
    window opens when its marker comes out, and every non-system frame after it is held in
    order until the draft's verdict is known — released in order, or its own frames dropped
    (the marker's, the copies', and everything the TTS says about a context inside the window)
    and the others let through. A draft settled before its marker comes out never opens a
    window: released, it passes; withdrawn, its marker and its context's frames are dropped.
    Verdicts are applied by the next frame through the hold; the verdict frames themselves
    (the turn's confirmation, the withdrawal) always follow.

    Args:
        remember: Withdrawn drafts' contexts kept to drop their late output.
    """

    def __init__(self, *, remember: int = 16):
        self.remember = remember
        self._verdicts: dict[int, bool] = {}  # marker -> released?
        self._pending: set[int] = set()  # markers expected, not settled
        self._own: set[int] = set()
        self._swallow: set[int] = set()
        self._window: int | None = None  # the marker of the open window
        self._held: list[_Held] = []
        self._contexts: set[str] = set()
        self._dead_marker: int | None = None  # a withdrawn draft whose marker came out late
        self._dead_context: str | None = None
        self._settle_after: dict[int, tuple[int, bool]] = {}  # frame -> (marker, released)
        self.dropped_contexts: deque = deque()

    @property
    def holding(self) -> bool:
        """Whether a draft's window is open (its output held)."""
        return self._window is not None

    @property
    def held_count(self) -> int:
        """Frames held now."""
        return len(self._held)

    @property
    def held_items(self) -> list[Any]:
        """The frames held now, in order."""
        return [h.item for h in self._held]

    # -- the feeder's side ---------------------------------------------------------------

    def expect(self, marker_id: int) -> None:
        """A draft's start marker (a copy handed to the TTS) will come out of the TTS."""
        self._pending.add(marker_id)
        self._own.add(marker_id)

    def own(self, frame_id: int) -> None:
        """A frame of the draft (a copy handed to the TTS)."""
        self._own.add(frame_id)

    def swallow(self, frame_id: int) -> None:
        """A frame only for the TTS (the interruption that cancels a draft): never passed on."""
        self._swallow.add(frame_id)

    def settle(self, marker_id: int, *, released: bool, after: int | None = None) -> None:
        """The draft whose marker is ``marker_id`` was confirmed (``released``) or withdrawn.

        With ``after`` (the id of the frame that carries the verdict down, e.g. the
        confirmation), the verdict takes effect when that frame comes out of the TTS, and that
        frame passes first: the transport sees the confirmation before the draft's audio.
        """
        if after is not None:
            self._settle_after[after] = (marker_id, released)
            return
        if marker_id in self._pending:
            self._pending.discard(marker_id)
            self._verdicts[marker_id] = released

    # -- the frames out of the TTS -------------------------------------------------------

    def frame(
        self,
        item: Any,
        *,
        frame_id: int,
        context_id: str | None = None,
        system: bool = False,
        interruptible: bool = True,
    ) -> list[Any]:
        """A frame coming out of the TTS (downstream). Returns what to push now, in order."""
        out = self._apply_verdict()
        if frame_id in self._settle_after:
            marker_id, released = self._settle_after.pop(frame_id)
            self.settle(marker_id, released=released)
            return [*out, item, *self._apply_verdict()]
        if frame_id in self._swallow:
            self._swallow.discard(frame_id)
            return out
        if system:
            return [*out, item]
        if frame_id in self._verdicts or frame_id in self._pending:
            return out + self._marker(item, frame_id)
        if self._dead_marker is not None and interruptible:
            if context_id is not None and self._dead_context in (None, context_id):
                self._dead_context = context_id
                return out  # the late output of a draft withdrawn before it came out
            if frame_id in self._own:
                return out
        if interruptible and context_id is not None and context_id in self.dropped_contexts:
            return out  # the TTS's late output for a withdrawn draft
        if self._window is None:
            if frame_id in self._own and interruptible:
                return out  # a copy of a draft that never opened a window (withdrawn)
            return [*out, item]
        draft = frame_id in self._own or context_id is not None
        if context_id is not None:
            self._contexts.add(context_id)
        self._held.append(_Held(item, draft, interruptible))
        return out

    def end(self) -> list[Any]:
        """The session ends: an open window's draft is dropped (nothing unconfirmed played)."""
        out = self._apply_verdict()
        if self._window is not None:
            out += self._close(released=False)
        return out

    # -- helpers ---------------------------------------------------------------------------

    def _marker(self, item: Any, marker_id: int) -> list[Any]:
        out: list[Any] = []
        if self._window is not None:  # a new draft's marker while one is open: the old is void
            out += self._close(released=False)
        self._dead_marker, self._dead_context = None, None
        verdict = self._verdicts.pop(marker_id, None)
        if verdict is True:
            self._pending.discard(marker_id)
            return [*out, item]  # confirmed before its audio came out: plays as it comes
        if verdict is False:
            self._dead_marker = marker_id
            return out
        self._window = marker_id
        self._held, self._contexts = [_Held(item, True, True)], set()
        return out

    def _apply_verdict(self) -> list[Any]:
        if self._window is None or self._window not in self._verdicts:
            return []
        released = self._verdicts.pop(self._window)
        return self._close(released=released)

    def _close(self, *, released: bool) -> list[Any]:
        if released:
            out = [h.item for h in self._held]
        else:
            out = [h.item for h in self._held if not h.draft or not h.interruptible]
            for context in self._contexts:
                self.dropped_contexts.append(context)
            while len(self.dropped_contexts) > self.remember:
                self.dropped_contexts.popleft()
        self._pending.discard(self._window)
        self._window, self._held, self._contexts = None, [], set()
        return out
