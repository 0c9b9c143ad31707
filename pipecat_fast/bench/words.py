"""Words lost: every word the caller said must reach the LLM context.

Pure: the scripted utterances (what the STT's finals say) and the user messages the context
ended up with, as text; the normaliser (:mod:`pipecat_fast.textnorm`: case, punctuation and
spacing aside) decides what a word is. A word counts as lost when the context holds fewer of it
than the caller said (a multiset difference: the order a late final landed in does not matter,
only that it landed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from pipecat_fast.textnorm import normalize_words


@dataclass(frozen=True)
class WordsLost:
    """Scripted words and the ones the context never got.

    Attributes:
        scripted: Words the caller said (normalised), over every utterance.
        lost: The words missing from the context, one entry per missing occurrence.
    """

    scripted: int
    lost: tuple[str, ...]


def words_lost(utterances: Iterable[str], user_messages: Iterable[str]) -> WordsLost:
    """Count the caller's words that never reached the context."""
    said = Counter(w for u in utterances for w in normalize_words(u))
    heard = Counter(w for m in user_messages for w in normalize_words(m))
    missing = said - heard
    return WordsLost(scripted=sum(said.values()), lost=tuple(sorted(missing.elements())))


def user_texts(messages: Iterable[dict]) -> list[str]:
    """The text of every user message of an ``LLMContext`` (string or text-part content)."""
    out = []
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [p.get("text", "") for p in content if isinstance(p, dict)]
    return out
