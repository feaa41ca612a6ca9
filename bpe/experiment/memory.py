"""Memory of the whole process tree, sampled over time by a background thread.

What it does: every `interval` seconds sums the memory of this process and all its children
(pre-tokenization workers, a profiled child): PSS where the OS exposes it (shared pages split
fairly between processes, so forked workers are not double counted), RSS otherwise. Each sample
is tagged with the current stage, giving a timeline and a per-stage peak. `ru_maxrss` of the
process and of its reaped children complete the picture (they catch peaks between samples).

What a run reports (`phase_memory`): the tree's memory when the sampler starts is the run's
*baseline*, and each phase (training: stages 1-3; analysis) is reported as its peak and as what
it *added* above that baseline. The added figure is the one that depends on the trainer and the
input only: a job of a sweep runs in a process that earlier jobs already used (modules they
imported, caches they filled), which raises the baseline and every absolute peak with it, but
not what training adds (`release_free_memory` first hands back what they freed).

What it does not do: limit memory, or profile allocations (that is scalene's job).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
import resource
import threading
import time

import psutil

from bpe.runs.stages import SETUP

logger = logging.getLogger(__name__)

MB = 1024 * 1024


def _process_mb(proc: psutil.Process) -> float:
    try:
        info = proc.memory_full_info()
        value = getattr(info, "pss", None) or info.rss
    except psutil.AccessDenied:
        value = proc.memory_info().rss
    return value / MB


def release_free_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc's `malloc_trim`).

    Called before a run's sampler starts: a process reused by a sweep holds pages that earlier
    jobs freed, which the next job's allocations would reuse unseen (so a job's measured
    growth would depend on its place in the sweep). Elsewhere than glibc only the collection runs.
    """
    gc.collect()
    name = ctypes.util.find_library("c")
    if not name:
        return
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to trim
        return
    trim(0)


def phase_memory(per_stage: dict[str, float], stages: tuple[str, ...], baseline: float) -> dict:
    """A phase's memory from per-stage peaks: its peak, the stage of that peak, and what it
    added above the run's baseline (the tree's memory when sampling began).

    >>> phase_memory({"setup": 150.0, "pretokenize": 360.0, "merge": 170.0},
    ...              ("pretokenize", "merge"), 150.0)
    {'peak_mb': 360.0, 'added_mb': 210.0, 'stage': 'pretokenize'}
    >>> phase_memory({"setup": 150.0}, ("analysis",), 150.0)
    {'peak_mb': None, 'added_mb': None, 'stage': None}
    """
    seen = [s for s in stages if s in per_stage]
    if not seen:
        return {"peak_mb": None, "added_mb": None, "stage": None}
    stage = max(seen, key=lambda s: per_stage[s])
    peak = per_stage[stage]
    return {
        "peak_mb": round(peak, 2),
        "added_mb": round(max(0.0, peak - baseline), 2),
        "stage": stage,
    }


def tree_mb(pid: int | None = None) -> float:
    """Memory of a process and all its descendants, in MB (PSS where available)."""
    root = psutil.Process(pid or os.getpid())
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += _process_mb(proc)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue  # a worker exited between listing and reading
    return total


class MemorySampler:
    """Background sampler: `with MemorySampler() as m: m.set_stage("merge"); ...`.

    Samples are tagged `SETUP` until the first `set_stage`. After exit, `summary()` gives the
    peak, per-stage peaks and the (downsampled) timeline.
    """

    def __init__(self, *, interval: float = 0.05, max_points: int = 2000) -> None:
        self.interval = interval
        self.max_points = max_points
        self.stage = SETUP
        self.samples: list[tuple[float, float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self._t0 = 0.0

    def __enter__(self) -> MemorySampler:
        self._t0 = time.perf_counter()
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sample()

    def elapsed(self) -> float:
        """Seconds since the sampler started (the clock of the timeline)."""
        return time.perf_counter() - self._t0

    def set_stage(self, stage: str) -> None:
        """Switch the stage label, with a sample at the boundary."""
        self.stage = stage
        self._sample()

    def _sample(self) -> None:
        try:
            mb = tree_mb()
        except Exception as err:  # noqa: BLE001 - sampling must never kill a run
            logger.debug("memory sample failed: %s", err)
            return
        self.samples.append((time.perf_counter() - self._t0, mb, self.stage))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def summary(self) -> dict:
        """Peak, per-stage peaks, ru_maxrss figures and a timeline of at most max_points."""
        per_stage: dict[str, float] = {}
        for _, mb, stage in self.samples:
            per_stage[stage] = max(per_stage.get(stage, 0.0), mb)
        step = max(1, -(-len(self.samples) // self.max_points))
        timeline = [[round(t, 4), round(mb, 2), stage] for t, mb, stage in self.samples[::step]]
        # keep the true peak visible in a downsampled timeline
        if self.samples and step > 1:
            peak = max(self.samples, key=lambda s: s[1])
            timeline.append([round(peak[0], 4), round(peak[1], 2), peak[2]])
            timeline.sort(key=lambda p: p[0])
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        return {
            "peak_mb": round(max((mb for _, mb, _ in self.samples), default=0.0), 2),
            # the first sample: what the process tree held before the run's work began
            "baseline_mb": round(self.samples[0][1], 2) if self.samples else None,
            "ru_maxrss_mb": round(own, 2),
            "children_ru_maxrss_mb": round(children, 2),
            "per_stage_peak_mb": {k: round(v, 2) for k, v in per_stage.items()},
            "interval_s": self.interval,
            "num_samples": len(self.samples),
            "timeline": timeline,
        }
