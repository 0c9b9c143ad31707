"""Named bench configurations: what each one adds to the stock pipeline."""

import pytest

from pipecat_fast.bench.configs import CONFIGS
from pipecat_fast.bench.material import bench_calls
from pipecat_fast.bench.pipeline import Endpoints, build_spec

NOWHERE = Endpoints(
    llm_base_url="http://127.0.0.1:9/v1",
    tts_url="ws://127.0.0.1:9",
    stt_base_url="ws://127.0.0.1:9",
)


def spec_for(name):
    spec = build_spec(bench_calls(ids=["reschedule"])[0], NOWHERE)
    CONFIGS[name].customize(spec)
    return spec


def prefill_config(spec):
    (prefill,) = [p for p in spec.before_llm if type(p).__name__ == "SpeculativePrefill"]
    return prefill.config


@pytest.mark.parametrize("words", [1, 3, 4])
def test_sweep_variants_wait_for_n_words_before_the_first_prefill_too(words):
    # docs/prefill.md's sweep: "the first prefill also waited for N words".
    config = prefill_config(spec_for(f"prefill-{words}w"))
    assert (config.first_words, config.min_new_words) == (words, words)


def test_the_default_prefill_is_not_a_sweep_variant():
    default = prefill_config(spec_for("prefill"))
    assert (default.first_words, default.min_new_words) != (4, 4)
    assert default.first_words != prefill_config(spec_for("prefill-4w")).first_words


def test_all_is_every_lever_that_composes():
    spec = spec_for("all")
    names = [type(p).__name__ for p in spec.after_stt + spec.before_llm + spec.between_llm_tts]
    assert names == [
        "TwoUpdateStabilizer",
        "WarmupCheck",
        "SpeculativePrefill",
        "FastTextProcessor",
    ]
    stop = spec.user_params.user_turn_strategies.stop
    assert [type(s).__name__ for s in stop] == ["DraftAndHoldUserTurnStopStrategy"]
    # The levers around the call and the output: warmup and TTS dial while the phone rings,
    # barge-in truncation, the cache-bust guard; no configuration's callers are changed.
    assert type(spec.barge_in).__name__ == "BargeInTruncator"
    assert [type(o).__name__ for o in spec.observers] == ["CacheBustGuard"]
    assert len(spec.ringing) == 2 and spec.ring_s == 6.0 and len(spec.on_hangup) == 2
    assert spec.call.barge_in_after_s == []  # the stock callers: nobody talks over a reply


def test_a_lever_registered_into_all_later_is_applied_by_all(monkeypatch):
    from pipecat_fast.bench import configs

    seen = []
    monkeypatch.setattr(configs, "ALL", [*configs.ALL])
    configs.register(configs.BenchConfig("x-test", "test lever", seen.append), in_all=True)
    try:
        spec = spec_for("all")
        assert seen == [spec]
        assert configs.ALL[-1] == "x-test"
    finally:
        configs.CONFIGS.pop("x-test", None)


def test_all_eot_is_all_with_eot_in_drafts_place():
    def names(spec):
        return [type(p).__name__ for p in spec.after_stt + spec.before_llm + spec.between_llm_tts]

    every, spec = spec_for("all"), spec_for("all-eot")
    expected = names(every)
    expected.insert(expected.index("FastTextProcessor"), "PreemptiveTTS")  # right after the LLM
    assert names(spec) == expected
    assert type(spec.after_tts[0]).__name__ == "HeldAudioGate"  # right after the TTS
    assert [type(p).__name__ for p in spec.after_tts[1:]] == [
        type(p).__name__ for p in every.after_tts
    ]
    (stop,) = spec.user_params.user_turn_strategies.stop
    assert type(stop).__name__ == "DraftAndHoldUserTurnStopStrategy"
    assert type(spec.user_params.vad_analyzer).__name__ == "PauseTap"
    assert type(every.user_params.vad_analyzer).__name__ != "PauseTap"


def test_all_eot_interim_drafts_on_the_interim_at_the_first_silent_frame():
    def stop_of(name):
        (stop,) = spec_for(name).user_params.user_turn_strategies.stop
        return stop

    interim, base = stop_of("all-eot-interim"), stop_of("all-eot")
    assert (interim._draft_early_s, interim._draft_core.pause_stable_s) == (0.032, 0.032)
    assert (base._draft_early_s, base._draft_core.pause_stable_s) == (0.1, None)
