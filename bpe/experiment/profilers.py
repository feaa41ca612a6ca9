"""Profilers for the training stages: none, cProfile, or scalene in a child process.

What it does:
    * `cprofile`: runs the stages under `cProfile` in this process (pre-tokenization workers are
      separate processes and are not profiled); saves `profile/cprofile.pstats`, the pstats text
      report `profile/cprofile.txt`, and `profile/summary.json` (top functions);
    * `scalene`: runs the stages in a child `scalene run -o profile/scalene.json <target> ---
      <args>` process (scalene must own the interpreter from the start: calling
      `scalene_profiler.start()` under plain python exits the process, so we never do), forwards
      the child's log lines (stages, warnings) to this process's loggers as they come and its
      progress bars to the log every few seconds, then reads the result back and writes
      `profile/summary.json` (top functions and lines by CPU, with memory);
    * `none`: just runs the stages.

What it does not do: render Markdown (ANALYSIS.md embeds `summary.json` at report time).
"""

from __future__ import annotations

import codecs
import cProfile
import io
import json
import logging
import os
import pickle
import pstats
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from bpe.runs.layout import PROFILE_SUMMARY
from bpe.util.io import PROJECT_ROOT, atomic_write_text

if TYPE_CHECKING:
    from bpe.pipeline.plan import RunPlan

logger = logging.getLogger(__name__)

PROFILERS = ("none", "cprofile", "scalene")
SCALENE_TARGET = Path(__file__).with_name("scalene_target.py")


def check_profiler(name: str) -> None:
    if name not in PROFILERS:
        raise ValueError(f"unknown profiler {name!r}; choose one of {list(PROFILERS)}")


def run_cprofile(fn: Callable[[], Any], out_dir: Path, *, top_n: int) -> Any:
    """Run fn under cProfile; write pstats, a text report and summary.json. Returns fn()."""
    out_dir.mkdir(parents=True, exist_ok=True)
    prof = cProfile.Profile()
    try:
        return prof.runcall(fn)
    finally:
        prof.dump_stats(str(out_dir / "cprofile.pstats"))
        stats = pstats.Stats(prof)
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(top_n)
        atomic_write_text(out_dir / "cprofile.txt", text.getvalue())
        summary = {"profiler": "cprofile", "functions": _pstats_top(stats, top_n)}
        atomic_write_text(out_dir / PROFILE_SUMMARY, json.dumps(summary, indent=1) + "\n")


def _pstats_top(stats: pstats.Stats, top_n: int) -> list[dict]:
    total = max(stats.total_tt, 1e-12)
    rows = []
    for (filename, lineno, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():
        rows.append(
            {
                "function": func,
                "file": _short(filename),
                "line": lineno,
                "calls": ncalls,
                "self_seconds": round(tottime, 4),
                "cumulative_seconds": round(cumtime, 4),
                "self_percent": round(100 * tottime / total, 2),
            }
        )
    rows.sort(key=lambda r: (-r["self_seconds"], r["file"], r["line"]))
    return rows[:top_n]


def _short(filename: str) -> str:
    """Path relative to the project (or site-packages / stdlib tail), never a machine path."""
    p = Path(filename)
    try:
        return str(p.resolve().relative_to(PROJECT_ROOT))
    except (ValueError, OSError):
        pass
    parts = p.parts
    for marker in ("site-packages", "lib"):
        if marker in parts:
            idx = len(parts) - 1 - parts[::-1].index(marker)
            return "/".join(parts[idx + 1 :]) or p.name
    return p.name


#: A log line of the child (see `bpe.experiment.scalene_target`): level, logger, message.
_CHILD_LOG = re.compile(r"^bpe-child-log (\d+) ([\w.]+): (.*)$", re.DOTALL)
#: How often a progress bar line of the child reaches the log (the last one always does).
PROGRESS_LOG_SECONDS = 5.0


def _pieces(stream: BinaryIO) -> Iterator[str]:
    """Lines of a byte stream as they arrive, also split at carriage returns (tqdm redraws)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    buf = ""
    while chunk := stream.read1(4096):
        buf += decoder.decode(chunk)
        *done, buf = re.split(r"[\r\n]", buf)
        yield from (piece for piece in done if piece.strip())
    buf += decoder.decode(b"", final=True)
    if buf.strip():
        yield buf


def forward_child_output(stream: BinaryIO, tail: list[str]) -> None:
    """Send the child's output to our loggers as it comes; keep the last lines in `tail`.

    Log lines keep their level and logger name; progress bars are logged at most every
    `PROGRESS_LOG_SECONDS` (plus the last one); anything else (scalene's own messages) is
    logged as is.
    """
    last_logged, pending = 0.0, None
    for piece in _pieces(stream):
        tail.append(piece)
        del tail[:-15]
        match = _CHILD_LOG.match(piece)
        if match:
            if pending is not None:  # the bar's final state before the next stage line
                logger.info("child progress: %s", pending)
                pending = None
            level, name, message = match.groups()
            logging.getLogger(name).log(int(level), "%s", message)
        elif "|" in piece and "%" in piece:  # a tqdm bar
            pending = piece.strip()
            if time.monotonic() - last_logged >= PROGRESS_LOG_SECONDS:
                logger.info("child progress: %s", pending)
                last_logged, pending = time.monotonic(), None
        else:
            logger.info("scalene: %s", piece.strip())
    if pending is not None:
        logger.info("child progress: %s", pending)


def run_scalene(
    plan: RunPlan,
    out_dir: Path,
    *,
    top_n: int,
    cpu_only: bool = False,
    timeout: float = 3600,
) -> Any:
    """Train `plan` (`bpe.pipeline.train_planned`) in a scalene-profiled child; return its
    TrainResult.

    The child trains the plan as it was checked here (nothing is planned again). Its stage
    lines reach this process's log as they happen, and so do its progress bars (throttled)
    when the plan's spec asks for them.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    profile_json = out_dir / "scalene.json"
    with tempfile.TemporaryDirectory() as tmp:
        # pickled, not JSON: the plan holds typed values (a `Variant`, a `Corpus`, a loaded
        # parent), and the child is this interpreter running this package
        spec = Path(tmp) / "plan.pickle"
        result_path = Path(tmp) / "result.pickle"
        spec.write_bytes(pickle.dumps({"plan": plan, "result_path": str(result_path)}))
        # --program-path: profile the whole package, not only the target's own directory.
        cmd = [
            sys.executable,
            "-m",
            "scalene",
            "run",
            "-o",
            str(profile_json),
            "--program-path",
            str(PROJECT_ROOT / "bpe"),
        ]
        if cpu_only:
            cmd.append("--cpu-only")
        cmd += [str(SCALENE_TARGET), "---", str(spec)]
        logger.info("profiling with scalene in a child process: %s", profile_json)
        env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
        tail: list[str] = []
        # stdout and stderr in one pipe: scalene and the child both may write to either.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        reader = threading.Thread(
            target=forward_child_output, args=(proc.stdout, tail), daemon=True
        )
        reader.start()
        try:
            returncode = proc.wait(timeout=timeout)
        except BaseException:  # timeout, Ctrl-C, SIGTERM: the child must not outlive the run
            proc.kill()
            proc.wait()
            raise
        finally:
            # subtle: a killed child's own workers may hold the pipe open for a moment; never
            # wait on them forever (the daemon reader ends with the pipe or the process)
            reader.join(timeout=30)
            if not reader.is_alive():
                proc.stdout.close()
        if returncode != 0 or not result_path.is_file():
            detail = "\n".join(tail)
            raise RuntimeError(f"scalene run failed (exit {returncode}): {detail}")
        with open(result_path, "rb") as f:
            result = pickle.load(f)
    if not profile_json.is_file():
        raise RuntimeError(f"scalene did not write {profile_json}; is scalene installed?")
    summary = summarize_scalene(json.loads(profile_json.read_text("utf-8")), top_n=top_n)
    atomic_write_text(out_dir / PROFILE_SUMMARY, json.dumps(summary, indent=1) + "\n")
    return result


def waiting_lines() -> set[tuple[str, int]]:
    """(file, line) of code that only waits in a thread of its own: the progress clock's loop
    (`bpe.util.progress.Progress._run`). Scalene counts a thread's time inside a C call as
    native CPU even while it sleeps (a profiled OWT run showed the clock's `wait` as its hottest
    line, 19.5%), so these lines are the harness's, never BPE's hot spots."""
    import inspect

    from bpe.util import progress

    source, start = inspect.getsourcelines(progress.Progress._run)
    short = _short(inspect.getsourcefile(progress) or "")
    return {(short, n) for n in range(start, start + len(source))}


def summarize_scalene(profile: dict, *, top_n: int) -> dict:
    """Top functions and lines by total CPU % (python + native), with memory, from scalene JSON.
    The lines that only wait in a harness thread (`waiting_lines`) are left out, and their
    share is recorded as `waiting_percent`."""
    functions, lines = [], []
    waiting, waiting_percent = waiting_lines(), 0.0
    for filename, info in (profile.get("files") or {}).items():
        short = _short(filename)
        for kind, bucket in (("functions", functions), ("lines", lines)):
            for row in info.get(kind) or []:
                cpu_py = float(row.get("n_cpu_percent_python") or 0.0)
                cpu_c = float(row.get("n_cpu_percent_c") or 0.0)
                if (short, row.get("lineno")) in waiting:
                    waiting_percent += (cpu_py + cpu_c) if kind == "lines" else 0.0
                    continue
                if cpu_py + cpu_c <= 0 and not row.get("n_peak_mb"):
                    continue
                bucket.append(
                    {
                        "file": short,
                        "line": row.get("lineno"),
                        "code": (row.get("line") or "").strip()[:80],
                        "cpu_percent": round(cpu_py + cpu_c, 2),
                        "cpu_python_percent": round(cpu_py, 2),
                        "cpu_native_percent": round(cpu_c, 2),
                        "peak_mb": round(float(row.get("n_peak_mb") or 0.0), 2),
                        "alloc_mb": round(float(row.get("n_malloc_mb") or 0.0), 2),
                    }
                )
    for bucket in (functions, lines):
        bucket.sort(key=lambda r: (-r["cpu_percent"], r["file"], r["line"] or 0))
    return {
        "profiler": "scalene",
        "elapsed_seconds": profile.get("elapsed_time_sec"),
        "max_footprint_mb": profile.get("max_footprint_mb"),
        "functions": functions[:top_n],
        "lines": lines[:top_n],
        "waiting_percent": round(waiting_percent, 2),
    }
