"""metrics.json: the run's measured facts, rewritten atomically as the run progresses.

What it does: holds the metrics dict, writes it with status `running` when the run starts,
`failed` (with the error and the stage it happened in) when anything goes wrong, and
`complete` last, after every other artifact is on disk. Each write replaces the file
atomically, so a reader never sees half a file.

What it does not do: measure anything itself, or format reports.
"""

from __future__ import annotations

import datetime as dt
import json
import traceback
from pathlib import Path
from typing import Any

from bpe._io import atomic_write_text

SCHEMA_VERSION = 1


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


class MetricsFile:
    """The metrics of one run and their file. Keys follow experiments/README.md."""

    def __init__(self, path: Path, run: dict[str, Any]) -> None:
        self.path = path
        self.data: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "status": "running",
            "error": None,
            "started_at": now_iso(),
            "finished_at": None,
            "run": run,
        }

    def update(self, **values: Any) -> None:
        self.data.update(values)

    def write(self) -> None:
        atomic_write_text(self.path, json.dumps(self.data, indent=1, sort_keys=False) + "\n")

    def fail(self, error: BaseException, stage: str | None) -> None:
        """Mark the run failed with the error, where it happened, and its traceback."""
        self.data["status"] = "failed"
        self.data["finished_at"] = now_iso()
        message = str(error) or type(error).__name__
        self.data["error"] = {
            "type": type(error).__name__,
            "message": message,
            "stage": stage,
            "traceback": "".join(traceback.format_exception(error)),
        }
        self.write()

    def as_complete(self) -> dict:
        """The metrics as they will read once complete (for rendering the final report)."""
        self.data["finished_at"] = self.data.get("finished_at") or now_iso()
        return {**self.data, "status": "complete"}

    def complete(self) -> None:
        """Flip status to complete: call this last."""
        self.data["status"] = "complete"
        self.data["finished_at"] = self.data.get("finished_at") or now_iso()
        self.write()
