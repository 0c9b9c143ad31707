"""The generated test model: vocabulary, GGUF contents, determinism, cache naming.

Needs gguf + tokenizers (the bench extra), not llama.cpp.
"""

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from pipecat_fast.testing import gguf_model
from pipecat_fast.testing.gguf_model import (
    CHATML_TEMPLATE,
    EOS_TOKEN_ID,
    MODEL_SPECS,
    SPECIAL_TOKENS,
    ModelSpec,
    token_bytes,
    unspeakable_token_ids,
)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gguf") is None or importlib.util.find_spec("tokenizers") is None,
    reason="gguf and tokenizers (the pipecat-fast 'bench' extra) are needed to build the model",
)

TINY = ModelSpec(name="tiny", hidden_size=64, n_layers=2, n_heads=2, ffn_size=128, vocab_size=512)


def test_vocab_puts_control_tokens_first_and_is_deterministic():
    corpus = gguf_model.corpus_text()
    first = gguf_model.train_vocab(corpus, 512)
    again = gguf_model.train_vocab(corpus, 512)
    assert first == again
    assert first.tokens[:3] == SPECIAL_TOKENS
    assert len(first.tokens) == 512
    # Every merge joins two tokens that exist, and its result is in the vocabulary.
    vocab = set(first.tokens)
    for merge in first.merges[:50]:
        left, right = merge.split(" ")
        assert left in vocab and right in vocab and left + right in vocab


def test_token_bytes_decodes_gpt2_byte_symbols():
    assert token_bytes("Ġthe") == b" the"
    assert token_bytes("Ċ") == b"\n"
    assert token_bytes("âĢĻ") == "\u2019".encode()  # right single quote, 3 bytes


def test_unspeakable_ids_are_control_tokens_and_partial_utf8():
    tokens = [*SPECIAL_TOKENS, "Ġthe", "âĢ", "âĢĻ", "Â", "hello"]
    assert unspeakable_token_ids(tokens) == [0, 1, 2, 4, 6]


def test_written_gguf_carries_vocab_template_and_weights(tmp_path):
    import gguf

    path = tmp_path / "tiny.gguf"
    vocab = gguf_model.write_gguf(TINY, path)
    reader = gguf.GGUFReader(path)

    def scalar(key):
        field = reader.fields[key]
        return field.parts[field.data[0]]

    assert bytes(scalar("tokenizer.chat_template")).decode() == CHATML_TEMPLATE
    assert bytes(scalar("tokenizer.ggml.model")).decode() == "gpt2"
    assert int(scalar("tokenizer.ggml.eos_token_id")[0]) == EOS_TOKEN_ID
    assert gguf_model.read_token_list(path) == list(vocab.tokens)
    types = reader.fields["tokenizer.ggml.token_type"]
    assert [int(types.parts[i][0]) for i in types.data[:4]] == [3, 3, 3, 1]
    names = {tensor.name: tensor for tensor in reader.tensors}
    assert "output.weight" not in names  # tied to the token embedding
    assert len([n for n in names if n.startswith("blk.")]) == TINY.n_layers * 9
    embd = names["token_embd.weight"]
    assert list(embd.shape) == [TINY.hidden_size, len(vocab.tokens)]
    assert embd.tensor_type == gguf.GGMLQuantizationType.F16
    n_params = sum(int(t.n_elements) for t in reader.tensors)
    assert n_params == TINY.n_params


def test_same_spec_writes_identical_bytes_and_another_seed_does_not(tmp_path):
    gguf_model.write_gguf(TINY, tmp_path / "a.gguf")
    gguf_model.write_gguf(TINY, tmp_path / "b.gguf")
    gguf_model.write_gguf(dataclasses.replace(TINY, seed=1), tmp_path / "c.gguf")
    a, b, c = ((tmp_path / f"{x}.gguf").read_bytes() for x in "abc")
    assert a == b
    assert a != c


def test_cache_name_follows_spec_and_env(tmp_path, monkeypatch):
    monkeypatch.setenv(gguf_model.CACHE_DIR_ENV, str(tmp_path))
    bench = gguf_model.model_path(MODEL_SPECS["bench"])
    assert bench.parent == tmp_path
    assert bench.name.startswith("pipecat-fast-bench-") and bench.suffix == ".gguf"
    assert gguf_model.model_path(MODEL_SPECS["bench"]) == bench
    changed = dataclasses.replace(MODEL_SPECS["bench"], seed=7)
    assert gguf_model.model_path(changed) != bench
    assert gguf_model.spec_hash(TINY, "corpus one") != gguf_model.spec_hash(TINY, "corpus two")


def test_ensure_model_generates_once_then_reuses(tmp_path, monkeypatch):
    monkeypatch.setitem(MODEL_SPECS, "tiny", TINY)
    written = []
    real_write = gguf_model.write_gguf

    def counting_write(spec, path, **kwargs):
        written.append(path)
        return real_write(spec, path, **kwargs)

    monkeypatch.setattr(gguf_model, "write_gguf", counting_write)
    first = gguf_model.ensure_model("tiny", directory=tmp_path)
    second = gguf_model.ensure_model("tiny", directory=tmp_path)
    assert first == second and first.is_file()
    assert written == [first]
    assert not list(tmp_path.glob("*.tmp"))


def test_ensure_model_rejects_unknown_size():
    with pytest.raises(ValueError, match="unknown model size 'huge'.*bench, small"):
        gguf_model.ensure_model("huge")


def test_named_sizes_match_their_description():
    assert 80e6 < MODEL_SPECS["bench"].n_params < 95e6
    assert 15e6 < MODEL_SPECS["small"].n_params < 25e6


def test_cache_dir_defaults_under_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv(gguf_model.CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert gguf_model.cache_dir() == Path(tmp_path) / "pipecat-fast"
