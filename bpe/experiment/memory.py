"""Memory of the whole process tree, sampled over time by a watcher process (a thread
where the process cannot start).

What it does: every `interval` seconds sums the memory of this process and all its children
(pre-tokenization workers, a profiled child) that the tree *allocated* (`MEASURE`): on Linux
the proportional share (PSS) of its anonymous and shared-memory pages, so a page a forked
worker still shares with its parent is split between them, not counted twice. File-backed pages
(the interpreter's and libraries' code, the page cache) are left out: every Python process on
the machine maps the same libraries, so their share moved with whatever else ran (measured: the
same run's starting memory was 152.6 MB quiet and 148.4 MB beside three other Python processes,
the whole difference in file pages; 93.1 MB allocated both times). Elsewhere: psutil's USS
(private pages) or RSS. Each sample is tagged with the stage current at its time, giving a
timeline and a per-stage peak.
`ru_maxrss` of the process and of its reaped children complete the picture (they catch peaks
between samples).

subtle: the samples are taken by a small watcher *process* (`WATCHER`), not by a thread of
this one: a sampling thread needs the GIL for every file psutil reads, and a busy merge loop
holds it, so a thread took one sample in a second of pure Python (stages under a second went
unmeasured). The watcher leaves itself out of the sums; a sample at each stage boundary is
still taken here. It writes its samples to a file that this process reads when it collects
them, so the run keeps a single thread and stage 1 can fork its workers (a thread reading a
pipe made them start from a fork server, each importing Numba again: 2-3 CPU seconds and a
slower start of a stage 1 on 1 GiB). Where the watcher cannot start, a thread samples instead.

What a run reports (`phase_memory`): the tree's memory when the sampler starts is the run's
*baseline*, and each phase (training: stages 1-3; analysis) is reported as its peak and as what
it *added* above that baseline. The added figure is the one that depends on the trainer and the
input only: a job of a sweep runs in a process that earlier jobs already used (modules they
imported, caches they filled), which raises the baseline and every absolute peak with it, but
not what training adds (`release_free_memory` first hands back what they freed).

What it does not do: limit memory, or profile allocations (that is scalene's job).
"""

from __future__ import annotations

import bisect
import ctypes
import ctypes.util
import gc
import logging
import operator
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from bpe.runs import schema
from bpe.runs.stages import SETUP

logger = logging.getLogger(__name__)

MB = 1024 * 1024
#: glibc's `mallopt` parameters (malloc.h) and their default value, 128 KiB
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_GLIBC_DEFAULT_THRESHOLD = 128 * 1024


#: What a sample measures, as metrics.json's `memory.measure` records it
MEASURE = schema.ALLOCATED_PSS
#: the lines of `smaps_rollup` that make up `MEASURE` (kB each)
_ALLOCATED = (b"Pss_Anon:", b"Pss_Shmem:")


def allocated_kb(rollup: bytes) -> int | None:
    """The allocated PSS in kB of one `/proc/<pid>/smaps_rollup`, None if it lacks the lines.

    >>> allocated_kb(b"Pss: 900 kB\\nPss_Anon: 100 kB\\nPss_File: 780 kB\\nPss_Shmem: 20 kB\\n")
    120
    >>> allocated_kb(b"Pss: 900 kB\\n") is None
    True
    """
    found = [int(line.split()[1]) for line in rollup.splitlines() if line.startswith(_ALLOCATED)]
    return sum(found) if len(found) == len(_ALLOCATED) else None


def _process_mb(proc: psutil.Process) -> float:
    """A process's allocated memory in MB (`MEASURE`) from `/proc/<pid>/smaps_rollup` (one
    summary the kernel adds up), else psutil's USS (private pages; it reads the whole `smaps`,
    far slower for a large process), else RSS."""
    try:
        with open(f"/proc/{proc.pid}/smaps_rollup", "rb") as f:
            kb = allocated_kb(f.read())
        if kb is not None:
            return kb / 1024
    except (FileNotFoundError, ProcessLookupError):
        raise psutil.NoSuchProcess(proc.pid) from None
    except OSError:  # no smaps_rollup (not Linux, an old kernel) or not ours to read
        pass
    try:
        info = proc.memory_full_info()
        value = getattr(info, "uss", None) or info.rss
    except psutil.AccessDenied:
        value = proc.memory_info().rss
    return value / MB


def release_free_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc's `malloc_trim`).

    Called before a run's sampler starts: a process reused by a sweep holds pages that earlier
    jobs freed, which the next job's allocations would reuse unseen (so a job's measured
    growth would depend on its place in the sweep), and glibc's malloc thresholds that earlier
    jobs raised (pinned here). Elsewhere than glibc only the collection runs.
    """
    gc.collect()
    name = ctypes.util.find_library("c")
    if not name:
        return
    try:
        libc = ctypes.CDLL(name)
        trim, mallopt = libc.malloc_trim, libc.mallopt
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to trim
        return
    # subtle: glibc raises its mmap threshold (up to 32 MiB) each time a large mmapped block
    # is freed, so in a process that earlier jobs used, a job's big arrays come from the heap,
    # whose freed pages stay resident: its peak then depends on the jobs before it. Pinning
    # both thresholds at glibc's defaults turns that adaptation off, in every job alike.
    # Measured (default dataset, vocab 2,000, cache=false, joblib n_jobs=1, two repeats):
    # alone 23.2 MB, jobs 2-5 of a sweep 28.8-36.1 MB unpinned; pinned: alone 22.6-23.1 MB,
    # jobs 2-5 22.7-24.9 MB.
    mallopt(_M_MMAP_THRESHOLD, _GLIBC_DEFAULT_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, _GLIBC_DEFAULT_THRESHOLD)
    trim(0)


def phase_memory(
    per_stage: dict[str, float],
    stages: tuple[str, ...],
    baseline: float,
    *,
    gaps: dict[str, float] | None = None,
) -> dict:
    """A phase's memory from per-stage peaks: its peak, the stage of that peak, what it added
    above the run's baseline (the tree's memory when sampling began) and, from the per-stage
    `gaps` (`widest_gaps`), the longest the watcher waited for a sample in the phase.

    >>> phase_memory({"setup": 150.0, "pretokenize": 360.0, "merge": 170.0},
    ...              ("pretokenize", "merge"), 150.0, gaps={"merge": 0.05, "analysis": 0.6})
    {'peak_mb': 360.0, 'added_mb': 210.0, 'stage': 'pretokenize', 'widest_gap_s': 0.05}
    >>> phase_memory({"setup": 150.0}, ("analysis",), 150.0)
    {'peak_mb': None, 'added_mb': None, 'stage': None, 'widest_gap_s': None}
    """
    seen = [s for s in stages if s in per_stage]
    waited = [gaps[s] for s in stages if s in (gaps or {})]
    widest = max(waited) if waited else None
    if not seen:
        return {"peak_mb": None, "added_mb": None, "stage": None, "widest_gap_s": widest}
    stage = max(seen, key=lambda s: per_stage[s])
    peak = per_stage[stage]
    return {
        "peak_mb": round(peak, 2),
        "added_mb": round(max(0.0, peak - baseline), 2),
        "stage": stage,
        "widest_gap_s": widest,
    }


def widest_gaps(samples: list[tuple[float, float, str]]) -> dict[str, float]:
    """Per stage, the longest wait for one of its samples: the time since the sample before,
    counted in the stage of the sample that ended the wait (a phase's figure is then final
    when the phase ends, whatever the watcher does in later, larger trees).

    >>> widest_gaps([(0.0, 9.0, "merge"), (0.05, 9.0, "merge"), (0.6, 9.0, "analysis")])
    {'merge': 0.05, 'analysis': 0.55}
    """
    gaps: dict[str, float] = {}
    for (before, _, _), (t, _, stage) in zip(samples, samples[1:], strict=False):
        gaps[stage] = round(max(gaps.get(stage, 0.0), t - before), 4)
    return gaps


def tree_mb(pid: int | None = None, *, exclude: frozenset[int] = frozenset()) -> float:
    """Memory of a process and all its descendants but `exclude`, in MB (`MEASURE`)."""
    root = psutil.Process(pid or os.getpid())
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        if proc.pid in exclude:
            continue
        try:
            total += _process_mb(proc)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue  # a worker exited between listing and reading
    return total


#: The watcher's budget: sampling may take `WATCHER_BURST` seconds plus `WATCHER_DUTY` of the
#: time since it started; past that it waits longer than `interval` (`pause_after`). So a short
#: run is sampled every interval, and a long one with big processes does not pay for it in
#: wall time: reading a process's `smaps_rollup` walks its page tables, so a sample costs more
#: as the tree grows. Stage 1 of a 1 GiB corpus (a parent and two workers holding 750 MB) took
#: 23 ms a sample; there, three alternations, stage 1's wall / the watcher's CPU seconds / the
#: peak it saw: every 0.05 s 19.0-22.1 s / 4.7-5.8 s / 773-798 MB; within this budget
#: 15.9-18.9 s / 1.1-1.2 s / 727-795 MB; no watcher 15.8-18.3 s. (A 5% duty missed more of
#: the peak: 692-753 MB.)
WATCHER_BURST, WATCHER_DUTY = 0.2, 0.1


def pause_after(*, spent: float, elapsed: float, interval: float) -> float:
    """Seconds the watcher waits after a sample, having spent `spent` CPU seconds in `elapsed`
    s: `interval` while it is within its budget (`WATCHER_DUTY`), else until it is again.

    >>> pause_after(spent=0.15, elapsed=0.4, interval=0.05)  # a short run: every interval
    0.05
    >>> round(pause_after(spent=1.2, elapsed=9.0, interval=0.05), 3)  # 10 s covers 1.2 s
    1.0
    """
    due = (spent - WATCHER_BURST) / WATCHER_DUTY
    return max(interval, due - elapsed)


#: The watcher process: prints `<monotonic seconds> <MB>` of its parent's tree (itself left
#: out) every interval (`pause_after`) until its parent is gone or it is stopped.
WATCHER = """
import os, sys, time
from bpe.experiment.memory import pause_after, tree_mb
parent, interval, me = int(sys.argv[1]), float(sys.argv[2]), frozenset([os.getpid()])
began, cpu = time.monotonic(), time.process_time()
while True:
    start = time.monotonic()
    try:
        mb = tree_mb(parent, exclude=me)
    except Exception:
        break
    print(f"{start} {mb}", flush=True)
    # the CPU it took (the kernel's walk included), not the wall time: a busy machine that
    # keeps the watcher waiting for a core does not use up its budget
    spent = time.process_time() - cpu
    time.sleep(pause_after(spent=spent, elapsed=time.monotonic() - began, interval=interval))
"""


def _stamp(line: str) -> float:
    """The time of a watcher line (NaN when it cannot be read)."""
    try:
        return float(line.split()[0])
    except (ValueError, IndexError):
        return float("nan")


def _start_watcher(interval: float, out) -> subprocess.Popen | None:
    """The watcher process (`WATCHER`) for this process's tree, writing to file `out`, or None
    if it cannot start."""
    try:
        return subprocess.Popen(
            [sys.executable, "-c", WATCHER, str(os.getpid()), str(interval)],
            stdout=out,
            stderr=subprocess.DEVNULL,
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(
                    filter(
                        None,
                        [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")],
                    )
                ),
            },
        )
    except OSError as err:
        logger.debug("memory watcher did not start (%s): sampling from a thread", err)
        return None


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
        #: (monotonic time, stage) at each switch: labels the watcher's samples afterwards
        self._stages: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self._watcher: subprocess.Popen | None = None
        #: the file the watcher writes to, how much of it was read, and a line read in part
        self._out = tempfile.TemporaryFile()
        self._read_to = 0
        self._partial = b""
        self._lines: list[str] = []
        self._t0 = 0.0

    def __enter__(self) -> MemorySampler:
        self._t0 = time.monotonic()
        self._stages.append((self._t0, self.stage))
        self._sample()
        self._watcher = _start_watcher(self.interval, self._out)
        if self._watcher is None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.terminate()
            self._watcher.wait(timeout=5)
        elif self._thread.is_alive():
            self._thread.join(timeout=5)
        self.collect()
        self._out.close()
        self._sample()

    def elapsed(self) -> float:
        """Seconds since the sampler started (the clock of the timeline)."""
        return time.monotonic() - self._t0

    def set_stage(self, stage: str) -> None:
        """Switch the stage label, with a sample at the boundary."""
        self.stage = stage
        self._stages.append((time.monotonic(), stage))
        self._sample()

    def _exclude(self) -> frozenset[int]:
        return frozenset() if self._watcher is None else frozenset([self._watcher.pid])

    def _sample(self) -> None:
        try:
            mb = tree_mb(exclude=self._exclude())
        except Exception as err:  # noqa: BLE001 - sampling must never kill a run
            logger.debug("memory sample failed: %s", err)
            return
        self.samples.append((time.monotonic() - self._t0, mb, self.stage))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _read(self) -> None:
        """Take the watcher's whole lines written since the last read (timestamps its own)."""
        while chunk := os.pread(self._out.fileno(), 1 << 20, self._read_to):
            self._read_to += len(chunk)
            *lines, self._partial = (self._partial + chunk).split(b"\n")
            self._lines.extend(line.decode() for line in lines)

    def collect(self, *, settle: bool = False) -> None:
        """Move the watcher's samples so far into `samples`, each labelled with the stage
        current at its time. With `settle`, first wait (a few intervals at most) for a sample
        taken after now, so every stage up to now has all of its samples."""
        if self._watcher is None:
            return
        if settle:
            now = time.monotonic()
            deadline = now + 5 * self.interval + 0.5
            while time.monotonic() < deadline and self._watcher.poll() is None:
                self._read()
                if self._lines and _stamp(self._lines[-1]) >= now:
                    break
                time.sleep(self.interval / 5)
        if not self._out.closed:
            self._read()
        lines, self._lines = self._lines, []
        times = [t for t, _ in self._stages]
        for line in lines:
            t = _stamp(line)
            k = bisect.bisect_right(times, t) - 1
            try:
                mb = float(line.split()[1])
            except (ValueError, IndexError):
                continue
            if t != t or k < 0:  # unreadable (NaN) or before the first stage
                continue
            self.samples.append((t - self._t0, mb, self._stages[k][1]))
        self.samples.sort(key=lambda s: s[0])

    def summary(self) -> dict:
        """Peak, per-stage peaks, ru_maxrss figures and a timeline of at most max_points."""
        self.collect(settle=True)
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
        times = [t for t, _, _ in self.samples]
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        return {
            "measure": MEASURE,
            "peak_mb": round(max((mb for _, mb, _ in self.samples), default=0.0), 2),
            # the first sample: what the process tree held before the run's work began
            "baseline_mb": round(self.samples[0][1], 2) if self.samples else None,
            "ru_maxrss_mb": round(own, 2),
            "children_ru_maxrss_mb": round(children, 2),
            "per_stage_peak_mb": {k: round(v, 2) for k, v in per_stage.items()},
            "interval_s": self.interval,
            # the watcher waits longer after slow samples (`pause_after`): the longest wait,
            # in the whole run and per stage (`widest_gaps`)
            "widest_gap_s": round(max(map(operator.sub, times[1:], times), default=0.0), 4),
            "per_stage_widest_gap_s": widest_gaps(self.samples),
            "num_samples": len(self.samples),
            "timeline": timeline,
        }
