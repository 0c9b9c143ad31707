"""Render the bench's static knowledge appendix (the ``large-prompt`` profile) from structured data.

A real voice agent's prompt grows large when a practice pastes its reference material into it:
offices, fee schedule, insurance estimates, policies, FAQ. ``render_knowledge`` turns one JSON file
of such facts (``data/prompts/<name>_knowledge.json``) into that text, deterministically, so the
repository ships ~45 KB of facts instead of ~120 KB of prose, and the ~30,000-token prompt is the
same byte for byte on every machine. The loader in :mod:`pipecat_fast.bench.calls` appends it to
the base prompt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_CLASSES = ("preventive", "basic", "major", "orthodontic")


def _end(text: str) -> str:
    """Add a full stop unless the text already ends a sentence."""
    return text if text.endswith((".", "!", "?")) else text + "."


def money(amount: float) -> str:
    """Dollars as a voice agent writes them: ``$145``, ``$65.50``, ``$1,195``."""
    if round(amount, 2) == int(amount):
        return f"${int(amount):,}"
    return f"${amount:,.2f}"


def monthly_payment(principal: float, months: int, apr_percent: float) -> float:
    """Level monthly payment of an amortized loan (``apr_percent`` 0 means principal / months)."""
    if apr_percent == 0:
        return principal / months
    r = apr_percent / 100 / 12
    return principal * r / (1 - (1 + r) ** -months)


def patient_share(fee: float, coverage_percent: int, deductible: float, applies: bool) -> float:
    """Estimated patient share of a fee: the deductible (if it applies) plus the uncovered part."""
    ded = min(deductible, fee) if applies else 0.0
    return ded + (fee - ded) * (100 - coverage_percent) / 100


def render_knowledge(data: Mapping[str, Any]) -> str:
    """Render the knowledge JSON as a prompt appendix (markdown-style headings, plain sentences).

    Args:
        data: The parsed ``*_knowledge.json`` object (keys as in the shipped file).

    Returns:
        The appendix text, ending with a newline.

    Raises:
        KeyError: If a required section or field is missing (the loader reports it with the file).
    """
    out: list[str] = [f"# {data['title']}", "", data["intro"], ""]
    out += _offices(data)
    out += _blocks(data)
    out += _fees(data)
    out += _insurance(data)
    out += _estimates(data)
    out += _financing(data)
    out += _policies(data)
    out += ["## Handling common call situations", ""]
    out += [f"- {title}: {text}" for title, text in data["situations"]] + [""]
    out += ["## Frequently asked questions", ""]
    for q, a in data["faq"]:
        out += [f"Q: {q}", f"A: {a}", ""]
    out += ["## Phrases in other languages", ""]
    for lang, phrases in data["phrases"].items():
        out += [f"### {lang}"] + [f"- {label}: {text}" for label, text in phrases] + [""]
    out += ["## Glossary in plain words", ""]
    out += [f"- {term}: {meaning}." for term, meaning in data["glossary"]]
    return "\n".join(out).rstrip() + "\n"


def _offices(data: Mapping[str, Any]) -> list[str]:
    out = ["## Offices", ""]
    for o in data["offices"]:
        out += [f"### {o['name']} office", f"Address: {o['address']}."]
        out += [f"- {day}: {_end(hours)}" for day, hours in o["hours"]]
        out += ["Who works here:"] + [f"- {day}: {_end(who)}" for day, who in o["schedule"]]
        out += [f"Parking: {o['parking']}", f"Getting here: {o['transit']}"]
        out += [f"Access: {o['accessibility']}", f"Notes: {o['notes']}", ""]
    out += ["Both offices are closed on these holidays: " + "; ".join(data["holidays"]) + ".", ""]
    out += ["## People", ""]
    for p in data["providers"]:
        out += [f"- {p['name']}, {p['role']}. Works at {p['where']}. Speaks {p['languages']}."]
        out += [f"  {p['about']}"]
    return out + [""]


def _blocks(data: Mapping[str, Any]) -> list[str]:
    out = [
        "## Usual appointment blocks",
        "",
        "The schedule is built from these blocks. Real openings always come from "
        "check_availability; use the blocks only to suggest what to search for.",
        "",
    ]
    for b in data["blocks"]:
        for day in b["days"]:
            visits = " ".join(_end(f"{k[0].upper()}{k[1:]}: {when}") for k, when in b["visits"])
            out += [f"- {b['office']}, {day}: {visits}"]
    return out + [""]


def _fees(data: Mapping[str, Any]) -> list[str]:
    plan = data["membership"]
    out = ["## Visit packages", ""]
    for p in data["packages"]:
        fee = "free" if p["fee"] == 0 else money(p["fee"])
        out += [f"- {p['name']}: {fee}, about {p['minutes']} minutes; {p['includes']}."]
    out += ["", "## Self-pay fee schedule by kind of treatment", ""]
    for cat in data["categories"]:
        out += [f"### {cat['name']}", f"Before the visit: {cat['before']}"]
        out += [f"After the visit: {cat['after']}"]
        for p in (p for p in data["procedures"] if p["category"] == cat["id"]):
            minutes = f", about {p['minutes']} minutes" if p["minutes"] else ""
            member = _member_price(p, cat, plan)
            out += [f"- {p['code']} {p['name']}: {money(p['fee'])}{minutes}. {p['about']} {member}"]
        out += [""]
    return out


def _member_price(proc: Mapping[str, Any], cat: Mapping[str, Any], plan: Mapping[str, Any]) -> str:
    if proc["code"] in {"D1110", "D0120", "D0274", "D0140"}:
        return f"Included in the {plan['name']}."
    pct = 10 if cat["class"] in ("not covered", "orthodontic") else plan["discount_percent"]
    return f"{plan['name']} price: {money(round(proc['fee'] * (100 - pct) / 100, 2))}."


def _insurance(data: Mapping[str, Any]) -> list[str]:
    out = ["## Insurance plans", ""]
    for c in data["carriers"]:
        if c["annual_max"] == 0:
            out += [f"- {c['name']}: {c['network']}. {c['notes']}"]
            continue
        cov = ", ".join(f"{k} {c['coverage'][k]}%" for k in _CLASSES)
        out += [
            f"- {c['name']}: {c['network']}. Typical coverage {cov}; annual maximum "
            f"{money(c['annual_max'])}, deductible {money(c['deductible'])}. {c['notes']}"
        ]
    plan = data["membership"]
    out += [
        "",
        f"### {plan['name']}",
        f"{money(plan['monthly'])} a month or {money(plan['yearly'])} a year. Includes "
        f"{plan['includes']}, plus {plan['discount_percent']}% off other treatment. "
        f"{plan['rules']}",
    ]
    return out + [""]


def _estimates(data: Mapping[str, Any]) -> list[str]:
    procs = {p["code"]: p for p in data["procedures"]}
    classes = {c["id"]: c["class"] for c in data["categories"]}
    out = [
        "## Typical patient share with insurance",
        "",
        "Planning figures only: first visit of the plan year, deductible not yet met, typical "
        "coverage of each plan. Out-of-network plans may allow less than our fee, so the share can "
        "be higher. Never promise these figures to a caller.",
        "",
    ]
    for c in data["carriers"]:
        if c["annual_max"] == 0:
            continue
        out += [f"### {c['name']} ({c['network']})"]
        for code in data["estimate_procedures"]:
            p = procs[code]
            cls = classes[p["category"]]
            pct = c["coverage"].get(cls, 0)
            first = patient_share(p["fee"], pct, c["deductible"], cls != "preventive")
            later = patient_share(p["fee"], pct, c["deductible"], False)
            line = (
                f"- {code} {p['name']}, fee {money(p['fee'])}: plan pays about {pct}% ({cls}); "
                f"patient share about {money(round(first, 2))}"
            )
            if later != first:
                line += f", or {money(round(later, 2))} once the deductible is met"
            out += [line + "."]
        out += [""]
    return out


def _financing(data: Mapping[str, Any]) -> list[str]:
    fin = data["financing"]
    out = ["## Financing examples", "", f"{fin['rules']}", ""]
    for p in data["procedures"]:
        if p["fee"] < fin["minimum"]:
            continue
        parts = []
        for months in fin["terms_months"]:
            apr = 0 if months <= fin["zero_percent_up_to_months"] else fin["apr_after"]
            pay = money(round(monthly_payment(p["fee"], months, apr), 2))
            parts.append(f"{pay} a month for {months} months" + (f" at {apr}% APR" if apr else ""))
        out += [f"- {p['code']} {p['name']}, {money(p['fee'])}: " + "; ".join(parts) + "."]
    return out + [""]


def _policies(data: Mapping[str, Any]) -> list[str]:
    out = ["## Policies in detail", ""]
    for title, text in data["policies"]:
        out += [f"### {title}", text, ""]
    return out
