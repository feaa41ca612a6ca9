"""Progress a log can show: an INFO line every few seconds from each long stage, plus its bar.

What it does: a `Progress` counts the work a stage has done (bytes pre-tokenized, merges made)
as the stage reports it with `update(n)`, draws an optional tqdm bar, and, while it runs, a
daemon thread logs one INFO line every `interval` seconds (`LOG_INTERVAL_S`, 9 s, by default):

    stage 1 (count pretokens): 412 MB of 1024 MB (40%), 25.1 MB/s, ETA 24 s
    stage 3 (select and merge): merges 12000/31743, 850 merges/s, ETA 23 s

Until the first `update` the line is a heartbeat naming the phase that has no ticks (stage 2
counts pairs in one go, then a heap is built; the first chunk of a file takes a while):

    stage 2 (count pairs): still running, 12 s

Bars go to stderr and are off in logs (and in sweeps); these lines are what `train.log` shows, so
a long run never goes quiet there for longer than the interval. The thread is a clock only: it
reads two numbers and logs; `close()` (or leaving the `with` block) stops and joins it, so no
thread outlives its stage.

What it does not do: decide when a thread may start. A thread alive while a process forks can
leave a lock held in the child, so a stage that forks workers starts its `Progress` once they
run (`bpe.pretokenize` through `bpe.util.pool.map_chunks(on_start=...)`; a first `update`
starts
it too).
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType
from typing import Any, Literal

__all__ = ["LOG_INTERVAL_S", "Progress", "format_duration"]

#: Seconds between two progress lines in the log. A long run promises a line at least every
#: 10 s; a wake-up is late by as long as the main thread holds the GIL in one C call (adding a
#: chunk's counts: up to 0.6 s measured at 1M unique pretokens on a busy 2-core machine), so
#: the clock ticks a little sooner.
LOG_INTERVAL_S = 9.0

#: The name of the logging thread (tests look for leftovers by it).
THREAD_NAME = "bpe-progress"

Unit = Literal["B", "merge"]

#: Merges made before stage 3's line gives an ETA. One merge says nothing about the rest: the
#: first merges touch the most occurrences, and one of them can take minutes (a pretoken of
#: millions of bytes) while later ones take microseconds, so an ETA from it once read "19 h"
#: for a run that then took seconds.
MIN_MERGES_FOR_ETA = 10


def format_duration(seconds: float) -> str:
    """A short human duration for ETAs and heartbeats.

    >>> format_duration(0.34), format_duration(24.4), format_duration(250)
    ('0.3 s', '24 s', '4.2 min')
    >>> format_duration(3 * 3600)
    '3.0 h'
    """
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _mb(num_bytes: float) -> str:
    value = num_bytes / 1e6
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


class Progress:
    """One stage's progress: a counter, an optional tqdm bar and a periodic log line.

    Args:
        label: how the stage is named in its lines, e.g. "stage 1 (count pretokens)".
        total: the work to do, in `unit`s (bytes of a file, merges to make); None until
            `set_total` says (the bar appears then).
        unit: "B" (shown in MB, MB/s) or "merge".
        logger: where the lines go (the stage's own module logger).
        waiting: the phase before the first `update`, when it has its own name (stage 2
            before the merges tick); the rate then counts from the first update. None: the
            stage itself, timed from `start()`.
        bar: also draw a tqdm bar (`tqdm.auto`) with this description.
        interval: seconds between log lines.

    >>> p = Progress("merging", total=20, unit="merge", logger=logging.getLogger("x"))
    >>> p.line(now=p.t0 + 2.0)
    'merging: still running, 2.0 s'
    >>> p.update(4)  # too few merges to tell how long the rest takes
    >>> p.line(now=p.t_first + 2.0)
    'merging: merges 4/20, 2 merges/s, ETA after 10 merges'
    >>> p.update(6)
    >>> p.line(now=p.t_first + 5.0)
    'merging: merges 10/20, 2 merges/s, ETA 5.0 s'
    >>> p.close()
    """

    def __init__(
        self,
        label: str,
        *,
        total: int | None,
        unit: Unit,
        logger: logging.Logger,
        waiting: str | None = None,
        bar: str | None = None,
        interval: float = LOG_INTERVAL_S,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval={interval!r} must be > 0 seconds")
        self.label, self.total, self.unit, self.logger = label, total, unit, logger
        self.waiting = waiting
        self.interval = interval
        self.done = 0
        self.t0 = time.monotonic()
        self.t_first: float | None = None
        self._bar_desc = bar
        self._bar: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the stage's side -------------------------------------------------------------------

    def start(self) -> Progress:
        """Start the bar and the logging thread (once; a later call does nothing)."""
        if self._thread is not None:
            return self
        self._open_bar()
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()
        return self

    def _open_bar(self) -> None:
        if self._bar_desc is None or self._bar is not None or self.total is None:
            return
        from tqdm.auto import tqdm  # imported only for a bar: tqdm.auto takes ~60 ms

        kwargs = {"unit_scale": True} if self.unit == "B" else {}
        self._bar = tqdm(total=self.total, desc=self._bar_desc, unit=self.unit, **kwargs)
        self._bar.update(self.done)

    def update(self, n: int = 1) -> None:
        """Count `n` more units done (starts the bar and the thread on the first call)."""
        if self.t_first is None:
            self.t_first = time.monotonic()
            if self._thread is None:
                self.start()
        self.done += n
        if self._bar is not None:
            self._bar.update(n)

    def set_total(self, total: int) -> None:
        """The work to do, once it is known (the merges, after the words are built)."""
        self.total = total
        if self._thread is not None:  # started: the bar can show now
            self._open_bar()

    def close(self) -> None:
        """Stop and join the thread, close the bar. Safe to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the clock's side -------------------------------------------------------------------

    def _run(self) -> None:
        # fixed deadlines from the start, so a late wake-up does not delay every later line
        deadline = time.monotonic() + self.interval
        while not self._stop.wait(max(0.0, deadline - time.monotonic())):
            self.logger.info("%s", self.line())
            deadline = max(deadline + self.interval, time.monotonic() + self.interval / 2)

    def line(self, *, now: float | None = None) -> str:
        """The log line for the progress so far (at `now`, a `time.monotonic()` reading)."""
        now = time.monotonic() if now is None else now
        done, t_first = self.done, self.t_first  # read once: the stage goes on meanwhile
        if t_first is None or done == 0:
            return f"{self.waiting or self.label}: still running, {format_duration(now - self.t0)}"
        since = t_first if self.waiting else self.t0
        rate = done / max(now - since, 1e-9)
        total = self.total or 0
        left = max(total - done, 0)
        eta = format_duration(left / rate) if rate > 0 else "unknown"
        if self.unit == "B":
            share = 100 * done / total if total else 100.0
            return (
                f"{self.label}: {_mb(done)} MB of {_mb(total)} MB ({share:.0f}%), "
                f"{rate / 1e6:.1f} MB/s, ETA {eta}"
            )
        if done < MIN_MERGES_FOR_ETA:
            return (
                f"{self.label}: merges {done}/{total}, {rate:.{rate < 1 and 2 or 0}f} merges/s, "
                f"ETA after {MIN_MERGES_FOR_ETA} merges"
            )
        return (
            f"{self.label}: merges {done}/{total}, {rate:.{rate < 1 and 2 or 0}f} merges/s, "
            f"ETA {eta}"
        )
