"""A sweep as a process: how its jobs ended (`SweepOutcome`, read by `bpe-train` for its exit
status), the lock that keeps two sweeps out of one directory, and the Hydra callback that
records a search when a multirun starts (`bpe.runs.search`) and writes SWEEP.md when it ends.

What it does not do: render the report (`bpe.analysis.sweep.report`).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from bpe.analysis.loader import load_tidy
from bpe.analysis.sweep.report import write_sweep_report
from bpe.runs.layout import SWEEP_FILE
from bpe.runs.search import search_record, write_search
from bpe.util.io import pid_alive

try:
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover - hydra is a dependency
    Callback = object  # type: ignore[assignment,misc]

logger = logging.getLogger(__name__)


#: What the last multirun of this process left: its directory and the jobs that did not
#: complete (`SweepOutcome`), read by `bpe-train` to set its exit status.
LAST_SWEEP: dict[str, object] = {}


@dataclass(frozen=True)
class SweepOutcome:
    """How a sweep's jobs ended: `(job directory name, status, error or None)` for each job
    that did not complete; empty when every job completed."""

    sweep_dir: Path
    jobs: int
    unfinished: tuple[tuple[str, str, str | None], ...]

    def message(self) -> str:
        """One line for stderr: how many jobs did not complete, each with why, and SWEEP.md.

        >>> SweepOutcome(Path("s"), 2, (("0_a", "failed", "boom"),)).message()
        '1 of 2 job(s) did not complete: 0_a failed (boom); see s/SWEEP.md'
        """
        said = "; ".join(
            f"{name} {status}" + (f" ({error})" if error else "")
            for name, status, error in self.unfinished
        )
        return (
            f"{len(self.unfinished)} of {self.jobs} job(s) did not complete: {said}; "
            f"see {self.sweep_dir / SWEEP_FILE}"
        )


def sweep_outcome(sweep_dir: Path) -> SweepOutcome:
    """Read each job's status (a `running` job whose process is gone reads crashed)."""
    _, runs = load_tidy(sweep_dir, hint="pass a sweep directory written by `bpe-train -m`")
    bad = runs[runs["status"] != "complete"]
    unfinished = tuple(
        (
            Path(r["run_dir"]).name,
            str(r["status"]),
            r["error"] if isinstance(r["error"], str) else None,
        )
        for _, r in bad.sort_values("run_dir").iterrows()
    )
    return SweepOutcome(sweep_dir, len(runs), unfinished)


#: The file a running sweep holds in its directory: `{"pid": ...}` of its `bpe-train -m`.
SWEEP_LOCK = ".sweep.lock"


def claim_sweep_dir(sweep_dir: Path) -> None:
    """Take the sweep directory for this process, or refuse it while another live sweep holds
    it (two sweeps into one directory would mix their jobs and logs). A lock left by a sweep
    whose process is gone is taken over.

    Raises:
        FileExistsError: another running sweep holds sweep_dir.
    """
    sweep_dir.mkdir(parents=True, exist_ok=True)
    lock = sweep_dir / SWEEP_LOCK
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                pid = int(json.loads(lock.read_text("utf-8"))["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                pid = None
            if pid is not None and pid != os.getpid() and pid_alive(pid):
                raise FileExistsError(
                    f"sweep directory {str(sweep_dir)!r} is used by another running sweep "
                    f"(process {pid}); pass another hydra.sweep.dir, or wait for it to end"
                ) from None
            lock.unlink(missing_ok=True)  # left by a sweep that is gone (or by this process)
            continue
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps({"pid": os.getpid()}))
        return


class SweepReportCallback(Callback):
    """Hydra callback: write SWEEP.md when a multirun ends (never raises), and record in
    `LAST_SWEEP` which jobs did not complete, so `bpe-train -m` exits non-zero for them."""

    def on_multirun_start(self, config, **kwargs) -> None:  # noqa: ARG002
        LAST_SWEEP.clear()
        LAST_SWEEP["sweep_dir"] = Path(config.hydra.sweep.dir)
        claim_sweep_dir(Path(config.hydra.sweep.dir))
        record = search_record(config)
        if record is not None:  # a search: its space is in no job's files
            write_search(Path(config.hydra.sweep.dir), record)

    def on_multirun_end(self, config, **kwargs) -> None:  # noqa: ARG002
        sweep_dir = Path(config.hydra.sweep.dir)
        try:
            write_sweep_report(sweep_dir)
            LAST_SWEEP["outcome"] = sweep_outcome(sweep_dir)
        except Exception as err:  # noqa: BLE001 - a report failure must not fail the sweep
            logger.error("could not write the sweep report: %s (run bpe-report SWEEP_DIR)", err)
