"""``pipecat-fast bench overhead``: pairing, the report, the CLI and a smoke run (no timing
asserted: performance is shown by the benchmark, not by tests)."""

import asyncio
import json
from argparse import Namespace

import pytest

from pipecat_fast.bench.evals import overhead
from pipecat_fast.bench.evals.overhead import Input, Ratio, Row, RowResult, build_report


def constant(ns: int, units: int):
    async def measure():
        return ns, units

    return measure


def test_each_item_is_paired_with_the_no_op_of_its_own_repetition():
    fast = Row("g", "fast", "token", constant(0, 1), constant(0, 1), goal_us=5.0)
    slow = Row("g", "slow", "token", constant(0, 1), constant(0, 1))
    results = [
        RowResult(fast, item_us=[10.0, 30.0, 12.0], base_us=[8.0, 27.0, 9.0]),
        RowResult(slow, item_us=[20.0, 40.0, 22.0], base_us=[8.0, 27.0, 9.0]),
    ]
    report = build_report(results, [Ratio("g", "fast ÷ slow", "fast", "slow", goal=0.5)])
    fast_row, slow_row = report["rows"]
    # 2, 3, 3 µs: the slow second repetition slowed both; pairing removes it.
    assert fast_row["overhead_us"] == {"median": 3.0, "min": 2.0, "max": 3.0}
    assert fast_row["within_goal"] is True and slow_row["within_goal"] is None
    [ratio] = report["ratios"]
    assert ratio["ratio"]["median"] == pytest.approx(3 / 13)  # per repetition: 2/12, 3/13, 3/13
    assert ratio["within_goal"] is True


def test_the_markdown_table_has_every_row_ratio_and_unmeasured_group():
    row = Row("stabilizer", "feed", "interim", constant(0, 1), constant(0, 1), goal_us=20.0)
    report = build_report(
        [RowResult(row, item_us=[30.0, 31.0], base_us=[10.0, 10.0])], [], unmeasured=["guard"]
    )
    table = overhead.markdown(report)
    assert "| stabilizer | feed | interim | 20.5 [20.0–21.0] | ≤ 20 µs |" in table
    assert "| guard | not measured yet | | | |" in table


def test_measure_interleaves_and_warms_up_once():
    order = []

    def recorder(name):
        async def measure():
            order.append(name)
            return 1000, 1

        return measure

    rows = [Row("g", n, "u", recorder(n + "+"), recorder(n + "0")) for n in ("a", "b")]
    asyncio.run(overhead.measure(rows, reps=2))
    warm, rep0, rep1 = order[:4], order[4:8], order[8:]
    assert warm == ["a0", "a+", "b0", "b+"]
    assert rep0 == ["a0", "a+", "b0", "b+"]  # forwards in even repetitions...
    assert rep1 == ["b+", "b0", "a+", "a0"]  # ...backwards in odd ones, rotated


def test_the_inputs_are_what_the_rows_say():
    turns = overhead.stabilizer_turns(8, 30)
    assert all(t[-1] == " ".join(t[-1].split()[:30]) and len(t[-1].split()) == 30 for t in turns)
    assert sum(len(t) - 1 for t in turns) > 8 * 25  # about one interim per word, some repeats
    replies = overhead.reply_streams(500)
    assert sum(map(len, replies)) >= 500
    assert "".join(replies[0]) == overhead.AGENT_REPLIES[0]


def test_bad_options_are_refused(capsys):
    assert overhead.run(Namespace(reps=1, only="stabilizer", quick=True, out=None, markdown=False))
    assert "--reps must be >= 2" in capsys.readouterr().out
    assert overhead.run(Namespace(reps=2, only="nope", quick=True, out=None, markdown=False))
    assert "--only takes groups of stabilizer, aggregator, ttfa, guard" in capsys.readouterr().out


def test_the_cli_routes_the_suite():
    from pipecat_fast.cli import BENCH_SUITES

    assert BENCH_SUITES["overhead"][0] == "pipecat_fast.bench.evals.overhead"


def test_a_quick_run_measures_every_row_and_checks_its_output(tmp_path, monkeypatch):
    small = Input(utterances=2, reply_tokens=120, turns=1, worst_pushes=200, guard_prompts=(1500,))
    monkeypatch.setattr(overhead, "Input", lambda **_: small)
    out = tmp_path / "overhead.json"
    args = Namespace(
        reps=2, only="stabilizer,aggregator,ttfa,guard", quick=True, out=out, markdown=True
    )
    assert overhead.run(args) == 0
    report = json.loads(out.read_text())
    names = [r["name"] for r in report["rows"]]
    assert len(names) == 10 and any("30-word" in n for n in names)
    checks = {r["name"]: r["check"] for r in report["rows"]}
    assert checks["PartialStabilizer.feed, 30-word utterances"]["last_stable_is_final"]
    assert checks["FastTextAggregator (ours)"]["every_word_back"]
    assert checks["SimpleTextAggregator (Pipecat)"]["every_word_back"]
    assert checks["TTFAObserver.on_push_frame, a call's mix"]["turns_measured"] == 1
    assert [r["name"] for r in report["ratios"]] == ["FastTextAggregator ÷ SimpleTextAggregator"]
    guard = [c for n, c in checks.items() if n.startswith("PrefixTracker")]
    assert [c["warnings"] > 0 for c in guard] == [False, True]  # the bust is found every time
    (snap,) = [c for n, c in checks.items() if n.startswith("CacheBustGuard snapshot")]
    assert snap["snapshots"] > 0  # every request snapshotted
    assert report["meta"]["unmeasured"] == []
    assert report["meta"]["clock"] == "time.process_time_ns"


def test_the_module_runs_on_its_own(capsys):
    assert overhead.main(["--reps", "1"]) == 2
    assert "--reps must be >= 2" in capsys.readouterr().out
