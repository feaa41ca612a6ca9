"""How many worker processes to use, and how they start: the worker-count policy, in one place.

What it does:
    * `default_num_workers`: the usable CPUs (affinity-aware, so a SLURM allocation counts);
    * `resolve_num_workers`: None -> every usable CPU, else a checked int >= 1;
    * `fair_share` / `workers_per_job`: a job's share when a launcher runs several at once
      (joblib's n_jobs, submitit_local's whole sweep, SLURM's cpus_per_task);
    * `plan_workers` / `start_method_for`: the cap at the CPUs, in-process for small inputs
      and inside daemonic processes, and fork vs forkserver.

What it does not do: cut chunks (`bpe.corpus.chunks`), start processes (`bpe.util.pool`),
or read Hydra's config (`bpe.experiment.launching.launcher_info` passes the launcher's numbers
in).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import threading
from dataclasses import dataclass

logger = logging.getLogger(__name__)

#: Files smaller than this are processed in-process: starting workers costs more than it saves.
DEFAULT_MIN_PARALLEL_BYTES = 256 * 1024


def default_num_workers() -> int:
    """Usable CPUs (affinity-aware), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def resolve_num_workers(num_workers: int | None) -> int:
    """None -> every usable CPU; otherwise the number itself, which must be >= 1.

    >>> resolve_num_workers(3), resolve_num_workers(None) == default_num_workers()
    (3, True)
    """
    if num_workers is None:
        return default_num_workers()
    if isinstance(num_workers, bool) or int(num_workers) != num_workers or num_workers < 1:
        raise ValueError(f"num_workers={num_workers!r} must be an int >= 1 (or None for all CPUs)")
    return int(num_workers)


def fair_share(n_jobs: int) -> int:
    """Workers per job when a launcher runs `n_jobs` jobs at once, so jobs x workers <= CPUs.

    `n_jobs` counts as joblib counts it: -1 is every usable CPU, -2 all but one, and so on.

    >>> fair_share(default_num_workers())
    1
    """
    cpus = default_num_workers()
    at_once = n_jobs if n_jobs > 0 else max(1, cpus + 1 + n_jobs)
    return max(1, cpus // at_once)


@dataclass(frozen=True)
class WorkerPlan:
    """How many workers map over the chunks and how they start."""

    workers: int
    #: "in-process", "fork", "forkserver" or "spawn"
    start_method: str


def start_method_for(workers: int) -> str:
    """The start method for `workers` worker processes of this process ("in-process" for 1).

    subtle: forking a multi-threaded process can copy a lock another thread holds (logging, a
    memory sampler thread inside psutil) into the child, which then hangs forever. fork is the
    fastest start and safe with one thread; with more workers come from a clean fork server
    instead (spawn where there is none). A run keeps one thread for this reason: its memory
    watcher is a process (`bpe.experiment.memory`).
    """
    if workers <= 1:
        return "in-process"
    methods = mp.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


def plan_workers(
    num_workers: int | None,
    *,
    num_bytes: int,
    min_parallel_bytes: int = DEFAULT_MIN_PARALLEL_BYTES,
) -> int:
    """How many workers to ask for, before the chunks are known (see `plan` for the policy).

    >>> plan_workers(1, num_bytes=10**6), plan_workers(2, num_bytes=100, min_parallel_bytes=1000)
    (1, 1)
    """
    workers = resolve_num_workers(num_workers)
    cpus = default_num_workers()
    if workers > cpus:
        logger.info("num_workers=%d capped at %d: the usable CPUs", workers, cpus)
        workers = cpus
    if workers > 1 and num_bytes < min_parallel_bytes:
        return 1  # starting processes would cost more than the work
    if workers > 1 and mp.current_process().daemon:
        logger.info(
            "running in-process instead of %d workers: this is a daemonic process (e.g. a "
            "multiprocessing.Pool worker), which may not start child processes",
            workers,
        )
        return 1
    return workers


def workers_per_job(
    num_workers: int | None,
    *,
    jobs_at_once: int | None = None,
    cpus_per_task: int | None = None,
    log: bool = False,
) -> int | None:
    """A job's pre-tokenization workers when a launcher runs `jobs_at_once` jobs side by side.

    None (every usable CPU of the job) stays None unless jobs share the machine: then each
    gets its `fair_share`, and a larger explicit `num_workers` is lowered to it. A SLURM
    job's `cpus_per_task` is a bound too, for clusters that do not enforce the allocation.

    >>> workers_per_job(None), workers_per_job(4, cpus_per_task=2)
    (None, 2)
    """
    workers = num_workers
    if jobs_at_once is not None and (workers is None or workers > fair_share(jobs_at_once)):
        if workers is not None and log:
            logger.info(
                "num_workers=%d lowered to %d: %s jobs share the CPUs",
                workers,
                fair_share(jobs_at_once),
                jobs_at_once,
            )
        workers = fair_share(jobs_at_once)
    if cpus_per_task is not None and (workers is None or workers > int(cpus_per_task)):
        if workers is not None and log:
            logger.info(
                "num_workers=%d lowered to %d: the job's cpus_per_task", workers, cpus_per_task
            )
        workers = int(cpus_per_task)
    return workers
