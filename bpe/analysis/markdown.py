"""The few Markdown helpers every report shares: number cells, tables, long cells.

What it does: formats values for table cells (missing -> "n/a", never a made-up number),
renders GitHub tables with `tabulate` without re-parsing numbers, shortens very long cells.

What it does not do: decide what a report says (see run_report, sweep, reports).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tabulate import tabulate


def fmt(value: Any, spec: str = ".3f", none: str = "n/a") -> str:
    """Format a number for a table cell; None and NaN become `none`.

    >>> fmt(1.23456), fmt(None), fmt(float("nan"), ".1f")
    ('1.235', 'n/a', 'n/a')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return none
    return format(value, spec)


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
