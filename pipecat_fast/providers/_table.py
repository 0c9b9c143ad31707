"""Reading the registry's JSON tables (``llm_cache.json``, ``tts.json``, ``stt.json``).

One loader for all three: the bundled file read once, a user's file checked for the shape every
table shares (an object with a ``providers`` object), a provider name or alias resolved to its
canonical name, and a module name matched against an entry's module prefixes. The per-kind
modules (:mod:`.llm`, :mod:`.tts`, :mod:`.stt`) turn entries into their facts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path


@cache
def bundled(filename: str) -> dict:
    """The bundled table ``filename`` of this package (read once)."""
    text = resources.files("pipecat_fast.providers").joinpath(filename).read_text("utf-8")
    return json.loads(text)


def load(path: str | Path | None, *, filename: str, what: str) -> dict:
    """A table from ``path``, or the bundled ``filename`` when ``path`` is ``None``.

    Args:
        path: A JSON file shaped like the bundled one.
        filename: The bundled table's file name.
        what: What the table is, for the error message (``"TTS facts table"``).

    Raises:
        ValueError: If the file cannot be read, is not JSON, or has no ``providers`` object.
    """
    if path is None:
        return bundled(filename)
    try:
        table = json.loads(Path(path).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read {what} {path}: {e}") from e
    if not isinstance(table, dict) or not isinstance(table.get("providers"), dict):
        raise ValueError(f"{path}: expected an object with a 'providers' object")
    return table


def names(table: dict) -> list[str]:
    """The canonical provider names of a table, sorted."""
    return sorted(table["providers"])


def canonical(provider: str, table: dict) -> str | None:
    """The canonical name of ``provider`` (a name or one of an entry's ``aliases``), or ``None``."""
    p = provider.strip().lower()
    for name, entry in table["providers"].items():
        if p == name or p in entry.get("aliases", []):
            return name
    return None


def module_matches(module: str, prefixes: Iterable[str]) -> bool:
    """Whether ``module`` is one of ``prefixes`` or inside one of them (``a.b`` is in ``a``)."""
    return any(module == p or module.startswith(p + ".") for p in prefixes)
