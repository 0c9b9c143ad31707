"""The registry's one table loader, shared by the LLM, TTS and STT facts."""

import json

import pytest

from pipecat_fast.providers import _table, llm, stt, tts

LOADERS = [
    (llm.load_table, "minimum-prefix table"),
    (tts.load_tts_table, "TTS facts table"),
    (stt.load_stt_table, "STT facts table"),
]


@pytest.mark.parametrize(("load", "what"), LOADERS)
def test_each_kind_rejects_an_unreadable_file_naming_what_it_is(tmp_path, load, what):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe not json")
    with pytest.raises(ValueError, match=what):
        load(bad)
    with pytest.raises(ValueError, match=what):
        load(tmp_path / "missing.json")


@pytest.mark.parametrize(("load", "what"), LOADERS)
def test_each_kind_rejects_a_table_without_a_providers_object(tmp_path, load, what):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"providers": ["openai"]}))
    with pytest.raises(ValueError, match="'providers' object"):
        load(path)


@pytest.mark.parametrize(
    ("load", "bundled"),
    [
        (llm.load_table, "llm_cache.json"),
        (tts.load_tts_table, "tts.json"),
        (stt.load_stt_table, "stt.json"),
    ],
)
def test_none_gives_the_bundled_table_read_once(load, bundled):
    assert load(None) is _table.bundled(bundled)
    assert load(None) is load(None)


def test_a_users_table_is_used_as_given(tmp_path):
    path = tmp_path / "t.json"
    table = {"providers": {"acme": {"aliases": ["acme_tts"]}}}
    path.write_text(json.dumps(table))
    assert tts.load_tts_table(path) == table
    assert tts.tts_providers(tts.load_tts_table(path)) == ["acme"]


def test_aliases_resolve_to_the_canonical_name_case_and_space_insensitively():
    table = {"providers": {"elevenlabs": {"aliases": ["11labs"]}, "rime": {}}}
    assert _table.canonical(" 11Labs ", table) == "elevenlabs"
    assert _table.canonical("RIME", table) == "rime"
    assert _table.canonical("eleven", table) is None


def test_a_module_matches_its_prefix_and_what_is_inside_it_not_a_longer_name():
    prefixes = ["pipecat.services.cartesia"]
    assert _table.module_matches("pipecat.services.cartesia", prefixes)
    assert _table.module_matches("pipecat.services.cartesia.tts", prefixes)
    assert not _table.module_matches("pipecat.services.cartesiax", prefixes)
    assert not _table.module_matches("pipecat.services", prefixes)


def test_the_three_kinds_identify_providers_through_the_shared_matcher():
    assert tts.identify_tts_provider(["pipecat.services.cartesia.tts"]) == "cartesia"
    assert llm.identify_provider(["pipecat.services.anthropic.llm"]) == "anthropic"
    module = stt.load_stt_table()["providers"]["deepgram"]["result_modules"][0]
    assert stt.identify_stt_result(module + ".results") == "deepgram"
