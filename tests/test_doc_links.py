"""README.md and docs/*.md render as plain Markdown with working relative links: every relative
link resolves to a file in the repository, and every ``#anchor`` to a heading of its page (the
slug GitHub gives it)."""

import re
import unicodedata
from pathlib import Path

import pytest

from tests.conftest import ROOT

LINK = re.compile(r"(?<!\\)!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.S | re.M)
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def prose(markdown: str) -> str:
    """The text links live in: fenced blocks and inline code removed."""
    return INLINE_CODE.sub("", FENCE.sub("", markdown))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup and punctuation dropped, lowercase, spaces to
    hyphens (letters of any script, digits, ``-`` and ``_`` kept)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    kept = "".join(
        c
        for c in text
        if c in " -_" or unicodedata.category(c)[0] in "LN" or unicodedata.category(c) == "Mn"
    )
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor on a page, duplicates numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text("utf-8"))):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    out.update(re.findall(r"<a (?:name|id)=\"([^\"]+)\"", path.read_text("utf-8")))
    return out


def relative_links(path: Path) -> list[str]:
    targets = LINK.findall(prose(path.read_text("utf-8")))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.I)]


def broken(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            found.append(f"{target}: no such file")
            continue
        if root.resolve() not in dest.parents:
            found.append(f"{target}: outside the repository")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            found.append(f"{target}: no heading #{anchor} in {dest.name}")
    return found


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    assert broken(page) == []


def test_slugs_follow_githubs_rules():
    assert slug("The end-of-turn critical path: confirm, draft") == (
        "the-end-of-turn-critical-path-confirm-draft"
    )
    assert slug("1. Confirm on a `complete` transcript") == "1-confirm-on-a-complete-transcript"
    assert slug("Scale-out (vLLM / SGLang)") == "scale-out-vllm--sglang"
    assert slug("Größe & Ümlaut") == "größe--ümlaut"


def test_the_checker_catches_a_missing_file_and_a_missing_anchor(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Here\n\n## Twice\n\n## Twice\n", "utf-8")
    page.write_text(
        "[ok](other.md#here) [ok2](other.md#twice-1) [self](#top) [web](https://x.y/#no)\n"
        "[gone](missing.md) [bad](other.md#nowhere) [up](../x.md)\n\n# Top\n\n"
        "```\n[in code](nowhere.md)\n```\n`[inline](nowhere.md)`\n",
        "utf-8",
    )
    assert broken(page, root=tmp_path) == [
        "missing.md: no such file",
        "other.md#nowhere: no heading #nowhere in other.md",
        "../x.md: no such file",
    ]
