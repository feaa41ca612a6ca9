"""What a number was measured on: the machine, the interpreter and the load, as a record and a line.

What it does:
    * `host()`: the CPU model, CPUs (all and usable), RAM, platform, Python and the load
      average (1, 5, 15 minutes) at the moment it is called, as a JSON-ready dict;
    * `host_line(record)`: that record as the sentence a report opens with;
    * `load_span(records)`: the 1-minute load averages of several records as one range, the
      way a cross-run report says what load its runs were measured under;
    * `versions(names)`: the installed version of each distribution (None: not installed), as
      runs and benchmarks record them.

Every run records `host()` in environment.json (under `ENV_KEY`) when it starts, and every benchmark
in its results; every report that publishes a number from them names the machine through
`host_line`, so "measured on" has one definition.

What it does not do: choose which packages to record or read the code's git sha (each run's
environment record and each benchmark's results do), or judge whether a load was quiet.
"""

from __future__ import annotations

import importlib.util
import os
import platform
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path

#: the key environment.json keeps `host()` under (`bpe.experiment.environment.capture`), which
#: ANALYSIS.md and the loader read
ENV_KEY = "host"


def cpu_model() -> str | None:
    """The CPU's model name as the kernel reports it (None where /proc/cpuinfo is missing)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip() or None
    return None


def _ram_gb() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return None
    return round(pages * size / 1e9, 1)


def host() -> dict:
    """This machine and its load now, as a JSON-ready record.

    >>> record = host()
    >>> sorted(record)
    ['cpu_model', 'cpus', 'cpus_usable', 'load_average_at_start', 'platform', 'python', 'ram_gb']
    >>> len(record["load_average_at_start"])
    3
    """
    from bpe.util.workers import default_num_workers  # multiprocessing: not for tokenizers

    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - a system without a load average
        load = None
    return {
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "cpus_usable": default_num_workers(),
        "ram_gb": _ram_gb(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average_at_start": load,
    }


def host_line(record: Mapping, *, load: bool = True) -> str:
    """The sentence that names a machine (and, with `load`, the load it was measured under).

    >>> host_line({"cpu_model": "EPYC", "cpus": 2, "cpus_usable": 2, "ram_gb": 25.3,
    ...            "platform": "Linux-6.1", "python": "3.11.7",
    ...            "load_average_at_start": [0.32, 1.57, 1.93]})[38:]
    'Linux-6.1, Python 3.11.7; load average at start 0.32, 1.57, 1.93'
    >>> host_line({"cpus": 4, "python": "3.12.1"}, load=False)
    'unknown CPU, 4 CPUs (? usable), ? GB RAM; Python 3.12.1'
    """
    text = (
        f"{record.get('cpu_model') or 'unknown CPU'}, {record.get('cpus') or '?'} CPUs "
        f"({record.get('cpus_usable') or '?'} usable), {record.get('ram_gb') or '?'} GB RAM; "
        + (f"{record['platform']}, " if record.get("platform") else "")
        + f"Python {record.get('python') or '?'}"
    )
    averages = record.get("load_average_at_start")
    if load and averages:
        text += f"; load average at start {', '.join(str(x) for x in averages)}"
    return text


def load_span(records: Iterable[Mapping]) -> str | None:
    """The 1-minute load averages of several records as one range (None if none recorded).

    >>> load_span([{"load_average_at_start": [0.3, 1, 1]}, {"load_average_at_start": [1.9, 1, 1]}])
    '0.3-1.9'
    >>> load_span([{"load_average_at_start": [0.5, 0, 0]}, {}])
    '0.5'
    >>> load_span([{}]) is None
    True
    """
    ones = [r["load_average_at_start"][0] for r in records if r.get("load_average_at_start")]
    if not ones:
        return None
    low, high = min(ones), max(ones)
    return f"{low:g}" if low == high else f"{low:g}-{high:g}"


def versions(names: Iterable[str]) -> dict[str, str | None]:
    """The installed version of each distribution, None where it is not installed.

    >>> versions(["numpy", "no-such-distribution"])["no-such-distribution"] is None
    True
    """
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def numba_installed() -> bool:
    """Whether Numba and NumPy (which it needs) can be found, without importing either: the
    one test of the `compiled` extra, for the compiled trainer, scanner and encoder alike."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in ("numba", "numpy"))
    except ImportError:  # a finder that refuses it outright
        return False
