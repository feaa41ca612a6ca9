"""Who is writing a run, and whether that process still exists: the facts behind `crashed`.

What it does: `this_process()` names the current process by host, pid and start time (the
pid alone is not enough: the OS reuses pids). A run records it in metrics.json when it starts;
`observed_status(metrics)` turns a recorded `running` into `crashed` when that process is gone
(no such pid, a zombie, or a pid now held by a process that started at another time) and into
`stale` when the run was written on another host, where this machine cannot look.

A process killed with SIGKILL, by the OOM killer or by a power cut cannot record its own end,
so readers derive it from here; every other status is returned as recorded.

What it does not do: write anything, or kill anything.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import psutil

#: Statuses a reader can observe besides the recorded running / complete / failed.
CRASHED = "crashed"
STALE = "stale"

#: How far two readings of one process's start time may differ (psutil derives it from clock
#: ticks since boot, so the same process always reads the same to well under this).
_START_TOLERANCE_S = 0.5


def this_process() -> dict[str, Any]:
    """Host, pid and start time (seconds since the epoch) of the calling process.

    >>> info = this_process()
    >>> info["pid"] == os.getpid(), sorted(info)
    (True, ['create_time', 'host', 'pid'])
    """
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "create_time": psutil.Process().create_time(),
    }


def process_alive(process: dict[str, Any]) -> bool | None:
    """Whether the recorded process still runs: True, False, or None when it cannot be checked.

    None: the record names another host (or no host, pid and start time at all).

    >>> process_alive(this_process()), process_alive({})
    (True, None)
    """
    host, pid, started = process.get("host"), process.get("pid"), process.get("create_time")
    if host != socket.gethostname() or not isinstance(pid, int):
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False  # dead, only waiting for its parent to read the exit code
        now_started = proc.create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True  # it exists; another user's process with the same pid is still a process
    if isinstance(started, int | float) and abs(now_started - started) > _START_TOLERANCE_S:
        return False  # the pid was reused by a later process
    return True


def observed_status(metrics: dict[str, Any]) -> str:
    """The status a reader should show: the recorded one, or crashed / stale for a dead `running`.

    Runs written before the process was recorded keep `running` (nothing to check).

    >>> observed_status({"status": "complete"})
    'complete'
    >>> observed_status({"status": "running", "process": this_process()})
    'running'
    >>> observed_status({"status": "running", "process": {**this_process(), "create_time": 0.0}})
    'crashed'
    >>> observed_status({"status": "running", "process": {**this_process(), "host": "elsewhere"}})
    'stale'
    """
    status = metrics.get("status") or "unknown"
    process = metrics.get("process")
    if status != "running" or not isinstance(process, dict):
        return status
    alive = process_alive(process)
    if alive is None:
        return STALE
    return "running" if alive else CRASHED


def explain(metrics: dict[str, Any]) -> str | None:
    """One sentence on why a run reads as crashed or stale; None for any other status.

    >>> explain({"status": "complete"}) is None
    True
    """
    status = observed_status(metrics)
    process = metrics.get("process") or {}
    who = f"process {process.get('pid')} on host {process.get('host')!r}"
    if status == CRASHED:
        return (
            f"{who} is gone but never recorded an end (killed with SIGKILL, by the OOM killer "
            "or a power cut?); its files are unfinished leftovers"
        )
    if status == STALE:
        return (
            f"still marked running by {who}, which this machine cannot check; look there, "
            "or treat the run as unfinished"
        )
    return None
