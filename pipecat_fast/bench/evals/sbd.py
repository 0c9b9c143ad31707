"""``pipecat-fast bench sbd``: streaming sentence-boundary accuracy, ours vs Pipecat vs pySBD.

Every case of ``../shared/data/sbd/*.jsonl`` (pySBD's golden rules, sentencex's tests, Pipecat's
``match_endofsentence`` tests: material nobody on this project wrote) is fed token by token to
our ``StreamSegmenter`` (first-phrase policy off: this measures sentence boundaries) and to
Pipecat 1.14's ``SimpleTextAggregator``, in three ways: real o200k_base token boundaries (raw
bytes for ours, the same boundaries held back to whole code points for Pipecat, which takes
``str``), one character at a time, and one word at a time. pySBD segments the whole text offline
(``clean=False``: no aggregator here rewrites text) as the reference.

Scoring (the same for all three):

- A chunk is compared after collapsing whitespace runs to one space and trimming it; empty
  chunks are dropped. Expected sentences get the same treatment.
- List cases (pySBD, sentencex) pass when the chunk list equals the expected list exactly.
- Pipecat's end-of-sentence cases give an end index, ``false`` or ``"truthy"`` for a text that
  may continue. ``false``: nothing may be emitted before the end of the reply. An index inside
  the text: the first chunk emitted before the end of the reply must end there. An index at the
  end of the text, or ``"truthy"``: the text must come out as one chunk (a streaming aggregator
  may hold the last boundary for lookahead, as Pipecat's own does). pySBD's list is read the
  same way, its last sentence playing the part of the text still held.
- A streaming aggregator passes a case only if it passes in every feeding mode.

The token streams of ``llm_streams/tokenizer_boundary_streams.jsonl`` (Hindi, Japanese, Korean,
emoji cut at real o200k/cl100k boundaries, many tokens invalid UTF-8 alone) are fed as raw bytes
to ours and as code-point-safe pieces to Pipecat; the suite counts chunk ends that fall inside a
grapheme cluster and U+FFFD in the output. It also reports the per-token overhead (median µs
per push) and the boundary-to-emit delay (tokens between the token that completes a boundary
mark and the push that emits the chunk), both in the ``tokens`` mode, and the token at which
the first chunk of a multi-sentence case is released: ours with the first-phrase policy off
and on, and Pipecat's.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import json
import re
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import regex

from pipecat_fast.aggregator.core import SegmenterConfig, StreamSegmenter
from pipecat_fast.testing.shared_data import shared_data_dir

DEFAULT_DATA = shared_data_dir()
MODES = ("tokens", "chars", "words")
AGGREGATORS = ("ours", "pipecat")


@dataclass
class Case:
    """One test text from the shared material."""

    source: str  # "pysbd", "sentencex" or "pipecat"
    lang: str
    text: str
    expected: list[str] | None = None  # list cases
    end_index: int | bool | str | None = None  # Pipecat's end-of-sentence cases


@dataclass
class Run:
    """What one aggregator did with one fed text."""

    streamed: list[str] = field(default_factory=list)  # chunks emitted before the end
    flushed: list[str] = field(default_factory=list)  # chunks emitted at the end
    push_ns: list[int] = field(default_factory=list)
    ends: list[tuple[int, int]] = field(default_factory=list)  # (push index, boundary offset)


def load_cases(data_dir: Path) -> list[Case]:
    """Read the three SBD files; raises FileNotFoundError when the material is absent."""
    sbd = data_dir / "sbd"
    cases: list[Case] = []
    for name, source in (
        ("pysbd_golden_rules.jsonl", "pysbd"),
        ("sentencex_tests.jsonl", "sentencex"),
    ):
        for line in (sbd / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            cases.append(Case(source, row["lang"], row["text"], expected=row["expected"]))
    for line in (sbd / "pipecat_match_endofsentence.jsonl").read_text("utf-8").splitlines():
        row = json.loads(line)
        cases.append(Case("pipecat", row["lang"], row["text"], end_index=row["expected_end_index"]))
    return cases


def load_streams(data_dir: Path) -> list[dict]:
    """Read the tokenizer-boundary token streams."""
    path = data_dir / "llm_streams" / "tokenizer_boundary_streams.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def lang_code(lang: str) -> str:
    """Language code to configure the aggregators with (Pipecat's 'latin' rows are English)."""
    return "en" if lang in ("latin", "emoji") else lang


def norm(text: str) -> str:
    """Whitespace runs to one space, trimmed: the comparison form of a chunk."""
    return re.sub(r"\s+", " ", text).strip()


def norm_list(chunks: list[str]) -> list[str]:
    """Normalised non-empty chunks."""
    return [n for n in (norm(c) for c in chunks) if n]


def feeds(text: str, modes: tuple[str, ...] = MODES) -> dict[str, list[str | bytes]]:
    """The pieces to feed for each mode (``tokens`` are raw o200k_base token bytes)."""
    out: dict[str, list[str | bytes]] = {}
    if "tokens" in modes:
        from pipecat_fast.tokens import encode, get_encoding

        enc = get_encoding("o200k_base")
        out["tokens"] = [enc.decode_single_token_bytes(t) for t in encode(text, "o200k_base")]
    if "chars" in modes:
        out["chars"] = list(text)
    if "words" in modes:
        out["words"] = re.findall(r"\s*\S+|\s+$", text)
    return out


def as_text_pieces(pieces: list[str | bytes]) -> list[str]:
    """Byte pieces held back to whole code points (what a JSON delta can carry)."""
    if not pieces or isinstance(pieces[0], str):
        return [p if isinstance(p, str) else p.decode("utf-8", "replace") for p in pieces]
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    return [dec.decode(p) for p in pieces]  # type: ignore[arg-type]


def run_ours(pieces: list[str | bytes], lang: str, first_phrase: bool = False) -> Run:
    """Feed ``pieces`` to a fresh ``StreamSegmenter``."""
    seg = StreamSegmenter(SegmenterConfig(language=lang_code(lang), first_phrase=first_phrase))
    run = Run()
    for idx, piece in enumerate(pieces):
        t0 = time.perf_counter_ns()
        chunks = seg.push(piece)
        run.push_ns.append(time.perf_counter_ns() - t0)
        for c in chunks:
            run.streamed.append(c.text)
            run.ends.append((idx, c.mark_end))
    run.flushed = [c.text for c in seg.flush()]
    return run


async def run_pipecat(pieces: list[str], lang: str) -> Run:
    """Feed ``pieces`` to a fresh Pipecat ``SimpleTextAggregator`` (sentence mode)."""
    from pipecat.utils.text.simple_text_aggregator import SimpleTextAggregator

    agg = SimpleTextAggregator(language=lang_code(lang))
    run = Run()
    text = "".join(pieces)
    cursor = 0
    for idx, piece in enumerate(pieces):
        t0 = time.perf_counter_ns()
        out = [a.text async for a in agg.aggregate(piece)]
        run.push_ns.append(time.perf_counter_ns() - t0)
        for a in out:
            run.streamed.append(a)
            pos = text.find(a, cursor) if a else -1
            if pos >= 0:
                cursor = pos + len(a)
                run.ends.append((idx, cursor))
    rest = await agg.flush()
    run.flushed = [rest.text] if rest and rest.text else []
    return run


_PYSBD: dict[str, object] = {}


def run_pysbd(text: str, lang: str) -> list[str] | None:
    """Sentences pySBD finds in the whole text; None if it lacks the language or fails."""
    try:
        import pysbd
    except ImportError:  # the reference is optional: pip install "pipecat-fast[bench]"
        if "_missing" not in _PYSBD:
            _PYSBD["_missing"] = None
            print("pysbd is not installed: the pySBD column will read n/a")
        return None
    code = lang_code(lang)
    if code not in _PYSBD:
        try:
            _PYSBD[code] = pysbd.Segmenter(language=code, clean=False)
        except Exception:
            _PYSBD[code] = None
    seg = _PYSBD[code]
    if seg is None:
        return None
    try:
        return list(seg.segment(text))  # type: ignore[attr-defined]
    except Exception:
        return None


def passes(case: Case, streamed: list[str], flushed: list[str]) -> bool:
    """Whether an aggregator's output is right for ``case`` (see the module docstring)."""
    if case.expected is not None:
        return norm_list(streamed + flushed) == norm_list(case.expected)
    early = norm_list(streamed)
    everything = norm_list(streamed + flushed)
    e, text = case.end_index, case.text
    if e is False:
        return not early
    if isinstance(e, int) and not isinstance(e, bool) and e < len(text.rstrip()):
        return bool(early) and early[0] == norm(text[:e])
    return everything == [norm(text)]


def grapheme_splits(text: str, ends: list[int]) -> int:
    """How many chunk ends fall inside a grapheme cluster of ``text``."""
    bounds = {m.end() for m in regex.finditer(r"\X", text)} | {0}
    return sum(1 for e in ends if e not in bounds)


def _token_of(offsets: list[int], char_pos: int) -> int:
    for t, end in enumerate(offsets):
        if end > char_pos:
            return t
    return len(offsets) - 1


def _delays(run: Run, pieces: list[str]) -> list[int]:
    offsets, total = [], 0
    for p in pieces:
        total += len(p)
        offsets.append(total)
    return [idx - _token_of(offsets, end - 1) for idx, end in run.ends if end > 0]


def evaluate(data_dir: Path, modes: tuple[str, ...] = MODES, limit: int | None = None) -> dict:
    """Run the whole suite and return the report as a JSON-ready dict."""
    cases = load_cases(data_dir)[:limit] if limit else load_cases(data_dir)
    rows: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    by_source: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    per_mode: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    push_ns: dict[str, list[int]] = defaultdict(list)
    delays: dict[str, list[int]] = defaultdict(list)
    failures: list[dict] = []
    first_chunk: dict[str, list[int]] = defaultdict(list)
    timed_mode = "tokens" if "tokens" in modes else modes[0]

    async def _all() -> None:
        for case in cases:
            fed = feeds(case.text, modes)
            ok = {a: True for a in AGGREGATORS}
            outputs: dict[str, list[str]] = {}
            for mode, pieces in fed.items():
                text_pieces = as_text_pieces(pieces)
                ours = run_ours(pieces, case.lang)
                theirs = await run_pipecat(text_pieces, case.lang)
                for name, r in (("ours", ours), ("pipecat", theirs)):
                    good = passes(case, r.streamed, r.flushed)
                    ok[name] &= good
                    per_mode[f"{name}/{mode}"][0] += good
                    per_mode[f"{name}/{mode}"][1] += 1
                    if mode == timed_mode:
                        push_ns[name].extend(r.push_ns)
                        delays[name].extend(_delays(r, text_pieces))
                        if case.expected and len(case.expected) >= 2:
                            first_chunk[name].append(_first_emit(r, pieces))
                if mode == timed_mode and case.expected and len(case.expected) >= 2:
                    eager = run_ours(pieces, case.lang, first_phrase=True)
                    first_chunk["ours_first_phrase"].append(_first_emit(eager, pieces))
                    if not good:
                        outputs[f"{name}/{mode}"] = (
                            norm_list(r.streamed) + ["|"] + norm_list(r.flushed)
                        )
            ref = run_pysbd(case.text, case.lang)
            results = dict(ok)
            if ref is not None:
                results["pysbd"] = passes(case, ref[:-1], ref[-1:])
            for name, good in results.items():
                for table in (rows[case.lang], by_source[case.source]):
                    table[name][0] += good
                    table[name][1] += 1
            if not ok["ours"]:
                failures.append(
                    {
                        "source": case.source,
                        "lang": case.lang,
                        "text": case.text[:300],
                        "expected": case.expected if case.expected else case.end_index,
                        "got": outputs,
                        "pipecat_ok": ok["pipecat"],
                        "pysbd_ok": results.get("pysbd"),
                    }
                )

    asyncio.run(_all())
    streams = evaluate_streams(data_dir)
    return {
        "modes": list(modes),
        "timed_mode": timed_mode,
        "languages": {k: {a: v for a, v in d.items()} for k, d in sorted(rows.items())},
        "sources": {k: {a: v for a, v in d.items()} for k, d in by_source.items()},
        "per_mode": dict(per_mode),
        "per_token_us_median": {
            k: round(statistics.median(v) / 1000, 2) for k, v in push_ns.items() if v
        },
        "per_token_us_p95": {k: round(_pct(v, 95) / 1000, 2) for k, v in push_ns.items() if v},
        "delay_tokens": {
            k: {"median": statistics.median(v), "p95": _pct(v, 95), "n": len(v)}
            for k, v in delays.items()
            if v
        },
        "first_chunk_token": {
            k: {"median": statistics.median(v), "mean": round(statistics.fmean(v), 2), "n": len(v)}
            for k, v in first_chunk.items()
            if v
        },
        "streams": streams,
        "failures": failures,
    }


def _first_emit(run: Run, pieces: list) -> int:
    """Index of the piece whose push released the first chunk (the last piece if only flush)."""
    return run.ends[0][0] if run.ends else len(pieces) - 1


def _pct(values: list[int], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def evaluate_streams(data_dir: Path) -> list[dict]:
    """Grapheme splits and U+FFFD on the real tokenizer-boundary streams."""
    out = []
    for row in load_streams(data_dir):
        text = row["text"]
        raw = [bytes.fromhex(t["hex"]) for t in row["tokens"]]
        safe = row["codepoint_safe_chunks"]
        ours_bytes = run_ours(raw, lang_code(row["lang"]))
        ours_str = run_ours(safe, lang_code(row["lang"]))
        theirs = asyncio.run(run_pipecat(safe, lang_code(row["lang"])))
        item = {"lang": row["lang"], "tokenizer": row["tokenizer"].split()[0]}
        for name, r in (("ours_bytes", ours_bytes), ("ours_str", ours_str), ("pipecat", theirs)):
            chunks = r.streamed + r.flushed
            ends = [e for _, e in r.ends]
            item[name] = {
                "chunks": chunks,
                "grapheme_splits": grapheme_splits(text, ends),
                "replacement_chars": sum(c.count("\ufffd") for c in chunks),
                "reproduces_text": "".join(chunks) == text if name != "pipecat" else None,
            }
        out.append(item)
    return out


def print_report(report: dict) -> None:
    """Print the per-language table and the summary with rich."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title="Streaming sentence boundaries: exact sentence lists (all feed modes)")
    for col in ("language", "cases", "ours", "pipecat", "pysbd (offline)"):
        table.add_column(col, justify="right" if col != "language" else "left")

    def cell(v: list[int] | None) -> str:
        return f"{100 * v[0] / v[1]:.1f}% ({v[0]}/{v[1]})" if v and v[1] else "n/a"

    langs = report["languages"]
    for lang in sorted(langs, key=lambda k: (-langs[k]["ours"][1], k)):
        d = langs[lang]
        table.add_row(
            lang, str(d["ours"][1]), cell(d["ours"]), cell(d["pipecat"]), cell(d.get("pysbd"))
        )
    for src, d in report["sources"].items():
        table.add_row(
            f"[b]{src} (all)[/b]",
            str(d["ours"][1]),
            cell(d["ours"]),
            cell(d["pipecat"]),
            cell(d.get("pysbd")),
        )
    console.print(table)
    modes = Table(title="Per feeding mode")
    modes.add_column("aggregator/mode")
    modes.add_column("accuracy", justify="right")
    for k, v in sorted(report["per_mode"].items()):
        modes.add_row(k, cell(v))
    console.print(modes)
    s = Table(title="Token streams (real o200k/cl100k boundaries)")
    for col in ("lang", "tokenizer", "ours (bytes) splits", "ours U+FFFD", "pipecat splits"):
        s.add_column(col)
    for it in report["streams"]:
        s.add_row(
            it["lang"],
            it["tokenizer"],
            str(it["ours_bytes"]["grapheme_splits"]),
            str(it["ours_bytes"]["replacement_chars"]),
            str(it["pipecat"]["grapheme_splits"]),
        )
    console.print(s)
    console.print(
        f"per-token overhead, median µs: {report['per_token_us_median']}  "
        f"p95: {report['per_token_us_p95']}"
    )
    console.print(f"boundary-to-emit delay (tokens): {report['delay_tokens']}")
    console.print(
        "first chunk released at token (multi-sentence cases): "
        f"{report.get('first_chunk_token', {})}"
    )
    for line in goal_lines(report):
        console.print(line)


def goal_lines(report: dict) -> list[str]:
    """The issue's three goals, each with its verdict."""
    langs = report["languages"]
    behind = [
        lang
        for lang, d in langs.items()
        if d["ours"][0] * d["pipecat"][1] < d["pipecat"][0] * d["ours"][1]
    ]
    en = langs.get("en", {})
    ours_en = 100 * en["ours"][0] / en["ours"][1] if en else 0.0
    ref_en = 100 * en["pysbd"][0] / en["pysbd"][1] if en and "pysbd" in en else 0.0
    splits = sum(it["ours_bytes"]["grapheme_splits"] for it in report["streams"])
    verdict_langs = "met" if not behind else "MISSED on " + ", ".join(sorted(behind))
    verdict_en = "met" if ours_en >= ref_en - 3 else "MISSED"
    verdict_splits = "met" if splits == 0 else "MISSED"
    return [
        f"goal: >= Pipecat on every language: {verdict_langs}",
        f"goal: English within 3 points of pySBD: ours {ours_en:.1f}% vs pySBD {ref_en:.1f}% "
        f"-> {verdict_en}",
        f"goal: zero grapheme splits on the token streams: {splits} -> {verdict_splits}",
    ]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CLI options of ``pipecat-fast bench sbd``."""
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="shared data folder")
    parser.add_argument("--out", type=Path, help="write the full report as JSON here")
    parser.add_argument("--modes", default=",".join(MODES), help="tokens,chars,words")
    parser.add_argument("--limit", type=int, help="only the first N cases (smoke runs)")


def run(args: argparse.Namespace) -> int:
    """Run the suite; exit code 0, or 2 when the shared material is missing."""
    from loguru import logger

    if not (args.data / "sbd").is_dir():
        print(f"shared test material not found at {args.data} (expected ../shared/data)")
        return 2
    logger.disable("pipecat")  # Pipecat's banner and debug lines; the table is the output here
    modes = tuple(m for m in args.modes.split(",") if m in MODES) or MODES
    try:
        report = evaluate(args.data, modes, args.limit)
    finally:
        logger.enable("pipecat")
    print_report(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0
