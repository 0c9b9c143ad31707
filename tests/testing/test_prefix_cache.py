import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipecat_fast.testing.prefix_cache import PrefixCache

PROMPT = list(range(3000))


def test_repeated_prefix_hits_in_block_increments():
    cache = PrefixCache()
    assert cache.lookup("m", PROMPT, now=0.0) == 0
    cache.insert("m", PROMPT, now=0.0)
    follow_up = PROMPT + [7, 8, 9] * 40
    # 3000 tokens cached, rounded down to the 128-token block: 23 * 128.
    assert cache.lookup("m", follow_up, now=1.0) == 2944


def test_a_changed_token_invalidates_everything_after_its_block():
    cache = PrefixCache()
    cache.insert("m", PROMPT, now=0.0)
    busted = PROMPT.copy()
    busted[1500] = -1
    assert cache.lookup("m", busted, now=1.0) == 1408  # blocks before token 1500 only
    busted[10] = -1
    assert cache.lookup("m", busted, now=1.0) == 0


def test_below_minimum_nothing_is_cached_or_reported():
    cache = PrefixCache()
    short = list(range(900))
    assert cache.insert("m", short, now=0.0) == 0
    assert cache.lookup("m", short, now=0.0) == 0
    cache.insert("m", PROMPT, now=0.0)
    assert cache.lookup("m", PROMPT[:1000], now=0.0) == 0  # 896 cached < 1024


def test_ttl_expiry_and_refresh_on_hit():
    cache = PrefixCache(ttl_s=10.0)
    cache.insert("m", PROMPT, now=0.0)
    assert cache.lookup("m", PROMPT, now=9.0) == 2944  # refreshes to 19.0
    assert cache.lookup("m", PROMPT, now=18.0) == 2944
    assert cache.lookup("m", PROMPT, now=40.0) == 0
    assert cache.stats.expirations >= 1


def test_lru_eviction_drops_the_least_recently_used_prefix():
    cache = PrefixCache(capacity=46, block_tokens=128, min_tokens=128)
    a = list(range(2944))  # 23 blocks
    b = list(range(10_000, 12_944))  # 23 blocks
    cache.insert("m", a, now=0.0)
    cache.insert("m", b, now=1.0)
    assert cache.lookup("m", a, now=2.0) == 2944  # a is now most recently used
    c = list(range(20_000, 20_128))  # one more block evicts one block of b
    cache.insert("m", c, now=3.0)
    assert cache.lookup("m", a, now=4.0) == 2944
    # Leaves go first, as in serving engines: b loses its deepest block, not its root.
    assert cache.lookup("m", b, now=4.0) == 2816
    assert cache.stats.evictions == 1


def test_namespaces_do_not_share_entries():
    cache = PrefixCache()
    cache.insert("model-a|call-1", PROMPT, now=0.0)
    assert cache.lookup("model-a|call-2", PROMPT, now=0.0) == 0


def test_breakpoint_checkpoints_hit_only_at_written_breakpoints():
    cache = PrefixCache(min_tokens=1024)
    cache.insert("m", PROMPT, now=0.0, checkpoints=[2000, 2500])
    longer = PROMPT + list(range(50))
    assert cache.lookup("m", longer, now=1.0, checkpoints=[2500, 3050], contiguous=False) == 2500
    assert cache.lookup("m", longer, now=1.0, checkpoints=[2200, 3050], contiguous=False) == 0


@given(st.lists(st.integers(0, 50), min_size=0, max_size=600), st.integers(0, 599))
def test_hit_never_exceeds_the_common_prefix(tokens, cut):
    cache = PrefixCache(block_tokens=16, min_tokens=16)
    cache.insert("m", tokens, now=0.0)
    other = tokens[:cut] + [-1] + tokens[cut:]
    hit = cache.lookup("m", other, now=0.0)
    assert hit <= min(cut, len(tokens))
    assert hit % 16 == 0


def test_rejects_nonsense_configuration():
    with pytest.raises(ValueError):
        PrefixCache(block_tokens=0)
