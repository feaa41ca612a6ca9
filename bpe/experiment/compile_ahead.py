"""Compile the analysis kernels in a helper process while the run trains.

On a machine where Numba has not cached the encoder's kernels yet (a fresh clone, a new
version), the analysis stage used to compile them on first use: about 20 s of one core, with
the other core idle. Here `bpe-train` starts a helper process as soon as its command line is
checked (before Hydra and the run's heavy modules load), which compiles them
(`bpe.tokenizer.warm`) into Numba's on-disk cache at the lowest CPU priority, one way of
encoding after the other, saying when each is warm. The analysis then waits for each way just
before its first use (the segmentation methods' `cut` compiles while the merges are measured)
and loads the machine code from the cache. Measured on a 2-core machine with an empty cache:
the default run took 28.3 s against 14.4 s for the second (38.5 s against 12.1 s before).

What it does:
    * `ways_needed(cfg)`: the ways of encoding the analysis uses (merges; the segmentation
      methods' cut; a PickyBPE tokenizer's replay), in the order it uses them;
    * `start(ways)` starts a helper for the ways `STAMP` does not record as warm for these
      kernel sources, this Numba, this Python, this cache folder and this host (a warm
      machine starts none), or takes over the one `bpe-train` started. The helper runs
      outside the run's process tree (it detaches at once), so training's memory and its
      children's peak never include it; one way at a time it takes a lock of that way, so
      helpers of parallel runs (a sweep's jobs) do not compile one way twice;
    * `Ahead.wait(ways)` relays the helper's log lines (a compile announces itself every few
      seconds, so a wait is never silent) until those ways are warm, and returns the seconds
      waited and the helper's CPU seconds for them, which the runner records as
      `kernel_compile`;
    * `Ahead.stop()` and `stop_all()` end a helper a failed or finished run no longer needs.

One helper, not one per way: the ways share most of their kernels (GPT-2's scanner, the cache
walk), which two helpers side by side compiled twice; the first run then took 34 s.

What it does not do: compile the trainers' or the pre-tokenizer's kernels (their stages do,
timed as `compile`), or anything when Numba is missing or the package folder is read-only
(the analysis then compiles on first use, as before, announced and timed).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO

from bpe.runs.settings import analysis_setting
from bpe.util.kernel_sources import KERNEL_MODULES, PACKAGE, sources_hash

logger = logging.getLogger(__name__)

#: where the helper records which ways it warmed, for what (under the package's folder)
STAMP = PACKAGE / "__pycache__" / "encoder_warm.json"
#: keys the stamp remembers (cache folders, Python versions), the latest kept
STAMP_ENTRIES = 16
#: the lock the stamp is written under (each way has its own beside it)
LOCK = STAMP.with_suffix(".lock")
#: a helper that has not finished after this long is stopped (compiling every way takes ~40 s
#: of CPU on a 2-core machine)
TIMEOUT_SECONDS = 600.0
#: a helper's line when a way is warm: `warm <way> <CPU seconds it took>`
WARM = "warm"


def ways_needed(cfg: Mapping) -> list[str]:
    """The ways of encoding a run's analysis uses (`bpe.tokenizer.warm.WAYS`).

    >>> ways_needed({"analysis": {"segmentations": ["merges"]}, "variant": {"name": "bpe"}})
    ['merges']
    >>> ways_needed({"variant": {"name": "picky"}})
    ['merges', 'cut', 'replay']
    """
    ways = ["merges"]
    if any(m != "merges" for m in analysis_setting(cfg.get("analysis"), "segmentations")):
        ways.append("cut")
    if str((cfg.get("variant") or {}).get("name", "bpe")) == "picky":
        ways.append("replay")
    return ways


def stamp_key() -> dict:
    """What the cached machine code is valid for: the kernels' and the warm-up's sources,
    Numba's and Python's versions, the cache folder Numba was told to use, this host."""
    try:
        numba = metadata.version("numba")
    except metadata.PackageNotFoundError:
        numba = None
    return {
        "sources": sources_hash(PACKAGE, (*KERNEL_MODULES, "tokenizer/warm.py")),
        "numba": numba,
        "python": sys.version,
        "cache_dir": os.environ.get("NUMBA_CACHE_DIR", ""),
        "host": platform.node(),
    }


def warm_ways(key: Mapping | None = None) -> set[str]:
    """The ways `STAMP` records as warm for `key` (default: this machine's `stamp_key`)
    whose cache index files are all still there (a cleared cache is not warm)."""
    key = key or stamp_key()
    for entry in _entries():
        if entry.get("key") != key:
            continue
        ways = entry.get("ways")
        if not isinstance(ways, dict):
            return set()
        return {
            way
            for way, files in ways.items()
            if isinstance(files, list) and all(Path(str(f)).is_file() for f in files)
        }
    return set()


def _entries() -> list[dict]:
    """The stamp's entries (one per key), newest last; [] when absent or unreadable."""
    try:
        stamp = json.loads(STAMP.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    entries = stamp.get("entries") if isinstance(stamp, dict) else None
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def warm_and_record(ways: Sequence[str]) -> list[str]:
    """Warm each way not yet warm here and record it in the stamp; returns the ways it
    warmed. Each way is warmed under a lock of its own, so the helpers of parallel runs (a
    sweep's jobs) do not compile one way twice. Imports Numba."""
    import bpe.util.jit_cache  # noqa: F401 - checks the caches are those of the sources
    from bpe.tokenizer.warm import warm
    from bpe.util.io import exclusive_lock

    warmed = []
    key = stamp_key()
    for way in ways:
        with exclusive_lock(LOCK.with_suffix(f".{way}.lock")):
            if way in warm_ways(key):
                continue  # another helper warmed it while this one waited
            warm([way])
            with exclusive_lock(LOCK):
                _record(key, way, _index_files())
            warmed.append(way)
    if not warmed:
        with exclusive_lock(LOCK):
            _record(key)  # in use: kept ahead of keys not used lately
    return warmed


@dataclass
class Waited:
    """How a wait for the helpers went: wall seconds this process waited, and the CPU seconds
    the helpers spent on the ways it waited for."""

    seconds: float
    helper_cpu_seconds: float


@dataclass
class _Helper:
    """One helper process: its pid, its output, the ways it warms in order, those done."""

    pid: int
    pipe: IO[str]
    ways: list[str]
    #: way -> CPU seconds the helper spent on it, once it is warm
    done: dict[str, float] = field(default_factory=dict)
    #: what of `done` a wait has already counted
    counted: set[str] = field(default_factory=set)

    def pending(self, ways: Sequence[str] | None) -> bool:
        """Whether any of `ways` (default: all of its own) is still to come from it."""
        if self.pipe.closed:
            return False
        wanted = self.ways if ways is None else [w for w in ways if w in self.ways]
        return any(w not in self.done for w in wanted) or (ways is None)

    def relay(self, line: str) -> None:
        """Log a line of its output; a `WARM` line marks a way done instead."""
        if line.startswith(WARM + " "):
            _, way, cpu = (line.split() + ["", ""])[:3]
            with contextlib.suppress(ValueError):
                self.done[way] = float(cpu)
        elif line:
            logger.info("kernel compile helper: %s", line)


class Ahead:
    """The running helpers: `wait` for some ways or all of them, `stop` the rest."""

    def __init__(self, helpers: Sequence[_Helper]) -> None:
        self.helpers = list(helpers)

    def ways(self) -> list[str]:
        """The ways these helpers warm."""
        return [w for h in self.helpers for w in h.ways]

    def wait(
        self, ways: Sequence[str] | None = None, *, timeout: float = TIMEOUT_SECONDS
    ) -> Waited:
        """Relay the helpers' lines until `ways` are warm (default: until every helper ends);
        a helper still at work after `timeout` is stopped."""
        t0 = time.perf_counter()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            waiting = {h.pipe.fileno(): h for h in self.helpers if h.pending(ways)}
            if not waiting:
                break
            ready, _, _ = select.select(list(waiting), [], [], 1.0)
            for fd in ready:
                helper = waiting[fd]
                line = helper.pipe.readline()
                if line:
                    helper.relay(line.rstrip("\n"))
                else:  # the helper closed its output: it ended
                    helper.pipe.close()
                    _forget(helper)
        else:
            logger.warning("kernel compile helpers still running after %.0f s: stopped", timeout)
            self.stop()
        wanted = set(self.ways() if ways is None else ways)
        missing = [w for h in self.helpers for w in h.ways if w in wanted and w not in h.done]
        if missing:
            logger.warning(
                "the kernel compile helper ended before warming %s (its lines above say why): "
                "the analysis compiles what it lacks itself",
                ", ".join(missing),
            )
        cpu = 0.0
        for helper in self.helpers:
            for way in wanted & set(helper.done) - helper.counted:
                cpu += helper.done[way]
                helper.counted.add(way)
        return Waited(time.perf_counter() - t0, cpu)

    def stop(self) -> None:
        """End the helpers still running (what they compiled stays valid in Numba's cache)."""
        for helper in self.helpers:
            if helper.pipe.closed:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(helper.pid, signal.SIGTERM)
            with contextlib.suppress(OSError):
                helper.pipe.close()
            _forget(helper)


#: helpers this process started that have not ended, in start order: a later `start` (the
#: runner's, after `bpe-train` started them before loading its heavy modules) takes them over
_RUNNING: list[_Helper] = []


def _forget(helper: _Helper) -> None:
    if any(h is helper for h in _RUNNING):
        _RUNNING[:] = [h for h in _RUNNING if h is not helper]


def start(ways: Sequence[str], *, announce: bool = True) -> Ahead | None:
    """Start a helper that warms, one after the other, the `ways` not yet warm here (taking
    over a helper this process already started for them), or None when nothing needs warming
    (the stamp says so), Numba is missing, or the package folder cannot hold the stamp.
    `announce`: log what compiles (off where logging is not set up yet)."""
    from bpe.util.machine import numba_installed

    if not numba_installed():
        return None
    taken = [h for h in _RUNNING if not h.pipe.closed and set(h.ways) & set(ways)]
    covered = {w for h in taken for w in h.ways}
    warm = warm_ways(stamp_key())
    missing = [w for w in ways if w not in warm and w not in covered]
    folder = STAMP.parent if STAMP.parent.is_dir() else PACKAGE
    if missing and os.access(folder, os.W_OK):
        helper = _start_one(missing)
        if helper is not None:
            _RUNNING.append(helper)
            taken.append(helper)
    if not taken:
        return None
    ahead = Ahead(taken)
    if announce:
        logger.info(
            "compiling the encoder's kernels (%s) in a helper process while training runs: "
            "this machine has not cached them yet",
            ", ".join(ahead.ways()),
        )
    return ahead


def stop_all() -> None:
    """Stop the helpers this process started that are still at work (`bpe-train` at exit)."""
    Ahead(list(_RUNNING)).stop()


def _start_one(ways: Sequence[str]) -> _Helper | None:
    """A detached helper warming `ways` in order, or None if it did not start."""
    STAMP.parent.mkdir(exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bpe.experiment.compile_ahead", *ways],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": _pythonpath()},
        start_new_session=True,  # Ctrl-C in the terminal is the run's to handle, not its
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the detached helper's pid, from the process that forked it
    proc.wait()
    try:
        return _Helper(int(first), proc.stdout, list(ways))
    except ValueError:
        logger.debug("kernel compile helper for %s did not start: %r", ways, first)
        proc.stdout.close()
        return None


def _pythonpath() -> str:
    """This package's parent first, so the helper imports the same code."""
    parts = [str(PACKAGE.parent), os.environ.get("PYTHONPATH", "")]
    return os.pathsep.join(p for p in parts if p)


def _helper(ways: Sequence[str]) -> int:
    """The helper: detach (the parent prints the pid and exits), then warm each way in turn,
    saying `WARM <way> <CPU seconds>` when it is."""
    pid = os.fork()
    if pid:
        print(pid, flush=True)
        os._exit(0)
    with contextlib.suppress(OSError):
        os.nice(19)  # the run's own work comes first: training's times stay its own
    logging.basicConfig(stream=sys.stdout, format="%(message)s", level=logging.INFO)
    for way in ways:
        cpu0 = time.process_time()
        warm_and_record([way])
        print(f"{WARM} {way} {time.process_time() - cpu0:.3f}", flush=True)
    return 0


def _index_files() -> list[str]:
    """The index files of Numba's cache for every encoder kernel this process has compiled or
    loaded (a cleared cache loses them: `warm_ways` then reads the way as cold)."""
    found = []
    for name, module in list(sys.modules.items()):
        if not name.startswith(("bpe.tokenizer.compiled", "bpe.text.gpt2_scanner")):
            continue
        for value in vars(module).values():
            if getattr(value, "overloads", None) and getattr(value, "_cache", None) is not None:
                cache_file = getattr(value._cache, "_cache_file", None)  # Numba's own layout
                path = getattr(cache_file, "_index_path", None)
                if path is not None and Path(path).is_file():
                    found.append(str(path))
    return sorted(set(found))


def _record(key: Mapping, way: str | None = None, files: Sequence[str] = ()) -> None:
    """Record `way` as warm for `key` (with its cache's index files) in the stamp, written
    atomically: this key's entry last, at most `STAMP_ENTRIES` kept (the least recently
    recorded go first)."""
    entries = _entries()
    ways = next((e.get("ways") for e in entries if e.get("key") == key), None)
    ways = dict(ways) if isinstance(ways, dict) else {}
    if way is not None:
        ways[way] = list(files)
    entries = [e for e in entries if e.get("key") != key]
    entries.append({"key": dict(key), "ways": ways})
    tmp = STAMP.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"entries": entries[-STAMP_ENTRIES:]}), encoding="utf-8")
    os.replace(tmp, STAMP)


if __name__ == "__main__":
    sys.exit(_helper(sys.argv[1:]))
