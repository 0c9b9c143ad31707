"""FastCall and CallBook: each lever in its slot, ring-time work that fails open, calls kept
between the webhook and the media stream."""

import asyncio

import pytest
from loguru import logger
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy

from pipecat_fast.compose import CallBook, FastCall, Levers, lever_classes

CLOSED = "127.0.0.1:9"  # the discard port: nothing listens, nothing is reached in these tests


@pytest.fixture
def logs():
    messages = []
    handler_id = logger.add(lambda m: messages.append(m.record["message"]), level="DEBUG")
    yield messages
    logger.remove(handler_id)


def services():
    llm = OpenAILLMService(
        api_key="test-key",
        base_url=f"http://{CLOSED}/v1",
        settings=OpenAILLMService.Settings(model="gpt-4.1-mini", system_instruction="Be brief."),
    )
    tts = CartesiaTTSService(
        api_key="test-key",
        settings=CartesiaTTSService.Settings(voice="test-voice"),
        url=f"ws://{CLOSED}",
    )
    return {"llm": llm, "tts": tts, "context": LLMContext()}


def slot_classes(call):
    return {name: [type(p).__name__ for p in slot] for name, slot in call.slots().items()}


def test_all_levers_sit_in_the_slots_their_docs_name():
    every = Levers.parse("all,endofturn,preemptive", playout_delay_s=0.15)
    call = FastCall("CA1", **services(), levers=every)
    assert slot_classes(call) == {
        "after_stt": ["TwoUpdateStabilizer"],
        "before_llm": ["SpeculativePrefill", "WarmupCheck"],
        "between_llm_tts": ["PreemptiveTTS", "FastTextProcessor"],
        "after_tts": ["HeldAudioGate"],
        "before_output": ["_BeforeOutput"],
        "after_output": ["_AfterOutput"],
    }
    assert [type(o).__name__ for o in call.observers] == ["TTFAObserver", "CacheBustGuard"]
    assert call.truncator is not None and call.truncator.playout_delay_s == 0.15
    assert call.prefill is not None and call.warmup is not None and call.guard is not None
    assert call.after_tts == [call.preemptive.hold]
    assert "DraftAndHoldUserTurnStopStrategy" in lever_classes(call)


def test_stock_adds_nothing_but_the_meter():
    call = FastCall("CA1", **services(), levers=Levers.stock())
    assert all(slot == [] for slot in call.slots().values())
    assert [type(o).__name__ for o in call.observers] == ["TTFAObserver"]
    assert call.warmup is call.prefill is call.truncator is call.guard is call.preemptive is None
    assert call.user_params().user_turn_strategies is None  # Pipecat's own defaults


def test_draft_and_hold_wraps_the_stop_strategy_it_is_given():
    stop = SpeechTimeoutUserTurnStopStrategy()
    call = FastCall("CA1", **services(), levers=Levers.all(endofturn=False))
    params = call.user_params(stop_strategy=stop)
    (strategy,) = params.user_turn_strategies.stop
    assert type(strategy).__name__ == "DraftAndHoldUserTurnStopStrategy"
    assert strategy.inner is stop


def test_draft_and_hold_refuses_turn_strategies_it_would_overwrite():
    call = FastCall("CA1", **services(), levers=Levers.all(endofturn=False))
    with pytest.raises(ValueError, match="stop_strategy="):
        call.user_params(user_turn_strategies=object())


def test_endofturn_builds_the_patience_dials_vad_and_stop_strategy():
    levers = Levers.all(endofturn=True, patience="patient")
    call = FastCall("CA1", **services(), levers=levers)
    params = call.user_params()
    assert type(params.vad_analyzer).__name__ == "PauseTap"
    assert params.vad_analyzer.params.stop_secs == 0.4  # the patient preset's stop window
    (strategy,) = params.user_turn_strategies.stop
    assert type(strategy).__name__ == "DraftAndHoldUserTurnStopStrategy"
    assert type(strategy.inner).__name__ == "CompleteTranscriptUserTurnStopStrategy"


def test_endofturn_refuses_a_stop_strategy_it_would_replace():
    with pytest.raises(ValueError, match="patience dial"):
        FastCall("CA1", **services(), levers=Levers.all(endofturn=True)).user_params(
            stop_strategy=SpeechTimeoutUserTurnStopStrategy()
        )


def test_an_unknown_patience_preset_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="snappy"):
        FastCall("CA1", **services(), levers=Levers.all(endofturn=True, patience="hasty"))


def test_without_draft_and_hold_the_stop_strategy_is_used_as_given():
    stop = SpeechTimeoutUserTurnStopStrategy()
    off = {"draft_and_hold": False, "endofturn": False, "preemptive": False}
    call = FastCall("CA1", **services(), levers=Levers.all(**off))
    assert call.user_params(stop_strategy=stop).user_turn_strategies.stop == [stop]


def test_the_context_must_be_the_calls_llm_context():
    with pytest.raises(TypeError, match="LLMContext"):
        FastCall("CA1", **{**services(), "context": []})


class FakeLease:
    def __init__(self):
        self.closed = 0

    async def close(self):
        self.closed += 1

    def report(self):
        return {"reused": 1}


class FakePool:
    def __init__(self, fail=False):
        self.fail = fail
        self.prewarmed = []
        self.lease = FakeLease()

    def prewarm(self, tts, **kwargs):
        if self.fail:
            raise RuntimeError("pool closed")
        self.prewarmed.append((tts, kwargs))
        return self.lease


async def test_ring_dials_the_pool_once_with_the_calls_facts_and_hang_up_closes_it():
    pool = FakePool()
    call = FastCall(
        "CA7", **services(), levers=Levers.parse("tts_pool"), pool=pool, is_retry=True,
        audio_out_sample_rate=8000,
    )  # fmt: skip
    call.ring()
    call.ring()
    assert pool.prewarmed == [(call.tts, {"call_id": "CA7", "is_retry": True, "sample_rate": 8000})]
    report = await call.hang_up()
    assert pool.lease.closed == 1 and report["tts_pool"] == {"reused": 1}
    assert report["levers"] == "tts_pool" and report["call_id"] == "CA7"
    assert report["ttfa"]["n_turns"] == 0 and report["turns"] == []
    assert await call.hang_up() is report and pool.lease.closed == 1


async def test_ring_fails_open_when_a_lever_cannot_start(logs):
    class BrokenWarmup:
        def start(self):
            raise RuntimeError("no loop for you")

        async def cancel(self):
            pass

    pool = FakePool(fail=True)
    call = FastCall("CA8", **services(), levers=Levers.parse("warmup,tts_pool"), pool=pool)
    call.warmup = BrokenWarmup()
    call.ring()  # neither failure escapes
    assert call.lease is None
    assert any("session warmup did not start: no loop for you" in m for m in logs)
    assert any("TTS pool did not take the call: pool closed" in m for m in logs)


async def test_ring_starts_the_session_warmup_and_hang_up_cancels_it():
    call = FastCall("CA9", **services(), levers=Levers.parse("warmup"))
    call.ring()
    task = call.warmup._warm_task
    assert task is not None
    report = await call.hang_up()
    assert task.done() and "warmup" in report


class RingingCall:
    def __init__(self, call_id):
        self.call_id = call_id
        self.rang = 0
        self.hung_up = asyncio.Event()

    def ring(self):
        self.rang += 1

    async def hang_up(self):
        self.hung_up.set()
        return {"call_id": self.call_id}


async def test_call_book_keeps_the_first_of_two_webhooks_and_answers_it_once():
    book = CallBook()
    first, second = RingingCall("CA1"), RingingCall("CA1")
    assert book.ring(first) is first and book.ring(second) is first
    assert first.rang == 1 and second.rang == 0 and "CA1" in book and len(book) == 1
    assert book.answer("CA1") is first
    assert book.answer("CA1") is None and "CA1" not in book
    assert await book.hang_up("CA-unknown") is None


async def test_call_book_gives_up_on_a_call_never_answered():
    book = CallBook(max_ring_s=0.01)
    call = RingingCall("CA2")
    book.ring(call)
    await asyncio.wait_for(call.hung_up.wait(), 5.0)
    assert "CA2" not in book


async def test_an_answered_call_is_not_given_up():
    book = CallBook(max_ring_s=0.05)
    answered, other = RingingCall("CA3"), RingingCall("CA4")
    book.ring(answered)
    book.ring(other)
    book.answer("CA3")
    await asyncio.wait_for(other.hung_up.wait(), 5.0)  # the same timer length has passed
    assert not answered.hung_up.is_set()


async def test_call_book_close_hangs_up_every_call_still_ringing():
    book = CallBook()
    calls = [RingingCall(f"CA{i}") for i in range(3)]
    for call in calls:
        book.ring(call)
    await book.aclose()
    assert all(c.hung_up.is_set() for c in calls) and len(book) == 0


def test_call_book_needs_a_positive_ring_limit():
    with pytest.raises(ValueError, match="max_ring_s"):
        CallBook(max_ring_s=0)


def test_the_engines_load_reaches_the_prefill_and_draft_and_hold():
    from pipecat_fast.load import EngineLoad, YieldConfig

    load = EngineLoad(None)
    config = YieldConfig(max_queue_s=0.5)
    call = FastCall("CA1", **services(), load=load, yield_config=config)
    assert call.prefill.load is load and call.prefill._prefill_yield is config
    (strategy,) = call.user_params().user_turn_strategies.stop
    assert strategy._draft_load is load and strategy._draft_yield is config
