"""``TTSPrewarmPolicy``: whether a TTS connection opened ahead can pay, decided per call.

The prewarm-policy shape of :mod:`pipecat_fast.warmup.policy` (a frozen target in, a
:class:`~pipecat_fast.warmup.Decision` with a stable reason code and a one-line detail out,
logged through a :class:`~pipecat_fast.warmup.DecisionLog`), with the TTS pool's own rules.
Pure: the provider facts come from the registry (:mod:`pipecat_fast.providers`), the facts
about the Pipecat service from :mod:`pipecat_fast._pipecat`, the time is passed in.

Rules, in order (the first that applies wins):

1. ``retry`` - the call is a retry (the API caller says so): 95 % of seed 000's retries were
   dead calls, so a socket opened for one is most likely closed unused.
2. ``holds_nothing`` - the service talks HTTP, or the provider's warmup leaves nothing the
   call uses (seed 000: OpenAI's warmup keeps no connection): an HTTP "warm" connection lives
   only in the client's keep-alive pool, which drops it after seconds (httpx 5 s), inside a
   ring.
3. ``no_adapter`` - the pool cannot dial what this Pipecat service would dial (no dial
   adapter for its class): the service opens its first socket itself, at pipeline start.
4. otherwise ``warm``, with how the socket will be kept alive until the call takes it.

The spare (:meth:`TTSPrewarmPolicy.decide_spare`) is decided separately: only for services
that reconnect on every interruption (Pipecat's ``InterruptibleTTSService``: Fish, Sarvam,
Rime's raw WebSocket), where a spare turns the barge-in's serial reconnect into a hand-over.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pipecat_fast.providers import TTSFacts, http_keepalive_expiry_s, tts_facts
from pipecat_fast.warmup import Decision


class PoolReason(StrEnum):
    """Why the pool warmed a call's TTS connection or kept a spare (stable report codes)."""

    WARM = "warm"
    RETRY = "retry"
    HOLDS_NOTHING = "holds_nothing"
    NO_ADAPTER = "no_adapter"
    SPARE = "spare"
    NO_SPARE = "no_spare"


@dataclass(frozen=True)
class PoolTarget:
    """What the pool's rules read about one call's TTS service.

    Attributes:
        provider: The provider's registry name, or ``None`` when unknown.
        websocket: The Pipecat service keeps a WebSocket (``WebsocketService``).
        can_prewarm: A dial adapter knows what the service will dial.
        reconnects_on_interruption: The service closes and reopens its socket on every
            interruption (Pipecat's ``InterruptibleTTSService``).
        is_retry: The call is a retry of an earlier attempt (the API caller says so).
        http_client: For an HTTP service, its client library (``"httpx"``/``"aiohttp"``).
    """

    provider: str | None
    websocket: bool
    can_prewarm: bool
    reconnects_on_interruption: bool = False
    is_retry: bool = False
    http_client: str | None = None


class TTSPrewarmPolicy:
    """Decides per call whether the pool dials the TTS while the phone rings (see module doc).

    Args:
        skip_retries: Skip calls flagged as retries.
        table: A TTS facts table (:func:`pipecat_fast.providers.load_tts_table`).
    """

    def __init__(self, *, skip_retries: bool = True, table: dict | None = None):
        self.skip_retries = skip_retries
        self.table = table

    def facts(self, target: PoolTarget) -> TTSFacts | None:
        """The registry's facts for ``target``'s provider, or ``None`` when unknown."""
        return tts_facts(target.provider, table=self.table) if target.provider else None

    def decide(self, target: PoolTarget, now_s: float) -> Decision:
        """Whether to open ``target``'s connection now, while the call rings.

        Args:
            target: The call's facts.
            now_s: The current time (s); unused by today's rules, kept for the shape.

        Raises:
            ValueError: If ``target.provider`` is not in the TTS table.
        """
        if target.is_retry and self.skip_retries:
            return Decision(
                False,
                PoolReason.RETRY,
                "a retry: 95 % of retries are dead calls (seed 000); no socket opened",
            )
        facts = self.facts(target)
        if not target.websocket:
            expiry = http_keepalive_expiry_s(target.http_client or "httpx", table=self.table)
            lasts = f"{expiry:.0f} s" if expiry is not None else "a few seconds"
            return Decision(
                False,
                PoolReason.HOLDS_NOTHING,
                f"HTTP service: a warm connection lives only in the client's keep-alive pool "
                f"({target.http_client or 'httpx'}: idle connections dropped after {lasts}), "
                "gone before the first sentence",
            )
        if facts is not None and facts.warm_holds == "nothing":
            return Decision(
                False,
                PoolReason.HOLDS_NOTHING,
                f"{facts.provider}: a warmup holds nothing the call uses ({facts.warm_source})",
            )
        name = target.provider or "this provider"
        if not target.can_prewarm:
            return Decision(
                False,
                PoolReason.NO_ADAPTER,
                f"no dial adapter for {name}'s Pipecat service: it opens its first socket "
                "itself at pipeline start",
            )
        return Decision(True, PoolReason.WARM, f"{name}: {self.upkeep(facts)}")

    def decide_spare(self, target: PoolTarget) -> Decision:
        """Whether to keep a spare socket once the service holds one."""
        if not target.websocket:
            return Decision(False, PoolReason.NO_SPARE, "HTTP service: no socket to spare")
        if target.reconnects_on_interruption:
            return Decision(
                True,
                PoolReason.SPARE,
                "reconnects on every interruption: a spare spares the barge-in a handshake",
            )
        return Decision(
            False,
            PoolReason.NO_SPARE,
            "keeps its socket across interruptions (and redials by itself after a close)",
        )

    def keepalive_s(self, target: PoolTarget) -> float | None:
        """How often to send the provider's keepalive to a held socket (``None``: never)."""
        facts = self.facts(target)
        if facts is None or facts.keepalive is None or not facts.keepalive.before_session:
            return None
        return facts.keepalive.interval_s

    def keepalive_message(self, target: PoolTarget) -> str | None:
        """The keepalive message for a held socket, or ``None``."""
        facts = self.facts(target)
        if self.keepalive_s(target) is None or facts is None or facts.keepalive is None:
            return None
        return facts.keepalive.message

    @staticmethod
    def upkeep(facts: TTSFacts | None) -> str:
        """How a held socket will be kept alive until the call takes it (one line)."""
        if facts is None:
            return "no documented idle limit; replaced if it closes"
        ka = facts.keepalive
        if ka is not None and ka.before_session:
            return f"held with its keepalive every {ka.interval_s:.0f} s"
        if facts.idle_close_s is not None:
            return (
                f"no keepalive before the session; replaced ahead of its "
                f"{facts.idle_close_s:.0f} s idle close"
            )
        return "no documented idle limit; replaced if it closes"
