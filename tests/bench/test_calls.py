"""The shipped call material and its loader: audio matches timings, replies resolve, bad input fails
clearly."""

import asyncio
import json
import shutil
import wave
from pathlib import Path

import numpy as np
import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from pipecat_fast.bench.calls import (
    DATA_DIR,
    SAMPLE_RATE,
    CallScriptError,
    call_ids,
    load_call,
    load_calls,
    load_system_prompt,
    load_tools,
    normalize_user_text,
    read_pcm,
    reply_table,
    tools_schema,
)
from pipecat_fast.bench.knowledge import money, monthly_payment, patient_share
from pipecat_fast.bench.smart_turn import (
    FIXTURE_MIN_P,
    STOP_WINDOW_MS,
    VERDICT_P,
    SmartTurnProbe,
    SmartTurnUnavailable,
    analysis_ends,
    verdicts,
)
from pipecat_fast.tokens import count_tokens

CALLS = load_calls()
TURNS = [(c.id, t) for c in CALLS for t in c.turns]


def _db(samples: np.ndarray) -> float:
    x = samples.astype(np.float64) / 32768.0
    return 10 * np.log10(np.mean(x**2) + 1e-12)


# --- the shipped material --------------------------------------------------------------------


def test_every_shipped_call_loads_with_its_prompt_and_tools():
    files = sorted(p.stem for p in (DATA_DIR / "calls").glob("*.json"))
    assert [c.id for c in CALLS] == call_ids() == files
    assert 4 <= len(CALLS) <= 5
    for call in CALLS:
        assert 3 <= len(call.turns) <= 4, call.id
        assert [t.index for t in call.turns] == list(range(len(call.turns)))
        assert call.system_prompt.startswith("# Role")
        assert 4 <= len(call.tools) <= 6
        assert call.espeak.version and call.espeak.voice and call.espeak.rate > 0
    assert len({(c.espeak.voice, c.espeak.rate) for c in CALLS}) == len(CALLS)  # callers differ
    assert {c.language for c in CALLS} >= {"en", "es"}


@pytest.mark.parametrize("call_id,turn", TURNS, ids=[f"{c}-{t.index}" for c, t in TURNS])
def test_timings_match_the_audio(call_id, turn):
    pcm, rate = read_pcm(turn.audio_path)
    assert rate == SAMPLE_RATE
    samples = np.frombuffer(pcm, dtype="<i2")
    duration_ms = len(samples) * 1000 // rate
    assert duration_ms == turn.audio_duration_ms
    assert 0 < turn.speech_start_ms < turn.speech_end_ms < duration_ms
    paused_ms = sum(p.end_ms - p.start_ms for p in turn.pauses)
    assert 1500 <= turn.speech_end_ms - turn.speech_start_ms - paused_ms <= 5000  # 1.5-5 s
    ms = rate // 1000
    for pause in turn.pauses:  # each pause is silence, between the words it says it is
        assert _db(samples[(pause.start_ms + 10) * ms : (pause.end_ms - 10) * ms]) < -60
    before = samples[: (turn.speech_start_ms - 10) * ms]
    after = samples[(turn.speech_end_ms + 10) * ms :]
    span = samples[turn.speech_start_ms * ms : turn.speech_end_ms * ms]
    # Silence outside the span, speech inside it: the JSON describes this very file.
    assert _db(before) < -60 and _db(after) < -60
    assert _db(span) > -35
    # Words in order, inside the span, spelling out the text, and each one voiced.
    words = turn.words
    assert " ".join(w.text for w in words) == turn.user_text
    assert words[0].start_ms >= turn.speech_start_ms and words[-1].end_ms <= turn.speech_end_ms
    for prev, cur in zip(words, words[1:], strict=False):
        assert prev.end_ms <= cur.start_ms
    for w in words:
        assert w.start_ms < w.end_ms
        assert _db(samples[w.start_ms * ms : w.end_ms * ms]) > -45, w


def test_audio_is_small_and_fits_a_short_call():
    total = sum(p.stat().st_size for p in (DATA_DIR / "audio").glob("*.wav"))
    assert total < 3_000_000
    referenced = {t.audio_path.name for _, t in TURNS}
    assert referenced == {p.name for p in (DATA_DIR / "audio").glob("*.wav")}  # none orphaned


# --- end of turn: Pipecat's default Smart Turn v3 must judge each caller's turn complete -------
#
# An "incomplete" verdict at a turn's real end makes the stock pipeline wait up to 3 s of silence
# (SmartTurnParams.stop_secs) before it answers, which swamps the latency under test; a verdict
# near 0.5 would make different machines measure different turns. Smart Turn v3 is int8 ONNX: its
# probabilities move between CPUs (docs/results/smart_turn_spread.json: emulated AVX2 against this
# machine's AVX-512) and with exactly where its input ends. So the fixtures keep every complete
# turn at p >= FIXTURE_MIN_P (0.8) at every chunk boundary a VAD stop can fall on, and the tests
# ask only for the verdict (0.5): never a recorded float.

PAUSES = [(c, t, j, p) for c, t in TURNS for j, p in enumerate(t.pauses)]


def test_the_calls_script_a_few_deliberate_pauses():
    # The end-of-turn work's false cut-off measure needs callers who stop mid-utterance.
    paused = [(c, t.index) for c, t in TURNS if t.deliberate_pause]
    assert 3 <= len(paused) <= len(TURNS) // 3
    assert len({c for c, _ in paused}) >= 3  # in several calls, voices and languages
    for _, turn in TURNS:
        for pause in turn.pauses:
            # A real hesitation, longer than any pipeline's reply needs to start.
            assert pause.end_ms - pause.start_ms >= pause.ms >= 1200


def test_recorded_verdicts_keep_a_margin_no_cpu_crosses():
    for call_id, turn in TURNS:
        assert turn.smart_turn_v3.min >= FIXTURE_MIN_P, (call_id, turn.index)
    for call_id, turn, j, pause in PAUSES:
        # A pause's verdict decides whether stock Pipecat cuts the caller off: it must read the
        # same way wherever the VAD stops in it, with the same margin.
        verdict = pause.smart_turn_v3
        assert verdict.min >= FIXTURE_MIN_P or verdict.max <= 1 - FIXTURE_MIN_P, (
            call_id,
            turn.index,
            j,
        )


@pytest.fixture(scope="module")
def probe():
    """Pipecat's own LocalSmartTurnAnalyzerV3 with its bundled model, asked as the pipeline asks."""
    pytest.importorskip("onnxruntime", reason="Smart Turn v3 runs on onnxruntime")
    try:
        analyzer = SmartTurnProbe()
    except SmartTurnUnavailable as e:
        pytest.skip(str(e))
    yield analyzer
    asyncio.run(analyzer.close())


async def _verdicts(probe, turn, window=STOP_WINDOW_MS):
    pcm, _ = read_pcm(turn.audio_path)
    spans = [(p.start_ms, p.end_ms) for p in turn.pauses]
    return await verdicts(probe, pcm, turn.speech_end_ms, spans, window)


@pytest.mark.parametrize("call_id,turn", TURNS, ids=[f"{c}-{t.index}" for c, t in TURNS])
async def test_smart_turn_judges_every_turn_complete_wherever_the_vad_stops(probe, call_id, turn):
    found = await _verdicts(probe, turn)
    assert len(found.end) >= 10  # every 20 ms chunk boundary 170-450 ms after the speech
    assert min(found.end) >= VERDICT_P
    # Each pause reads the way the script records it, wherever the VAD stops in it.
    for pause, ps in zip(turn.pauses, found.pauses, strict=True):
        taken = pause.smart_turn_v3.min >= VERDICT_P
        assert all((p >= VERDICT_P) == taken for p in ps), ps


async def test_verdicts_hold_when_onnxruntime_runs_other_kernels(probe):
    # Graph optimisations off: onnxruntime runs the unfused int8 graph (other kernels, other
    # rounding), as another CPU would. Every verdict stays; the probabilities do move, so this
    # is a real kernel change and not the same computation twice.
    try:
        other = SmartTurnProbe("graph-opt-off")
    except SmartTurnUnavailable as e:
        pytest.skip(str(e))
    near_stop = (230, 310)  # around the measured ~260 ms, to keep the test short
    moved = 0.0
    try:
        for _, turn in TURNS:
            a = await _verdicts(probe, turn, near_stop)
            b = await _verdicts(other, turn, near_stop)
            assert min(b.end) >= VERDICT_P, turn
            moved = max(moved, *(abs(x - y) for x, y in zip(a.end, b.end, strict=True)))
            for pause, ps in zip(turn.pauses, b.pauses, strict=True):
                taken = pause.smart_turn_v3.min >= VERDICT_P
                assert all((p >= VERDICT_P) == taken for p in ps)
    finally:
        await other.close()
    assert moved > 1e-3


def test_the_pipeline_asks_only_at_chunk_boundaries_inside_the_stop_window():
    ends = analysis_ends(1000)
    assert all(e % 320 == 0 for e in ends)  # 20 ms transport chunks at 16 kHz
    assert ends[0] >= (1000 + 170) * 16 and ends[-1] <= (1000 + 450) * 16
    assert len(ends) == 14


def test_every_user_text_maps_to_its_reply():
    table = reply_table(CALLS)
    assert len(table) == len(TURNS)  # no two turns share a user text
    for _, turn in TURNS:
        assert table[normalize_user_text(turn.user_text)] == turn.reply
        # As an STT might write it: other case, no punctuation, odd spacing.
        stt = "  ".join(regex.sub(r"\p{P}", "", turn.user_text).upper().split())
        assert table[normalize_user_text(stt)] == turn.reply


def test_replies_cover_what_the_bench_needs():
    replies = [t.reply for _, t in TURNS]
    assert any(regex.search(r"\p{Devanagari}", r) for r in replies)
    assert any(regex.search(r"\p{Hiragana}|\p{Katakana}", r) for r in replies)
    assert any(regex.search(r"[áéíóúñ¿¡]", r) for r in replies)
    assert any(regex.search(r"\p{Extended_Pictographic}", r) for r in replies)
    assert any(regex.search(r"\$\d+\.\d\d", r) for r in replies)  # a decimal price
    assert any("Dr." in r or "Dra." in r for r in replies)
    for r in replies:
        assert 2 <= len(_sentences(r)) <= 4, r


def _sentences(text: str) -> list[str]:
    """Split at 。/। or at .!? before a capital, ¿, ¡ or the end, except after "Dr." / "Dra."."""
    end = r"(?<=[。।])|(?<!\bDra?\.)(?<=[.!?])(?=\s+[\p{Lu}¿¡]|\s*$)"
    return [s for s in regex.split(end, text) if s.strip()]


def test_prompt_sizes_and_shared_prefix():
    path = DATA_DIR / "prompts" / "dental_receptionist.md"
    base = load_system_prompt(path)
    large = load_system_prompt(path, large=True)
    assert 2_800 <= count_tokens(base) <= 3_300
    assert 27_000 <= count_tokens(large) <= 33_000
    assert large.startswith(base.rstrip("\n"))  # the large prompt extends the same static prefix
    assert load_system_prompt(path, large=True) == large  # deterministic
    assert load_calls(["reschedule"], large_prompt=True)[0].system_prompt == large


def test_tools_convert_to_pipecat_schema_unchanged():
    tools = load_tools(DATA_DIR / "tools" / "dental_tools.json")
    schema = tools_schema(tools)
    assert [f.to_default_dict() for f in schema.standard_tools] == [t["function"] for t in tools]


def test_knowledge_arithmetic():
    assert money(145) == "$145" and money(65.5) == "$65.50" and money(1195) == "$1,195"
    assert monthly_payment(1200, 12, 0) == 100
    assert monthly_payment(1000, 12, 12) == pytest.approx(88.85, abs=0.01)  # standard annuity
    assert patient_share(1195, 50, 50, True) == pytest.approx(622.5)
    assert patient_share(95, 100, 50, False) == 0


# --- normalization -----------------------------------------------------------------------------

TEXTS = [t.user_text for _, t in TURNS]


@given(
    text=st.sampled_from(TEXTS),
    flips=st.lists(st.booleans(), min_size=60, max_size=60),
    gap=st.sampled_from([" ", "  ", "\t", " \n "]),
    strip=st.booleans(),
)
def test_normalization_ignores_case_punctuation_and_spacing(text, flips, gap, strip):
    variant = "".join(c.swapcase() if f else c for c, f in zip(text, flips * 3, strict=False))
    if strip:
        variant = regex.sub(r"\p{P}", "", variant)
    variant = gap + gap.join(variant.split()) + gap
    assert normalize_user_text(variant) == normalize_user_text(text)


def test_normalization_keeps_words_apart():
    assert normalize_user_text("Cancélela, por favor.") == "cancélela por favor"
    assert normalize_user_text("I don't—know") == "i dont know"
    assert normalize_user_text("book") != normalize_user_text("look")


# --- bad input ---------------------------------------------------------------------------------


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A private copy of one call (book_cleaning) with its prompt, tools and audio."""
    for sub in ("prompts", "tools"):
        shutil.copytree(DATA_DIR / sub, tmp_path / sub)
    (tmp_path / "calls").mkdir()
    (tmp_path / "audio").mkdir()
    shutil.copy(DATA_DIR / "calls" / "book_cleaning.json", tmp_path / "calls")
    for wav in (DATA_DIR / "audio").glob("book_cleaning_*.wav"):
        shutil.copy(wav, tmp_path / "audio")
    return tmp_path


def _edit(data: Path, change) -> Path:
    path = data / "calls" / "book_cleaning.json"
    obj = json.loads(path.read_text(encoding="utf-8"))
    change(obj)
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def _write_wav(path: Path, *, rate=SAMPLE_RATE, channels=1, width=2, seconds=3.0) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(b"\x00" * int(rate * seconds) * channels * width)


def test_the_private_copy_loads(data):
    assert load_calls(data_dir=data)[0].id == "book_cleaning"


def test_unknown_call_id(data):
    with pytest.raises(CallScriptError) as e:
        load_calls(["no_such_call"], data_dir=data)
    assert e.value.field == "id" and e.value.path.name == "no_such_call.json"
    assert "book_cleaning" in str(e.value)


def test_missing_call_file(data):
    with pytest.raises(CallScriptError) as e:
        load_call(data / "calls" / "gone.json")
    assert e.value.path.name == "gone.json" and e.value.field == "file"


def test_malformed_json(data):
    path = data / "calls" / "book_cleaning.json"
    path.write_text('{"id": "book_cleaning",\n "turns": [,]}', encoding="utf-8")
    with pytest.raises(CallScriptError) as e:
        load_call(path)
    assert e.value.path == path and e.value.field == "json" and "line 2" in str(e.value)


def _del(*keys):
    def change(obj):
        for k in keys[:-1]:
            obj = obj[k]
        del obj[keys[-1]]

    return change


def _set(value, *keys):
    def change(obj):
        for k in keys[:-1]:
            obj = obj[k]
        obj[keys[-1]] = value

    return change


PAUSE0 = "turns[3].user.pauses[0]."


@pytest.mark.parametrize(
    "change,field",
    [
        (_del("turns", 1, "assistant"), "turns[1].assistant"),
        (_del("turns", 0, "user", "speech_start_ms"), "turns[0].user.speech_start_ms"),
        (_del("espeak", "voice"), "espeak.voice"),
        (_del("language"), "language"),
        (_set("2830", "turns", 0, "user", "speech_end_ms"), "turns[0].user.speech_end_ms"),
        (_set(True, "turns", 0, "user", "speech_start_ms"), "turns[0].user.speech_start_ms"),
        (_set([], "turns"), "turns"),
        (_set("", "turns", 2, "user", "text"), "turns[2].user.text"),
        (_set("other_id", "id"), "id"),
        (_set(99_000, "turns", 0, "user", "speech_end_ms"), "turns[0].user.speech_end_ms"),
        (_set(5, "turns", 0, "user", "words", 3, "start_ms"), "turns[0].user.words[3]"),
        (_set(2900, "turns", 0, "user", "words", 9, "end_ms"), "turns[0].user.words[9]"),
        (_set("Bye", "turns", 0, "user", "words", 0, "text"), "turns[0].user.words"),
        (_set("audio/missing.wav", "turns", 1, "user", "audio"), "turns[1].user.audio"),
        (_set([0.9], "turns", 1, "user", "smart_turn_v3"), "turns[1].user.smart_turn_v3"),
        (
            _set({"min": 0.9, "max": 1.5}, "turns", 1, "user", "smart_turn_v3"),
            "turns[1].user.smart_turn_v3.max",
        ),
        (
            _set({"max": 0.9}, "turns", 1, "user", "smart_turn_v3"),
            "turns[1].user.smart_turn_v3.min",
        ),
        (
            _set({"min": 0.9, "max": 0.8}, "turns", 1, "user", "smart_turn_v3"),
            "turns[1].user.smart_turn_v3.min",
        ),
        (
            _set({"min": "x", "max": 0.8}, "turns", 3, "user", "pauses", 0, "smart_turn_v3"),
            PAUSE0 + "smart_turn_v3.min",
        ),
        (_set(9, "turns", 3, "user", "pauses", 0, "after_word"), PAUSE0 + "after_word"),
        (_set(6, "turns", 3, "user", "pauses", 0, "after_word"), PAUSE0 + "after_word"),
        (_set(150, "turns", 3, "user", "pauses", 0, "ms"), PAUSE0 + "ms"),
        (_set(9_000, "turns", 3, "user", "pauses", 0, "ms"), PAUSE0 + "end_ms"),
        (_set(700, "turns", 3, "user", "pauses", 0, "start_ms"), PAUSE0 + "start_ms"),
        (_del("turns", 3, "user", "pauses", 0, "end_ms"), PAUSE0 + "end_ms"),
        (_set(["x"], "turns", 3, "user", "pauses"), "turns[3].user.pauses[0]"),
        (_set({"after_word": 0}, "turns", 3, "user", "pauses"), "turns[3].user.pauses"),
        (_set("prompts/missing.md", "system_prompt"), "system_prompt"),
        (_set("tools/missing.json", "tools"), "tools"),
    ],
)
def test_bad_field_names_file_and_field(data, change, field):
    path = _edit(data, change)
    with pytest.raises(CallScriptError) as e:
        load_call(path)
    assert e.value.path == path
    assert e.value.field == field
    assert str(e.value).startswith(f"{path}: {field}: ")


@pytest.mark.parametrize(
    "wav,field",
    [
        ({"rate": 22_050}, "sample_rate"),
        ({"channels": 2}, "channels"),
        ({"width": 1}, "sample_width"),
        (None, "format"),
    ],
)
def test_bad_audio_names_file_and_field(data, wav, field):
    audio = data / "audio" / "book_cleaning_2.wav"
    if wav is None:
        audio.write_bytes(b"RIFF not really a wave file")
    else:
        _write_wav(audio, **wav)
    with pytest.raises(CallScriptError) as e:
        read_pcm(audio)
    assert e.value.path == audio and e.value.field == field
    # Loading the call names the call script and the turn's audio field, and the WAV's problem.
    with pytest.raises(CallScriptError) as e:
        load_call(data / "calls" / "book_cleaning.json")
    assert e.value.field == "turns[1].user.audio"
    assert audio.name in str(e.value) and field in str(e.value)


def test_read_pcm_missing_file(tmp_path):
    with pytest.raises(CallScriptError) as e:
        read_pcm(tmp_path / "nope.wav")
    assert e.value.field == "file" and e.value.path.name == "nope.wav"


def test_malformed_tools(data):
    tools = data / "tools" / "dental_tools.json"
    obj = json.loads(tools.read_text())
    del obj[2]["function"]["name"]
    tools.write_text(json.dumps(obj))
    with pytest.raises(CallScriptError) as e:
        load_call(data / "calls" / "book_cleaning.json")
    assert e.value.path == tools and e.value.field == "[2].function.name"


def test_large_prompt_needs_its_knowledge_file(data):
    (data / "prompts" / "dental_receptionist_knowledge.json").unlink()
    load_call(data / "calls" / "book_cleaning.json")  # the base prompt does not need it
    with pytest.raises(CallScriptError) as e:
        load_call(data / "calls" / "book_cleaning.json", large_prompt=True)
    assert e.value.path.name == "dental_receptionist_knowledge.json"


def test_malformed_knowledge_names_the_key(data):
    path = data / "prompts" / "dental_receptionist_knowledge.json"
    obj = json.loads(path.read_text())
    del obj["faq"]
    path.write_text(json.dumps(obj))
    with pytest.raises(CallScriptError) as e:
        load_system_prompt(data / "prompts" / "dental_receptionist.md", large=True)
    assert e.value.path == path and "faq" in e.value.field


def test_conflicting_replies_are_an_error(data):
    first = load_call(data / "calls" / "book_cleaning.json")
    _edit(data, _set("A different answer.", "turns", 2, "assistant"))
    other = data / "calls" / "book_cleaning.json"
    second = load_call(other)
    assert reply_table([first, first]) == reply_table([first])  # the same reply twice is fine
    with pytest.raises(CallScriptError) as e:
        reply_table([first, second])
    assert e.value.field == "turns[2].user.text" and e.value.path == other
