import pytest
from hypothesis import given
from hypothesis import strategies as st
from loguru import logger

from pipecat_fast._logging import LogLimiter, RateLimitedLog


@pytest.fixture
def lines():
    seen = []
    sink = logger.add(lambda m: seen.append(m.record), level="DEBUG", format="{message}")
    yield seen
    logger.remove(sink)


def test_a_burst_is_logged_then_held_back_and_the_next_line_counts_it():
    limiter = LogLimiter(burst=2, period_s=1.0)
    assert limiter.admit("x", 0.0) == (True, 0)
    assert limiter.admit("x", 0.1) == (True, 0)
    assert limiter.admit("x", 0.2) == (False, 0)
    assert limiter.admit("x", 0.9) == (False, 0)
    assert limiter.admit("y", 0.9) == (True, 0)  # keys are limited apart
    assert limiter.admit("x", 1.0) == (True, 2)  # the window moved past 0.0
    assert limiter.held_total("x") == 2
    assert limiter.take_pending() == {}


def test_pending_counts_are_taken_once():
    limiter = LogLimiter(burst=1, period_s=10.0)
    for t in range(5):
        limiter.admit("down", float(t))
    assert limiter.take_pending() == {"down": 4}
    assert limiter.take_pending() == {}


@pytest.mark.parametrize("kwargs", [{"burst": 0}, {"period_s": 0.0}, {"period_s": -1.0}])
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ValueError):
        LogLimiter(**kwargs)


@given(st.lists(st.floats(0, 20, allow_nan=False), max_size=200), st.integers(1, 4))
def test_never_more_than_burst_lines_in_any_window_and_every_message_is_accounted(times, burst):
    limiter = LogLimiter(burst=burst, period_s=1.0)
    shown, reported = [], 0
    for t in sorted(times):
        ok, held = limiter.admit("k", t)
        if ok:
            shown.append(t)
            reported += held
    reported += limiter.take_pending().get("k", 0)
    for i, t in enumerate(shown):
        assert len([u for u in shown[i:] if u < t + 1.0]) <= burst
    assert len(shown) + reported == len(times)


def test_eighty_thousand_failures_log_a_handful_of_lines_and_a_summary(lines):
    clock = iter(i * 1e-4 for i in range(100_000))  # 80,000 failures in 8 s
    log = RateLimitedLog("Strategy#0", burst=3, period_s=1.0, clock=lambda: next(clock))
    for _ in range(80_000):
        log.error("process_frame() missing 1 required positional argument", key="bad-call")
    log.flush()
    messages = [r["message"] for r in lines]
    assert 3 * 8 <= len(messages) <= 3 * 8 + 4
    assert messages[0] == "Strategy#0: process_frame() missing 1 required positional argument"
    assert "more like this were not logged" in messages[3]
    held = sum(int(m.split(" (")[1].split()[0]) for m in messages if " (" in m)
    final = int(messages[-1].split("Strategy#0: ")[1].split()[0])
    assert len(messages) - 1 + held + final == 80_000


def test_lines_point_at_the_caller(lines):
    RateLimitedLog("x").warning("hello")
    assert lines[0]["function"] == "test_lines_point_at_the_caller"
    assert lines[0]["level"].name == "WARNING"
