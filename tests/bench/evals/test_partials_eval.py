"""The partials waste table: hand-checked figures, the real sequences, the replay, the CLI."""

import argparse
import json

import pytest

from pipecat_fast.bench.calls import load_calls
from pipecat_fast.bench.evals import partials as evaluation
from pipecat_fast.bench.evals.partials import TimedSequence, evaluate, ready_times
from pipecat_fast.tokens import count_tokens

BOSTON = TimedSequence(
    "hand",
    ((0.1, "fly to"), (0.2, "fly to boston"), (0.3, "fly to austin"), (0.4, "fly to austin now")),
    "fly to austin now",
    0.5,
)


def test_every_partial_rereads_the_revised_word_and_two_updates_do_not():
    every, two = evaluate([BOSTON], rules=(1, 2))
    useful = count_tokens("fly to austin now")
    assert every.useful_tokens == two.useful_tokens == useful
    assert every.reread_tokens == count_tokens(" boston") and every.retracted_words == 1
    assert every.prefills == 4
    assert two.reread_tokens == 0 and two.retracted_words == 0
    assert two.prefills == 3
    assert every.reread_pct == pytest.approx(100 * every.reread_tokens / every.tokens_sent)
    assert every.extra_pct == pytest.approx(100 * every.reread_tokens / useful)


def test_lag_and_early_words_are_measured_against_every_partial():
    ready, _, _ = ready_times(BOSTON, 2)
    assert ready == pytest.approx([0.2, 0.2, 0.4, 0.5])  # "now" only with the final
    every, two = evaluate([BOSTON], rules=(1, 2))
    assert every.mean_lag_s == 0
    assert two.mean_lag_s == pytest.approx(0.1)
    assert (every.words_ready_early, two.words_ready_early) == (4, 3)


def test_a_final_that_rewrites_the_partials_is_counted_as_reread_at_final():
    seq = TimedSequence("rewrite", ((0.1, "book a"), (0.2, "book a table")), "cook a tabby", 0.3)
    [two] = evaluate([seq], rules=(2,))
    assert two.reread_at_final_tokens == count_tokens("book a") > 0
    assert two.reread_tokens == two.reread_at_final_tokens


def test_real_sequences_more_updates_reread_less(shared_data):
    real = evaluation.real_sequences(shared_data / "stt" / "pocketsphinx_partials.jsonl")
    assert len(real) == 14
    one, two, three = evaluate(real)
    assert one.sequences == 14
    assert one.reread_tokens > two.reread_tokens >= three.reread_tokens > 0
    assert one.retracted_words > two.retracted_words >= three.retracted_words
    assert 0 < two.mean_lag_s <= three.mean_lag_s
    assert one.useful_tokens == sum(count_tokens(s.final) for s in real)


def test_replay_has_the_real_structure(shared_data):
    real = evaluation.structure(
        evaluation.real_sequences(shared_data / "stt" / "pocketsphinx_partials.jsonl")
    )
    replay = evaluation.structure(evaluation.replay_sequences(0.25, seeds=2))
    assert replay["sequences"] == 2 * sum(len(c.turns) for c in load_calls())
    assert abs(replay["revision_rate"] - real["revision_rate"]) < 0.1
    assert abs(replay["mean_words_touched"] - real["mean_words_touched"]) < 0.5


def args(**kw):
    base = dict(data=None, rules="1,2,3", interval_ms=250.0, seeds=1, no_replay=False, out=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_cli_writes_both_tables_as_json(shared_data, tmp_path):
    out = tmp_path / "partials.json"
    data = shared_data / "stt" / "pocketsphinx_partials.jsonl"
    assert evaluation.run(args(data=data, out=out)) == 0
    report = json.loads(out.read_text())
    assert [r["updates"] for r in report["real"]["results"]] == [1, 2, 3]
    assert [r["updates"] for r in report["replay"]["results"]] == [1, 2, 3]
    two = report["real"]["results"][1]
    assert two["reread_tokens"] == two["tokens_sent"] - two["useful_tokens"]


def test_cli_without_data_runs_the_replay_and_rejects_bad_rules(tmp_path):
    out = tmp_path / "r.json"
    assert evaluation.run(args(data=tmp_path / "absent.jsonl", rules="2", out=out)) == 0
    report = json.loads(out.read_text())
    assert "real" not in report and report["replay"]["results"][0]["updates"] == 2
    assert evaluation.run(args(data=tmp_path / "absent.jsonl", rules="0")) == 2
    assert evaluation.run(args(data=tmp_path / "absent.jsonl", rules="two")) == 2
