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
