from hypothesis import given
from hypothesis import strategies as st

from pipecat_fast.prefill.core import PrefillConfig, PrefillPlanner, Skip


def test_first_prefill_early_then_one_per_n_new_words_and_one_at_a_time():
    planner = PrefillPlanner(PrefillConfig(first_words=1, min_new_words=2))
    assert planner.decide(0, 5000, now=0.0) is Skip.TOO_FEW_NEW_WORDS
    assert planner.decide(1, 5000, now=0.0) is None  # the first one carries the context
    assert planner.decide(5, 5000, now=0.1) is Skip.IN_FLIGHT
    planner.finished(True, now=0.2, prompt_tokens=5000, cached_tokens=4900)
    assert planner.decide(2, 5000, now=0.3) is Skip.TOO_FEW_NEW_WORDS  # only 1 new since 1
    assert planner.decide(3, 5000, now=0.3) is None
    assert planner.turn.prefills == 2
    assert planner.turn.prefill_computed_tokens == 100


def test_defaults_are_the_bench_choice():
    config = PrefillConfig()
    assert (config.first_words, config.min_new_words) == (1, 4)


def test_no_new_prefill_once_the_caller_is_silent_until_they_speak_again():
    planner = PrefillPlanner(PrefillConfig(min_new_words=1))
    planner.caller_silent()
    assert planner.decide(3, 100, now=0.0) is Skip.SILENCE
    planner.caller_speaking()
    assert planner.decide(3, 100, now=0.0) is None


def test_below_the_provider_minimum_nothing_is_sent():
    planner = PrefillPlanner(PrefillConfig(min_new_words=1, min_prompt_tokens=1024))
    assert planner.decide(3, 800, now=0.0) is Skip.BELOW_MINIMUM
    assert planner.decide(4, 1500, now=0.0) is None


def test_failures_back_off_exponentially_and_success_resets():
    planner = PrefillPlanner(PrefillConfig(min_new_words=1, backoff_s=1.0, max_backoff_s=3.0))
    assert planner.decide(1, 0, now=0.0) is None
    planner.finished(False, now=0.0)
    assert planner.decide(2, 0, now=0.5) is Skip.BACKING_OFF
    assert planner.decide(2, 0, now=1.0) is None
    planner.finished(False, now=1.0)  # second failure: 2 s
    assert planner.decide(3, 0, now=2.5) is Skip.BACKING_OFF
    assert planner.decide(3, 0, now=3.0) is None
    planner.finished(False, now=3.0)  # third: capped at 3 s
    assert planner.decide(4, 0, now=5.9) is Skip.BACKING_OFF
    assert planner.decide(4, 0, now=6.0) is None
    planner.finished(True, now=6.1, prompt_tokens=10, cached_tokens=0)
    assert planner.turn.prefill_failures == 3


def test_a_confirmed_turn_sends_nothing_more_and_a_new_turn_starts_fresh():
    planner = PrefillPlanner(PrefillConfig(min_new_words=1))
    assert planner.decide(1, 0, now=0.0) is None
    planner.stop_turn()
    assert planner.turn_over
    planner.finished(True, now=0.1, prompt_tokens=50, cached_tokens=0)
    assert planner.decide(5, 0, now=0.2) is Skip.TURN_ENDED
    account = planner.end_turn()
    assert (account.prefills, account.prefill_prompt_tokens) == (1, 50)
    assert planner.decide(1, 0, now=0.3) is None  # counts from zero again


def test_a_new_turn_whose_first_words_come_after_the_vad_stop_sends_nothing():
    planner = PrefillPlanner(PrefillConfig(min_new_words=1))
    assert planner.decide(2, 0, now=0.0) is None
    planner.finished(True, now=0.1)
    planner.caller_silent()
    planner.stop_turn()
    planner.end_turn()  # "Yes": the next turn's first stable word arrives with its final
    assert planner.decide(1, 0, now=1.0) is Skip.SILENCE
    planner.caller_speaking()
    assert planner.decide(1, 0, now=1.1) is None


def test_late_usage_lands_in_the_turn_that_sent_the_prefill():
    planner = PrefillPlanner(PrefillConfig(min_new_words=1))
    assert planner.decide(2, 0, now=0.0) is None
    first = planner.end_turn()
    planner.finished(True, now=1.0, prompt_tokens=70, cached_tokens=20)
    assert first.prefill_computed_tokens == 50
    assert planner.turn.prefill_computed_tokens == 0


@given(st.lists(st.integers(0, 30), max_size=40))
def test_never_two_in_flight(word_counts):
    planner = PrefillPlanner(PrefillConfig(min_new_words=1))
    in_flight = 0
    for i, words in enumerate(word_counts):
        if planner.decide(words, 0, now=float(i)) is None:
            in_flight += 1
            assert in_flight == 1
        if i % 3 == 2 and planner.in_flight:
            planner.finished(True, now=float(i))
            in_flight -= 1
