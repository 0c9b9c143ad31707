"""The example bots' own pieces: real providers from keys that are never logged, a refusal that
names the missing keys, per-call levers (the servers themselves: tests/test_examples_e2e.py)."""

import argparse
import importlib.util
import sys

import pytest
from loguru import logger

from tests.conftest import ROOT

SECRET = "sk-never-in-a-log-0123456789"


def load(name):
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "examples"))


@pytest.fixture
def logs():
    messages = []
    handler_id = logger.add(lambda m: messages.append(str(m)), level="TRACE")
    yield messages
    logger.remove(handler_id)


def args(**overrides):
    parser = argparse.ArgumentParser()
    load("bot_common").add_arguments(parser)
    parsed = parser.parse_args([])
    for key, value in overrides.items():
        setattr(parsed, key, value)
    return parsed


def test_without_keys_the_bot_names_the_missing_ones_not_their_values(monkeypatch):
    common = load("bot_common")
    monkeypatch.setenv("DEEPGRAM_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("CARTESIA_API_KEY", raising=False)
    with pytest.raises(SystemExit) as stop:
        common.Providers.from_args(args())
    message = str(stop.value)
    assert "OPENAI_API_KEY" in message and "CARTESIA_API_KEY" in message
    assert "DEEPGRAM_API_KEY" not in message and SECRET not in message


async def test_real_provider_keys_reach_the_services_and_never_a_log_line(monkeypatch, logs):
    common = load("bot_common")
    from pipecat_fast.compose import FastCall, Levers

    for key in common.REAL_KEYS:
        monkeypatch.setenv(key, SECRET)
    providers = common.Providers.from_args(args())
    services = providers.services("CA-test")
    assert services["llm"]._settings.extra["prompt_cache_key"] == "CA-test"
    call = FastCall("CA-test", **services, levers=Levers.all(), model=common.MODEL)
    call.ring()  # warmup and TTS dial start (and fail: nothing real is reachable here)
    common.lint_system_prompt()
    await call.hang_up()
    assert logs and not [m for m in logs if SECRET in m]


def test_a_call_may_ask_for_its_own_levers_and_a_bad_ask_keeps_the_servers(logs):
    common = load("bot_common")
    from pipecat_fast.compose import Levers

    default = Levers.parse("all", playout_delay_s=0.15, patience="snappy")
    own = common.levers_for("stock", default)
    assert own.on() == () and own.playout_delay_s == 0.15 and own.patience == "snappy"
    assert common.levers_for(None, default) is default
    assert common.levers_for("all,turbo", default) is default
    assert any("ignoring the call's levers 'all,turbo'" in m for m in logs)
