from hypothesis import given
from hypothesis import strategies as st

from pipecat_fast.prefix import common_prefix_len


def reference(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_examples():
    assert common_prefix_len("abcd", "abxy") == 2
    assert common_prefix_len("", "abc") == 0
    assert common_prefix_len("abc", "abc") == 3
    assert common_prefix_len("abc", "abcdef") == 3
    assert common_prefix_len([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix_len(("yes", "i"), ("yes", "we")) == 1
    assert common_prefix_len(b"\x00\x01", b"\x00\x02") == 1


def test_long_inputs_that_part_at_every_kind_of_offset():
    base = "x" * 100_000
    for cut in (0, 1, 31, 32, 33, 4095, 4096, 65_537, 99_999):
        changed = base[:cut] + "y" + base[cut + 1 :]
        assert common_prefix_len(base, changed) == cut
        assert common_prefix_len(list(base), list(changed)) == cut


@given(st.text(alphabet="ab", max_size=300), st.text(alphabet="ab", max_size=300))
def test_agrees_with_a_plain_loop_on_strings(a, b):
    assert common_prefix_len(a, b) == reference(a, b)


@given(st.lists(st.integers(0, 3), max_size=300), st.lists(st.integers(0, 3), max_size=300))
def test_agrees_with_a_plain_loop_on_token_lists(a, b):
    assert common_prefix_len(a, b) == reference(a, b) == common_prefix_len(b, a)


@given(st.text(max_size=200), st.text(max_size=50))
def test_a_shared_head_is_found_whatever_follows(head, tail):
    assert common_prefix_len(head + tail, head) == len(head)
