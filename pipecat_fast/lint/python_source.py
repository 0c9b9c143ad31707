"""Python-source mode: find prompt-building code and grade the volatile values it uses.

A *sink* is an expression that becomes (part of) what the model reads:

* the system slot: assignments to names like ``system_prompt``/``instructions``/
  ``self.personality``, keywords such as ``system_instruction=``, ``instructions=``,
  ``role_message=``, ``{"role": "system", "content": ...}``, ``{"prompt": ...}``, and
  f-strings that open with "You are";
* the message slot (after system prompt and tools): ``{"role": "user"|"developer", ...}``
  and per-turn instructions (``generate_reply(instructions=...)``);
* the tools slot (before the system prompt): ``tools=``, ``functions=``, ``{"functions": ...}``.

Each sink is rendered statically (:mod:`pipecat_fast.lint.py_render`); every volatile source
in a hole is graded by where the hole sits and how often the value changes.
"""

from __future__ import annotations

import ast
import contextvars
import re
from collections.abc import Callable
from dataclasses import dataclass

from pipecat_fast import tokens
from pipecat_fast.lint.findings import (
    LATE_TAIL_TOKENS,
    VOLATILE_RULES,
    Finding,
    Frequency,
    Position,
    Severity,
    grade,
    late_share,
    shorten,
)
from pipecat_fast.lint.placeholders import (
    Placeholder,
    classify_placeholder,
    find_placeholders,
    platform_fills,
)
from pipecat_fast.lint.project import imports_per_call_framework
from pipecat_fast.lint.prompt import below_minimum_message, breakpoint_cost
from pipecat_fast.lint.prompt_text import opens_like_prompt, reads_as_prompt
from pipecat_fast.lint.py_classify import (
    Classifier,
    Source,
    bind_arguments,
    function_returns,
    is_literal,
    is_setting,
)
from pipecat_fast.lint.py_index import ModuleIndex, Param, parse
from pipecat_fast.lint.py_render import Hole, Rendered, Renderer
from pipecat_fast.lint.textmap import TextMap
from pipecat_fast.lint.vocab import classify_name, words
from pipecat_fast.providers.llm import PrefixMinimum, prefix_minimum
from pipecat_fast.providers.prompt_vars import StateTemplating, state_templating

SYSTEM_WORDS = {
    "prompt",
    "prompts",
    "instruction",
    "instructions",
    "system",
    "persona",
    "personality",
    "preamble",
}
NOT_TEXT_WORDS = {"name", "id", "ids", "count", "index", "len", "tokens", "path", "file", "key"}
"""A name ending in one of these holds something about a prompt, not prompt text."""
BUILD_METHODS = {"format", "format_map", "replace", "join", "substitute", "safe_substitute"}
SYSTEM_KEYWORDS = {
    "system_instruction",
    "system_prompt",
    "system_message",
    "instructions",
    "instruction",
    "system",
    "prompt",
    "role_message",
    "preamble",
    "persona",
}
MESSAGE_CALLS = {"generate_reply", "say", "add_message", "add_messages", "append"}
USER_TURN_WORDS = frozenset({"user", "human"})
"""First words of a prompt-named variable that holds a user turn (``user_prompt``)."""

CONTEXT_WORDS = frozenset({"context", "ctx"})
"""A receiver named like a conversation context (``self.context``, ``chat_ctx``)."""

APPENDED_MESSAGE_KEYWORDS = {"task_messages"}
"""List keywords whose messages join the context after the conversation (Pipecat Flows)."""


MESSAGE_CLASSES = re.compile(r"(System|Human|User|AI|Assistant|Developer|Chat)Message$")
"""Message objects of LangChain-style and provider SDKs (``SystemMessage(content=...)``)."""


def message_content(node: ast.AST) -> ast.AST | None:
    """The ``content`` of a ``{"role": ..., "content": ...}`` literal or a message object."""
    if isinstance(node, ast.Call) and MESSAGE_CLASSES.search(_call_name(node) or ""):
        content = next((k.value for k in node.keywords if k.arg == "content"), None)
        return content if content is not None else (node.args[0] if node.args else None)
    if not isinstance(node, ast.Dict):
        return None
    keys = {
        k.value: v
        for k, v in zip(node.keys, node.values, strict=True)
        if isinstance(k, ast.Constant) and isinstance(k.value, str)
    }
    if isinstance(keys.get("role"), ast.Constant) and "content" in keys:
        return keys["content"]
    return None


TOOL_KEYWORDS = {"tools", "functions", "standard_tools"}
TOOL_RULES = {"CB101", "CB102", "CB106"}
"""What counts in a tool list: an awaited tool list (an MCP server's) is usually stable."""
_YOU_ARE = re.compile(
    r"\s*(?:(?i:your name is|act as)\b"
    r"|(?i:you are|you're|you’re)\s+(?:(?i:an?|the|now|speaking|talking|calling|acting|playing"
    r"|helping|assisting|working|representing)\b|[A-Z{]))"
)
"""How a role prompt opens: "You are a ...", "You're Emily", "You are {name}", "Act as".
Not "You're all set for {date}": a confirmation the bot says (a tool's result)."""

_KIND = {
    "CB101": "time/date",
    "CB102": "random value",
    "CB103": "caller data",
    "CB104": "fetched content",
    "CB105": "conversation history",
    "CB106": "order-unstable data",
}


@dataclass(frozen=True)
class Sink:
    """An expression whose value the model reads.

    Attributes:
        value: The expression.
        slot: ``"system"``, ``"append"`` (``+=`` onto a prompt), ``"message"`` or ``"tools"``.
        label: Where it goes, for messages (``"`system_prompt`"``).
        name: The name assigned, for ``NAME = ...`` sinks (templates are named).
        block: True for the text of a content block that carries ``cache_control``.
        per_turn: For messages: a one-turn instruction (``generate_reply(instructions=)``)
            sent once and never part of a cached prefix, rather than a message that stays
            in the context or is a request of its own.
    """

    value: ast.AST
    slot: str
    label: str
    name: str | None = None
    block: bool = False
    per_turn: bool = False
    rewrite: bool = False
    """A message's content set in place (``m["content"] = x + m["content"]``): the
    message's own earlier text in it is not new content."""
    template: bool = False
    """A literal read as a prompt template by its text (see ``_template_literal``): its
    placeholders named like volatile values are graded."""
    last_append: bool = False
    """For ``+=`` onto a prompt: the last such append to that name in its function, not in
    a loop, so what it appends is the prompt's tail."""
    fallback: str = ""
    """Found by its text alone (it reads as a prompt; no sink in view takes it):
    ``"opening"`` when the text opens like a prompt, ``"body"`` otherwise."""
    state: StateTemplating | None = None
    """The framework that fills this instruction's ``{name}`` from session state (ADK)."""
    opens_context: bool = False
    """For messages: with only its node's role messages before it, it opens the context (a
    Pipecat Flows node's task message where the node sets ``role_messages``): graded by
    its own layout, as the prompt's text. Other messages come after the system prompt and
    are late."""
    report_first: int = 0
    """For a list of messages laid out together for positions only: report the values of
    its first this many messages, not the others (they are graded by their own sinks)."""


def _target_name(target: ast.AST) -> str | None:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    if isinstance(target, ast.Subscript):
        key = target.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
    return None


def _names_prompt_text(name: str) -> bool:
    w = words(name)
    return bool(w) and bool(set(w) & SYSTEM_WORDS) and w[-1] not in NOT_TEXT_WORDS


SHORT_VALUE_TOKENS = 16
"""What a value named like a short scalar (``timezone``, ``caller_name``) can take up at
most, for bounding a position: a timezone, a name, an id or a date fits in it."""
SHORT_VALUE_WORDS = {
    "timezone",
    "tz",
    "zone",
    "locale",
    "language",
    "lang",
    "name",
    "id",
    "sid",
    "number",
    "count",
    "date",
    "time",
    "day",
    "weekday",
    "month",
    "year",
    "hour",
    "minute",
    "phone",
    "email",
    "currency",
    "city",
    "country",
}


def _message_text(node: ast.AST) -> bool:
    """``msg["content"]``, ``messages[i]["content"]``: the text of a message dict."""
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and node.slice.value == "content"
    )


def _system_guarded(tree: ast.Module) -> set[int]:
    """Statements under an ``if`` that tests a message's role for ``"system"``.

    ``if msg.get("role") == "system":`` / ``if m["role"] == "system":``: the message the
    body rewrites is the system message.
    """
    out: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            continue
        if not isinstance(test.ops[0], ast.Eq):
            continue
        sides = [test.left, *test.comparators]
        if not any(isinstance(x, ast.Constant) and x.value == "system" for x in sides):
            continue
        if "role" not in ast.unparse(test):
            continue
        for stmt in node.body:
            out.update(id(n) for n in ast.walk(stmt))
    return out


def _not_in_tool_list(sink: Sink, src: Source, hole: Hole, index: ModuleIndex) -> bool:
    """A source of a tool list that does not change the list.

    A rule a tool list cannot bust, or a tool named in the list (:func:`_tool_reference`).
    """
    return sink.slot == "tools" and (
        src.rule not in TOOL_RULES or _tool_reference(sink, src, hole.node, index)
    )


_SCHEMA_KEYWORDS = {"name", "description", "parameters", "properties", "enum", "title", "schema"}
"""Keywords of a tool-schema constructor whose value is the schema's own text."""


def _tool_lists(value: ast.AST, index: ModuleIndex) -> list[ast.List | ast.Tuple]:
    """The literal lists a tool-list value is (``tools=[...]``, or a name assigned one)."""
    if isinstance(value, (ast.List, ast.Tuple)):
        return [value]
    if isinstance(value, ast.Name) and index.owns(value):
        return [v for v in index.resolve_name(value) if isinstance(v, (ast.List, ast.Tuple))]
    return []


def _tool_reference(sink: Sink, src: Source, node: ast.AST, index: ModuleIndex) -> bool:
    """A tool named in a tool list (``tools=[get_weather, get_datetime]``), judged by its name.

    The element is the tool itself (a function, a schema); its name says what the tool
    does, not that the list changes. So is a name only passed to a tool factory in the list
    by a keyword that is not the schema's text (``create_transfer_tool(call_uuid=call_uuid)``,
    not ``description=``): it binds the tool's handler, and the schema says nothing of it.
    """
    lists = _tool_lists(sink.value, index)
    elements = [e for lst in lists for e in lst.elts]
    if not (src.guessed and elements):
        return False
    if isinstance(src.origin, (ast.Name, ast.Attribute)) and any(e is src.origin for e in elements):
        return True
    name = src.origin.arg if isinstance(src.origin, ast.arg) else getattr(src.origin, "id", None)
    if name is None:
        return False
    uses = [n for lst in lists for n in ast.walk(lst) if isinstance(n, ast.Name) and n.id == name]
    passed = {
        id(k.value)
        for e in elements
        if isinstance(e, ast.Call)
        for k in e.keywords
        if k.arg and k.arg not in _SCHEMA_KEYWORDS
    }
    return bool(uses) and all(id(n) in passed for n in uses)


_PERSON_NAME_WORDS = {"name", "first", "full", "given"}
"""A value called only ``name``/``first_name``: whose name it is, the text around it says."""
_ADDRESSED = re.compile(
    r"(?:\b(?:help(?:ing)?|assist(?:ing)?|coach(?:ing)?|support(?:ing)?|greet(?:ing)?|"
    r"(?:talk|speak|chat)(?:ing)?\s+(?:to|with)|hi|hello|hey|dear|"
    r"(?:user|caller|customer|client|patient|member|student|learner)(?:'s)?\s+(?:first\s+)?"
    r"name\s+is)|\b(?:user|caller|customer|client|patient|student|learner)\s*:)[\s,\"']*$",
    re.IGNORECASE,
)
"""Text just before a value that says it is the name of the person spoken to."""


def _addressed_person(skeleton: str, start: int, hole: Hole) -> bool:
    """``...helping {name} navigate...``, ``Hi {first_name}!``: a person's name, per caller.

    Only a plain name or parameter called ``name`` (``first_name``, ``full_name``); the
    agent's own name comes after "You are" or "Your name is", which this does not match.
    """
    node = hole.node.value if isinstance(hole.node, ast.FormattedValue) else hole.node
    if isinstance(node, ast.Name):
        ident = node.id
    elif isinstance(node, ast.Constant) and hole.name:
        ident = hole.name.strip("{} ")  # a template's placeholder
    else:
        return False
    w = words(ident)
    if not w or w[-1] != "name" or not set(w) <= _PERSON_NAME_WORDS:
        return False
    return _ADDRESSED.search(skeleton[max(0, start - 40) : start]) is not None


def _own_text(sink: Sink, hole: Hole) -> bool:
    """The earlier text of a message whose content is rewritten in place."""
    node = hole.node.value if isinstance(hole.node, ast.FormattedValue) else hole.node
    return sink.rewrite and _message_text(node)


def _short_value(node: ast.AST) -> bool:
    """A name, attribute or getter named like a short scalar (``self.timezone``)."""
    if isinstance(node, ast.FormattedValue):
        node = node.value
    if isinstance(node, ast.Call) and not node.args:
        node = node.func
    name = _target_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    w = words(name or "")
    return bool(w) and w[-1] in SHORT_VALUE_WORDS


DATA_WORDS = {"csv", "json", "yaml", "table", "data", "snapshot", "states", "records", "rows"}
"""Last words of a name that holds data rather than instructions (``entity_csv``,
``device_states``): appended after a whole prompt, such data is part of the appended
block, whatever its size."""


def _holds_data(node: ast.AST) -> bool:
    """A name or attribute named like data (``entity_csv``, ``self.device_states``)."""
    if isinstance(node, ast.FormattedValue):
        node = node.value
    name = _target_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    w = words(name or "")
    return bool(w) and w[-1] in DATA_WORDS


def _names_history(node: ast.AST) -> bool:
    """A name or attribute named like a conversation history (``conversation_history``)."""
    if isinstance(node, ast.FormattedValue):
        node = node.value
    name = _target_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    guess = classify_name(name) if name else None
    return guess is not None and guess[0] == "CB105"


def _holds_prompt_text(node: ast.AST) -> bool:
    """A name or attribute named like a whole prompt (``base_prompt``, ``self.instructions``).

    Also a message's own text, ``msg["content"]``: what a message already holds (the system
    prompt, when the message is the system message).
    """
    if isinstance(node, ast.FormattedValue):
        node = node.value
    if _message_text(node):
        return True
    name = _target_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    return bool(name) and _names_prompt_text(name)


def _builds_text(
    value: ast.AST, segments: list, index: ModuleIndex, classifier: Classifier | None = None
) -> bool:
    """True for code that builds prompt text.

    Literal text, a format-like call, or a call of a function defined in view that builds
    the text it returns. A bare name, other call or await only passes a value on; it is
    linted where it is built.
    """
    if any(isinstance(s, str) and s.strip() for s in segments):
        return True
    node = value
    if isinstance(node, ast.Name):
        resolved = index.resolve_name(node)
        node = resolved[0] if len(resolved) == 1 else node
    return (
        (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in BUILD_METHODS
        )
        or isinstance(node, (ast.JoinedStr, ast.BinOp))
        or (classifier is not None and _returns_text(node, classifier))
    )


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def _separators_only(value: ast.AST) -> bool:
    """An f-string whose literal text is whitespace and punctuation only (``f"- {x}"``)."""
    if not isinstance(value, ast.JoinedStr):
        return False
    text = "".join(str(v.value) for v in value.values if isinstance(v, ast.Constant))
    return not re.search(r"\w", text)


def _last_append(tree: ast.Module, node: ast.AugAssign) -> bool:
    """True when ``node`` (``x += ...``) is the last append to ``x`` in its function.

    What it appends ends the text. Also in a loop whose piece is values joined by
    separators only (``for node in nodes: text += f"; {node}"``): each pass's value is
    followed by the next pass's, as volatile, and no static text; a piece with words of its
    own is repeated static text after the first pass's value, so it does not count.
    """
    if not isinstance(node.target, ast.Name):
        return False
    scope: ast.AST = tree
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn is not scope:
            if any(n is node for n in ast.walk(fn)):
                scope = fn  # ast.walk is breadth first: the innermost function comes last
    loops = (ast.For, ast.AsyncFor, ast.While)
    constants = _module_strings(tree)
    tail = 0  # tokens
    head = 0
    for n in ast.walk(scope):
        if (
            isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == node.target.id for t in n.targets)
            and n.lineno < node.lineno
        ):
            text = _fixed_text(n.value, lambda name: constants.get(name.id))
            head = max(head, tokens.count_tokens(text) if text else 0)
        if (
            isinstance(n, loops)
            and any(m is node for m in ast.walk(n))
            and not _separators_only(node.value)
        ):
            return False
        if (
            isinstance(n, ast.AugAssign)
            and n is not node
            and isinstance(n.target, ast.Name)
            and n.target.id == node.target.id
            and n.lineno > node.lineno
            and not _labelled_values(n.value)
        ):
            text = _fixed_text(n.value, lambda name: constants.get(name.id))
            if text is None:
                return False
            tail += tokens.count_tokens(text)
    # Closing lines of fixed text after it (`prompt += "\n\nRULES:\n1. ..."`, or a
    # module constant of them), under one cache increment in all or under a third of the
    # fixed text the prompt started from: what they add costs less than what stays cached.
    return tail < max(LATE_TAIL_TOKENS, head // 2)


def _module_strings(tree: ast.Module) -> dict[str, ast.Constant]:
    """Top-level ``NAME = "..."`` string constants of a module, by name."""
    out: dict[str, ast.Constant] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
            if isinstance(stmt.value.value, str):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        out[t.id] = stmt.value
    return out


def _fixed_text(node: ast.AST, resolve: Callable[[ast.Name], ast.AST | None]) -> str | None:
    """A string literal's text, or that of the string constant a name resolves to."""
    if isinstance(node, ast.Name):
        node = resolve(node)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


LABEL_WORDS = 3
"""A later append of at most this many words around its values adds no static text."""


def _labelled_values(value: ast.AST) -> bool:
    """An f-string of values with a short label at most (``f", order: {order_id}"``).

    Appended after a value, it is more per-call text, not static text after it: what
    follows the first value is as volatile as the value itself.
    """
    if not isinstance(value, ast.JoinedStr):
        return False
    if not any(isinstance(v, ast.FormattedValue) for v in value.values):
        return False
    text = " ".join(str(v.value) for v in value.values if isinstance(v, ast.Constant))
    return len(re.findall(r"\w+", text)) <= LABEL_WORDS


def find_sinks(tree: ast.Module, project=None) -> list[Sink]:
    """Every prompt sink in a module, each value node once (first classification wins).

    ``project`` (the linted tree) tells which functions some module calls.
    """
    sinks: list[Sink] = []
    seen: set[int] = set()

    def add(
        value: ast.AST | None,
        slot: str,
        label: str,
        name: str | None = None,
        block=False,
        per_turn=False,
        template=False,
        rewrite=False,
        last_append=False,
        state=None,
        report_first=0,
        opens_context=False,
    ) -> None:
        if value is None or id(value) in seen:
            return
        seen.add(id(value))
        sinks.append(
            Sink(
                value,
                slot,
                label,
                name,
                block,
                per_turn,
                rewrite,
                template,
                last_append,
                state=state,
                report_first=report_first,
                opens_context=opens_context,
            )
        )

    state = _state_framework(tree)
    appended: set[int] = set()
    appended_messages: set[int] = set()
    guarded = _system_guarded(tree)
    called = _called_names(tree, project)
    lambdas: list[tuple[str, ast.Lambda]] = []
    after_system = _messages_after_system(tree)
    appended_after_system = _appended_after_system(tree)
    nodes_first: list[tuple[ast.List, int]] = []
    opening_tasks: set[int] = set()
    combined: set[int] = set()
    later_nodes = _later_flow_nodes(tree)
    for node in ast.walk(tree):
        pair = _flows_role_and_task(node)
        if pair is not None and id(node) in later_nodes:
            pair = None  # its task messages join the context after the conversation so far
        if pair is not None:
            # A Pipecat Flows node's role messages are followed by its task messages: on the
            # first node nothing comes between them, so the task text is what a value at
            # the role message's end costs.
            joined = ast.List(elts=[*pair[0].elts, *pair[1].elts], ctx=ast.Load())
            ast.copy_location(joined, pair[0])
            nodes_first.append((joined, len(pair[0].elts)))
            combined.add(id(pair[0]))
            # Only the first task message follows the role messages directly; a second
            # one is a message added after them.
            opening_tasks.add(id(pair[1].elts[0]))
        if isinstance(node, ast.Call):
            lists = [k.value for k in node.keywords if k.arg in APPENDED_MESSAGE_KEYWORDS]
            if _call_name(node) in ("add_messages", "extend"):
                lists += list(node.args[:1])
            if (
                _call_name(node) == "add_message"
                and isinstance(node.func, ast.Attribute)
                and set(words(ast.unparse(node.func.value))) & CONTEXT_WORDS
                and node.args
                and isinstance(node.args[0], ast.Dict)
            ):
                # `self.context.add_message({...})`: Pipecat's `LLMContext.add_message`
                # appends after what the context holds (the system prompt, the turns).
                appended_messages.add(id(node.args[0]))
            for lst in lists:
                if isinstance(lst, (ast.List, ast.Tuple)):
                    appended.add(id(lst))
                    appended_messages.update(id(e) for e in lst.elts)
        elif isinstance(node, ast.Dict):
            # A Pipecat Flows node written as a dict literal (``NodeConfig`` is a TypedDict).
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and k.value in APPENDED_MESSAGE_KEYWORDS:
                    if isinstance(v, (ast.List, ast.Tuple)):
                        appended.add(id(v))
                        appended_messages.update(id(e) for e in v.elts)
    for joined, n_role in nodes_first:
        contents = [c for e in joined.elts[:n_role] if (c := message_content(e)) is not None]
        if contents:
            # (The task messages keep their own sinks: graded as messages, and a helper's
            # parameter that fills one is followed to its callers.)
            add(joined, "system", "a Flows node's role and task messages", report_first=n_role)
            seen.update(id(c) for c in contents)
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)) and id(node) in combined:
            continue
        if isinstance(node, (ast.List, ast.Tuple)) and id(node) not in appended:
            contents = [c for e in node.elts if (c := message_content(e)) is not None]
            if contents and all(
                message_content(e) is not None or isinstance(e, ast.Starred) for e in node.elts
            ):
                if id(node) in after_system:
                    # `messages.create(system=SYSTEM, messages=[...])`: the system prompt is
                    # its own argument, so every message here comes after it.
                    for c in contents:
                        add(c, "message", "a message after the request's system prompt")
                    continue
                # A request (or a context's first messages): graded over all its messages.
                add(node, "system", "the messages of a request")
                seen.update(id(c) for c in contents)
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                name = _target_name(t)
                if name and _names_prompt_text(name) and isinstance(node.value, ast.Lambda):
                    lambdas.append((name, node.value))
                elif name and _names_prompt_text(name) and words(name)[0] in USER_TURN_WORDS:
                    # `user_prompt = f"Transcript: {t}..."`: the user turn's text, sent as a
                    # message after the system prompt (named for the role it is sent as).
                    add(node.value, "message", f"`{shorten(ast.unparse(t), 40)}` (a user turn)")
                elif name and _names_prompt_text(name):
                    slot = "append" if isinstance(node, ast.AugAssign) else "system"
                    simple = name if isinstance(t, ast.Name) else None
                    last = isinstance(node, ast.AugAssign) and _last_append(tree, node)
                    add(
                        node.value,
                        slot,
                        f"`{shorten(ast.unparse(t), 40)}`",
                        simple,
                        last_append=last,
                    )
                elif name and name in TOOL_KEYWORDS:
                    if not isinstance(node.value, ast.Attribute):
                        # (`tools = context.tools` reads a list built, and graded, elsewhere.)
                        add(node.value, "tools", f"`{shorten(ast.unparse(t), 40)}`")
                elif _message_text(t) and not isinstance(node, ast.AugAssign):
                    # `messages[i]["content"] = instruction + msg["content"]`: a message
                    # rewritten in place. The system message when the index is 0 or an
                    # `if` has checked its role; otherwise a message of the context.
                    first = isinstance(t.value, ast.Subscript) and (
                        isinstance(t.value.slice, ast.Constant) and t.value.slice.value == 0
                    )
                    system = first or id(node) in guarded
                    label = "the system message's content" if system else "a message's content"
                    add(node.value, "system" if system else "message", label, rewrite=True)
        elif isinstance(node, ast.Call):
            call = _call_name(node)
            for kw in node.keywords:
                fills = state is not None and kw.arg in state.keywords
                if kw.arg in SYSTEM_KEYWORDS or fills:
                    per_turn = call in MESSAGE_CALLS
                    slot = "message" if per_turn else "system"
                    add(
                        kw.value,
                        slot,
                        f"`{call}({kw.arg}=...)`",
                        per_turn=per_turn,
                        state=state if fills else None,
                    )
                elif kw.arg in TOOL_KEYWORDS:
                    add(kw.value, "tools", f"`{call}({kw.arg}=...)`")
                elif kw.arg and "_".join(words(kw.arg)) in SYSTEM_KEYWORDS:
                    # An options object's `systemInstruction` (JavaScript's spelling).
                    for text in _content_parts(kw.value) or [kw.value]:
                        add(text, "system", f"`{call}({kw.arg}=...)`")
        elif isinstance(node, ast.Dict):
            keys = {
                k.value: v
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            }
            if "cache_control" in keys and "text" in keys:
                add(keys["text"], "system", "a text block with `cache_control`", block=True)
            for key, value in keys.items():
                if isinstance(value, ast.Lambda) and _names_prompt_text(key):
                    # `{"getPrompt": () => clock() + PROMPT}`: a prompt-named function
                    # (see the `def` case below) as an object's member.
                    lambdas.append((key, value))
            role = keys.get("role")
            if isinstance(role, ast.Constant) and "content" in keys:
                slot = "system" if role.value == "system" else "message"
                # The model's own turn or a tool's result: a turn of the conversation,
                # which comes after the system prompt, the tools and the history before it.
                turn = role.value in TURN_ROLES
                if id(node) in appended_messages or id(node) in appended_after_system:
                    # A node's task message (Pipecat Flows) joins the context after the role
                    # messages and the conversation so far: what precedes it is cached, and
                    # only the rest of the message after a value is at stake.
                    slot = "message"
                add(
                    keys["content"],
                    slot,
                    f"a {role.value!s} message",
                    per_turn=turn,
                    opens_context=id(node) in opening_tasks,
                )
            for key in SYSTEM_KEYWORDS & keys.keys():
                add(keys[key], "system", f'`"{key}"` entry')
            for key, value in keys.items():
                # JavaScript spells Gemini's `system_instruction` `systemInstruction`, and
                # its value may be a Content, `{parts: [{text: ...}]}`: the text parts.
                if key in SYSTEM_KEYWORDS or "_".join(words(key)) not in SYSTEM_KEYWORDS:
                    continue
                for text in _content_parts(value) or [value]:
                    add(text, "system", f'`"{key}"` entry')
            for key in TOOL_KEYWORDS & keys.keys():
                add(keys[key], "tools", f'`"{key}"` entry')
    output = _output_text(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values and id(node) not in output:
            first = node.values[0]
            if isinstance(first, ast.Constant) and _YOU_ARE.match(str(first.value)):
                add(node, "system", "an f-string prompt")
        elif (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and _names_prompt_text(node.name)
            and node.name not in called
        ):
            # `def make_system_prompt(self): return TEMPLATE.format(...)`, never called in
            # view: what a function named like a prompt returns is that prompt, wherever
            # its caller sends it. (Called in view, it is graded where its result goes,
            # with the caller's arguments.)
            for value in function_returns(node):
                add(value, "system", f"what `{node.name}()` returns")
    for name, fn in lambdas:
        if name not in called:
            add(fn.body, "system", f"what `{name}()` returns")
    for node in _template_literals(tree, project):
        add(node, "system", "a prompt template", template=True)
    for chain in _section_chains(tree):
        add(chain, "system", "the prompt sections added with `prompt_add_section()`-style calls")
    later = _later_message_names(tree)
    if later:
        # `prompt = f"Client {name} calling..."` sent as a later message of a request
        # (`[system, {"role": ..., "content": prompt}]`): graded there, after the
        # system prompt, not as a prompt of its own.
        sinks = [s for s in sinks if not (s.name in later and s.slot in ("system", "append"))]
    tails = _tail_fragment_names(tree)
    if tails:
        # `doctor_prompt = f"# Doctors: {names}..."` then `instructions = BASE + doctor_prompt`:
        # a piece of a prompt with text before it wherever it is used, graded there.
        sinks = [s for s in sinks if not (s.name in tails and s.slot == "system")]
    return sinks


def _tail_fragment_names(tree: ast.Module) -> set[str]:
    """Names only ever read after other text of a ``+`` chain or an f-string."""
    after: set[str] = set()
    elsewhere: set[str] = set()
    marked: set[int] = set()
    for node in ast.walk(tree):
        parts: list[ast.AST] = []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            parts = [node.right]
        elif isinstance(node, ast.JoinedStr):
            parts = [
                v.value
                for i, v in enumerate(node.values)
                if i and isinstance(v, ast.FormattedValue) and not v.format_spec
            ]
        for part in parts:
            if isinstance(part, ast.Name):
                after.add(part.id)
                marked.add(id(part))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and id(node) not in marked:
            elsewhere.add(node.id)
    return after - elsewhere


def _appended_after_system(tree: ast.Module) -> set[int]:
    """Messages appended to a list that already opens with a system message.

    ``messages.append({"role": "system", "content": SYSTEM})`` and then, lines below in
    the same function, ``messages.append({"role": "system", "content": f"{memories}"})``:
    the later one follows the system prompt (and whatever came between), so it is a later
    message, whatever its role. Returns the ``id`` of each such message dict.
    """
    out: set[int] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        firsts: dict[str, tuple[int, str]] = {}  # list name -> (line, role of its opening)
        later: list[tuple[str, int, ast.Dict]] = []
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name) and isinstance(node.value, ast.List):
                    elts = node.value.elts
                    if elts and isinstance(elts[0], ast.Dict):
                        role = _role(elts[0])
                        _opening(firsts, target.id, node.lineno, role)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "append"
                and isinstance(node.func.value, ast.Name)
                and len(node.args) == 1
                and isinstance(node.args[0], ast.Dict)
                and message_content(node.args[0]) is not None
            ):
                name = node.func.value.id
                _opening(firsts, name, node.lineno, _role(node.args[0]))
                later.append((name, node.lineno, node.args[0]))
            elif (message := _inserted_after_first(node, fn)) is not None:
                # `context.messages.insert(1, {...})`, `.insert(len(messages) - 1, msg)`: at
                # least the opening message comes before it, whatever else the list holds.
                out.add(id(message))
        for name, line, message in later:
            first = firsts.get(name)
            if first is not None and first[1] == "system" and line > first[0]:
                out.add(id(message))
    return out


def _inserted_after_first(node: ast.AST, fn: ast.AST) -> ast.Dict | None:
    """The message ``msgs.insert(i, message)`` puts after the opening one, if it does.

    The index a constant of 1 or more, or counted from the list's end (``len(msgs) - 1``,
    a name set from ``len(...)``); the message a dict literal or a name ``fn`` assigns one.
    """
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "insert"
        and len(node.args) == 2
    ):
        return None
    index, message = node.args
    if isinstance(message, ast.Name):
        dicts = [
            a.value
            for a in ast.walk(fn)
            if isinstance(a, ast.Assign)
            and isinstance(a.value, ast.Dict)
            and any(isinstance(t, ast.Name) and t.id == message.id for t in a.targets)
        ]
        message = dicts[-1] if len(dicts) == 1 else None
    if not isinstance(message, ast.Dict) or message_content(message) is None:
        return None
    if isinstance(index, ast.Constant):
        return message if type(index.value) is int and index.value >= 1 else None
    return message if _counted_from_end(index, fn) else None


def _counted_from_end(index: ast.AST, fn: ast.AST) -> bool:
    """``len(msgs) - 1``, or a name some assignment in ``fn`` sets from ``len(...)``."""
    exprs = [index]
    if isinstance(index, ast.Name):
        exprs += [
            a.value
            for a in ast.walk(fn)
            if isinstance(a, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == index.id for t in a.targets)
        ]
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len"
        for e in exprs
        for n in ast.walk(e)
    )


def _opening(firsts: dict[str, tuple[int, str]], name: str, line: int, role: str) -> None:
    if name not in firsts or line < firsts[name][0]:
        firsts[name] = (line, role)


REQUEST_MESSAGE_KEYWORDS = {"messages", "input", "contents"}
"""A request's conversation argument, beside a separate system prompt argument."""


def _messages_after_system(tree: ast.Module) -> set[int]:
    """The message lists of requests that take the system prompt as an argument of its own.

    Anthropic's ``system=``, Gemini's ``system_instruction=``, OpenAI Responses'
    ``instructions=``: every message of the list (given directly, or through a name
    assigned a list in the same function) follows that system prompt.
    """
    scopes: dict[int, ast.AST] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(fn):
                scopes[id(n)] = fn  # breadth first: the innermost function is set last
    out: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _call_name(node) in MESSAGE_CALLS:
            continue
        kws = {k.arg: k.value for k in node.keywords if k.arg}
        if not (kws.keys() & SYSTEM_KEYWORDS):
            continue
        for key in REQUEST_MESSAGE_KEYWORDS & kws.keys():
            value = kws[key]
            if isinstance(value, (ast.List, ast.Tuple)):
                out.add(id(value))
            elif isinstance(value, ast.Name):
                for stmt in ast.walk(scopes.get(id(node), tree)):
                    if (
                        isinstance(stmt, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == value.id for t in stmt.targets)
                        and isinstance(stmt.value, (ast.List, ast.Tuple))
                        and stmt.lineno < node.lineno
                    ):
                        out.add(id(stmt.value))
    return out


def _later_flow_nodes(tree: ast.Module) -> set[int]:
    """Pipecat Flows nodes the module shows are not the first (``id`` of each node).

    The first node is the one given to ``flow_manager.initialize(node)``, or set with
    ``set_node`` right after ``initialize()`` in the same function; a node built in a
    function that is not how the first node is made is reached by a transition, and by
    default its messages are appended to the context, after the conversation so far. With
    no ``initialize`` call in view, nothing is known (every node may open the context).
    """
    firsts: set[str] = set()
    known = False
    for fn in [tree, *(n for n in ast.walk(tree) if isinstance(n, _FUNCTIONS))]:
        body = list(ast.walk(fn)) if fn is tree else _own_nodes(fn)
        inits = [
            n
            for n in body
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "initialize"
            and "flow" in words(ast.unparse(n.func.value))
        ]
        if fn is tree:
            known = bool(inits)
            continue
        for init in inits:
            firsts.update(_node_builders(init.args[:1]))
            for n in body:
                if (
                    isinstance(n, ast.Call)
                    and _call_name(n) == "set_node"
                    and n.lineno >= init.lineno
                    and "flow" in words(ast.unparse(n.func))
                ):
                    firsts.update(_node_builders(n.args[1:2] or n.args[:1]))
    if not known or not firsts:
        return set()
    out: set[int] = set()
    for fn in (n for n in ast.walk(tree) if isinstance(n, _FUNCTIONS)):
        if fn.name in firsts:
            continue
        for n in _own_nodes(fn):
            if _flows_role_and_task(n) is not None:
                out.add(id(n))
    return out


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """The nodes of a function's body, not those of functions nested in it."""
    out: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        n = stack.pop()
        if isinstance(n, (*_FUNCTIONS, ast.Lambda, ast.ClassDef)):
            continue
        out.append(n)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _node_builders(args: list[ast.expr]) -> set[str]:
    """Names of what makes the node passed (``create_initial_node(...)``, ``await f()``)."""
    out: set[str] = set()
    for a in args:
        if isinstance(a, ast.Await):
            a = a.value
        if isinstance(a, ast.Call):
            name = _call_name(a)
            if name:
                out.add(name)
        elif isinstance(a, ast.Name):
            out.add(a.id)
    return out


def _flows_role_and_task(node: ast.AST) -> tuple[ast.List, ast.List] | None:
    """A Pipecat Flows node's ``role_messages`` and ``task_messages`` lists, when literal."""
    if isinstance(node, ast.Call):
        parts = {k.arg: k.value for k in node.keywords if k.arg}
    elif isinstance(node, ast.Dict):
        parts = {
            k.value: v
            for k, v in zip(node.keys, node.values, strict=True)
            if isinstance(k, ast.Constant) and isinstance(k.value, str)
        }
    else:
        return None
    role, task = parts.get("role_messages"), parts.get("task_messages")
    if isinstance(role, ast.List) and isinstance(task, ast.List) and role.elts and task.elts:
        return role, task
    return None


def _state_framework(tree: ast.Module) -> StateTemplating | None:
    """The framework the module imports that fills instructions from session state."""
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules.update(a.name for a in node.names)
    for fw in state_templating():
        if any(m == p or m.startswith(p + ".") for m in modules for p in fw.imports):
            return fw
    return None


_STATE_KEY = re.compile(r"(?<!\{)\{(artifact\.[\w.\-]+|(?:[a-z]+:)?[A-Za-z_]\w*)(\?)?\}(?!\})")
"""``{key}``, ``{key?}``, ``{user:key}``, ``{artifact.name}`` in a state-filled instruction."""


def _state_holes(segments: list, sink: Sink) -> list:
    """Split an instruction's text at the session-state keys its framework fills.

    Each key is filled from the session's state before every request (``app:`` keys, set
    per deployment, excepted). Its name says what kind of content it is when it can
    (``{current_time}`` a clock); otherwise it is the session's own state (per session).
    """
    assert sink.state is not None
    out: list = []
    for seg in segments:
        if not isinstance(seg, str):
            out.append(seg)
            continue
        pos = 0
        for m in _STATE_KEY.finditer(seg):
            key = m.group(1)
            if key.startswith(sink.state.config_prefixes):
                continue
            name = key.split(":", 1)[-1].split(".")[-1]
            guess = classify_placeholder(Placeholder(m.start(), m.end(), name, double=False))
            rule, freq, what = guess or ("CB103", Frequency.SESSION, "the session's state")
            if rule not in VOLATILE_RULES:
                rule, freq, what = "CB103", Frequency.SESSION, "the session's state"
            origin = ast.Constant(value=m.group())
            ast.copy_location(origin, sink.value)
            src = Source(rule, freq, origin, f"{m.group()} ({what})", placeholder=True)
            out.append(seg[pos : m.start()])
            out.append(Hole(sink.value, [src], None, None, m.group()))
            pos = m.end()
        out.append(seg[pos:])
    return [s for s in out if not (isinstance(s, str) and not s)]


def _later_message_names(tree: ast.Module) -> set[str]:
    """Names sent, bare, as the content of a message after a request's system message.

    Or as a user, assistant or tool message anywhere (``context.add_message({"role": "user",
    "content": greeting_prompt})``): that message is graded where it is sent (a request's
    list of messages, or a message added to a running context), not as a prompt of its own.
    """
    out: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Dict)
            and any(isinstance(k, ast.Constant) and k.value == "role" for k in node.keys)
            and _role(node) in ("user", "assistant", "tool")
        ):
            content = message_content(node)
            if isinstance(content, ast.Name):
                out.add(content.id)
        if not isinstance(node, (ast.List, ast.Tuple)):
            continue
        system_seen = False
        for element in node.elts:
            content = message_content(element)
            if content is None:
                continue
            if system_seen and isinstance(content, ast.Name):
                out.add(content.id)
            if _role(element) == "system":
                system_seen = True
    return out


def _section_call(node: ast.AST) -> bool:
    """``agent.prompt_add_section(title, body)``-style calls: a prompt built from sections.

    The method's name says it adds a section to the prompt (words ``prompt``, ``add`` or
    ``append``, and ``section``), as in SignalWire's agents SDK and other prompt-object
    builders.
    """
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    w = set(words(node.func.attr))
    return "prompt" in w and bool(w & {"add", "append"}) and bool(w & {"section", "subsection"})


def _section_text(call: ast.Call) -> list[ast.expr]:
    """The text parts of one section call: its title, body and bullets, in order."""
    parts: list[ast.expr] = [a for a in call.args if not isinstance(a, ast.Starred)]
    for kw in call.keywords:
        if kw.arg in ("title", "body", "text", "content"):
            parts.append(kw.value)
        elif kw.arg in ("bullets", "items"):
            join = ast.Call(
                func=ast.Attribute(value=ast.Constant("\n- "), attr="join", ctx=ast.Load()),
                args=[kw.value],
                keywords=[],
            )
            parts.append(ast.copy_location(join, kw.value))
    return parts


def _section_chains(tree: ast.Module) -> list[ast.expr]:
    """One text per class (or module) that builds its prompt from section calls.

    The sections added in ``__init__`` come first (the agent's base prompt), then those
    added elsewhere, in source order: the order the prompt is assembled in when the
    object is built and then configured. Every branch's section counts (control flow is
    ignored, as elsewhere).
    """
    owners: dict[int, list[tuple[int, int, ast.Call]]] = {}
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    for node in ast.walk(tree):
        if not _section_call(node):
            continue
        owner: ast.AST = tree
        in_init = False
        up = parents.get(id(node))
        while up is not None:
            if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)) and up.name == "__init__":
                in_init = True
            if isinstance(up, ast.ClassDef):
                owner = up
                break
            up = parents.get(id(up))
        owners.setdefault(id(owner), []).append((0 if in_init else 1, node.lineno, node))
    chains: list[ast.expr] = []
    for calls in owners.values():
        calls.sort(key=lambda c: (c[0], c[1]))
        text: ast.expr | None = None
        for _rank, _line, call in calls:
            for part in _section_text(call):
                piece = ast.copy_location(
                    ast.BinOp(left=part, op=ast.Add(), right=ast.Constant("\n")), call
                )
                text = (
                    piece
                    if text is None
                    else ast.copy_location(ast.BinOp(left=text, op=ast.Add(), right=piece), call)
                )
        if text is not None:
            chains.append(text)
    return chains


_ROLE_LINE = re.compile(r"^[ \t#>*-]*(you are|you're|your name is|act as)\b", re.I | re.M)


def _template_literals(tree: ast.Module, project=None) -> list[ast.Constant]:
    """String literals that read as a prompt template whatever name holds them.

    A multi-line literal with a role line (a line opening with "You are") and a
    template placeholder named like a volatile value (``{{current_time}}``), not a
    docstring and not the receiver of a ``.format``-like call (that call is linted):
    a template a template engine fills out of view, held under a name that says nothing
    (``content=``, a dict value, a seed record).
    """
    out: list[ast.Constant] = []
    bound = project.bound_variables() if project is not None else None
    for parent in ast.walk(tree):
        if isinstance(parent, ast.Expr) or (
            isinstance(parent, ast.Attribute) and parent.attr in BUILD_METHODS
        ):
            continue
        for node in ast.iter_child_nodes(parent):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            text = node.value
            if "\n" not in text or not _ROLE_LINE.search(text):
                continue
            if any(
                classify_placeholder(ph, bound) is not None
                for ph in find_placeholders(text)
                if text.startswith(("{{", "${"), ph.start)
            ):
                out.append(node)
    return out


def _called_names(tree: ast.Module, project) -> set[str]:
    """Functions called by a plain name, and methods called on ``self``/``cls``."""
    names: set[str] = set()
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Name):
            names.add(f.id)
        elif (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f.value.id in ("self", "cls")
        ):
            names.add(f.attr)
    return names | (project.called_names() if project is not None else set())


MAX_HELPER_DEPTH = 3
"""How many helpers deep a parameter is followed to the sink it is passed into."""


def _parameter_sinks(fdef: ast.AST, classifier: Classifier, depth: int = 0) -> dict:
    """The parameters of ``fdef`` that reach a sink in its body as they are.

    ``def node(content): return {"task_messages": [{"role": "system", "content": content}]}``
    puts ``content`` in a system message: whatever a caller passes there is prompt text.
    A parameter handed on unchanged to another such helper counts too.

    Returns:
        ``id`` of the parameter's ``ast.arg`` -> ``(slot, label, block, per_turn,
        opens_context)``.
    """
    ix = classifier.ix(fdef)
    cache = ix.memo.setdefault("parameter_sinks", {})
    if id(fdef) in cache:
        return cache[id(fdef)]
    cache[id(fdef)] = {}  # a recursive helper ends here
    if "sinks" not in ix.memo:
        ix.memo["sinks"] = find_sinks(ix.tree, ix.project)

    def param_of(node: ast.AST | None) -> ast.arg | None:
        if isinstance(node, ast.Name) and Classifier._within(ix, node, fdef):
            values = ix.resolve_name(node)
            if len(values) == 1 and isinstance(values[0], Param) and values[0].function is fdef:
                return values[0].arg
        return None

    out: dict[int, tuple] = {}
    for sink in ix.memo["sinks"]:
        if not Classifier._within(ix, sink.value, fdef):
            continue
        arg = param_of(sink.value)
        if arg is not None:
            spec = (sink.slot, sink.label, sink.block, sink.per_turn, sink.opens_context)
            out.setdefault(id(arg), spec)
        elif isinstance(sink.value, (ast.List, ast.Tuple)):  # the messages of a request
            for element in sink.value.elts:
                arg = param_of(message_content(element))
                if arg is None:
                    continue
                role = _role(element)
                slot = "system" if role == "system" else "message"
                spec = (slot, f"a {role} message", False, role in TURN_ROLES, False)
                out.setdefault(id(arg), spec)
    if depth < MAX_HELPER_DEPTH:
        for node in ast.walk(fdef):
            if not isinstance(node, ast.Call):
                continue
            callee, is_method = classifier._callee(node)
            if callee is None or callee is fdef:
                continue
            inner = _parameter_sinks(callee, classifier, depth + 1)
            if not inner:
                continue
            for pid, value in bind_arguments(callee, node, is_method).items():
                arg = param_of(value) if pid in inner else None
                if arg is not None:
                    out.setdefault(id(arg), inner[pid])
    cache[id(fdef)] = out
    return out


def _content_parts(value: ast.AST) -> list[ast.AST]:
    """The ``text`` of each part of a Gemini Content literal ``{"parts": [{"text": ...}]}``."""
    if not isinstance(value, ast.Dict):
        return []
    for k, v in zip(value.keys, value.values, strict=True):
        if isinstance(k, ast.Constant) and k.value == "parts" and isinstance(v, ast.List):
            return [
                pv
                for part in v.elts
                if isinstance(part, ast.Dict)
                for pk, pv in zip(part.keys, part.values, strict=True)
                if isinstance(pk, ast.Constant) and pk.value == "text"
            ]
    return []


TURN_ROLES = frozenset({"assistant", "tool", "function"})
"""Roles whose message is a turn of the conversation (the model's reply, a tool's result)."""


def _role(message: ast.AST) -> str:
    if isinstance(message, ast.Dict):
        for k, v in zip(message.keys, message.values, strict=True):
            if isinstance(k, ast.Constant) and k.value == "role" and isinstance(v, ast.Constant):
                return str(v.value)
    if isinstance(message, ast.Call):
        for k in message.keywords:  # `ChatMessage(role="system", content=...)`
            if k.arg == "role" and isinstance(k.value, ast.Constant):
                return str(k.value.value)
        m = MESSAGE_CLASSES.search(_call_name(message) or "")
        if m:
            return "system" if m.group(1) == "System" else m.group(1).lower()
    return "user"


def _is_text_expr(node: ast.AST, index: ModuleIndex) -> bool:
    """Text built by this expression: a literal, an f-string, ``+``, ``.format()``..."""
    if isinstance(node, ast.Name):
        values = index.resolve_name(node)
        node = values[0] if len(values) == 1 and not isinstance(values[0], Param) else node
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.IfExp):
        # `tpl.format(**kw) if kw else tpl`: text built in one branch at least.
        return _is_text_expr(node.body, index) or _is_text_expr(node.orelse, index)
    return isinstance(node, (ast.JoinedStr, ast.BinOp)) or (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in BUILD_METHODS
    )


def _returns_text(node: ast.AST, classifier: Classifier, depth: int = 0) -> bool:
    """A call of a function defined in view whose every ``return`` builds text.

    ``self._format(TEMPLATE, claim=...)``: text built here, through a helper.
    """
    if not isinstance(node, ast.Call) or depth > MAX_HELPER_DEPTH:
        return False
    fdef, _is_method = classifier._callee(node)
    if fdef is None:
        return False
    returns = function_returns(fdef)
    ix = classifier.ix(fdef)
    return bool(returns) and all(
        _is_text_expr(r, ix) or _returns_text(r, classifier, depth + 1) for r in returns
    )


def argument_sinks(tree: ast.Module, classifier: Classifier, found: list[Sink]) -> list[Sink]:
    """Arguments passed to a helper that puts them in a prompt (see ``_parameter_sinks``).

    The helper may live in another module of the linted tree; the text is graded here,
    where it is built.
    """
    seen = {id(s.value) for s in found}
    out: list[Sink] = []
    index = classifier.index
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not (node.args or node.keywords):
            continue
        values = list(node.args) + [k.value for k in node.keywords]
        if not any(_is_text_expr(v, index) or _returns_text(v, classifier) for v in values):
            continue  # only text built here can be prompt text passed on
        fdef, is_method = classifier._callee(node)
        if fdef is None:
            continue
        specs = _parameter_sinks(fdef, classifier)
        if not specs:
            continue
        given = {id(a) for a in node.args} | {id(k.value) for k in node.keywords}
        for pid, value in bind_arguments(fdef, node, is_method).items():
            spec = specs.get(pid)
            if spec is None or id(value) not in given or id(value) in seen:
                continue
            seen.add(id(value))
            slot, label, block, per_turn, opens = spec
            name = getattr(fdef, "name", "helper")
            built = f"{label} built by `{name}()`"
            out.append(Sink(value, slot, built, None, block, per_turn, opens_context=opens))
    return out


@dataclass(frozen=True)
class Place:
    """Where a hole sits in a rendered prompt, in tokens, with what is unknown around it.

    Attributes:
        before: Known tokens before the hole.
        after: Known tokens after it.
        total: Known tokens in the whole prompt.
        unknown_before: Holes of unknown size before it (names, then count).
        unknown_after: Holes of unknown size after it.
    """

    before: int
    after: int
    total: int
    unknown_before: tuple[str, ...] = ()
    unknown_after: tuple[str, ...] = ()
    prompt_before: bool = False
    prompt_after: bool = False
    """A whole prompt of unknown size follows (a prompt-named value, a message's content)."""
    until_next: int | None = None
    """Known tokens after the hole up to the next value that changes at least as often
    (``None`` when there is none, or unknown-size text lies between them)."""
    history_hole: bool = False
    """The hole is named like a conversation history (``conversation_history``)."""
    short_after: int = 0
    short_before: int = 0
    """How many of ``unknown_before`` are named like a short value."""
    data_after: int = 0
    """How many of ``unknown_after`` are named like data (``entity_csv``), not
    instructions."""
    volatile_after: int = 0
    """How many of ``unknown_after`` (not named short) are volatile values themselves: they
    add no static text after the hole, only more per-call text."""
    """How many of ``unknown_after`` are named like a short value (a timezone, a name,
    an id: at most ``SHORT_VALUE_TOKENS`` each)."""

    @property
    def after_at_most(self) -> int | None:
        """An upper bound of what follows the hole (``None``: unbounded text follows)."""
        if len(self.unknown_after) > self.short_after + self.volatile_after:
            return None
        return self.after + SHORT_VALUE_TOKENS * self.short_after

    @property
    def exact(self) -> bool:
        """True when every part of the prompt around the hole has a known size."""
        return not self.unknown_before and not self.unknown_after

    def band(self) -> Position | None:
        """The position band when the known sizes decide it, else ``None``.

        A hole of unknown size counts as at least one token.
        """
        b_lo = self.before + len(self.unknown_before)
        a_lo = self.after + len(self.unknown_after)
        if self.masked_late:
            # Checked first: however much follows, a value as volatile comes within one
            # cache increment, and what follows that one is its cost, not this value's.
            return Position.LATE
        if not self.unknown_before and self.before <= a_lo:
            return Position.EARLY
        if (
            self.unknown_before
            and len(self.unknown_before) == self.short_before
            and self.before + SHORT_VALUE_TOKENS * self.short_before <= a_lo
        ):
            # `f"You are {agent_name}. Current time: {now}"`: only short values (a name,
            # an id) of unknown size precede it.
            return Position.EARLY
        if self.prompt_after and not self.unknown_before and self.before < LATE_TAIL_TOKENS:
            # `instruction + msg["content"]`: a short head put in front of a whole prompt
            # (a name that says it is prompt text, a message's own content).
            return Position.EARLY
        if self.masked_late:
            return Position.LATE
        a_hi = self.after_at_most
        if a_hi is not None and b_lo > a_hi:
            return (
                Position.LATE
                if a_hi < LATE_TAIL_TOKENS or late_share(b_lo, a_hi)
                else Position.MIDDLE
            )
        if self.prompt_before and (
            (a_hi is not None and a_hi < LATE_TAIL_TOKENS)
            or (
                self.after < LATE_TAIL_TOKENS
                and len(self.unknown_after)
                <= self.short_after + self.data_after + self.volatile_after
            )
        ):
            # `f"{base_prompt}{runtime_context}"`: a short tail appended to a whole prompt
            # passed in (a name that says it is prompt text), whatever its size; data of
            # unknown size in that tail (`{entity_csv}`) is part of what is appended.
            return Position.LATE
        return None

    @property
    def masked_late(self) -> bool:
        """Less than one cache increment of static text before a value as volatile.

        Whatever follows the next value that changes at least as often is lost to that
        one anyway, so this value costs at most the short stretch between them
        (``{history}``, a short label, then ``{latest_question}``).
        """
        return self.until_next is not None and self.until_next < LATE_TAIL_TOKENS

    def describe(self) -> str:
        """``"token ~26 of ~930"``, with bounds where sizes are unknown."""
        if self.exact:
            return f"token ~{self.before} of ~{self.total}"
        where = (
            f"token ~{self.before}"
            if not self.unknown_before
            else (f"token {self.before}+ (after {_names(self.unknown_before)}, size unknown)")
        )
        return f"{where} of at least ~{self.total}"


def _names(labels: tuple[str, ...]) -> str:
    shown = ", ".join(f"`{x}`" for x in labels[:2])
    return shown + (f" and {len(labels) - 2} more" if len(labels) > 2 else "")


def _cost(freq: Frequency) -> str:
    """``": about 24 cache misses a day per prompt variant"`` for clock granularities."""
    per_day = freq.misses_per_day
    if per_day is None:
        return ""
    return f": about {per_day:,} cache miss{'es' if per_day > 1 else ''} a day per prompt variant"


def _message(
    src: Source, freq: Frequency, pos: Position, sink: Sink, where: dict, place: Place | None
) -> str:
    kind = _KIND.get(src.rule, "value")
    kind = f"named like {kind}" if src.guessed else kind
    if src.per_pass:
        kind = "a loop variable, and the loop sends a request on each pass"
    head = f"`{src.what}` ({kind}, changes {freq.label}{_cost(freq)})"
    if sink.slot == "message" and (sink.per_turn or place is None):
        return (
            f"{head} goes into {sink.label} after the system prompt and tools ({pos.value}): "
            "only what follows it is re-prefilled."
        )
    if sink.slot == "tools":
        return (
            f"{head} feeds the tool list {sink.label}; tools precede the system prompt in the "
            f"cached prefix ({pos.value})."
        )
    if place is None:
        return (
            f"{head} lands in {sink.label} inside `{where['hole']}`, whose layout is not "
            f"visible here: position unknown, graded {pos.value}."
        )
    if place.unknown_after:
        after = f"everything after it (at least ~{place.after} tokens) is"
    elif place.after:
        after = f"the ~{place.after} tokens after it are"
    else:
        after = "nothing after it is"
    return (
        f"{head} lands in {sink.label} at {place.describe()} ({pos.value}): the cached "
        f"prefix stops there and {after} re-prefilled whenever it changes."
    )


def _tool_swaps(tree: ast.Module, index: ModuleIndex) -> list[Finding]:
    lists: list[ast.AST] = []
    setters: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            kws = {k.arg for k in node.keywords}
            if "functions" in kws and (
                {"task_messages", "name"} & kws or "Node" in _call_name(node)
            ):
                lists.extend(k.value for k in node.keywords if k.arg == "functions")
            if _call_name(node) == "LLMSetToolsFrame":
                setters.append(node)
    distinct = {ast.unparse(v) for v in lists}
    out: list[Finding] = []
    at = setters[0] if setters else (lists[1] if len(distinct) >= 2 else None)
    if at is not None:
        line, col = index.line_col(at)
        why = (
            f"{len(distinct)} different per-node tool lists"
            if len(distinct) >= 2
            else "LLMSetToolsFrame replaces the tools mid-session"
        )
        out.append(
            Finding(
                rule="CB107",
                severity=Severity.INFO,
                message=(
                    f"{why}: every swap changes the tools block, which precedes the system "
                    "prompt in the OpenAI/Anthropic cached prefix, so the next request "
                    "misses the cache."
                ),
                line=line,
                col=col,
                estimated=True,
                evidence=shorten(ast.unparse(at), 60),
            )
        )
    return out


CONTEXT_INSERTERS = {
    "Mem0MemoryService": ("position", 1),
}
"""Pipecat services that insert retrieved text into the context at a fixed index on every
user turn: service -> (its ``InputParams`` field for the index, the default).

``Mem0MemoryService`` (Pipecat 1.14, ``pipecat/services/mem0/memory.py``: ``position:
int = Field(default=1)``; ``_enhance_context_with_memories`` runs per user query and does
``messages.insert(position, memory_message)``)."""


def _context_inserts(tree: ast.Module, index: ModuleIndex) -> list[Finding]:
    """CB104 for a service that inserts per-turn retrieved text at a fixed context index.

    Each turn adds a new message at a fixed index: every message after it (the whole
    conversation once it is longer than the index) changes from there on every request.
    At index 0 that is before the system prompt: nothing is ever cached (an error). Past
    it (Pipecat's default, 1) the system prompt stays a cached prefix and what is lost is
    the conversation's own re-use: content after the stable prefix (late, an info).
    """
    out: list[Finding] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _call_name(node) not in CONTEXT_INSERTERS:
            continue
        field, default = CONTEXT_INSERTERS[_call_name(node)]
        position: object = default
        for kw in node.keywords:
            if kw.arg == "params" and isinstance(kw.value, ast.Call):
                for inner in kw.value.keywords:
                    if inner.arg == field:
                        value = inner.value
                        position = value.value if isinstance(value, ast.Constant) else None
        if not isinstance(position, int):
            continue  # an index the code computes: not judged
        line, col = index.line_col(node)
        name = _call_name(node)
        pos = Position.EARLY if position <= 0 else Position.LATE
        out.append(
            Finding(
                rule="CB104",
                severity=grade(Frequency.REQUEST, pos),
                message=(
                    f"`{name}` inserts the memories it retrieves for each user turn as a new "
                    f"message at index {position} of the context ({field}={position}): "
                    "everything after that index, the conversation so far, differs from "
                    "the previous request from there on, so only the first "
                    f"{position} message(s) are ever served from cache."
                ),
                line=line,
                col=col,
                frequency=Frequency.REQUEST,
                position=pos,
                estimated=True,
                evidence=f"{name}({field}={position})",
                fix=(
                    "Insert the memories after the conversation (a `position` past the end "
                    "of any context, so the newest turn's memory goes last) or in the latest "
                    "user message; keep the system prompt and history as an unchanged prefix."
                ),
            )
        )
    return out


def _front_inserts(tree: ast.Module, index: ModuleIndex) -> list[Finding]:
    """CB104 for a frame processor that inserts a message it builds per turn at index 0.

    ``messages.insert(self._memory_position, message)`` in a ``FrameProcessor`` whose
    ``memory_position`` parameter defaults to 0 (or a literal 0): the new message goes in
    front of the system prompt on every request, so nothing after it is ever cached.
    """
    out: list[Finding] = []
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        methods = {m.name for m in cls.body if isinstance(m, _FUNCTIONS)}
        if "process_frame" not in methods:
            continue
        for fn in (m for m in cls.body if isinstance(m, _FUNCTIONS)):
            for node in _own_nodes(fn):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "insert"
                    and len(node.args) == 2
                    and _front_index(node.args[0], index)
                    and _built_message(node.args[1], fn)
                ):
                    continue
                line, col = index.line_col(node)
                out.append(
                    Finding(
                        rule="CB104",
                        severity=grade(Frequency.REQUEST, Position.EARLY),
                        message=(
                            f"`{cls.name}` inserts a message it builds for each turn at index 0 "
                            f"of the context (`{shorten(ast.unparse(node), 60)}`): in front of "
                            "the system prompt and the conversation, so no request shares a "
                            "cached prefix with the one before."
                        ),
                        line=line,
                        col=col,
                        frequency=Frequency.REQUEST,
                        position=Position.EARLY,
                        estimated=True,
                        evidence=shorten(ast.unparse(node), 60),
                        fix=(
                            "Insert it after the conversation (just before the latest user "
                            "message) or into the latest user message; keep the system prompt "
                            "first."
                        ),
                    )
                )
    return out


def _front_index(expr: ast.AST, index: ModuleIndex) -> bool:
    """An insert index that is 0.

    A literal, or ``self.x`` set from a parameter defaulting to 0 (also inside
    ``max(0, min(self.x, len(msgs)))``).
    """
    if isinstance(expr, ast.Constant):
        return type(expr.value) is int and expr.value == 0
    if isinstance(expr, ast.Name):
        values = index.resolve_name(expr)
        if len(values) == 1 and isinstance(values[0], ast.expr):
            return _front_index(values[0], index)
        if len(values) == 1 and isinstance(values[0], Param):
            d = _param_default(values[0])
            return isinstance(d, ast.Constant) and type(d.value) is int and d.value == 0
        return False
    attrs = [
        n
        for n in ast.walk(expr)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
    ]
    if len(attrs) != 1:
        return False
    values = index.resolve_self_attr(attrs[0])
    defaults = []
    for v in values:
        if isinstance(v, ast.Name):
            for r in index.resolve_name(v):
                if isinstance(r, Param):
                    defaults.append(_param_default(r))
    return bool(defaults) and all(
        isinstance(d, ast.Constant) and type(d.value) is int and d.value == 0 for d in defaults
    )


def _param_default(param: Param) -> ast.AST | None:
    args = getattr(param.function, "args", None)
    if args is None:
        return None
    positional = args.posonlyargs + args.args
    if param.arg in positional:
        i = positional.index(param.arg) - (len(positional) - len(args.defaults))
        return args.defaults[i] if i >= 0 else None
    if param.arg in args.kwonlyargs:
        return args.kw_defaults[args.kwonlyargs.index(param.arg)]
    return None


def _built_message(expr: ast.AST, fn: ast.AST) -> bool:
    """A message dict (or a name ``fn`` assigns one) whose content is not a literal."""
    if isinstance(expr, ast.Name):
        dicts = [
            a.value
            for a in ast.walk(fn)
            if isinstance(a, (ast.Assign, ast.AnnAssign))
            and isinstance(a.value, ast.Dict)
            and any(
                isinstance(t, ast.Name) and t.id == expr.id
                for t in (a.targets if isinstance(a, ast.Assign) else [a.target])
            )
        ]
        expr = dicts[-1] if len(dicts) == 1 else None
    if not isinstance(expr, ast.Dict):
        return False
    keys = {
        k.value: v
        for k, v in zip(expr.keys, expr.values, strict=True)
        if isinstance(k, ast.Constant)
    }
    content = keys.get("content") if "role" in keys else None  # (the role may be a variable)
    return content is not None and not is_literal(content)


def breakpoint_mode(tree: ast.Module) -> str | None:
    """How the module marks explicit cache breakpoints on the system prompt, if it does.

    Returns:
        ``"enable_prompt_caching"`` when it turns on Pipecat's prompt caching (Anthropic,
        Bedrock: the whole system prompt becomes one block with the breakpoint at its end),
        ``"cache_control"`` when it builds content blocks with ``cache_control`` itself,
        else ``None``.
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "enable_prompt_caching":
            if isinstance(node.value, ast.Constant) and node.value.value is True:
                return "enable_prompt_caching"
        if isinstance(node, ast.Call) and _call_name(node) == "LLMEnablePromptCachingFrame":
            return "enable_prompt_caching"
    return None


def _placeholder_holes(
    segments: list, sink: Sink, classifier: Classifier, platform_only: bool = False
) -> list:
    """Split a template's literal text at placeholders named like volatile values.

    ``platform_only``: only at the placeholders a platform or template engine fills with
    volatile content by itself (:func:`~pipecat_fast.lint.placeholders.platform_fills`),
    for text that is not a template the code fills.
    """
    out: list = []
    anchor = sink.value
    project = classifier.ix(anchor).project
    bound = project.bound_variables() if project is not None else None
    for seg in segments:
        if not isinstance(seg, str):
            out.append(seg)
            continue
        spans = []
        for ph in find_placeholders(seg):
            if platform_only and not platform_fills(ph):
                continue
            guess = classify_placeholder(ph, bound)
            if guess is not None:
                named = not platform_fills(ph) and (bound or {}).get(ph.name) is None
                spans.append((ph.start, ph.end, seg[ph.start : ph.end], guess, named))
        if not spans:
            out.append(seg)
            continue
        spans.sort()
        pos = 0
        for start, end, text, (rule, freq, _noun), named in spans:
            if start < pos:
                continue
            out.append(seg[pos:start])
            origin = ast.Constant(value=text)
            ast.copy_location(origin, anchor)
            src = Source(rule, freq, origin, text, guessed=named, placeholder=True)
            out.append(Hole(anchor, [src], None, None, text))
            pos = end
        out.append(seg[pos:])
    return [s for s in out if not (isinstance(s, str) and not s)]


def lint_python_source(
    source: str,
    filename: str = "<source>",
    *,
    provider: str | None = None,
    model: str | None = None,
    encoding: str = tokens.DEFAULT_ENCODING,
    table: dict | None = None,
    project=None,
    breakpoints: bool | None = None,
) -> list[Finding]:
    """Lint Python code that builds prompts.

    Args:
        source: The module's source text.
        filename: Its path (names the module in a project, and the syntax-error message).
        provider: Provider for the minimum-prefix check; ``None`` skips it.
        model: Model id for the minimum-prefix table.
        encoding: Token encoding for the estimated offsets.
        table: Minimum-prefix table; the bundled one by default.
        project: A :class:`~pipecat_fast.lint.project.Project` of the linted tree, so
            names imported from its other modules resolve there.
        breakpoints: True when the system prompt is sent as one block carrying an explicit
            cache breakpoint (Anthropic ``cache_control``); ``None`` tells it from the code
            (``enable_prompt_caching=True``).

    Returns:
        Findings sorted by line. Offsets (``char_offset``/``token_offset``) are estimates
        over the statically rendered prompt (``estimated=True``); ``line``/``col`` point at
        the source. Code that does not parse is linted from what can be recovered (the
        statements that parse, then the string literals and f-string fields of the rest),
        with a CB901 note saying so.

    Raises:
        ValueError: If ``provider`` is not in the minimum-prefix table.
    """
    minimum = prefix_minimum(provider, model, table)
    try:
        tree = parse(source, filename=filename)
    except SyntaxError as e:
        from pipecat_fast.lint.recover import lint_unparsable

        return lint_unparsable(
            source,
            filename,
            e,
            lambda tree, text: _lint_tree(
                tree, text, minimum, encoding, filename, project, breakpoints
            ),
        )
    except RecursionError:
        return _literals_only(source, "nested too deeply to parse", minimum, encoding)
    except (ValueError, MemoryError) as e:
        return [Finding(rule="CB901", severity=Severity.WARNING, message=f"not linted: {e}")]
    try:
        return _lint_tree(tree, source, minimum, encoding, filename, project, breakpoints)
    except RecursionError:
        # ast.parse takes deeper nesting than a recursive walk of the tree does: a prompt
        # concatenated from hundreds of literals with `+`.
        return _literals_only(source, "expressions nested too deeply to analyse", minimum, encoding)


def _literals_only(
    source: str, why: str, minimum: PrefixMinimum | None, encoding: str
) -> list[Finding]:
    """Code too deep to walk: lint the prompt-like string literals it holds.

    As for code that does not parse, with a CB901 note (a warning when none could be read).
    """
    from pipecat_fast.lint.recover import literal_findings

    def lint_tree(tree: ast.Module, text: str) -> list[Finding]:
        return _lint_tree(tree, text, minimum, encoding)

    try:
        found, linted = literal_findings(source, None, lint_tree)
    except RecursionError:
        found, linted = [], 0
    if linted:
        note = Finding(
            rule="CB901",
            severity=Severity.INFO,
            message=f"{why}: linted {linted} prompt-like string literal(s) of it",
        )
    else:
        note = Finding(rule="CB901", severity=Severity.WARNING, message=f"{why}, not linted")
    return [note, *found]


END_TOKENS = 4
"""Tokens a request's rendering may add after a message's last value (our rendering's role
separator, counted by the BPE in `pipecat_fast.tokens`; not a provider figure)."""
INSIDE_TAIL_MIN_BEFORE = 64
"""Known tokens before a hole for its own place to say where a value inside it sits (half
an OpenAI cache increment): fewer, and the hole may hold most of the prompt."""


def _record_of(node: ast.AST) -> str | None:
    """The record a field is read from (``student`` for ``student.name``).

    Also ``user`` for ``user["id"]`` or ``user.get("id")``, and ``self.caller`` for
    ``self.caller.phone``.

    ``None`` for anything else, and for a bare ``self``/``cls`` (an object's attributes are
    its configuration as often as its state).
    """
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
    ):
        base = node.func.value
    elif isinstance(node, (ast.Attribute, ast.Subscript)):
        base = node.value
    else:
        return None
    if not isinstance(base, (ast.Name, ast.Attribute, ast.Subscript)):
        return None
    if isinstance(base, ast.Name) and base.id in ("self", "cls"):
        return None
    return ast.unparse(base)


def _in_later_message(sink: Sink, hole: Hole, classifier: Classifier, encoding: str) -> bool:
    """Whether ``hole`` sits in a message after a system prompt of the request.

    Only for a request's messages written as one list (``[system, user]``): the user
    message's text comes after the whole system prompt. Not when the messages before it
    hold under one cache increment of text (``{"role": "system", "content": "You
    classify."}``): then the user message is the prompt, laid out as one text with it.
    """
    if not isinstance(sink.value, (ast.List, ast.Tuple)):
        return False
    index = classifier.ix(sink.value)

    def resolve(name: ast.Name) -> ast.AST | None:
        values = index.resolve_name(name)
        return values[0] if len(values) == 1 and isinstance(values[0], ast.expr) else None

    later: set[int] = set()
    system_seen = False
    before: int | None = 0  # tokens of the messages before the first later one
    for element in sink.value.elts:
        content = message_content(element)
        if content is None:
            continue
        if system_seen:
            later.update(id(n) for n in ast.walk(content))
        elif before is not None:
            # Text that is not literal (a name for a prompt of its own) counts as large.
            text = _fixed_text(content, resolve)
            before = None if text is None else before + tokens.count_tokens(text, encoding)
        if _role(element) == "system":
            system_seen = True
    inside = id(hole.node) in later or (hole.via is not None and id(hole.via) in later)
    if not inside:
        # Built by a helper the later message calls (`f"Known: {_context(call)}"`).
        inside = any(
            isinstance(n, ast.Call)
            and id(n) in later
            and (fdef := classifier._callee(n)[0]) is not None
            and Classifier._within(classifier.ix(fdef), hole.node, fdef)
            for element in sink.value.elts
            for n in ast.walk(element)
        )
    if not inside:
        return False
    return before is None or before >= LATE_TAIL_TOKENS


def _position(
    sink: Sink, src: Source, place: Place, later_message: bool = False
) -> tuple[Position, Place | None, bool]:
    """The value's position band, the place to describe it by, and whether it is settled.

    Not settled: the known sizes cannot decide the band (a layout out of view, text of
    unknown size around it), so the band is the *middle* default.

    ``later_message``: the value is in a user message that follows a system message of
    the same request (the request's messages are rendered as one text).
    """
    if sink.slot == "message" and sink.per_turn:
        return Position.LATE, place, True
    if sink.slot == "message" and not src.inside and sink.opens_context:
        # A Flows node's task message right after its role messages: the two open the
        # context, so what follows the value inside the message is the prompt's own text,
        # and a short tail (under one cache increment) is late.
        a_hi = place.after_at_most
        if a_hi is not None and a_hi < LATE_TAIL_TOKENS:
            return Position.LATE, place, True
        band = place.band()
        return (band, place, True) if band is not None else (Position.MIDDLE, place, False)
    if sink.slot == "message" and not src.inside:
        # A message after the system prompt (a user message; a Flows task message of a
        # node that keeps the role messages before it and the conversation between): what
        # precedes it is cached, and the value is past that stable prefix: late. Only the
        # rest of the message after it is re-prefilled, which the finding's place says.
        return Position.LATE, place, True
    if later_message and not src.inside:
        # `[system, {"role": "user", "content": f"{name} is calling. ..."}]`: the system
        # prompt before it is the stable prefix; the value is past it.
        return Position.LATE, place, True
    if sink.slot == "tools":
        return Position.EARLY, place, True
    if sink.slot == "append" and sink.last_append and not src.inside:
        # `prompt += f"\nCaller: {phone}\n"`, the last append: the value sits after
        # everything the prompt held, and only the rest of this text follows it.
        a_hi = place.after_at_most
        if a_hi is not None and a_hi < LATE_TAIL_TOKENS:
            return Position.LATE, place, True
    if src.inside and sink.slot == "append" and sink.last_append:
        # Inside text of unknown layout appended after everything the prompt held
        # (`prompt += header + context_body`): only the rest of that text follows it.
        return Position.LATE, None, False
    if src.inside and (sink.slot == "message" or later_message):
        # Inside text of unknown layout in a message after the system prompt and tools:
        # the shared prefix is already behind it, and only the rest of this message, out
        # of view, is at stake.
        return Position.LATE, None, False
    if (
        src.inside
        and sink.slot != "append"
        and place.before >= INSIDE_TAIL_MIN_BEFORE
        and place.band() is Position.LATE
    ):
        # Inside text of unknown layout (`{transcript_text}`, `{history_context}`) that is
        # itself the tail of a prompt in view: less than a third of the prompt's known text
        # follows the hole, so less follows the value. Only when the text in view before
        # the hole is a prompt of its own size (a hole after a few tokens may be the prompt).
        return Position.LATE, place, True
    a_end = place.after_at_most
    if (
        src.inside
        and src.rule == "CB105"
        and place.history_hole
        and a_end is not None
        and a_end <= END_TOKENS
    ):
        # A history block that ends the text (`"Conversation history:\n" f"{history}"`):
        # after the turns inside it comes only the block's own formatting.
        return Position.LATE, place, True
    if src.inside and place.masked_late:
        # Inside text of unknown layout that a value as volatile follows within one cache
        # increment (`<memories>{formatted}</memories> Time: {now}`): the block is a volatile
        # one, and what follows it is lost to that value anyway.
        return Position.LATE, place, True
    if src.inside or sink.slot == "append":
        return Position.MIDDLE, None, False
    band = place.band()
    return (band, place, True) if band is not None else (Position.MIDDLE, place, False)


def _lint_tree(
    tree: ast.Module,
    source: str,
    minimum: PrefixMinimum | None,
    encoding: str,
    filename: str = "<source>",
    project=None,
    breakpoints: bool | None = None,
) -> list[Finding]:
    path = None if filename in ("<source>", "-") else filename
    index = ModuleIndex(tree, source, path=path, project=project)
    if project is not None:
        project.register(index)
    mode = breakpoint_mode(tree) if breakpoints is None else None
    if breakpoints:
        mode = "breakpoints"
    run = _ModuleLint(index, encoding, mode)
    which = SINK_RULES.get()
    sinks = find_sinks(tree, project) if which == "all" else []
    index.memo["sinks"] = sinks
    sinks = sinks + argument_sinks(tree, run.classifier, sinks)
    for sink in sinks:
        run.lint_sink(sink)
    if which != "none":
        for sink in unreached_prompts(tree, run.renderer, sinks):
            run.lint_sink(sink)
    return run.findings(minimum)


SINK_RULES: contextvars.ContextVar[str] = contextvars.ContextVar("sink_rules", default="all")
"""Which ways of finding prompt text in code are on, for measuring them apart.

``"all"`` (the default): the sinks named in the module docstring, then the text-only
fallback (:func:`unreached_prompts`); ``"fallback-only"``: the fallback alone, as if no API
were known (``pipecat-fast bench lint --sink-rules fallback-only``); ``"none"``: neither (only
what needs no sink: text, JSON and YAML files, framework services such as Mem0).
"""


_NOT_PROMPT_CALLS = {
    "print",
    "log",
    "debug",
    "info",
    "warning",
    "warn",
    "error",
    "exception",
    "critical",
    "write",
    "echo",
}
"""Calls whose text argument is output for people (logs, prints), not for a model."""


FALLBACK_NOTE = {
    "opening": (
        " Found by its text alone (lower confidence): it opens like a prompt, but no code in"
        " view sends it to a model, so it is graded as the start of one."
    ),
    "body": (
        " Found by its text alone (lower confidence): it reads as prompt instructions, but no"
        " code in view sends it to a model and it does not open like a prompt, so where it"
        " sits in one is unknown."
    ),
}


def _confidence(sink: Sink, src: Source, settled: bool) -> str:
    """How far a finding can be trusted.

    ``"high"``: the code computes the value and the position is settled; ``"low"``: the
    text was found by its content alone; ``"medium"`` otherwise (a name says what the
    value is, or its position is the *middle* default).
    """
    if sink.fallback:
        return "low"
    return "high" if settled and not src.guessed else "medium"


def _body_position(place: Place) -> Position:
    """Where a value early in prompt-like text that does not open a prompt sits.

    The text's own place in the prompt is unknown (it may be a section near the end, or a
    one-turn instruction): *late* when less than one cache increment of it follows the
    value (little is lost even if the text opens the request), else *middle*.
    """
    a_hi = place.after_at_most
    if a_hi is not None and a_hi < LATE_TAIL_TOKENS:
        return Position.LATE
    return Position.MIDDLE


def _output_text(tree: ast.Module) -> set[int]:
    """Nodes inside log lines, prints and exception messages: text for people."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) or (
            isinstance(node, ast.Call) and _call_name(node) in _NOT_PROMPT_CALLS
        ):
            skip.update(id(n) for n in ast.walk(node))
    return skip


def _text_candidates(tree: ast.Module) -> list[ast.AST]:
    """Outermost text-building expressions that hold run-time values.

    f-strings, ``+`` concatenations and ``.format``-like calls, as assigned, returned or
    passed; not docstrings, log lines or exception messages.
    """
    out: list[ast.AST] = []
    skip = _output_text(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, (ast.JoinedStr, ast.BinOp)) or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in BUILD_METHODS
        ):
            if isinstance(node, ast.JoinedStr) and not any(
                isinstance(v, ast.FormattedValue) for v in node.values
            ):
                continue
            out.append(node)
            skip.update(id(n) for n in ast.walk(node))
    return out


def unreached_prompts(tree: ast.Module, renderer: Renderer, sinks: list[Sink]) -> list[Sink]:
    """Text that reads as an instruction prompt but reaches no sink in view.

    A framework the linter does not know takes its prompt through calls it cannot
    recognise (``agent.set_persona(text)``, a section builder, a helper whose caller is out
    of view). Such text is still linted, as a prompt of its own, when its literal part
    reads as one by its content (:func:`~pipecat_fast.lint.prompt_text.reads_as_prompt`).
    Text some sink's render already went through is not looked at again.
    """
    inside: set[int] = set(renderer.visited)
    for sink in sinks:
        inside.update(id(n) for n in ast.walk(sink.value))
    out: list[Sink] = []
    probe = _TextProbe(renderer.index, renderer.classifier)
    for node in _text_candidates(tree):
        if id(node) in inside:
            continue
        literal = _literal_probe(probe, node)
        if not literal or not reads_as_prompt(literal):
            continue
        kind = "opening" if opens_like_prompt(literal) else "body"
        out.append(
            Sink(node, "system", "text that reads as a prompt (no sink in view)", fallback=kind)
        )
    return out


class _TextProbe(Renderer):
    """A renderer that only lays out text: its values are left unclassified (cheap)."""

    def hole(self, node: ast.AST) -> list:
        return [Hole(node, [], None, None)]


def _literal_probe(probe: _TextProbe, node: ast.AST) -> str:
    """The literal text a text-building expression renders to, values left out."""
    try:
        segments = probe.render(node).segments
    except RecursionError:
        return ""
    return "".join(s for s in segments if isinstance(s, str))


def _untraced(node: ast.AST, classifier: Classifier) -> str | None:
    """What an untraced value is, when nothing in view says what it holds; else ``None``.

    A function parameter no call in view fills, a name imported from outside the linted
    tree (or whose import was cut off), an attribute of one of those, or the result of a
    call whose function is out of view. Not configuration (``config.X``, ``os.environ``),
    not a whole prompt passed in (``base_prompt``), not ``self.x`` (an object's own state,
    most often set from configuration), not data built in view.
    """
    if isinstance(node, ast.FormattedValue):
        node = node.value
    if is_setting(node) or _holds_prompt_text(node):
        return None
    root = node
    while isinstance(root, (ast.Attribute, ast.Subscript)) or (
        isinstance(root, ast.Call)
        and isinstance(root.func, ast.Attribute)
        and root.func.attr in _PASS_THROUGH
    ):
        root = root.func.value if isinstance(root, ast.Call) else root.value
    if isinstance(root, ast.Call):
        func = root.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        ix = classifier.ix(root)
        if (
            name in BUILD_METHODS
            or _names_prompt_text(name)
            or (isinstance(func, ast.Name) and ix.resolve_function(func) is not None)
        ):
            return None  # text built here (a template filled in view) or a helper in view
        return f"the result of `{name}()`, a function out of view" if name else None
    if not isinstance(root, ast.Name) or root.id in ("self", "cls") or root.id.isupper():
        return None
    ix = classifier.ix(root)
    values = ix.resolve_name(root)
    if values and isinstance(values[-1], Param):
        if _filled_with_constants(ix, values[-1]):
            return None  # every call in view passes a literal for it
        return f"`{root.id}`, a parameter whose value is not in view"
    if not values and classifier.external(root):
        return f"`{root.id}`, a name from outside the linted code"
    return None


def _filled_with_constants(ix: ModuleIndex, param: Param) -> bool:
    """True when the module calls the parameter's function and every call passes a literal.

    The function is found by its name (a class: by the class's name, for ``__init__``).
    """
    fn = param.function
    name = getattr(fn, "name", None)
    method = isinstance(ix.parent.get(fn), ast.ClassDef)
    if name == "__init__":
        cls = ix.parent.get(fn)
        name = cls.name if isinstance(cls, ast.ClassDef) else None
    if not name:
        return False
    calls = [
        n
        for n in ast.walk(ix.tree)
        if isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Name) and n.func.id == name)
            or (isinstance(n.func, ast.Attribute) and n.func.attr == name)
        )
    ]
    if not calls:
        return False
    for call in calls:
        try:
            value = bind_arguments(fn, call, skip_self=method).get(id(param.arg))
        except (TypeError, ValueError):
            return False
        if value is None or not is_literal(value):
            return False
    return True


_PASS_THROUGH = {"get", "strip", "lower", "upper", "title", "capitalize"}
"""Methods that pass a value on (``d.get("k")``, ``s.strip()``) without saying more."""

UNTRACED_NOTE = (
    " Lower confidence: nothing in view says what it holds. If it changes per call or per"
    " session, move it after the static instructions; if it is configuration, ignore this."
)


class _ModuleLint:
    """The findings of one module's sinks, kept one per value and rule (the worst)."""

    def __init__(self, index: ModuleIndex, encoding: str, mode: str | None) -> None:
        self.index = index
        self.encoding = encoding
        self.mode = mode
        self.classifier = Classifier(index)
        self.renderer = Renderer(index, self.classifier)
        self.best: dict[tuple[int, str], Finding] = {}
        self.static_prefixes: list[tuple[int, tuple[str, ...], Sink]] = []
        self.extra_findings: list[Finding] = []
        self.untraced: set[int] = set()

    def keep(self, key: tuple[int, str], finding: Finding) -> None:
        old = self.best.get(key)
        if old is None or (finding.severity, -finding.line) > (old.severity, -old.line):
            self.best[key] = finding

    def render(self, sink: Sink) -> list:
        index, renderer = self.index, self.renderer
        issues_before = set(renderer.issues)
        renderer.filled_by_replace = False
        segments = renderer.render(sink.value).segments
        filled = renderer.filled_by_replace
        line = getattr(sink.value, "lineno", 0)
        if sink.name and any(ln > line for ln in index.formatted_at.get(sink.name, [])):
            # One step of `prompt = prompt.replace(...)` filled further in later statements:
            # what it leaves unfilled is not what ships (the last step is checked).
            for key in set(renderer.issues) - issues_before:
                del renderer.issues[key]
        if sink.state is not None:
            return _state_holes(segments, sink)
        project = index.project
        if sink.template or (
            sink.slot == "system"
            and sink.name
            and sink.name not in index.formatted_names
            and not (project is not None and sink.name in project.imported_and_filled())
            and not filled
        ):
            if (
                project is not None
                and index.path
                and sink.name
                and project.unused_import_of(index.path, sink.name)
            ):
                # A template the modules in view import around and never use.
                return segments
            # (`filled`: the text came through a `.replace("{{name}}", ...)` chain, so it
            # is a template the code in view fills; what the chain leaves ships as text.)
            # A template defined here and filled elsewhere (another module, or never in
            # view): its placeholders say what will go there.
            segments = _placeholder_holes(segments, sink, self.classifier)
        elif sink.slot in ("system", "append"):
            # Text sent as it is: a platform fills its own variables in it
            # (`{{customer.number}}`, Liquid's `{{ "now" | date }}`) on every call.
            segments = _placeholder_holes(segments, sink, self.classifier, platform_only=True)
        return segments

    def lint_sink(self, sink: Sink) -> None:
        segments = self.render(sink)
        if sink.slot != "tools" and not _builds_text(
            sink.value, segments, self.index, self.classifier
        ):
            return
        skeleton, holes = Rendered(segments).skeleton()
        for hole, start, _e in holes:
            if (
                not hole.sources
                and hole.sample is None
                and _addressed_person(skeleton, start, hole)
                and not self.called_in_view(hole.node)
            ):
                what = f"{hole.label.strip('{}')} (the person the text addresses by name)"
                hole.sources = [Source("CB103", Frequency.SESSION, hole.node, what, guessed=True)]
        tm = TextMap(skeleton, self.encoding)
        total = tm.token_count
        first_volatile: tuple[int, tuple[str, ...]] | None = None
        rates = [self.hole_rate(sink, hole) for hole, _s, _e in holes]
        # The conversation spread into the request after the system message
        # (`[system, *state.messages]`) changes every turn: it ends what a value before it
        # can cost, though it is no finding of its own.
        spread = {
            id(e.value)
            for e in getattr(sink.value, "elts", [])
            if isinstance(sink.value, (ast.List, ast.Tuple)) and isinstance(e, ast.Starred)
        }
        masks = [
            Frequency.REQUEST if rate is None and id(hole.node) in spread else rate
            for rate, (hole, _s, _e) in zip(rates, holes, strict=True)
        ]
        # (A template's placeholders share the template's node: they are not fields.)
        records = [
            self.record_of(hole.node) if hole.name is None else None for hole, _s, _e in holes
        ]
        lasts: list[int] = []
        nexts: list[tuple[int, int] | None] = []  # (next as volatile, tokens to it)
        for i in range(len(holes)):
            # Fields of one record written one after another (`{student.name}, grade
            # {student.grade}, goals: {student.goals}`) change together: the block is one
            # value, and only the text after its last field is at stake. (Fields far apart,
            # with a cache increment of text between them, are not one block.)
            last = i
            while (
                rates[i] is not None
                and records[i] is not None
                and last + 1 < len(holes)
                and records[last + 1] == records[i]
                and tm.token_at(holes[last + 1][1]) - tm.token_at(holes[last][2]) < LATE_TAIL_TOKENS
            ):
                last += 1
            lasts.append(last)
            found = None
            if rates[i] is not None:
                for k in range(last + 1, len(holes)):
                    rate = masks[k]
                    if rate is not None and rate >= rates[i]:
                        gap = tm.token_at(holes[k][1]) - tm.token_at(holes[last][2])
                        found = (k, max(0, gap))
                        break
                    if holes[k][0].sample is None:
                        break  # unknown-size text before it: the stretch is not known
            nexts.append(found)
        reported = None
        if sink.report_first and isinstance(sink.value, ast.List):
            reported = {id(n) for e in sink.value.elts[: sink.report_first] for n in ast.walk(e)}
        for i, (hole, start, _end) in enumerate(holes):
            if reported is not None and not (
                id(hole.node) in reported or (hole.via is not None and id(hole.via) in reported)
            ):
                continue  # laid out here for the position of the others only
            last = lasts[i]
            until_next = nexts[i][1] if nexts[i] is not None else None
            after_holes = [h for k, (h, _s, _e) in enumerate(holes) if k > last]
            place = Place(
                before=tm.token_at(start),
                after=max(0, total - tm.token_at(holes[last][2])),
                total=total,
                unknown_before=tuple(h.label for h, _s, _e in holes[:i] if h.sample is None),
                unknown_after=tuple(h.label for h in after_holes if h.sample is None),
                prompt_before=any(
                    h.sample is None and _holds_prompt_text(h.node) for h, _s, _e in holes[:i]
                ),
                prompt_after=any(
                    h.sample is None and _holds_prompt_text(h.node) for h in after_holes
                ),
                until_next=until_next,
                history_hole=_names_history(hole.node),
                short_after=sum(
                    1 for h in after_holes if h.sample is None and _short_value(h.node)
                ),
                short_before=sum(
                    1 for h, _s, _e in holes[:i] if h.sample is None and _short_value(h.node)
                ),
                data_after=sum(
                    1
                    for h in after_holes
                    if h.sample is None and _holds_data(h.node) and not _short_value(h.node)
                ),
                volatile_after=sum(
                    1
                    for k, (h, _s, _e) in enumerate(holes)
                    if k > last
                    and h.sample is None
                    and rates[k] is not None
                    and not _short_value(h.node)
                ),
            )
            if self.lint_hole(sink, hole, start, place) and first_volatile is None:
                first_volatile = (place.before, place.unknown_before)
            if rates[i] is None and hole.sample is None and sink.slot in ("system", "append"):
                self.lint_untraced(sink, hole, start, place)
        if sink.slot == "system" and not sink.fallback and (skeleton.strip() or holes):
            unknown = tuple(h.label for h, _s, _e in holes if h.sample is None)
            static = first_volatile if first_volatile is not None else (total, unknown)
            self.static_prefixes.append((static[0], static[1], sink))

    def called_in_view(self, node: ast.AST) -> bool:
        """Whether the function whose parameter ``node`` reads is called in the linted tree.

        Called in view, its callers say what the parameter holds (and the value is graded
        through them); never called, only the prompt's own text can.
        """
        if isinstance(node, ast.FormattedValue):
            node = node.value
        if not isinstance(node, ast.Name):
            return False
        ix = self.classifier.ix(node)
        values = ix.resolve_name(node)
        if not (values and isinstance(values[-1], Param)):
            return False
        fn = values[-1].function
        name = getattr(fn, "name", None)
        if name == "__init__":
            cls = ix.parent.get(fn)
            name = cls.name if isinstance(cls, ast.ClassDef) else None
        if not name:
            return False
        project = ix.project
        if project is not None:
            return name in project.called_names()
        return any(
            isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == name
            for n in ast.walk(ix.tree)
        )

    def record_of(self, node: ast.AST) -> str | None:
        """The record a value is a field of (:func:`_record_of`), through one assignment.

        ``customer = ctx.get("customer")`` then ``{customer}``: a field of ``ctx``.
        """
        if isinstance(node, ast.Name):
            values = self.classifier.ix(node).resolve_name(node)
            if len(values) == 1 and isinstance(values[0], ast.expr):
                node = values[0]
        return _record_of(node)

    def per_call_processes(self, node: ast.AST) -> bool:
        """Whether the tree ``node`` is in starts a fresh process for each call."""
        project = self.classifier.ix(node).project or self.index.project
        if project is not None:
            return project.runs_per_call_processes()
        return imports_per_call_framework("\n".join(self.index.lines))

    def source_rate(self, src: Source) -> tuple[Frequency, bool]:
        """How often a source's value changes where it is used; True for a clock read at import."""
        freq = src.granularity
        at_import = False
        if not src.placeholder and not src.per_pass and not src.per_call:
            runs = self.classifier.ix(src.origin).eval_frequency(src.origin)
            at_import = runs is Frequency.PROCESS and src.rule == "CB101"
            if at_import and self.per_call_processes(src.origin):
                # A clock read at import is fixed per process; where the framework starts
                # a process for each call (LiveKit runs each job in its own process) it is
                # computed again for every call: as often as its granularity, per call.
                runs = Frequency.SESSION
            freq = min(freq, runs)
        return freq, at_import

    def hole_rate(self, sink: Sink, hole: Hole) -> Frequency | None:
        """How often the most volatile value of a hole changes.

        ``None`` when nothing in it is volatile, or only values fixed per process start.
        """
        if _own_text(sink, hole):
            return None
        rates = [
            self.source_rate(src)[0]
            for src in hole.sources
            if not _not_in_tool_list(sink, src, hole, self.index)
        ]
        best = max(rates, default=None)
        return best if best is not None and best > Frequency.PROCESS else None

    def lint_hole(self, sink: Sink, hole: Hole, start: int, place: Place) -> bool:
        """Findings for the sources of one hole; True if one is a warning or worse."""
        index = self.index
        at = hole.via if hole.via is not None else hole.node
        line, col = index.line_col(at if index.owns(at) else sink.value)
        volatile = False
        if _own_text(sink, hole):
            return False  # the message's own text, rewritten in place: not new content
        later = _in_later_message(sink, hole, self.classifier, self.encoding)
        # Pipecat's prompt caching puts the breakpoint on the system prompt only, the first
        # system message of the request: a user message after it is not in that block.
        in_block = sink.block or (self.mode is not None and sink.slot == "system" and not later)
        for src in hole.sources:
            if _not_in_tool_list(sink, src, hole, self.index):
                continue
            freq, at_import = self.source_rate(src)
            pos, shown, settled = _position(sink, src, place, later)
            if sink.fallback == "body" and pos is Position.EARLY:
                pos = _body_position(place)
            severity = grade(freq, pos)
            if sink.fallback and src.guessed and severity > Severity.INFO:
                # Two guesses stacked (the prompt found by its text, the value's volatility by
                # its name): a note, not a finding. Measured on the two blind sets run after the
                # fallback landed: such findings added 2 false positives and no true one.
                severity = Severity.INFO
            volatile = volatile or severity >= Severity.WARNING
            message = _message(src, freq, pos, sink, {"hole": hole.label}, shown)
            if sink.fallback:
                message += FALLBACK_NOTE[sink.fallback]
            if at_import and freq > Frequency.PROCESS:
                message += (
                    " It is computed at import time, and the framework in this tree starts "
                    "a process for each call: each call renders its own value."
                )
            elif at_import:
                message += (
                    " It is computed once at import time: fixed for the life of the process, "
                    "so the cache holds across calls (a process that runs for days keeps a "
                    "stale date; if your deployment starts a process per call, it changes "
                    "per call)."
                )
            origin_line = getattr(src.origin, "lineno", line)
            if index.owns(src.origin) and origin_line != line:
                message += f" (value computed at line {origin_line})"
            finding = Finding(
                rule=src.rule,
                severity=severity,
                message=message,
                char_offset=start,
                token_offset=place.before,
                line=line,
                col=col,
                frequency=freq,
                position=pos,
                estimated=True,
                evidence=shorten(ast.unparse(hole.node), 60),
                extra={
                    "origin_line": origin_line,
                    "sink": sink.label,
                    "size_known": place.exact,
                    "total_tokens": place.total,
                    "tokens_after": place.after,
                    "guessed": src.guessed,
                    "settled": settled,
                    "confidence": _confidence(sink, src, settled),
                },
            )
            self.keep((src.key, src.rule), finding)
            block_severity = grade(freq, Position.EARLY)
            if in_block and freq > Frequency.PROCESS and block_severity >= Severity.WARNING:
                block = _block_finding(src, freq, block_severity, sink, self.mode or "", line, col)
                self.keep((src.key, "CB108"), block)
        return volatile

    def lint_untraced(self, sink: Sink, hole: Hole, start: int, place: Place) -> None:
        """An info note for a value nothing in view explains, early in a prompt.

        Measured across the studied corpora, such values are configuration more often
        than per-call data (an agent's name, a destination, a project path), so the note
        is info, never a warning: it does not count as a finding about the prompt.
        """
        if _own_text(sink, hole) or id(hole.node) in self.untraced:
            return
        what = _untraced(hole.node, self.classifier)
        if what is None:
            return
        src = Source("CB109", Frequency.SESSION, hole.node, what)
        pos, shown, settled = _position(sink, src, place)
        if sink.fallback == "body" and pos is Position.EARLY:
            pos = _body_position(place)
        if pos is not Position.EARLY or not settled or place.after < LATE_TAIL_TOKENS:
            return  # also when less than one cache increment of known text is at stake
        self.untraced.add(id(hole.node))
        at = hole.via if hole.via is not None else hole.node
        index = self.index
        line, col = index.line_col(at if index.owns(at) else sink.value)
        where = shown.describe() if shown is not None else "an unknown position"
        self.extra_findings.append(
            Finding(
                rule="CB109",
                severity=Severity.INFO,
                message=(
                    f"{hole.label} ({what}) lands in {sink.label} at {where} (early)."
                    + UNTRACED_NOTE
                ),
                char_offset=start,
                token_offset=place.before,
                line=line,
                col=col,
                position=pos,
                estimated=True,
                evidence=shorten(ast.unparse(hole.node), 60),
                extra={"sink": sink.label, "confidence": "low", "untraced": True},
            )
        )

    def findings(self, minimum: PrefixMinimum | None) -> list[Finding]:
        index = self.index
        # One finding per place and rule: two sources in one hole read as one problem.
        by_place: dict[tuple[int, int, str], Finding] = {}
        for f in self.best.values():
            k = (f.line, f.col, f.rule)
            if k not in by_place or f.severity > by_place[k].severity:
                by_place[k] = f
        found = list(by_place.values())
        taken = {(f.line, f.col, f.rule) for f in found}
        found.extend(f for f in self.extra_findings if (f.line, f.col, f.rule) not in taken)
        for issue in self.renderer.issues.values():
            line, col = index.line_col(issue.node if index.owns(issue.node) else index.tree)
            found.append(
                Finding(
                    rule="CB201",
                    severity=Severity.parse(issue.severity),
                    message=issue.message,
                    line=line,
                    col=col,
                    estimated=True,
                    evidence=issue.placeholder,
                )
            )
        found.extend(_tool_swaps(index.tree, index))
        found.extend(_context_inserts(index.tree, index))
        found.extend(_front_inserts(index.tree, index))
        found.extend(_below_minimum(minimum, self.static_prefixes, found, index))
        found.sort(key=lambda f: (f.line, f.col, -f.severity))
        return found


def _block_finding(
    src: Source, freq: Frequency, severity: Severity, sink: Sink, mode: str, line: int, col: int
) -> Finding:
    how = {
        "enable_prompt_caching": "Pipecat's enable_prompt_caching sends the whole system "
        "prompt as one block with the cache breakpoint at its end",
        "cache_control": "this text block carries `cache_control`",
        "breakpoints": "the system prompt is one block carrying the cache breakpoint",
    }[mode if not sink.block else "cache_control"]
    cost = breakpoint_cost(freq)
    return Finding(
        rule="CB108",
        severity=severity,
        message=(f"`{src.what}` (changes {freq.label}) is inside the cached block: {how}, {cost}."),
        line=line,
        col=col,
        frequency=freq,
        position=Position.EARLY,
        estimated=True,
        evidence=src.what,
        extra={"sink": sink.label, "mode": mode},
    )


def _below_minimum(minimum, static_prefixes, findings, index) -> list[Finding]:
    """CB301 for the longest static start of a system prompt, when below the floor."""
    if minimum is None or minimum.tokens <= 0 or not static_prefixes:
        return []
    if any(f.severity >= Severity.ERROR for f in findings):
        return []  # an early error already says nothing is cached
    exact = [p for p in static_prefixes if not p[1]]
    if any(p[0] >= minimum.tokens for p in static_prefixes):
        return []
    static, unknown, sink = max(static_prefixes, key=lambda p: (p[0], not p[1]))
    if exact and max(p[0] for p in exact) >= static:
        static, unknown, sink = max(exact, key=lambda p: p[0])
    line, col = index.line_col(sink.value)
    where = f"longest static start of a system prompt, {sink.label}"
    if unknown:
        message = (
            f"the static prefix ({where}) is at least {static} tokens plus "
            f"{_names(unknown)} of unknown size: if those stay short, it is below the "
            f"{minimum.tokens:,}-token minimum for {minimum.provider} and nothing is cached "
            f"until history pushes the prompt past the floor (source: {minimum.source})."
        )
        severity = Severity.INFO
    else:
        message = below_minimum_message(static, minimum, where)
        severity = Severity.WARNING
    return [
        Finding(
            rule="CB301",
            severity=severity,
            message=message,
            token_offset=static,
            line=line,
            col=col,
            estimated=True,
            extra={
                "minimum": minimum.tokens,
                "static_tokens": static,
                "size_known": not unknown,
            },
        )
    ]


__all__ = ["Hole", "Sink", "find_sinks", "lint_python_source"]
