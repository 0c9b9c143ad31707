"""The example bots end to end, as a caller meets them: each example server runs as a user
starts it (``--offline``: Pipecat's real services against the loopback emulators) and a
caller dials it over loopback — Twilio's Media Streams protocol, an aiortc WebRTC peer — once
with stock Pipecat and once with every lever. TTFA is measured where the caller hears the
reply; ``scripts/e2e_examples.py`` is the same run with more calls (the figures in
docs/examples.md)."""

import importlib.util
import shutil
from argparse import Namespace

import pytest

from tests.conftest import ROOT


def load_e2e():
    spec = importlib.util.spec_from_file_location("e2e_examples", ROOT / "scripts/e2e_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["twilio", "webrtc"])
async def test_example_answers_a_caller_stock_and_with_every_lever(
    transport, tmp_path, monkeypatch
):
    aioice = pytest.importorskip("aioice.ice")
    # The run keeps ICE on loopback in this process; put aioice back afterwards.
    monkeypatch.setattr(aioice, "get_host_addresses", aioice.get_host_addresses)
    e2e = load_e2e()
    args = Namespace(
        transport=transport,
        calls=1,
        turns=1,
        repeats=1,
        configs="stock,all",
        out=None,
        report_dir=tmp_path,
        ring_s=1.0,  # twilio: an outbound call; its status callback starts the levers
    )
    report = await e2e.run(args)
    e2e.print_summary(report)  # the client-side ratio, for the log
    results = {r["config"]: r for r in report["results"]}
    assert set(results) == {"stock", "all"}
    for config, r in results.items():
        client, server = r["client"], r["server"]
        assert client["error"] is None, (config, report["server_log_tail"])
        assert client["greeting_ms"] is not None  # the bot greets when the call connects
        (turn,) = client["turns"]
        assert turn["ttfa_ms"] is not None, (config, report["server_log_tail"])
        # The server's own meter saw the call with the levers the caller asked for.
        assert server["levers"] == config and server["turns"].get(0) is not None
        # The caller hears the reply after the server sent it: the client's TTFA is not
        # shorter than the server's by more than the two ends' estimates of the end of
        # speech differ (VAD and Smart Turn work in 10-30 ms steps).
        assert turn["ttfa_ms"] > server["turns"][0] - 100
    # What ran only with the levers: the TTS socket dialled at the webhook was the one the
    # call's setup took (open already, or still dialling and awaited when the connection came
    # up first: both spare the setup its own handshake), and the warmup sent the call's prompt
    # before the caller spoke.
    assert results["all"]["server"]["tts_pool_first"] in {"reused", "waited"}
    assert results["all"]["server"]["warmup_prompt_tokens"] > 1024
    assert results["stock"]["server"]["tts_pool_first"] is None
    assert results["stock"]["server"]["warmup_prompt_tokens"] is None
    ratio = report["client_ttfa"]["all"]
    assert report["client_ttfa"]["turns"] == 1 and ratio["p50"] > 0


def test_page_turns_join_an_utterances_stretches_and_find_the_first_reply_after_it():
    e2e = load_e2e()
    local = [[1000, 2000], [2300, 3000], [9000, 10000]]  # utterance 0 has a 300 ms pause
    remote = [[500, 900], [2500, 2600], [3400, 5000], [12000, 13000]]
    # The bot audio at 2500 starts inside utterance 0 (not a reply); 3400 answers it.
    assert e2e.page_turns(local, remote, 2.0) == [400.0, 2000.0]
    assert e2e.page_turns(local, [], 2.0) == [None, None]


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("chromium") is None or shutil.which("chromedriver") is None,
    reason="headless Chromium needs Debian's chromium and chromium-driver packages",
)
async def test_webrtc_example_in_headless_chromium_stock_and_with_every_lever(tmp_path):
    """The WebRTC example's own page in a real browser, a fake microphone playing the caller."""
    e2e = load_e2e()
    args = Namespace(
        transport="chromium",
        calls=1,
        turns=1,
        repeats=1,
        configs="stock,all",
        out=None,
        report_dir=tmp_path,
    )
    report = await e2e.run(args)
    e2e.print_summary(report)
    results = {r["config"]: r for r in report["results"]}
    for config, r in results.items():
        assert r["client"]["error"] is None, (config, report["server_log_tail"])
        (turn,) = r["client"]["turns"]
        assert turn["ttfa_ms"] is not None and turn["ttfa_ms"] > 0
        assert r["client"]["greeting_ms"] is not None
        assert r["server"]["levers"] == config  # the page asked for them; the server ran them
