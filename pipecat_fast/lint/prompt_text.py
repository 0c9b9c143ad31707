"""Whether a text reads as an LLM instruction prompt, by its content alone.

The source modes find prompts by where text goes (a ``system_prompt`` name, an
``instructions=`` keyword, a system message). Code written for a framework the linter does
not know sends its prompt through calls it cannot recognise; the text itself still says
what it is: instructions addressed to a model ("You are...", "Never...", "If the caller...",
"Respond with..."), often under role/rules/tone headings and in bullet lists. This module
reads only the text, so the fallback that uses it needs no knowledge of any API.
"""

from __future__ import annotations

import re

_OPENING = re.compile(
    r"^[\s#>*_\-\[(]*(?:<[\w-]{2,30}>\s*)?(?:"
    r"you\s+are|you're|your\s+(?:name|role|job|task|goal|purpose|mission)\s+is|act\s+as"
    r"|as\s+an?\s+[\w\- ]{0,40}?(?:assistant|agent|bot|receptionist|representative)\b"
    r"|(?:role|persona|identity|personality|system|instructions?)\s*(?:[:\]\n#]|$)"
    r")",
    re.IGNORECASE,
)
"""The first line of a prompt: a role line or a role/persona/instructions heading."""

_SECOND_PERSON = re.compile(r"\b(?:you|your|you're|you'll|yourself)\b", re.IGNORECASE)
_VERBS = (
    r"always|never|do\s+not|don't|be|keep|use|respond|reply|answer|ask|speak|talk|help|"
    r"avoid|make\s+sure|remember|only|greet|confirm|stay|introduce|analy[sz]e|classify|"
    r"extract|summari[sz]e|return|output|provide|generate|write|check|identify|follow|"
    r"ensure|focus|limit|start|end|begin|offer|explain|determine|decide|evaluate"
)
_INSTRUCTION = re.compile(
    rf"(?:^|[.!?]\s+)[\s#>*\-\d.)]*(?:{_VERBS}|if\s+the\s+(?:user|caller|customer|patient|guest))\b",
    re.IGNORECASE | re.MULTILINE,
)
"""A sentence or line that opens with an instruction (``Always ...``, ``- Keep ...``)."""
_HEADING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]+\S|\*\*[^*\n]{2,40}\*\*:?[ \t]*$|[A-Z][A-Z0-9 /&()\-]{2,40}:)",
    re.MULTILINE,
)
"""A Markdown heading, a bold label line, or an ALL-CAPS label (``RULES:``)."""
_ADDRESSEE = re.compile(
    r"\b(?:the\s+(?:user|caller|customer|patient|guest|assistant|model|agent)|"
    r"respond\s+(?:with|in|only)|reply\s+(?:with|in|only)|in\s+character)\b",
    re.IGNORECASE,
)
_MARKUP = re.compile(r"^\s*(?:<\?xml|<!doctype|<html|<svg|\{|\[|select\s|https?://)", re.I)
"""Text that is a document, data or a query rather than prose: XML/HTML, JSON, SQL, a URL."""

_CODE_LINE = re.compile(
    r"^\s*(?:[\w.]+\s*=\s*\S|[)\]}][,;)]*\s*$|(?:def|class|import|from|return|const|let)\s"
    r"|.*[(\[{,]\s*$)"
)
"""A line of code: an assignment, a closing bracket, a block keyword, a bracket left open."""
CODE_SHARE = 0.3
"""Text whose non-blank lines are this much code or more is code, not instructions."""

MIN_OPENING_CHARS = 40
"""A role line this long at least (shorter: a fragment such as ``"You are "``)."""
MIN_BODY_CHARS = 200
"""Without a role line, instructions this long at least."""
MIN_SCORE = 3
"""Cues a text without a role line needs (second person, instruction sentences,
headings and words addressing the model, each counted up to a cap)."""


OPENING_LINES = 3
"""A role line counts as the opening among this many first non-blank lines (a title
heading, ``# Voice Assistant``, may come first)."""


def opens_like_prompt(text: str) -> bool:
    """True when a role line or a role/instructions heading opens the text.

    The role line may follow a title heading or an opening tag (``<role>``) among the first
    :data:`OPENING_LINES` non-blank lines.
    """
    if len(text.strip()) < MIN_OPENING_CHARS or looks_like_code(text):
        return False
    lines = [ln for ln in text.splitlines() if ln.strip()][:OPENING_LINES]
    for i, line in enumerate(lines):
        if _OPENING.match(line):
            return True
        if not (line.lstrip().startswith(("#", "<")) or i == 0 and len(line) < 60):
            break
    return False


def prompt_score(text: str) -> int:
    """How much a text reads as instructions to a model: capped counts of its cues."""
    return (
        min(len(_SECOND_PERSON.findall(text)), 4)
        + min(len(_INSTRUCTION.findall(text)), 4)
        + min(len(_HEADING.findall(text)), 3)
        + min(len(_ADDRESSEE.findall(text)), 3)
    )


def reads_as_prompt(text: str) -> bool:
    """True when the text reads as instructions to a model.

    Either it opens like a prompt (:func:`opens_like_prompt`), or it is long prose (not
    markup, a query or a URL) with enough instruction cues (:func:`prompt_score`).
    """
    if opens_like_prompt(text):
        return True
    if len(text.strip()) < MIN_BODY_CHARS or _MARKUP.search(text) or looks_like_code(text):
        return False
    return prompt_score(text) >= MIN_SCORE


def looks_like_code(text: str) -> bool:
    """True when at least :data:`CODE_SHARE` of the non-blank lines are code."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 3:
        return False
    return sum(1 for ln in lines if _CODE_LINE.match(ln)) >= CODE_SHARE * len(lines)
