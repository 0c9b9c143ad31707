"""When to send a speculative prefill: the pure decision logic, no I/O and no clock.

The bet: while the caller is still talking, send the LLM provider a prefill-only request
(``max_tokens=1``) carrying exactly the context the real turn will send, with the caller's
stable words as the user message, so the provider's prefix/KV cache already holds everything up
to the last stable word when the turn ends. The real request then only prefills the last few
words. Who pays when it loses: the provider (and, on a shared engine, other callers) computes
prefill tokens that a later revision or an abandoned turn throws away.

:class:`PrefillPlanner` keeps the rules in one place:

- at most one prefill in flight per session;
- the first prefill of a turn at ``first_words`` stable words, then one per ``min_new_words``
  newly stable words;
- no new prefill once the VAD reports silence (the turn is about to end, and on engines that
  finish a cancelled prefill under a global lock a late prefill would delay the real request —
  measured on llama-cpp-python's server);
- no prefill below the provider's minimum cacheable prompt (it cannot cache; logged once);
- after a failed prefill (error, timeout, 429), back off for ``backoff_s`` and double it on each
  further failure, up to ``max_backoff_s``; the stock path is never affected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Skip(StrEnum):
    """Why a stable update did not start a prefill."""

    IN_FLIGHT = "in_flight"
    TOO_FEW_NEW_WORDS = "too_few_new_words"
    SILENCE = "silence"
    BELOW_MINIMUM = "below_minimum"
    BACKING_OFF = "backing_off"
    TURN_ENDED = "turn_ended"
    DISABLED = "disabled"


@dataclass(frozen=True)
class PrefillConfig:
    """Tuning of the prefill bet.

    Parameters:
        first_words: Stable words that start a turn's first prefill. Default 1: the first
            prefill carries the whole context (system, tools, history), the part worth
            warming early; a later one only adds the caller's words.
        min_new_words: Newly stable words required between later prefills. Default 4: on
            our bench 1, 2, 3 and 4 words gave the same TTFA and cost +16, +10, +7 and +4 %
            prefill compute (docs/prefill.md).
        min_prompt_tokens: The provider's minimum cacheable prompt (tokens); a smaller
            prompt is never sent. OpenAI: 1,024; Anthropic: 512-4,096 by model; vLLM,
            SGLang, llama.cpp: 0 (``shared/reference/prompt_caching_rules.md``).
        stop_on_silence: Send no new prefill once the VAD reports the caller silent.
        backoff_s: Pause after a failed prefill (s), doubled per consecutive failure.
        max_backoff_s: Longest pause (s).
    """

    first_words: int = 1
    min_new_words: int = 4
    min_prompt_tokens: int = 0
    stop_on_silence: bool = True
    backoff_s: float = 2.0
    max_backoff_s: float = 30.0


@dataclass
class TurnAccount:
    """What the bet cost and bought in one user turn (tokens are provider-reported).

    Parameters:
        prefills: Prefill requests sent.
        prefill_failures: Of those, how many failed.
        prefill_prompt_tokens: Prompt tokens sent speculatively.
        prefill_computed_tokens: Of those, tokens the provider had to prefill (not cached).
        skipped: Count of stable updates that did not start a prefill, by reason.
    """

    prefills: int = 0
    prefill_failures: int = 0
    prefill_prompt_tokens: int = 0
    prefill_computed_tokens: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """JSON form, keys prefixed for the TTFA report."""
        return {
            "prefill_requests": self.prefills,
            "prefill_failures": self.prefill_failures,
            "prefill_prompt_tokens": self.prefill_prompt_tokens,
            "prefill_computed_tokens": self.prefill_computed_tokens,
        }


class PrefillPlanner:
    """Decides, update by update, whether to send a speculative prefill now.

    Args:
        config: The rules' parameters.
    """

    def __init__(self, config: PrefillConfig | None = None):
        self.config = config or PrefillConfig()
        self.turn = TurnAccount()
        self._in_flight = False
        self._in_flight_account: TurnAccount | None = None
        self._silent = False
        self._turn_over = False
        self._sent_words = 0
        self._failures = 0
        self._blocked_until = 0.0

    @property
    def turn_over(self) -> bool:
        """Whether the current turn was confirmed (no new prefills for it)."""
        return self._turn_over

    @property
    def in_flight(self) -> bool:
        """Whether a prefill request is outstanding."""
        return self._in_flight

    def blocked(self, stable_words: int, now: float) -> Skip | None:
        """The cheap rules alone (no prompt size): why a prefill cannot go now, or None.

        Lets a caller skip rendering the prompt when a prefill could not go anyway.
        """
        return self._why_not(stable_words, self.config.min_prompt_tokens, now)

    def decide(self, stable_words: int, prompt_tokens: int, now: float) -> Skip | None:
        """Whether a stable update should start a prefill.

        Args:
            stable_words: Stable words of the caller's turn so far.
            prompt_tokens: Estimated prompt tokens of the prefill request.
            now: Current time (s, any monotonic clock).

        Returns:
            None to send now (and the planner counts it as in flight), else why not.
        """
        reason = self._why_not(stable_words, prompt_tokens, now)
        if reason is None:
            self._in_flight = True
            self._in_flight_account = self.turn
            self._sent_words = stable_words
            self.turn.prefills += 1
        else:
            self.turn.skipped[reason.value] = self.turn.skipped.get(reason.value, 0) + 1
        return reason

    def _why_not(self, stable_words: int, prompt_tokens: int, now: float) -> Skip | None:
        if self._turn_over:
            return Skip.TURN_ENDED
        if self._in_flight:
            return Skip.IN_FLIGHT
        if self._silent and self.config.stop_on_silence:
            return Skip.SILENCE
        needed = self.config.first_words if self._sent_words == 0 else self.config.min_new_words
        if stable_words - self._sent_words < max(1, needed):
            return Skip.TOO_FEW_NEW_WORDS
        if prompt_tokens < self.config.min_prompt_tokens:
            return Skip.BELOW_MINIMUM
        if now < self._blocked_until:
            return Skip.BACKING_OFF
        return None

    def finished(self, ok: bool, now: float, prompt_tokens: int = 0, cached_tokens: int = 0):
        """Record the end of the prefill in flight, in the account of the turn that sent it.

        Args:
            ok: Whether the provider answered it.
            now: Current time (s).
            prompt_tokens: Prompt tokens the provider reported.
            cached_tokens: Of those, tokens it read from its cache.
        """
        account = self._in_flight_account or self.turn
        self._in_flight = False
        self._in_flight_account = None
        if ok:
            self._failures = 0
            account.prefill_prompt_tokens += prompt_tokens
            account.prefill_computed_tokens += max(0, prompt_tokens - cached_tokens)
            return
        account.prefill_failures += 1
        self._failures += 1
        exponent = min(self._failures - 1, 30)  # no overflow however long the outage
        pause = min(self.config.max_backoff_s, self.config.backoff_s * 2**exponent)
        self._blocked_until = now + pause

    def caller_silent(self) -> None:
        """The VAD reports the caller stopped speaking."""
        self._silent = True

    def caller_speaking(self) -> None:
        """The VAD reports the caller speaking (again)."""
        self._silent = False

    def end_turn(self) -> TurnAccount:
        """Close the turn: no more prefills for it; returns its account and starts a new one.

        The VAD state carries over: a short reply ("Yes") can reach the stabiliser only with its
        final, after the VAD stop, and must not send a prefill then.
        """
        account, self.turn = self.turn, TurnAccount()
        self._turn_over = False
        self._sent_words = 0
        return account

    def stop_turn(self) -> None:
        """No new prefill for this turn (the real request is on its way)."""
        self._turn_over = True
