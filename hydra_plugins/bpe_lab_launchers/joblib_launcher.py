"""Hydra's joblib launcher, made to end a sweep cleanly when a job's process is killed.

`hydra/launcher=joblib` (bpe/conf/hydra/launcher/joblib.yaml) is Hydra's `JoblibLauncher` with
one change: when a loky worker dies (SIGKILL, the out-of-memory killer), loky breaks the whole
pool, terminates the jobs still running, and `Parallel` raises `TerminatedWorkerError`, which
Hydra would print as a long traceback, with no SWEEP.md and the runs left at `running`. Here
the error is logged in one line, each job of the batch is returned as ended (its run directory
says how: complete, failed, or `running` with its process gone, which every reader shows as
crashed), so Hydra's `on_multirun_end` writes SWEEP.md and `bpe-train` exits non-zero
(`bpe.cli.sweep_process.SweepReportCallback` counts what did not complete).

SIGTERM or SIGINT to `bpe-train` (the launcher's process) reaches every job: each job's process
gets SIGTERM first, so its runner marks its run failed ("received signal SIGTERM") and stops
its own workers; after a grace period joblib stops what is left (a run its killed job left
`running` is then marked failed by the launcher, naming the signal), and the sweep ends as above:
SWEEP.md written, `bpe-train` non-zero, `experiments/latest` untouched (jobs never move it).

What it does not do: rerun a killed job, or change how jobs are dispatched.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import (
    JoblibLauncher as _HydraJoblibLauncher,
)

from bpe.util.interrupts import sigterm_raises

logger = logging.getLogger(__name__)


def quiet_schema_warning() -> None:
    """Silence Hydra's warning that bpe/conf/hydra/launcher/joblib.yaml shares its name with
    the plugin's schema: it replaces that config on purpose, and Hydra 1.3 merges it onto the
    schema as wanted. Called where configs are composed: `bpe-train`'s process (bpe.cli.train)
    and each joblib worker (which imports this module when Hydra scans for plugins)."""
    warnings.filterwarnings(
        "ignore", message=r"\n'hydra/launcher/joblib' is validated against ConfigStore schema"
    )


quiet_schema_warning()


class JoblibLauncher(_HydraJoblibLauncher):
    """Hydra's joblib launcher; a killed worker ends the batch with one log line, not a crash."""

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from joblib.externals.loky.process_executor import TerminatedWorkerError

        try:
            # SIGTERM and SIGINT first reach the jobs (`_stop_jobs`), then raise
            # KeyboardInterrupt here, which makes joblib stop the pool
            signals = (signal.SIGTERM, signal.SIGINT)
            with sigterm_raises(signals=signals, first=_stop_jobs):
                return super().launch(job_overrides, initial_job_idx)
        except KeyboardInterrupt as err:
            _mark_killed(Path(str(self.config.hydra.sweep.dir)), str(err or "Ctrl-C"))
            logger.error(
                "sweep interrupted (%s): its jobs were stopped; each run directory records how "
                "its job ended, and SWEEP.md lists them",
                err or "Ctrl-C",
            )
            return [
                JobReturn(overrides=list(o), status=JobStatus.COMPLETED, _return_value="stopped")
                for o in job_overrides
            ]
        except TerminatedWorkerError as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            logger.error(
                "a job's process was killed and joblib stopped the jobs running beside it "
                "(%s); each run directory records how its job ended (a killed one reads "
                "crashed), and SWEEP.md lists them",
                first,
            )
            return [
                JobReturn(overrides=list(o), status=JobStatus.COMPLETED, _return_value="killed")
                for o in job_overrides
            ]


#: seconds the jobs get, after SIGTERM, to mark their runs failed before joblib kills them: a
#: job stopping its chunk workers on a loaded machine took more than 10 s; under SLURM's
#: default 30 s between SIGTERM and SIGKILL, so SWEEP.md is still written
GRACE_SECONDS = 20.0

#: consecutive idle observations (0.1 s apart) that count a job as done with its SIGTERM: one
#: observation is not enough on a loaded machine, where a job that still has work to do can
#: get no CPU for a moment and look idle
IDLE_OBSERVATIONS = 3


def _stop_jobs() -> None:
    """Send SIGTERM to this process's job processes (joblib's workers), whose runners then
    mark their runs failed, and wait until they are idle or `GRACE_SECONDS` pass."""
    import psutil

    jobs = psutil.Process().children()
    for job in jobs:
        with contextlib.suppress(psutil.Error):
            job.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    last = {job.pid: _cpu_seconds(job) for job in jobs}
    idle_for = 0
    while time.monotonic() < deadline and idle_for < IDLE_OBSERVATIONS:
        time.sleep(0.1)
        now = {job.pid: _cpu_seconds(job) for job in jobs}
        busy = any(_busy(job, before=last[job.pid], after=now[job.pid]) for job in jobs)
        idle_for = 0 if busy else idle_for + 1
        last = now


def _cpu_seconds(job) -> float | None:
    """CPU seconds a job process has used, or None once it is gone."""
    import psutil

    try:
        times = job.cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system


def _busy(job, *, before: float | None, after: float | None) -> bool:
    """Whether a job process is still working: its own workers alive, runnable or in disk
    wait, or using CPU since the last look (`before` -> `after` CPU seconds)."""
    import psutil

    if after is None:
        return False
    try:
        waiting = job.status() not in (psutil.STATUS_RUNNING, psutil.STATUS_DISK_SLEEP)
        return bool(job.children()) or not waiting or (before is not None and after > before)
    except psutil.Error:
        return False


def _mark_killed(sweep_dir: Path, reason: str) -> None:
    """Mark failed the runs of this sweep that a job left `running` with its process gone: it
    did not stop within `GRACE_SECONDS` and joblib killed it. The record names the signal, as
    the job's own would have."""
    import json

    from bpe.experiment.metrics import MetricsFile
    from bpe.runs.layout import METRICS_FILE
    from bpe.runs.liveness import observed_status

    for path in sweep_dir.glob(f"*/{METRICS_FILE}"):
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if data.get("status") != "running" or observed_status(data) == "running":
            continue
        metrics = MetricsFile.read_back(path, data)
        stopped = KeyboardInterrupt(
            f"sweep interrupted ({reason}): the job did not stop within {GRACE_SECONDS:.0f} s "
            "and was killed"
        )
        metrics.fail(stopped, (data.get("error") or {}).get("stage"))
        logger.warning("marked %s failed: its job was killed after the grace period", path.parent)
