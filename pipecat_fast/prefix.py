"""The length of the common prefix of two sequences: the one helper every lever uses.

Prefix caches keep the longest common prefix of two requests, the stabiliser keeps the words two
interims agree on, the linter and the guard locate where two renders of a prompt part ways: all
of them ask this one question, of strings, token lists or word lists.

The answer is found by comparing slices, so the element-by-element work runs in C: a short
prefix costs a few small comparisons, a long one (a 30k-token prompt that changed at its end)
about two passes over it, never a Python loop per character.
"""

from __future__ import annotations

from collections.abc import Sequence

_FIRST_STEP = 32


def common_prefix_len(a: Sequence, b: Sequence) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (elements compared with ``==``).

    Works for any sliceable sequences whose slices compare element-wise: ``str``, ``bytes``,
    ``list``, ``tuple``. ``common_prefix_len("abcd", "abxy") == 2``.

    Args:
        a: One sequence.
        b: The other.

    Returns:
        The number of leading elements the two share.
    """
    n = min(len(a), len(b))
    if n == 0:
        return 0
    # Two cheap probes first (an equality test stops at the first difference): one sequence
    # extends the other, or they part at their last shared element (a revised last word).
    if a[:n] == b[:n]:
        return n
    hi = n - 1
    if a[:hi] == b[:hi]:
        return hi
    # a[:hi] disagrees. Gallop: grow the agreed prefix a[:lo] by doubling steps while the
    # slices agree (a long sequence that parts early costs little)...
    lo, step = 0, _FIRST_STEP
    while lo + step < hi:
        if a[lo : lo + step] != b[lo : lo + step]:
            hi = lo + step
            break
        lo, step = lo + step, step * 2
    # ...then bisect inside the step that disagreed: a[:lo] agrees, a[lo:hi] does not.
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo
