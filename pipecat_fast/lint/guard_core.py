"""Pure core of the run-time guard: does each request's prefix extend the previous one's?

Feed it each LLM request as plain data (tools in provider format, the system instruction,
the messages) and each usage report; it returns warnings. No frames, tasks or clocks:
:class:`~pipecat_fast.lint.guard.CacheBustGuard` wraps it as a Pipecat observer.

The prefix of a request is tools + system + history up to the new user turn (the trailing
run of user messages is left out, so a turn re-sent with a longer transcript still counts
as extending). Providers cache in that order (tools, system, messages: Anthropic's docs,
../shared/reference/prompt_caching_rules.md), so a change in any part busts everything
after it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from pipecat_fast import tokens
from pipecat_fast.lint.findings import shorten
from pipecat_fast.lint.textmap import TextMap
from pipecat_fast.prefix import common_prefix_len

PART_SEPARATOR = "\n"


def _fallback(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return "sha256:" + hashlib.sha256(value).hexdigest()
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if not k.startswith("_")}
    return repr(value)


def serialize(value: Any) -> str:
    """Deterministic-enough JSON for hashing a request part (key order kept, as sent)."""
    try:
        return json.dumps(value, ensure_ascii=False, default=_fallback)
    except (TypeError, ValueError, RecursionError):
        return base64.b64encode(repr(value).encode("utf-8", "replace")).decode()


@dataclass(frozen=True)
class PrefixPart:
    """One part of a request prefix.

    Attributes:
        kind: ``"tools"``, ``"system"`` or ``"message"``.
        text: Its serialized text.
    """

    kind: str
    text: str

    @classmethod
    def of(cls, kind: str, text: str) -> PrefixPart:
        """Build a part."""
        return cls(kind, text)


@dataclass
class GuardWarning:
    """Something the guard noticed.

    Attributes:
        kind: ``"prefix-changed"`` or ``"no-cache-reads"``.
        cause: For prefix changes: ``"tools"``, ``"system"``, ``"history"``; else ``""``.
        message: Human explanation, with where the diff starts.
        request: 1-based index of the request that showed it.
        char_offset: Character offset in the serialized prefix where the diff starts.
        token_offset: Token offset of that character (``o200k_base``).
        first: True for the first warning of this kind and cause (logged as a warning;
            repeats are logged at debug level).
        detail: Extra data (tool names added/removed, old/new excerpt...).
    """

    kind: str
    cause: str
    message: str
    request: int
    char_offset: int | None = None
    token_offset: int | None = None
    first: bool = True
    detail: dict = field(default_factory=dict)


def tool_names(tools: list | None) -> list[str]:
    """Names of tools in OpenAI (``{"function": {"name"}}``) or flat (``{"name"}``) format."""
    names = []
    for t in tools or []:
        if isinstance(t, dict):
            fn = t.get("function")
            name = fn.get("name") if isinstance(fn, dict) else t.get("name")
            names.append(str(name))
        else:
            names.append(str(getattr(t, "name", t)))
    return names


def _prefix_end(messages: list) -> int:
    end = len(messages)
    while (
        end > 0 and isinstance(messages[end - 1], dict) and messages[end - 1].get("role") == "user"
    ):
        end -= 1
    return end


def prefix_parts(
    tools: list | None, system: str | None, messages: list[dict]
) -> tuple[list[PrefixPart], list[str]]:
    """Split a request into prefix parts (history up to the new user turn).

    Returns:
        ``(parts, tool_names)``.
    """
    parts: list[PrefixPart] = []
    if tools:
        parts.append(PrefixPart.of("tools", serialize(tools)))
    if system:
        parts.append(PrefixPart.of("system", system))
    parts.extend(PrefixPart.of("message", serialize(m)) for m in messages[: _prefix_end(messages)])
    return parts, tool_names(tools)


_FLAT = (str, int, float, bool, type(None))


def flat_copy(message: Any) -> Any:
    """A copy of a message that later in-place edits cannot reach, when one is cheap.

    A dict whose values are all plain scalars (``{"role": ..., "content": "..."}``, the
    usual chat message) is copied shallowly, which is a complete copy; anything nested is
    returned as is (and is serialized afresh every time it is compared).
    """
    if isinstance(message, dict) and all(isinstance(v, _FLAT) for v in message.values()):
        return dict(message)
    return message


def _flat_text(message: Any) -> str | None:
    """``role: ...`` lines for a plain chat message (no JSON escaping of a long content)."""
    if not isinstance(message, dict) or not all(isinstance(v, _FLAT) for v in message.values()):
        return None
    return "\n".join(f"{k}: {v}" for k, v in message.items())


class _PartCache:
    """Serialized prefix parts of the last request, reused when a value has not changed.

    Plain messages are compared with their copy from the last request (``==`` on a dict of
    the same strings is an identity check per value); a message that nests lists or dicts
    is serialized each time, so an in-place edit inside it is never missed. Token counts of
    part texts and token maps of the texts where changes were found are kept as well, so a
    prompt whose end changes on every request is tokenized once, not once per request.
    """

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self.values: list[Any] = []
        self.texts: list[str] = []
        self._counts: dict[str, int] = {}
        self._anchors: dict[int, TextMap] = {}

    def parts(self, tools: list | None, system: str | None, messages: list) -> list[PrefixPart]:
        values: list[tuple[str, Any]] = []
        if tools:
            values.append(("tools", tools))
        if system:
            values.append(("system", system))
        values.extend(("message", m) for m in messages[: _prefix_end(messages)])
        parts: list[PrefixPart] = []
        new_values: list[Any] = []
        for i, (kind, value) in enumerate(values):
            text = None
            if kind == "system":
                text = value
            elif kind == "message" and i < len(self.values):
                old = self.values[i]
                if old is not None and isinstance(value, dict) and value == old:
                    text = self.texts[i]
            if text is None:
                text = _flat_text(value) if kind == "message" else None
                text = serialize(value) if text is None else text
            kept = flat_copy(value) if kind == "message" else None
            new_values.append(kept if kept is not value else None)
            parts.append(PrefixPart(kind, text))
        self.values = new_values
        self.texts = [p.text for p in parts]
        return parts

    def count(self, text: str) -> int:
        """Tokens in a part's text (cached for the texts of the last two requests)."""
        n = self._counts.get(text)
        if n is None:
            if len(self._counts) > 256:
                self._counts.clear()
            n = self._counts[text] = tokens.count_tokens(text, self.encoding)
        return n

    def token_at(self, index: int, text: str, char: int) -> int:
        """Token index of ``char`` in the text of part ``index``.

        Reuses the token map of an earlier text of that part when it shares the first
        ``char`` characters (exact except within a token of ``char``).
        """
        anchor = self._anchors.get(index)
        if anchor is None or common_prefix_len(anchor.text, text) < char:
            if len(self._anchors) > 8:
                self._anchors.clear()
            anchor = self._anchors[index] = TextMap(text, self.encoding)
        return anchor.token_at(char)


class PrefixTracker:
    """Tracks one LLM's requests and usage across a session.

    Args:
        minimum_tokens: Provider's minimum cacheable prefix (0: no floor). Usage checks only
            count requests that follow one at least this long.
        after_turns: Warn about zero cache reads once this many eligible requests in a row
            read nothing from cache.
        known_addons: Texts a framework appends to the system instruction, by name (e.g.
            Pipecat's async-tool instructions), to name the cause of a change.
        encoding: Token encoding for offsets.
    """

    def __init__(
        self,
        *,
        minimum_tokens: int = 1024,
        after_turns: int = 2,
        known_addons: dict[str, str] | None = None,
        encoding: str = tokens.DEFAULT_ENCODING,
    ) -> None:
        self.minimum_tokens = minimum_tokens
        self.after_turns = max(1, after_turns)
        self.known_addons = dict(known_addons or {})
        self.encoding = encoding
        self.warnings: list[GuardWarning] = []
        self.requests = 0
        self._cache = _PartCache(encoding)
        self._last_parts: list[PrefixPart] | None = None
        self._last_tools: list[str] = []
        self._warned: set[tuple[str, str]] = set()
        self._last_input_tokens = 0
        self._eligible = 0
        self._reads = 0
        self._writing = 0
        self._usage_reports = 0

    # -- requests -------------------------------------------------------------------

    def observe_request(
        self, tools: list | None, system: str | None, messages: list[dict]
    ) -> list[GuardWarning]:
        """Record one LLM request.

        Args:
            tools: Tool definitions as sent (provider format), or ``None``.
            system: System instruction as sent, or ``None``.
            messages: Conversation messages as sent (dicts with ``role``).

        Returns:
            New warnings (also appended to :attr:`warnings`).
        """
        self.requests += 1
        parts = self._cache.parts(tools, system, messages)
        names = tool_names(tools)
        prev, prev_names = self._last_parts, self._last_tools
        self._last_parts, self._last_tools = parts, names
        if prev is None:
            return []
        j = 0
        while j < len(prev) and j < len(parts) and prev[j] == parts[j]:
            j += 1
        if j == len(prev):
            return []  # extends (or equals) the previous prefix
        return [self._emit(self._describe(prev, parts, j, prev_names, names))]

    def _describe(
        self,
        prev: list[PrefixPart],
        parts: list[PrefixPart],
        j: int,
        prev_names: list[str],
        names: list[str],
    ) -> GuardWarning:
        offset = sum(len(p.text) + len(PART_SEPARATOR) for p in parts[:j])
        old = prev[j]
        new = parts[j] if j < len(parts) else None
        local = common_prefix_len(old.text, new.text) if new and new.kind == old.kind else 0
        char = offset + local
        # Parts are counted one by one (a separator token each), so an unchanged part's
        # count is reused and a changed one is tokenized only up to the change.
        token = sum(self._cache.count(p.text) + 1 for p in parts[:j])
        if new is not None and local:
            token += self._cache.token_at(j, new.text, local)
        detail: dict[str, Any] = {}
        if new is None:
            cause, what = "history", "the history is shorter than before (messages removed)"
        elif "tools" in (old.kind, new.kind):
            cause = "tools"
            added = [n for n in names if n not in prev_names]
            removed = [n for n in prev_names if n not in names]
            detail = {"added": added, "removed": removed}
            if added or removed:
                bits = []
                if added:
                    bits.append("added " + ", ".join(added))
                if removed:
                    bits.append("removed " + ", ".join(removed))
                what = "the tool list changed (" + "; ".join(bits) + ")"
            elif names != prev_names:
                what = "the tools were reordered"
            elif new.kind != "tools":
                what = "the tools were dropped"
            else:
                what = "a tool definition changed"
            # Tools come first; say whether the system instruction changed with them
            # (Pipecat adds cancel tools and their instructions together).
            old_sys = next((p for p in prev if p.kind == "system"), None)
            new_sys = next((p for p in parts if p.kind == "system"), None)
            if old_sys and new_sys and old_sys.text != new_sys.text:
                at = common_prefix_len(old_sys.text, new_sys.text)
                what += "; also " + self._system_change(old_sys, new_sys, at)
        elif old.kind == "system" or new.kind == "system":
            cause = "system"
            what = self._system_change(old, new, local)
            detail = {"old": shorten(old.text[local:], 60), "new": shorten(new.text[local:], 60)}
        else:
            cause = "history"
            index = sum(1 for p in prev[:j] if p.kind == "message")
            what = f"history message {index} was rewritten (summarised, edited or dropped)"
            detail = {"old": shorten(old.text[local:], 60), "new": shorten(new.text[local:], 60)}
        message = (
            f"request {self.requests}: the prefix no longer extends request "
            f"{self.requests - 1}'s: {what}; the diff starts at token {token} "
            f"(char {char}), so everything after it is prefilled again."
        )
        return GuardWarning(
            kind="prefix-changed",
            cause=cause,
            message=message,
            request=self.requests,
            char_offset=char,
            token_offset=token,
            detail=detail,
        )

    def _system_change(self, old: PrefixPart, new: PrefixPart, local: int) -> str:
        if old.kind != "system":
            return "a system instruction appeared"
        if new.kind != "system":
            return "the system instruction was removed"
        if new.text.startswith(old.text):
            appended = new.text[len(old.text) :]
            named = [n for n, text in self.known_addons.items() if text and text in appended]
            if named:
                return (
                    f"text was appended to the system instruction: {' and '.join(named)} "
                    "(Pipecat recomposes it when tools are registered)"
                )
            return f"text was appended to the system instruction: `{shorten(appended, 50)}`"
        for name, text in self.known_addons.items():
            if text and (text in old.text) != (text in new.text):
                state = "added to" if text in new.text else "removed from"
                return f"{name} {state} the system instruction (Pipecat recomposition)"
        return (
            f"the system instruction changed at char {local}: "
            f"`{shorten(old.text[local:], 30)}` -> `{shorten(new.text[local:], 30)}`"
        )

    def _emit(self, warning: GuardWarning) -> GuardWarning:
        key = (warning.kind, warning.cause)
        warning.first = key not in self._warned
        self._warned.add(key)
        self.warnings.append(warning)
        return warning

    # -- usage ----------------------------------------------------------------------

    def observe_usage(
        self,
        prompt_tokens: int,
        cache_read_tokens: int | None,
        cache_write_tokens: int | None = None,
        *,
        net_of_cache: bool = False,
    ) -> list[GuardWarning]:
        """Record one request's token usage.

        Args:
            prompt_tokens: Input tokens as the provider reports them.
            cache_read_tokens: Tokens read from cache; ``None`` when not reported (then
                nothing is concluded).
            cache_write_tokens: Tokens written to cache, if reported.
            net_of_cache: True when ``prompt_tokens`` excludes cached tokens (Anthropic,
                Bedrock); False when it includes them (OpenAI-compatible). Per Pipecat's
                ``LLMTokenUsage`` docstring.

        Returns:
            A ``no-cache-reads`` warning the first time reads stay at zero on
            ``after_turns`` requests that each follow a request of at least
            ``minimum_tokens`` input tokens; else nothing.
        """
        reads = cache_read_tokens or 0
        total = prompt_tokens
        if net_of_cache:
            total += reads + (cache_write_tokens or 0)
        prev_total, self._last_input_tokens = self._last_input_tokens, total
        if cache_read_tokens is None:
            return []
        self._usage_reports += 1
        if self._usage_reports < 2 or prev_total < max(self.minimum_tokens, 1):
            return []
        self._eligible += 1
        self._reads += reads
        self._writing += 1 if cache_write_tokens else 0
        if self._reads or self._eligible < self.after_turns:
            return []
        if ("no-cache-reads", "") in self._warned:
            return []
        writes = f", {cache_write_tokens} written" if cache_write_tokens else ""
        cost = ""
        if self._writing == self._eligible:
            # Paid cache writes on every request and no read: worse than no caching.
            cost = (
                " Every one of them wrote the cache instead: with paid cache writes "
                "(Anthropic: 1.25x the input price for 5 minutes, 2x for 1 hour) this costs "
                "more than no caching. Volatile content inside the block that carries the "
                "cache breakpoint does this even at the block's very end (Pipecat's "
                "enable_prompt_caching marks the whole system prompt): put it in a "
                "separate block after the breakpoint, or in the latest user message."
            )
        return [
            self._emit(
                GuardWarning(
                    kind="no-cache-reads",
                    cause="",
                    message=(
                        f"cache reads stayed at 0 over {self._eligible} requests whose prefix "
                        f"was past the {self.minimum_tokens}-token minimum (last input "
                        f"{total} tokens{writes}): the prefix is not being reused. Look for "
                        "prefix-change warnings above, or run `pipecat-fast lint` on the "
                        "prompt." + cost
                    ),
                    request=self.requests,
                    detail={
                        "input_tokens": total,
                        "eligible_requests": self._eligible,
                        "writing_requests": self._writing,
                    },
                )
            )
        ]
