"""Complexity guards: the same work at two sizes, x4 apart, may cost at most x6 the time.

Linear work costs x4, quadratic x16; x6 leaves room for n log n and for noise. A ratio of two
timings taken in one test holds on a shared machine where an absolute bound does not: both
sizes run under the same load. Each size is timed as the best of a few runs of CPU time
(`time.process_time`: time spent waiting for a core does not count), with the collector off.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

#: How much more work the large size does.
FACTOR = 4
#: The largest time ratio allowed for FACTOR x the work (linear: 4, quadratic: 16).
MAX_RATIO = 6.0


def best_cpu_seconds(work: Callable[[], object], *, repeats: int) -> float:
    """The least CPU time of `repeats` calls of `work` (the garbage collector off meanwhile)."""
    best = float("inf")
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.process_time()
            work()
            best = min(best, time.process_time() - start)
    finally:
        if enabled:
            gc.enable()
    return best


def assert_linear(
    work: Callable[[int], object],
    size: int,
    *,
    repeats: int = 3,
    attempts: int = 3,
    what: str = "the work",
) -> float:
    """Fail unless `work(FACTOR * size)` costs at most MAX_RATIO x `work(size)`.

    A ratio above the bound is measured again (up to `attempts` times in all): a burst of load
    can inflate one timing, but quadratic work (x16) fails every attempt. Returns the ratio.
    (Two attempts, each timing one size after the other, failed a linear n-gram fit at x6.2
    and x6.4 in a CI run; it measures x4.5-4.8 alone.)
    `size` should make the small run take some tens of milliseconds, so the timer's resolution
    and fixed costs do not dominate.
    """
    tried = []
    for _ in range(attempts):
        # the sizes take turns, so a stretch of load (a neighbour's heavy test) meets both
        small = large = float("inf")
        for _ in range(repeats):
            small = min(small, best_cpu_seconds(lambda: work(size), repeats=1))
            large = min(large, best_cpu_seconds(lambda: work(FACTOR * size), repeats=1))
        ratio = large / max(small, 1e-6)
        if ratio <= MAX_RATIO:
            return ratio
        tried.append(f"x{ratio:.1f} ({small:.3f} s -> {large:.3f} s)")
    raise AssertionError(
        f"{what}: x{FACTOR} the size took {', then '.join(tried)} the time; linear is "
        f"x{FACTOR}, quadratic x{FACTOR**2}, the bound x{MAX_RATIO:g}"
    )
