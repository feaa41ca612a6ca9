"""How long this process spent compiling Numba kernels, and a voice while it compiles.

Numba compiles a kernel on its first call with new argument types, unless its machine code
is cached on disk (`bpe.util.jit_cache`): on a fresh clone that is seconds per kernel, during
which nothing else happens. This module listens to Numba's compile events so that:

    * a compile that lasts `ANNOUNCE_AFTER` seconds or more is logged as it runs, naming the
      kernel, and again every `ANNOUNCE_EVERY` seconds: a run is never silent for long;
    * `seconds()` and `cpu_seconds()` total the time spent compiling (outermost compiles only:
      a kernel compiles the kernels it calls inside its own compile), so that a caller can
      record compiling as its own stage instead of inside the stage that happened to call the
      kernel first (`bpe.experiment.runner`).

Loading machine code from the cache is not a compile and is not counted (Numba sends no
event for it; it takes tenths of a second).

What it does not do: import Numba (`install` takes the event module from the caller, so a
reader of `seconds()` never loads it), or compile anything.

>>> seconds() >= 0.0 and cpu_seconds() >= 0.0
True
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "ANNOUNCE_AFTER",
    "ANNOUNCE_EVERY",
    "CompileInfo",
    "cache_misses",
    "cpu_seconds",
    "install",
    "seconds",
]

logger = logging.getLogger(__name__)

#: a compile still running after this many seconds is logged (shorter ones are not worth a line)
ANNOUNCE_AFTER = 2.0
#: ... and then again this often while it lasts
ANNOUNCE_EVERY = 5.0

_totals = {"wall": 0.0, "cpu": 0.0}
_installed = False


def seconds() -> float:
    """Wall seconds this process has spent compiling Numba kernels so far."""
    return _totals["wall"]


def cpu_seconds() -> float:
    """CPU seconds of the same compiles (this process's threads)."""
    return _totals["cpu"]


@dataclass
class CompileInfo:
    """How readying a set of kernels went (`bpe.trainers.compiled.compile_kernels`,
    `bpe.pretokenize.engines.load_scanner`): seconds, and whether Numba's cache had all of
    their machine code."""

    seconds: float
    cached: bool
    #: False when an earlier call of this process (or of the parent it was forked from) did
    #: the work: seconds are then the first call's, not spent again
    now: bool = True


def cache_misses(dispatchers: Iterable) -> int:
    """How many times these Numba dispatchers compiled instead of loading from the cache
    (compare before and after a warm-up: equal means everything came from the cache)."""
    return sum(sum(d.stats.cache_misses.values()) for d in dispatchers)


class _Clock:
    """The listener: times outermost compiles and keeps a timer that speaks while one runs."""

    def __init__(self) -> None:
        self.depth = 0
        self.name = ""
        self.t0 = self.cpu0 = 0.0
        self.timer: threading.Timer | None = None

    def on_start(self, event) -> None:
        self.depth += 1
        if self.depth > 1:
            return
        self.name = _kernel_name(event)
        self.t0, self.cpu0 = time.perf_counter(), time.process_time()
        self._arm(ANNOUNCE_AFTER)

    def on_end(self, event) -> None:  # noqa: ARG002 - the start named it
        self.depth -= 1
        if self.depth > 0:
            return
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        wall = time.perf_counter() - self.t0
        _totals["wall"] += wall
        _totals["cpu"] += time.process_time() - self.cpu0
        if wall >= ANNOUNCE_AFTER:
            logger.info(
                "compiled %s in %.1f s (its machine code is cached: later runs load it)",
                self.name,
                wall,
            )

    def _arm(self, delay: float) -> None:
        self.timer = threading.Timer(delay, self._speak)
        self.timer.daemon = True
        self.timer.start()

    def _speak(self) -> None:
        if self.depth == 0:
            return
        logger.info(
            "compiling %s with Numba (first use on this machine; cached afterwards): %.0f s so far",
            self.name,
            time.perf_counter() - self.t0,
        )
        self._arm(ANNOUNCE_EVERY)


def _kernel_name(event) -> str:
    """`module.function` of the dispatcher an event is about."""
    try:
        fn = event.data["dispatcher"].py_func
        return f"{fn.__module__}.{fn.__qualname__}"
    except (AttributeError, KeyError, TypeError):
        return "a kernel"


def install(numba_event) -> None:
    """Listen to Numba's compile events (`numba.core.event`), once per process."""
    global _installed
    if _installed:
        return
    clock = _Clock()

    class Listener(numba_event.Listener):
        def on_start(self, event) -> None:
            clock.on_start(event)

        def on_end(self, event) -> None:
            clock.on_end(event)

    numba_event.register("numba:compile", Listener())
    _installed = True
