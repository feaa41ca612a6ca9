"""The Hydra callback every experiment tracker shares: log each job's run directory when the job
ends, and a single run that failed (which exits inside its job) when the process exits.

What it does: `TrackerCallback` finds the job's run directory and calls its subclass's `log`;
a tracker that fails never fails the run or the sweep (the error is logged, the run directory
stays complete). `bpe.tracking.to_mlflow.MlflowCallback` and
`bpe.tracking.to_wandb.WandbCallback` are its two subclasses.

What it does not do: read a run directory (`bpe.tracking.to_mlflow.tracked_run`) or talk to a
tracker (each subclass does).
"""

from __future__ import annotations

import atexit
import logging
from pathlib import Path

try:
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover - hydra is a dependency
    Callback = object  # type: ignore[assignment,misc]


class TrackerCallback(Callback):
    """Hydra callback: `log(run_dir, experiments_dir)` for each job when it ends (never raises).

    Subclasses name their tracker (`tracker`) and implement `log`; an error they expect and
    can explain (a locked store) is raised as `TrackerUnavailable` and logged as a warning.
    """

    #: how the logs name the tracker ("MLflow", "W&B")
    tracker = "a tracker"

    def __init__(self) -> None:
        self._pending = None  # the config of a job that started and has not ended
        self._hooked = False

    def on_job_start(self, config, **kwargs) -> None:  # noqa: ARG002
        # subtle: a single run that fails exits (status 1) inside the job, so Hydra never calls
        # on_job_end; the exit hook logs that run (as failed) instead.
        self._pending = config
        if not self._hooked:
            atexit.register(self._log_pending)
            self._hooked = True

    def on_job_end(self, config, job_return=None, **kwargs) -> None:  # noqa: ARG002
        self._pending = None
        self._log(config)

    def _log_pending(self) -> None:
        config, self._pending = self._pending, None
        if config is not None:
            self._log(config)

    def _log(self, config) -> None:
        run_dir = Path(str(config.hydra.runtime.output_dir))
        said = logging.getLogger(type(self).__module__)  # the tracker's own module names it
        try:
            self.log(run_dir, Path(str(config.experiments_dir)))
        except TrackerUnavailable as err:  # the run is complete: only its view is missing
            said.warning("%s", err)
        except Exception as err:  # noqa: BLE001 - tracking must never fail a run or a sweep
            said.error("could not log %s to %s: %s", run_dir, self.tracker, err)

    def log(self, run_dir: Path, experiments_dir: Path) -> None:
        raise NotImplementedError


class TrackerUnavailable(RuntimeError):
    """The tracker's store cannot take the run now; the message names it and the fix."""
