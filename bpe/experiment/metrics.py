"""metrics.json: the run's measured facts, rewritten atomically as the run progresses.

What it does: holds the metrics dict, writes it with status `running` when the run starts,
`failed` (with the error and the stage it happened in) when anything goes wrong, and
`complete` last, after every other artifact is on disk. Each write replaces the file
atomically, so a reader never sees half a file. The `running` record names the process
(host, pid, start time: `bpe.runs.liveness`), so a reader can tell a live run from one killed
without a word (SIGKILL, OOM killer, power cut).

A full disk must not keep the failure from being recorded: `reserve()` sets aside
`RESERVE_BYTES` next to metrics.json when the run starts, and `fail()` releases it just before
writing the failure (falling back to a record without the bulky lists when even that does not
fit). If nothing can be written at all, the file keeps saying `running` and readers report the
run as crashed once its process is gone.

What it does not do: measure anything itself, or format reports.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import traceback
from pathlib import Path
from typing import Any

from bpe.runs.liveness import this_process
from bpe.util.io import atomic_write_text

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1

#: Space set aside for the failure record. A whole run's metrics.json measures about 5-15 KB
#: (tinystories_sample, vocab 400-2000) and the fallback record without the bulky lists a few
#: KB plus at most 4 KB of traceback; small, because it also raises the least free space a run
#: needs to start (`bpe.cli.train`).
RESERVE_BYTES = 64 * 1024

#: Keys left out of the fallback failure record when the full one does not fit on the disk.
_BULKY_KEYS = ("longest_tokens", "token_lengths")


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


class MetricsFile:
    """The metrics of one run and their file. Keys follow experiments/README.md."""

    def __init__(self, path: Path, run: dict[str, Any]) -> None:
        self.path = path
        self.reserve_path = path.with_name(f".{path.name}.reserve")
        self.data: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "status": "running",
            "error": None,
            "started_at": now_iso(),
            "finished_at": None,
            "process": this_process(),
            "run": run,
        }

    @classmethod
    def read_back(cls, path: Path, data: dict[str, Any]) -> MetricsFile:
        """The record of a run already on disk (`data`, read from `path`), to be marked (e.g.
        failed) by a process other than the run's own."""
        record = cls(path, data.get("run") or {})
        record.data = data
        return record

    def update(self, **values: Any) -> None:
        self.data.update(values)

    def write(self) -> None:
        atomic_write_text(self.path, json.dumps(self.data, indent=1, sort_keys=False) + "\n")

    def reserve(self) -> None:
        """Set aside the space the failure record needs (released by `fail` and `complete`).

        Raises:
            OSError: the disk cannot hold it, naming the run directory and the fix.
        """
        try:
            fd = os.open(self.reserve_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            finally:
                os.close(fd)
        except OSError as err:
            self.release()
            raise type(err)(
                err.errno,
                f"cannot set aside {RESERVE_BYTES // 1024} KB for the run's records in "
                f"{str(self.path.parent)!r} ({err.strerror}); free some space or pass another "
                "experiments_dir",
            ) from None

    def release(self) -> None:
        """Give the reserved space back to the disk (no-op when nothing is reserved)."""
        try:
            self.reserve_path.unlink()
        except FileNotFoundError:
            pass

    def fail(self, error: BaseException, stage: str | None) -> None:
        """Mark the run failed with the error, where it happened, and its traceback.

        Never raises for a disk that cannot take the record: that is logged (naming the file),
        so the caller's error is the one that propagates.
        """
        self.data["status"] = "failed"
        self.data["finished_at"] = now_iso()
        message = str(error) or type(error).__name__
        self.data["error"] = {
            "type": type(error).__name__,
            "message": message,
            "stage": stage,
            "traceback": "".join(traceback.format_exception(error)),
        }
        self.release()
        try:
            self.write()
            return
        except OSError as err:
            logger.warning(
                "full failure record did not fit in %s (%s); writing a short one",
                self.path,
                err.strerror,
            )
        memory = self.data.get("memory")
        if isinstance(memory, dict):
            self.data["memory"] = {k: v for k, v in memory.items() if k != "timeline"}
        for key in _BULKY_KEYS:
            self.data.pop(key, None)
        self.data["error"]["traceback"] = self.data["error"]["traceback"][-4000:]
        try:
            self.write()
        except OSError as err:
            logger.error(
                "could not record the failure in %s (%s): it still says running; readers "
                "show the run as crashed once this process has exited",
                self.path,
                err.strerror,
            )

    def as_complete(self) -> dict:
        """The metrics as they will read once complete (for rendering the final report)."""
        self.data["finished_at"] = self.data.get("finished_at") or now_iso()
        return {**self.data, "status": "complete"}

    def complete(self) -> None:
        """Flip status to complete (one atomic write): call this last."""
        self.data["status"] = "complete"
        self.data["finished_at"] = self.data.get("finished_at") or now_iso()
        # the reserve goes first: on a nearly full disk it is what makes room for this write
        self.release()
        self.write()
