"""A chat request as the model reads it, in tokens: the one home for request-to-text counting.

Levers need to know how many prompt tokens a request carries before they send it (is a
prefill above the provider's minimum cacheable prefix?), and the OpenAI emulator needs the
token sequence a provider's prefix cache would compare. Both come from here.

What is counted (OpenAI's chat format, ``o200k_base``):

- every message costs its role and content tokens plus **3 framing tokens** (start, separator,
  end; one more when it carries a ``name``), and the reply is primed with **3 more**
  (``<start>assistant<message>``) — OpenAI's documented count for the gpt-4o/4.1 family
  (OpenAI Cookbook, "How to count tokens with tiktoken");
- tool calls in an assistant message are counted as their JSON;
- tool definitions are counted as the model reads them — rendered into a TypeScript-like
  ``namespace functions`` block (the form OpenAI's models are shown, per the same cookbook's
  function-counting section), not as the raw JSON schema — framed as one more message, and
  placed first (a change to the tools changes everything after it, as on the hosted APIs).

Framing tokens are negative ids in :func:`chat_tokens` (no vocabulary token collides with
them), so a prefix comparison treats them as tokens of their own. Anthropic's and self-hosted
engines' tokenizers differ; for them the count is an estimate of the same shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pipecat_fast.tokens import DEFAULT_ENCODING, encode, encode_within

MESSAGE_FRAMING_TOKENS = 3
"""Tokens OpenAI adds around every message (start, separator, end)."""
NAME_TOKENS = 1
"""One more for a message that carries a ``name``."""
REPLY_PRIMING_TOKENS = 3
"""``<start>assistant<message>``: the tokens that open the reply."""

START, SEPARATOR, END = -1, -2, -3
"""Framing token ids in :func:`chat_tokens` (outside every vocabulary)."""


def content_text(content: Any) -> str:
    """The text of a message ``content``: a string, or a list of parts.

    Text parts (``{"type": "text", "text": ...}``) give their text; any other part (an image,
    a document, a tool result block) its JSON with sorted keys. ``None`` gives ``""``.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            else:
                parts.append(json.dumps(part, ensure_ascii=False, sort_keys=True, default=str))
        return "".join(parts)
    return json.dumps(content, ensure_ascii=False, default=str)


def message_text(message: Any) -> str:
    """The text of one message the model reads: its content, then its tool calls as JSON."""
    if not isinstance(message, dict):
        return json.dumps(message, ensure_ascii=False, default=str)
    text = content_text(message.get("content"))
    if message.get("tool_calls"):
        text += json.dumps(message["tool_calls"], ensure_ascii=False, default=str)
    return text


def _ts_type(schema: Any, indent: str) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"]) or "any"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_ts_type({**schema, "type": k}, indent) for k in kind) or "any"
    if kind in ("integer", "number"):
        return "number"
    if kind in ("string", "boolean", "null"):
        return kind
    if kind == "array":
        return f"{_ts_type(schema.get('items'), indent)}[]"
    if kind == "object" or "properties" in schema:
        return _ts_object(schema, indent)
    return "any"


def _ts_object(schema: dict, indent: str) -> str:
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return "object"
    required = set(schema.get("required") or [])
    lines = ["{"]
    for name, prop in properties.items():
        description = prop.get("description") if isinstance(prop, dict) else None
        if description:
            lines.append(f"{indent}// {description}")
        optional = "" if name in required else "?"
        lines.append(f"{indent}{name}{optional}: {_ts_type(prop, indent)},")
    lines.append("}")
    return "\n".join(lines)


def tools_text(tools: Any) -> str:
    """Tool definitions as the model reads them (a ``namespace functions`` block).

    OpenAI-format function tools (``{"type": "function", "function": {...}}``) and bare
    function objects are rendered; any other tool is kept as its JSON.
    """
    if not tools:
        return ""
    if not isinstance(tools, list):
        return json.dumps(tools, ensure_ascii=False, default=str)
    lines = ["namespace functions {", ""]
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if fn is None and isinstance(tool, dict) and "name" in tool:
            fn = tool
        if not isinstance(fn, dict):
            lines.append(json.dumps(tool, ensure_ascii=False, default=str))
            continue
        if fn.get("description"):
            lines.append(f"// {fn['description']}")
        params = fn.get("parameters") or fn.get("input_schema")
        args = _ts_object(params, "") if isinstance(params, dict) else "object"
        if args == "object":
            lines.append(f"type {fn.get('name', '')} = () => any;")
        else:
            lines.append(f"type {fn.get('name', '')} = (_: {args}) => any;")
        lines.append("")
    lines.append("} // namespace functions")
    return "\n".join(lines)


def _framed(role: str, text: str, name: str | None, encoding: str, budget: int | None) -> list[int]:
    tokens = [START, *encode(role, encoding)]
    if name:
        tokens.extend([SEPARATOR, *encode(name, encoding)])
    tokens.append(SEPARATOR)
    if budget is None:
        tokens.extend(encode(text, encoding))
    else:  # a huge text costs about the budget's worth of work, not its whole length
        tokens.extend(encode_within(text, max(0, budget - len(tokens)), encoding))
    tokens.append(END)
    return tokens


def _blocks(
    messages: Iterable[Any], tools: Any, system: Any
) -> Iterable[tuple[str, str, str | None]]:
    if tools:
        yield "system", tools_text(tools), None
    if system:
        yield "system", content_text(system), None
    for message in messages or []:
        role = str(message.get("role", "")) if isinstance(message, dict) else ""
        name = message.get("name") if isinstance(message, dict) else None
        yield role, message_text(message), str(name) if name else None


def chat_tokens(
    messages: Iterable[Any],
    tools: Any = None,
    *,
    system: Any = None,
    encoding: str = DEFAULT_ENCODING,
    limit: int | None = None,
) -> list[int]:
    """The request's prompt as token ids: tools, system, messages, then the reply priming.

    Args:
        messages: Chat messages (``role``, ``content``, optional ``name``, ``tool_calls``).
        tools: Tool definitions as sent.
        system: A separate system instruction (Anthropic's ``system``), placed first.
        encoding: Token encoding.
        limit: Stop once more than this many tokens are known (for a context-window check:
            the result is then a prefix, longer than ``limit``).

    Returns:
        Token ids; framing tokens are :data:`START`, :data:`SEPARATOR`, :data:`END`.
    """
    tokens: list[int] = []
    for role, text, name in _blocks(messages, tools, system):
        budget = None if limit is None else limit - len(tokens)
        tokens.extend(_framed(role, text, name, encoding, budget))
        if limit is not None and len(tokens) > limit:
            return tokens
    tokens.extend([START, *encode("assistant", encoding), SEPARATOR])
    return tokens


def count_chat_tokens(
    messages: Iterable[Any],
    tools: Any = None,
    *,
    system: Any = None,
    encoding: str = DEFAULT_ENCODING,
) -> int:
    """Prompt tokens of a chat request as the provider counts them (see module docs)."""
    return len(chat_tokens(messages, tools, system=system, encoding=encoding))
