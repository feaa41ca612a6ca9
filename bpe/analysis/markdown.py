"""The few Markdown helpers every report shares: number cells, tables, long cells.

What it does: formats values for table cells (missing -> "n/a", never a made-up number),
renders GitHub tables with `tabulate` without re-parsing numbers, shortens very long cells,
and says what a run's input was (`input_summary`, shared by ANALYSIS.md and SWEEP.md).

What it does not do: decide what a report says (see run_report, sweep, reports).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate

from bpe.runs import schema


def fmt(value: Any, spec: str = ".3f", none: str = "n/a") -> str:
    """Format a number for a table cell; None and NaN become `none`.

    >>> fmt(1.23456), fmt(None), fmt(float("nan"), ".1f")
    ('1.235', 'n/a', 'n/a')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return none
    return format(value, spec)


def measured(value: Any) -> float | None:
    """A recorded number as a float, or None where nothing was measured (missing, NaN, text).

    >>> measured(3), measured(float("nan")), measured(None), measured("n/a")
    (3.0, None, None, None)
    """
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def table(rows: Sequence[Sequence], headers: Sequence[str], colalign=None) -> str:
    """A GitHub Markdown table; cells are shown exactly as given (already formatted)."""
    return tabulate(
        rows, headers=headers, tablefmt="github", colalign=colalign, disable_numparse=True
    )


def clip(text: str, width: int = 40) -> str:
    """Shorten long table cells (a 128-byte run of dashes) and say how long they were.

    >>> clip("-" * 50, 10)
    '----------… (50 chars)'
    """
    return text if len(text) <= width else f"{text[:width]}… ({len(text)} chars)"


def input_summary(metrics: Mapping) -> str | None:
    """`3 files, 1.57 MB, parquet`: a corpus of several files or of records, as metrics.json's
    lineage records it; None for a single plain text file (and older runs), which say no more.

    >>> lineage = {"files": [{}, {}, {}], "format": "parquet", "bytes": 1_572_791}
    >>> input_summary({"lineage": {"input": lineage}})
    '3 files, 1.57 MB, parquet'
    >>> input_summary({"lineage": {"input": {"files": [{}], "format": "text", "bytes": 9}}})
    """
    files = schema.get(metrics, schema.INPUT_FILES, default=[])
    fmt_name = schema.get(metrics, schema.INPUT_FORMAT, default="text")
    if len(files) <= 1 and fmt_name == "text":
        return None
    disk = schema.get(metrics, schema.INPUT_BYTES, default=0)
    return f"{len(files)} file{'s' if len(files) != 1 else ''}, {disk_size(disk)}, {fmt_name}"


def disk_size(num_bytes: float) -> str:
    """`1.20 GB`, `2.50 MB`, `12.0 KB`: a size on disk in the largest unit below it.

    >>> disk_size(1_572_791), disk_size(3e9)
    ('1.57 MB', '3.00 GB')
    """
    for unit, scale in (("GB", 1e9), ("MB", 1e6)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.2f} {unit}"
    return f"{num_bytes / 1e3:.1f} KB"


def rel_path(path: str | Path, root: Path) -> str:
    """A run's path as reports show it: relative to the experiments directory, else its name.

    >>> rel_path("/x/exp/sweeps/1/run", Path("/x/exp")), rel_path("/y/r", Path("/x"))
    ('sweeps/1/run', 'r')
    """
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return Path(path).name


def runs_used(paths: Sequence[str | Path], root: Path) -> list[str]:
    """The collapsed "Runs used" list every generated report carries, one path per run.

    >>> runs_used(["/e/b", "/e/a"], Path("/e"))[2:4]
    ['- `b`', '- `a`']
    """
    lines = ["<details><summary>Runs used</summary>", ""]
    lines += [f"- `{rel_path(p, root)}`" for p in paths]
    return [*lines, "", "</details>", ""]
