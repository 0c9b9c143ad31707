"""Parsing llama-cpp-python's verbose server log (pure: no engine needed)."""

import json

from pipecat_fast.testing.engine_log import GenerationTiming, PrefixHit, parse_engine_log

LOG_SAMPLE = """\
INFO:     127.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK
llama_perf_context_print:        load time =      12.51 ms
llama_perf_context_print: prompt eval time =    3855.10 ms /  3201 tokens (    1.20 ms per token)
llama_perf_context_print:        eval time =       0.00 ms /     1 runs   (    0.00 ms per token)
Llama.generate: 3180 prefix-match hit, remaining 21 prompt tokens to eval
llama_perf_context_print: prompt eval time =      41.00 ms /    21 tokens (    1.95 ms per token)
llama_perf_context_print:        eval time =     310.50 ms /    19 runs   (   16.34 ms per token)
Llama.generate: full prompt already cached, skipping reset
Llama.generate: 7 prefix-match hit, remaining 900 prompt tokens to eval
"""


def test_parse_engine_log_reads_prefix_hits_and_timings():
    log = parse_engine_log(LOG_SAMPLE)
    assert log.prefix_hits == [PrefixHit(3180, 21), PrefixHit(-1, 0), PrefixHit(7, 900)]
    assert log.timings == [
        GenerationTiming(3855.10, 3201, 0.0, 1),
        GenerationTiming(41.0, 21, 310.5, 19),
    ]


def test_parse_engine_log_ignores_unrelated_text():
    noise = json.dumps({"prompt eval": 3}) + "\nrandom line\n"
    log = parse_engine_log(noise)
    assert log.prefix_hits == [] and log.timings == []


REQUESTS_LOG = """\
llama_perf_context_print: prompt eval time =    3855.10 ms /  3201 tokens (    1.20 ms per token)
llama_perf_context_print:        eval time =       0.00 ms /     1 runs   (    0.00 ms per token)
Llama.generate: 3180 prefix-match hit, remaining 21 prompt tokens to eval
Llama.generate: 3190 prefix-match hit, remaining 30 prompt tokens to eval
llama_perf_context_print: prompt eval time =      41.00 ms /    30 tokens (    1.95 ms per token)
llama_perf_context_print:        eval time =     310.50 ms /    19 runs   (   16.34 ms per token)
Llama.generate: full prompt already cached, skipping reset
llama_perf_context_print: prompt eval time =       0.00 ms /     0 tokens (    0.00 ms per token)
llama_perf_context_print:        eval time =       0.00 ms /     1 runs   (    0.00 ms per token)
Llama.generate: 12 prefix-match hit, remaining 900 prompt tokens to eval
"""


def test_every_request_the_engine_started_is_one_record_completed_or_not():
    log = parse_engine_log(REQUESTS_LOG)
    cold, abandoned, real, repeat, running = log.requests
    # A cold prefill-only request: everything computed, nothing reused, one token generated.
    assert (cold.reused_tokens, cold.computed_tokens, cold.speculative) == (0, 3201, True)
    # A streamed reply whose client hung up: no timing, but its 21-token prefill ran.
    assert not abandoned.completed and not abandoned.speculative
    assert (abandoned.reused_tokens, abandoned.computed_tokens) == (3180, 21)
    # A real reply served from the cache.
    assert real.as_record() == {
        "prompt_tokens": 3220,
        "cached_tokens": 3190,
        "speculative": False,
        "completed": True,
        "decoded_tokens": 19,
    }
    # An abandoned reply's decode count is unknown: no figure rather than a low one.
    assert "decoded_tokens" not in abandoned.as_record()
    assert repeat.full_hit and repeat.computed_tokens == 0 and repeat.speculative
    # The last request is still running (or abandoned with nothing after it yet).
    assert log.open_request and not running.completed and running.computed_tokens == 900
    # The timings alone miss the abandoned reply's prefill: what the old accounting summed.
    assert sum(t.prompt_eval_tokens for t in log.timings) == 3231
    assert sum(r.computed_tokens for r in log.requests) == 3201 + 21 + 30 + 0 + 900
