"""The bench's printed tables."""

from pipecat_fast.bench.output import turns_table
from pipecat_fast.bench.runner import CallResult
from pipecat_fast.ttfa import TurnRecord


def _call(turn_numbers):
    turns = [
        TurnRecord(turn=n, user_stopped_at=0.0, marks={"first_audio_out": 0.5})
        for n in turn_numbers
    ]
    return CallResult(config="stock", call="c", repeat=0, turns=turns)


def test_a_turn_missing_from_the_table_is_named_in_its_caption():
    table = turns_table(_call([0, 1, 3]), "c")
    assert table.row_count == 3
    assert table.caption.startswith("turn 2: no answer heard")


def test_no_caption_when_every_turn_was_answered():
    assert turns_table(_call([0, 1, 2]), "c").caption is None
