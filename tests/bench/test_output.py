"""The bench's printed tables."""

from pipecat_fast.bench.output import progress_line, summary_table, turns_table
from pipecat_fast.bench.pairing import TurnOutcome
from pipecat_fast.bench.runner import CallResult, build_report
from pipecat_fast.ttfa import TurnRecord


def _call(answered, config="stock", cutoffs=None, scripted=None):
    cutoffs = cutoffs or {}
    outcomes = []
    for n in range(scripted or max(answered) + 1):
        record = None
        if n in answered:
            record = TurnRecord(turn=n, user_stopped_at=0.0, marks={"first_audio_out": 0.5})
        outcomes.append(
            TurnOutcome(n, record, false_cutoffs=cutoffs.get(n, 0), deliberate_pause=n in cutoffs)
        )
    return CallResult(
        config=config,
        call="c",
        repeat=0,
        turns=[o.record for o in outcomes if o.record],
        unanswered=sum(1 for o in outcomes if not o.record),
        outcomes=outcomes,
    )


def test_a_turn_missing_from_the_table_is_named_in_its_caption():
    table = turns_table(_call([0, 1, 3]), "c")
    assert table.row_count == 3
    assert table.caption.startswith("turn 2: no reply heard")


def test_no_caption_when_every_turn_was_answered():
    assert turns_table(_call([0, 1, 2]), "c").caption is None


def test_a_false_cutoff_is_named_in_the_call_table_and_counted_in_the_progress_line():
    result = _call([0, 1, 2], cutoffs={1: 1})
    assert "turn 1: bot audio started inside the caller's pause" in turns_table(result, "c").caption
    assert "3/3 turns answered" in progress_line(result, 1, 2)
    assert "1 false cut-off" in progress_line(result, 1, 2)


def test_the_summary_names_the_turns_only_some_configurations_answered():
    report = build_report([_call([0, 1, 2]), _call([0, 2], config="fast", scripted=3)], "stock")
    table = summary_table(report, "t")
    assert "over the 2 of 3 turns every configuration answered" in table.caption
    assert "finding: turn 0/c/0/1 answered by stock, not by fast" in table.caption
