"""Small statistics shared by measures and training records.

What it does not do: read runs or text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def gini(values: Sequence[float]) -> float:
    """The Gini coefficient of non-negative values: 0 when all are equal, towards 1 when one
    holds everything (the mean absolute difference over twice the mean).

    >>> round(gini([1, 1, 1, 1]), 3), round(gini([0, 0, 0, 4]), 3)
    (0.0, 0.75)
    """
    n = len(values)
    if n == 0 or sum(values) == 0:
        return 0.0
    ordered = sorted(values)
    # subtle: the weighted sum is 0 for equal values and never negative for sorted ones, but a
    # plain float sum of its terms came out at -2.5e-17 for five equal values; fsum adds them
    # exactly (equal values' terms cancel in pairs) and what rounding is left cannot go below 0
    weighted = math.fsum((2 * (i + 1) - n - 1) * v for i, v in enumerate(ordered))
    return max(0.0, weighted / (n * math.fsum(ordered)))
