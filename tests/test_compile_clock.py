"""Numba's compiles are timed and announced while they run (`bpe.util.compile_clock`)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from bpe.util import compile_clock, jit_cache  # noqa: E402,F401  (jit_cache installs the clock)


def test_a_compile_is_timed_and_announced_while_it_runs(monkeypatch, caplog):
    monkeypatch.setattr(compile_clock, "ANNOUNCE_AFTER", 0.0)
    monkeypatch.setattr(compile_clock, "ANNOUNCE_EVERY", 0.01)

    @numba.njit(cache=False)
    def fresh(a):  # a new function: Numba has no machine code for it
        total = 0
        for x in a:
            total += x * x
        return total

    before, cpu_before = compile_clock.seconds(), compile_clock.cpu_seconds()
    with caplog.at_level(logging.INFO, logger="bpe.util.compile_clock"):
        assert fresh(np.arange(4)) == 14
    spent = compile_clock.seconds() - before
    assert spent > 0 and compile_clock.cpu_seconds() > cpu_before
    said = caplog.text
    assert "compiling " in said and "fresh with Numba" in said  # while it ran
    assert ".fresh in " in said  # and when it ended
    before = compile_clock.seconds()
    assert fresh(np.arange(3)) == 5  # compiled already: nothing more is counted
    assert compile_clock.seconds() == before
