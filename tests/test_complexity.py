"""The complexity guard itself (`tests/complexity.py`): it fails quadratic work, every attempt,
and passes linear work."""

from __future__ import annotations

import pytest

from tests.complexity import assert_linear


def test_the_guard_fails_quadratic_work_and_passes_linear_work():
    def quadratic(n: int) -> None:
        for i in range(n):
            sum(range(i))

    with pytest.raises(AssertionError, match="quadratic x16"):
        assert_linear(quadratic, 1500, what="a quadratic loop")
    assert assert_linear(lambda n: sum(range(n)), 2_000_000, what="a linear sum") <= 6
