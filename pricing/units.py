"""Units of account. Bytes are integers everywhere; these only name the unit sizes.

GiB = 2^30, MiB = 2^20 bytes; "MB" (as in the spec, memory-model.md) is 10^6 bytes.
"""

import bisect

GiB = 1 << 30
MiB = 1 << 20
MB = 10**6


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers."""
    return -(-a // b)


def round_up(a: int, multiple: int) -> int:
    """`a` rounded up to a whole number of `multiple` (1 leaves it unchanged)."""
    return cdiv(a, multiple) * multiple


def gib(n: int) -> float:
    """Bytes as GiB, for printing only."""
    return n / GiB


def tokens_label(n: int) -> str:
    """A token count as people say it: 32k, 128k, 1M (2^10 = k, 2^20 = M, as context lengths are)."""
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10}k"
    return f"{n:,}"


def largest_such(holds, lo: int, hi: int) -> int:
    """The largest n in [lo, hi] for which the monotone predicate `holds` is true (true up to some n,
    false after it), or lo - 1 when it holds nowhere: a bisection (the standard library's bisect)."""
    return lo + bisect.bisect_left(range(lo, hi + 1), True, key=lambda n: not holds(n)) - 1
