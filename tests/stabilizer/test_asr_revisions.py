"""The ASR revision model: fitting counts, the shipped parameters, and the replay."""

import json
from dataclasses import replace
from itertools import pairwise

import pytest

from pipecat_fast.testing.deepgram_server import interim_events, utterance_from_words
from pipecat_fast.testing.revisions import (
    SHIPPED_MODEL_PATH,
    RevisionModel,
    fit_revision_model,
    load_partial_sequences,
    refit,
    revising_partials,
    shipped_model,
    with_revisions,
)
from pipecat_fast.textnorm import normalize_words

# 12 words at 3 words/s, the last ending at 4.0 s.
WORDS = "i would like to book a table for four people at eight".split()
UTTERANCE = utterance_from_words(
    "I would like to book a table for four people at eight.",
    [(w, i / 3, (i + 1) / 3) for i, w in enumerate(WORDS)],
)


def is_extension(a, b):
    a, b = normalize_words(a), normalize_words(b)
    return b[: len(a)] == a


def test_fit_counts_a_hand_made_sequence():
    seq = [(0.1, "go"), (0.2, "go for"), (0.3, "go forward"), (0.4, "go forward tan"), (0.5, "")]
    seq += [(0.6, "go forward ten meters"), (0.7, "go forward ten meters")]
    model = fit_revision_model([seq], source="hand")
    assert model.updates == 4  # the empty partial is dropped
    assert model.revisions == 2  # "for" -> "forward", "tan" -> "ten"
    assert model.touched == {1: 2}
    assert model.persistence == {1: 2}
    assert model.truncations == 1  # "for" was the start of "forward"
    assert model.shrinks == 0
    assert model.wrong_words == {"for": 1, "tan": 1}
    assert model.revision_rate == 0.5


def test_persistence_counts_how_long_the_replaced_word_was_shown():
    seq = [(0.1, "fly to boston"), (0.2, "fly to boston now"), (0.3, "fly to austin")]
    model = fit_revision_model([seq])
    assert model.persistence == {2: 1}
    assert model.touched == {2: 1}
    assert model.shrinks == 1


def test_model_round_trips_and_rejects_malformed_json():
    model = shipped_model()
    assert RevisionModel.from_dict(json.loads(json.dumps(model.to_dict()))) == model
    with pytest.raises(ValueError, match="malformed"):
        RevisionModel.from_dict({"source": "x"})


def test_shipped_model_names_its_source():
    raw = json.loads(SHIPPED_MODEL_PATH.read_text())
    assert "pocketsphinx_partials.jsonl" in raw["source"]
    assert raw["sequences"] == 14


def test_shipped_model_matches_a_refit(shared_data):
    fitted = refit(shared_data / "stt" / "pocketsphinx_partials.jsonl")
    assert fitted == shipped_model()


def test_refit_without_the_file_is_none(tmp_path):
    assert refit(tmp_path / "absent.jsonl") is None


def test_load_names_a_malformed_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"partials": [], "final_after_end_utt": "x"}\n{"partials": 3}\n')
    with pytest.raises(ValueError, match=r"p\.jsonl:2"):
        load_partial_sequences(path)


def test_load_reads_the_real_sequences(shared_data):
    seqs = load_partial_sequences(shared_data / "stt" / "pocketsphinx_partials.jsonl")
    assert len(seqs) == 14
    assert all(s.partials and all(text.strip() for _, text in s.partials) for s in seqs)
    assert all(a[0] < b[0] for s in seqs for a, b in pairwise(s.partials))


def test_replay_is_deterministic_per_utterance_and_ends_with_the_true_words():
    a = revising_partials(UTTERANCE, 0.25, seed=1)
    assert a == revising_partials(UTTERANCE, 0.25, seed=1)
    assert a != revising_partials(UTTERANCE, 0.25, seed=2)
    assert a[-1] == (4.0, " ".join(WORDS))
    times = [t for t, _ in a]
    assert times == sorted(times) and 0 < times[0] and times[-1] <= UTTERANCE.duration_s
    assert all(x[1] != y[1] for x, y in pairwise(a))


def test_replay_revises_like_the_real_engine():
    seqs = [revising_partials(UTTERANCE, 0.15, seed=s) for s in range(20)]
    fitted = fit_revision_model(seqs)
    real = shipped_model()
    assert abs(fitted.revision_rate - real.revision_rate) < 0.15
    assert fitted.persistence[1] / fitted.revisions > 0.7  # most wrong words live one update


def test_with_no_revisions_the_replay_is_word_by_word():
    still = replace(shipped_model(), revisions=0)
    seq = revising_partials(UTTERANCE, 0.25, model=still)
    assert all(is_extension(a, b) for (_, a), (_, b) in pairwise(seq))
    assert seq[:-1] == interim_events(UTTERANCE, 0.25)


def test_with_revisions_feeds_the_emulator():
    revised = with_revisions(UTTERANCE, 0.25, seed=3)
    assert revised.partials == tuple(revising_partials(UTTERANCE, 0.25, seed=3))
    assert interim_events(revised, 0.25) == list(revised.partials)


def test_replay_edge_cases():
    with pytest.raises(ValueError, match="interval_s"):
        revising_partials(UTTERANCE, 0)
    assert revising_partials(utterance_from_words("", []), 0.25) == []
    one = utterance_from_words("Yes.", [("Yes.", 0.0, 0.2)])
    assert revising_partials(one, 0.25) == [(0.2, "Yes.")]
