"""The patience dial: each preset's early-verdict silence reaches the confirmation strategy."""

import pytest

from pipecat_fast.endofturn import PRESETS, Patience, patience_stop_strategy, patience_vad
from tests.endofturn.test_early_draft import ScriptedVAD


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_verdict_is_asked_at_the_presets_silence_and_the_draft_at_its_own(name):
    preset = PRESETS[name]
    vad = patience_vad(preset, ScriptedVAD([]))
    draft = patience_stop_strategy(preset, vad)
    confirm = draft.inner
    assert confirm._eot_schedule.ask_at_s == preset.verdict_silence_s
    assert draft._draft_early_s == preset.early_silence_s
    # The verdict is never asked later than the draft: its inference must fit the window.
    assert preset.verdict_silence_s <= preset.early_silence_s


def test_a_verdict_silence_outside_the_stop_window_is_refused():
    with pytest.raises(ValueError, match="verdict_silence_s"):
        Patience("x", 0.2, 0.5, 0.1, 2, verdict_silence_s=0.2)
    with pytest.raises(ValueError, match="verdict_silence_s"):
        Patience("x", 0.2, 0.5, 0.1, 2, verdict_silence_s=0.0)
