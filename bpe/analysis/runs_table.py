"""The runs' table as a file: the loader's `tidy` view of every run, for pandas, R or a sheet.

What it does: `export_table(experiments_dir, path)` writes one row per run, the columns the
reports use (`bpe.analysis.loader.TIDY_COLUMNS`), to a .csv or .parquet file, atomically
(`bpe-report --table FILE`).

What it does not do: choose or rename columns (the loader's `tidy` does), or read a table
back (pandas does: `pd.read_csv`, `pd.read_parquet`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bpe.analysis.loader import load_runs, tidy
from bpe.util.io import atomic_open, atomic_write_text

#: the file types `export_table` writes, by suffix
TABLE_SUFFIXES = (".csv", ".parquet")


def export_table(experiments_dir: str | os.PathLike, path: str | os.PathLike) -> int:
    """Write the `tidy` table of every run under experiments_dir to path (.csv, or .parquet
    with pyarrow), atomically; returns the number of rows. A column of records (`host`) is
    written as JSON text, so both formats hold plain values.

    Raises:
        ValueError: path has another suffix, or parquet is asked for without pyarrow.
    """
    path = Path(path)
    if path.suffix not in TABLE_SUFFIXES:
        raise ValueError(
            f"cannot write a table to {str(path)!r}: name it .csv or .parquet "
            f"(e.g. {path.with_suffix('.csv').name})"
        )
    if path.suffix == ".parquet":  # before the runs are read, not after
        try:
            import pyarrow  # noqa: F401 - pandas writes parquet through it
        except ImportError:
            raise ValueError(
                "writing .parquet needs pyarrow: pip install -e '.[corpora]', or name the table "
                f"{path.with_suffix('.csv').name}"
            ) from None
    frame = tidy(load_runs(experiments_dir))
    for column in frame.columns:
        if frame[column].map(lambda v: isinstance(v, dict | list)).any():
            frame[column] = frame[column].map(
                lambda v: json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else v
            )
    if path.suffix == ".csv":
        atomic_write_text(path, frame.to_csv(index=False))
        return len(frame)
    with atomic_open(path) as f:
        frame.to_parquet(f, index=False)
    return len(frame)
