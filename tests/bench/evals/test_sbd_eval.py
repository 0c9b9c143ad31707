"""The bench sbd suite: scoring rules, and a small run on the shared material."""

from __future__ import annotations

import json

from pipecat_fast.bench.evals.sbd import Case, evaluate, grapheme_splits, norm_list, passes
from pipecat_fast.cli import main


def test_list_cases_compare_whitespace_normalised_sentences():
    case = Case("pysbd", "en", "A b.  C d.", expected=["A b.", "C d."])
    assert passes(case, ["A b.  "], ["C\nd."])
    assert not passes(case, [], ["A b.  C d."])
    assert norm_list([" a \n b ", "  "]) == ["a b"]


def test_end_of_sentence_cases_follow_pipecats_meaning():
    text = "First sentence. Second incomplete"
    assert passes(
        Case("pipecat", "latin", text, end_index=15), ["First sentence. "], ["Second incomplete"]
    )
    assert not passes(Case("pipecat", "latin", text, end_index=15), [], [text])
    # False: nothing may be emitted before the end of the reply.
    assert passes(Case("pipecat", "latin", "Mr. S", end_index=False), [], ["Mr. S"])
    assert not passes(Case("pipecat", "latin", "Mr. S", end_index=False), ["Mr. "], ["S"])
    # Index at the end / "truthy": one chunk, held or not.
    assert passes(Case("pipecat", "zh", "你好。", end_index="truthy"), [], ["你好。"])
    assert not passes(
        Case("pipecat", "latin", "U.S.A. and N.A.S.A.", end_index=19), ["U.S.A. "], ["and N.A.S.A."]
    )


def test_grapheme_split_counter():
    text = "a👍🏽b"
    assert grapheme_splits(text, [1, 3]) == 0
    assert grapheme_splits(text, [2]) == 1  # between the thumb and its skin tone


def test_suite_on_a_slice_of_the_shared_material(shared_data):
    report = evaluate(shared_data, modes=("words",), limit=30)
    total = sum(d["ours"][1] for d in report["languages"].values())
    assert total == 30
    assert set(report["per_mode"]) == {"ours/words", "pipecat/words"}
    assert report["per_token_us_median"]["ours"] > 0
    for stream in report["streams"]:
        ours = stream["ours_bytes"]
        assert ours["grapheme_splits"] == 0
        assert ours["replacement_chars"] == 0
        assert ours["reproduces_text"]


def test_cli_writes_the_json_report(shared_data, tmp_path):
    out = tmp_path / "sbd.json"
    assert main(["bench", "sbd", "--limit", "6", "--modes", "chars", "--out", str(out)]) == 0
    report = json.loads(out.read_text("utf-8"))
    assert {"languages", "sources", "streams", "delay_tokens", "failures"} <= set(report)


def test_cli_without_material_exits_2(tmp_path):
    assert main(["bench", "sbd", "--data", str(tmp_path)]) == 2
