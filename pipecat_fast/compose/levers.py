"""Which levers a call runs: a plain value, parsed from ``"all"``, ``"stock"`` or a list.

Pure: no Pipecat imports, no frames. :class:`~pipecat_fast.compose.call.FastCall` reads a
:class:`Levers` and builds the processors, observers and ring-time work it names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace

TELEPHONY_PLAYOUT_DELAY_S = 0.15
"""Audio written but not yet heard on a phone call: a telephony leg adds 100 ms or more
(seed 002), so barge-in truncation counts ~150 ms of written audio as not heard yet."""

WEBRTC_PLAYOUT_DELAY_S = 0.06
"""The same for a WebRTC client: its jitter buffer holds 20-60 ms (seed 002)."""


@dataclass(frozen=True)
class Levers:
    """The pipecat-fast levers of one call; every switch is a lever, on (``True``) or off.

    The defaults (``Levers()``, ``Levers.all()``, ``"all"``) are the bench's ``all``: every lever
    that composes with the others and makes TTFA no worse. The end-of-turn levers
    (``endofturn``, ``preemptive``) are opt-in (``"all,endofturn,preemptive"``) until their
    measured effect (docs/endofturn.md) shows the same.

    Parameters:
        stabilizer: ``TwoUpdateStabilizer`` after the STT (words that survived two interims).
        prefill: ``SpeculativePrefill`` before the LLM (needs ``stabilizer``).
        draft_and_hold: ``DraftAndHoldUserTurnStopStrategy`` around the end-of-turn strategy.
        endofturn: The end-of-turn levers on the patience dial (``patience_user_params``):
            the VAD behind a ``PauseTap``, the draft started at the pause, the turn confirmed
            on a complete transcript (needs ``draft_and_hold``: the dial's stop strategy is
            draft-and-hold around the confirmation).
        preemptive: ``PreemptiveTTS`` right after the LLM and its hold right after the TTS:
            the held draft's first audio synthesized before the turn is confirmed (needs
            ``draft_and_hold``).
        aggregator: ``make_text_processor()`` between the LLM and the TTS.
        bargein: ``BargeInTruncator`` around the output transport.
        warmup: ``SessionWarmup`` while the phone rings (and its first-turn checker).
        tts_pool: ``TTSWarmPool``: the TTS socket dialled while the phone rings.
        guard: ``CacheBustGuard`` (an observer) on the LLM's requests.
        playout_delay_s: Barge-in truncation's playout delay (s): ~0.15 on a phone line,
            ~0.06 on WebRTC.
        patience: The patience dial's preset for ``endofturn`` (``"snappy"``,
            ``"balanced"``, ``"patient"``; docs/endofturn.md).

    The TTFA meter is not a lever: every call has one (stock calls too), so both are measured
    alike.
    """

    stabilizer: bool = True
    prefill: bool = True
    draft_and_hold: bool = True
    endofturn: bool = False
    preemptive: bool = False
    aggregator: bool = True
    bargein: bool = True
    warmup: bool = True
    tts_pool: bool = True
    guard: bool = True
    playout_delay_s: float = WEBRTC_PLAYOUT_DELAY_S
    patience: str = "balanced"

    def __post_init__(self):
        if self.prefill and not self.stabilizer:
            raise ValueError(
                "prefill needs the stabiliser: SpeculativePrefill acts only on "
                "TwoUpdateStabilizer's stable words (turn stabilizer on, or prefill off)"
            )
        for lever in ("endofturn", "preemptive"):
            if getattr(self, lever) and not self.draft_and_hold:
                raise ValueError(
                    f"{lever} needs draft-and-hold: it works on the held draft reply "
                    f"(turn draft_and_hold on, or {lever} off)"
                )
        if not isinstance(self.patience, str) or not self.patience.strip():
            raise ValueError(f"patience must be a preset name, got {self.patience!r}")
        delay = self.playout_delay_s
        if isinstance(delay, bool) or not isinstance(delay, int | float) or not delay >= 0:
            raise ValueError(f"playout_delay_s must be a number >= 0, got {delay!r}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The levers' names, in the order frames meet them (the switches, not the delay)."""
        return tuple(f.name for f in fields(cls) if f.type in ("bool", bool))

    @classmethod
    def all(cls, **overrides: object) -> Levers:
        """The ``all`` composition (``overrides`` switch single ones, e.g. ``bargein=False``)."""
        return cls(**overrides)  # type: ignore[arg-type]

    @classmethod
    def stock(cls, **overrides: object) -> Levers:
        """Every lever off: stock Pipecat (with the TTFA meter, as every call has)."""
        off = dict.fromkeys(cls.names(), False)
        off.update(overrides)
        return cls(**off)  # type: ignore[arg-type]

    @classmethod
    def parse(
        cls, spec: str, *, playout_delay_s: float | None = None, patience: str | None = None
    ) -> Levers:
        """``"all"``, ``"stock"``, a list of levers, or either with ``name`` / ``-name`` edits.

        ``"all,-bargein"`` is the ``all`` composition without barge-in truncation,
        ``"all,endofturn,preemptive"`` with the end-of-turn levers, ``"stabilizer,prefill"``
        only those two. Items are separated by commas, ``+`` or spaces (a ``+`` in a URL's
        query arrives as a space); dashes and underscores are alike (``draft-and-hold``).

        Raises:
            ValueError: Naming an unknown lever, or a combination that cannot work.
        """
        known = cls.names()
        items = [s.lower().replace("-", "_") for s in re.split(r"[,+\s]+", str(spec))]
        items = [s for s in items if s]
        if not items:
            raise ValueError("empty lever list: give 'all', 'stock' or lever names")
        base: dict[str, bool]
        if items[0] == "all":
            base, items = {n: getattr(cls(), n) for n in known}, items[1:]
        elif items[0] in ("stock", "none"):
            base, items = dict.fromkeys(known, False), items[1:]
        else:
            base = dict.fromkeys(known, False)
        for item in items:
            on = not item.startswith("_")  # "-name" became "_name"
            name = item.lstrip("_")
            if name not in known:
                raise ValueError(f"unknown lever {name!r}; known: all, stock, {', '.join(known)}")
            base[name] = on
        extra: dict[str, object] = {}
        if playout_delay_s is not None:
            extra["playout_delay_s"] = playout_delay_s
        if patience is not None:
            extra["patience"] = patience
        return cls(**base, **extra)  # type: ignore[arg-type]

    def on(self) -> tuple[str, ...]:
        """The names of the levers that are on."""
        return tuple(n for n in self.names() if getattr(self, n))

    def describe(self) -> str:
        """``"all"``, ``"stock"`` or the levers that are on, for a log line."""
        on = self.on()
        if on == type(self)().on():
            return "all"
        return ", ".join(on) or "stock"

    def settings(self) -> dict[str, object]:
        """The settings that are not switches (``playout_delay_s``, ``patience``)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in self.names()}

    def with_playout_delay(self, seconds: float) -> Levers:
        """The same levers with barge-in truncation's playout delay set."""
        return replace(self, playout_delay_s=seconds)
