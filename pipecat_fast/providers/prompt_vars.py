"""Template variables voice-agent platforms fill themselves, read from ``prompt_vars.json``.

One home for what the cache-bust linter knows about platform-rendered prompts: the system
variables a platform fills in a ``{{placeholder}}`` (Vapi's ``{{now}}`` and
``{{customer.number}}``, ElevenLabs' ``{{system__caller_id}}``, Retell's
``{{current_time}}``...), the request fields through which an app binds its own variables
for one call (``variableValues``, ``dynamic_variables``, ``retell_llm_dynamic_variables``,
``templateContext``), the template engines' own clock values (Liquid's ``"now" | date``),
and the frameworks that start a process per call. Each entry names its source. Pure: names
in, facts out; grading them is :mod:`pipecat_fast.lint`'s job.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

from pipecat_fast.providers import _table

Kind = Literal["clock", "caller", "call_id", "history", "config"]
FILENAME = "prompt_vars.json"


@dataclass(frozen=True)
class PlatformVariable:
    """A variable a platform fills in a prompt template.

    Attributes:
        name: The variable as written in the template (``customer.number``).
        kind: ``clock``, ``caller``, ``call_id``, ``history`` or ``config``.
        granularity: For clocks, how often the rendered text changes: ``minute``, ``day``,
            ``session`` (a timestamp fixed when the call starts) or ``request`` (rendered
            anew each time the prompt is); else ``None``.
        platform: The platform whose documentation defines it.
        source: Where that comes from.
    """

    name: str
    kind: Kind
    granularity: str | None
    platform: str
    source: str


@cache
def _table_data() -> dict:
    return _table.bundled(FILENAME)


def platform_variable(name: str) -> PlatformVariable | None:
    """The platform variable ``name`` is (exact names first, then prefixes), or ``None``.

    A name several platforms define alike resolves to the first one listed; where they
    disagree on the kind, the more volatile reading wins (a name a platform fills with the
    clock is a clock wherever it appears).
    """
    key = name.strip()
    found: list[PlatformVariable] = []
    for platform, entry in _table_data()["providers"].items():
        spec = entry.get("variables", {}).get(key)
        if spec is None:
            for prefix, pspec in entry.get("prefixes", {}).items():
                if key.startswith(prefix) and len(key) > len(prefix):
                    spec = pspec
                    break
        if spec is not None:
            found.append(
                PlatformVariable(
                    key, spec["kind"], spec.get("granularity"), platform, entry["source"]
                )
            )
    if not found:
        return None
    volatile = [v for v in found if v.kind != "config"]
    return (volatile or found)[0]


def binding_fields() -> dict[str, str]:
    """Request fields whose object's keys are a template's variables for one call.

    Returns:
        ``{field: platform}`` (``{"variableValues": "vapi", ...}``).
    """
    out: dict[str, str] = {}
    for platform, entry in _table_data()["providers"].items():
        for field in entry.get("binding_fields", []):
            out.setdefault(field, platform)
    return out


def liquid_clock_literals() -> tuple[str, ...]:
    """String literals the Liquid ``date`` filter reads as the current time (``"now"``)."""
    return tuple(_table_data()["template_engines"]["liquid"]["clock_literals"])


def liquid_date_filters() -> tuple[str, ...]:
    """Liquid filters that format a date (``date``)."""
    return tuple(_table_data()["template_engines"]["liquid"]["date_filters"])


def liquid_default_format() -> str:
    """The format LiquidJS's ``date`` filter uses when none is given."""
    return _table_data()["template_engines"]["liquid"]["default_format"]


def template_clock_calls() -> tuple[str, ...]:
    """Functions template engines evaluate to the current time (Jinja's ``now()``)."""
    return tuple(_table_data()["template_engines"]["jinja"]["clock_calls"])


def process_per_call_imports() -> tuple[str, ...]:
    """Imports of frameworks that run each call in a fresh process (``livekit.agents``).

    A module-level value computed at import is computed again for every call there.
    """
    out: list[str] = []
    for entry in _table_data()["frameworks"].values():
        if entry.get("process_per_call"):
            out.extend(entry["imports"])
    return tuple(out)


@dataclass(frozen=True)
class StateTemplating:
    """A framework that fills ``{name}`` in an agent's instruction from session state.

    Attributes:
        imports: Module prefixes whose import in a file says it uses the framework.
        keywords: The agent's arguments whose strings it fills (``instruction``).
        config_prefixes: Name prefixes of state set per deployment, not per session.
        source: Where that comes from.
    """

    imports: tuple[str, ...]
    keywords: frozenset[str]
    config_prefixes: tuple[str, ...]
    source: str


@cache
def state_templating() -> tuple[StateTemplating, ...]:
    """Frameworks that render session state into instruction strings (Google ADK)."""
    out = []
    for entry in _table_data()["frameworks"].values():
        if "state_template_keywords" in entry:
            out.append(
                StateTemplating(
                    tuple(entry["imports"]),
                    frozenset(entry["state_template_keywords"]),
                    tuple(entry.get("config_prefixes", ())),
                    entry["source"],
                )
            )
    return tuple(out)


def _framework_types(key: str) -> frozenset[str]:
    """The union of one list field (``run_context_types``...) over the framework entries."""
    entries = _table_data()["frameworks"].values()
    return frozenset(t for entry in entries for t in entry.get(key, ()))


@cache
def call_argument_types() -> frozenset[str]:
    """Parameter types that carry what the model extracted from this call (``FlowArgs``)."""
    return _framework_types("call_argument_types")


@cache
def run_context_types() -> frozenset[str]:
    """Parameter types that carry one run's own context object (``RunContextWrapper``)."""
    return _framework_types("run_context_types")
