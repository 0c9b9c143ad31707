"""Code on the docs pages runs as written (the blocks that need no running pipeline)."""

import re
import shutil
import textwrap

import pytest

from tests.conftest import ROOT


def python_blocks(page: str) -> list[str]:
    text = (ROOT / "docs" / page).read_text("utf-8")
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", text, re.S | re.M)
    return [textwrap.dedent(body) for _, body in blocks]


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_bench_your_bot_caller_blocks_run_in_order(tmp_path, monkeypatch):
    """The ScriptedCall blocks: shipped, espeak-ng (saved), from_wavs, exact timings, format."""
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks("bench-your-bot.md")
    namespace: dict = {}
    for block in blocks[:3]:
        exec(compile(block, "bench-your-bot.md", "exec"), namespace)
    assert (tmp_path / "calls" / "pizza-1_2.wav").is_file()
    assert namespace["call"].id == "pizza-1" and len(namespace["call"].lines) == 1
    assert namespace["call"].lines[0].utterance.words[-1].end_s == 1.9
    assert namespace["utterance"].duration_s == 1.3


def test_bench_your_bot_stt_script_block_builds_an_utterance():
    namespace: dict = {}
    exec(compile(python_blocks("bench-your-bot.md")[2], "bench-your-bot.md", "exec"), namespace)
    utterance = namespace["utterance"]
    assert [w.text for w in utterance.words] == utterance.text.split()
    assert utterance.partials[-1] == (1.1, "hi i need a clean")
