from pipecat_fast.warmup import RequestUsage, WarmupReport, prefix_hash, prefix_parts

SYSTEM = {"role": "system", "content": "You are a dental receptionist."}
TOOLS = [{"type": "function", "function": {"name": "book", "parameters": {}}}]


def openai(messages, **extra):
    return {"model": "gpt-4.1", "messages": messages, "tools": TOOLS, **extra}


def test_the_user_turn_and_the_history_after_the_system_prompt_are_not_part_of_the_prefix():
    warmup = openai([SYSTEM, {"role": "user", "content": "Reply OK."}])
    first_turn = openai(
        [SYSTEM, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Hi"}]
    )
    assert prefix_hash(warmup) == prefix_hash(first_turn)
    assert prefix_parts(warmup)["system"] == [SYSTEM]


def test_a_changed_prompt_tool_order_model_or_cache_key_changes_the_hash():
    base = prefix_hash(openai([SYSTEM]))
    changed_prompt = openai([{**SYSTEM, "content": SYSTEM["content"] + " "}])
    other_tools = {**openai([SYSTEM]), "tools": TOOLS + [{"type": "function", "function": {}}]}
    reordered = {**openai([SYSTEM]), "tools": list(reversed(other_tools["tools"]))}
    variants = [
        changed_prompt,
        other_tools,
        reordered,
        {**openai([SYSTEM]), "model": "gpt-4.1-mini"},
        openai([SYSTEM], prompt_cache_key="call-1"),
    ]
    hashes = {prefix_hash(v) for v in variants}
    assert base not in hashes and len(hashes) == len(variants)


def test_anthropic_shape_uses_the_system_blocks():
    system = [{"type": "text", "text": "persona", "cache_control": {"type": "ephemeral"}}]
    a = {"model": "claude-sonnet-4-5", "system": system, "messages": [{"role": "user"}]}
    b = {**a, "messages": [{"role": "user"}, {"role": "assistant"}, {"role": "user"}]}
    assert prefix_hash(a) == prefix_hash(b)
    assert prefix_hash(a) != prefix_hash({**a, "system": [{**system[0], "text": "other"}]})


def test_report_sums_the_requests_and_says_whether_the_prefix_took():
    report = WarmupReport(warmed=True, reason="warm")
    report.requests = [
        RequestUsage(prompt_tokens=30_000, cached_tokens=0, cache_write_tokens=30_000),
        RequestUsage(prompt_tokens=30_000, cached_tokens=29_952, tool_calls=1),
    ]
    assert (report.prompt_tokens, report.cached_tokens, report.cache_write_tokens) == (
        60_000,
        29_952,
        30_000,
    )
    assert report.prefix_committed and report.completed == 2
    d = report.to_dict()
    assert d["tool_calls_drained"] == 1 and d["requests_sent"] == 2
    assert not WarmupReport(requests=[RequestUsage(prompt_tokens=10)]).prefix_committed
