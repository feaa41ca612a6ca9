"""How a run was launched: Hydra's output directory, the launcher running it (basic, joblib,
submitit), and how many jobs share this machine's CPUs, as metrics.json records them.

What it does not do: start jobs (Hydra's launchers do) or choose worker counts
(`bpe.util.workers`, which this module hands the launcher's numbers).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from bpe.util.workers import default_num_workers, workers_per_job

logger = logging.getLogger(__name__)


def hydra_output_dir() -> tuple[Path | None, list[str], dict]:
    """Hydra's run/job dir, overrides and sweep info when running under @hydra.main."""
    try:
        hc = HydraConfig.get()
    except ValueError:  # not running under @hydra.main
        return None, [], {}
    sweep = {}
    if str(hc.mode) == "RunMode.MULTIRUN":
        sweep = {"sweep_dir": str(Path(hc.sweep.dir)), "job_num": int(hc.job.num)}
    return Path(hc.runtime.output_dir), list(hc.overrides.task), sweep


#: Environment variable through which `bpe-train -m` tells its jobs how many there are (it
#: counts them before Hydra starts): submitit's local executor runs them all at once, and
#: nothing else in a job says how many share the machine. Jobs inherit the environment.
SWEEP_JOBS_ENV = "BPE_SWEEP_JOBS"


def launcher_target(cfg: DictConfig, *, log: bool = False) -> dict:
    """`launcher_info` for this job, from Hydra's config when running under @hydra.main."""
    try:
        hc = HydraConfig.get()
        launcher, hydra_overrides = hc.launcher, list(hc.overrides.hydra)
        batch = (hc.sweeper or {}).get("max_batch_size")
    except ValueError:  # not running under @hydra.main
        launcher, hydra_overrides, batch = {}, [], None
    jobs = os.environ.get(SWEEP_JOBS_ENV, "")
    return launcher_info(
        launcher,
        hydra_overrides,
        num_workers=cfg.num_workers,
        sweep_jobs=int(jobs) if jobs.isdigit() else None,
        max_batch_size=batch,
        log=log,
    )


def launcher_info(
    launcher: Mapping,
    hydra_overrides: list[str],
    *,
    num_workers: int | None,
    sweep_jobs: int | None = None,
    max_batch_size: int | None = None,
    log: bool = False,
) -> dict:
    """The Hydra launcher, how many jobs it runs at once, and each job's workers (its CPU share).

    `name` is basic, joblib, submitit_local, submitit_slurm (or none outside Hydra);
    `parallel_jobs` is how many jobs may run at the same time (1: one after another, so timings
    are comparable; None: unknown); `overrides` are the launcher's own command-line overrides
    (e.g. `hydra/launcher=joblib`), so a sweep's reproduce command keeps them.

    `workers_per_job` is what pre-tokenization gets (None: every usable CPU of the job; the
    policy is `bpe.util.workers.workers_per_job`, this function only says who shares the CPUs):
      * joblib runs `n_jobs` jobs side by side on this machine: each gets its `fair_share`,
        unless the user set both n_jobs and num_workers;
      * submitit_local starts every job of the sweep at once as a local process
        (`sweep_jobs` of them, fewer with the sweeper's max_batch_size): fair share of those;
      * submitit_slurm: each job is its own allocation of `cpus_per_task` CPUs, which SLURM
        usually enforces through the CPU affinity (`default_num_workers` reads it). A set
        cpus_per_task is also the bound, for clusters that do not enforce it; a larger
        num_workers is lowered to it.

    >>> slurm = {"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher."
    ...          "SlurmLauncher", "cpus_per_task": 8, "array_parallelism": 16}
    >>> info = launcher_info(slurm, ["hydra/launcher=submitit_slurm"], num_workers=None)
    >>> info["name"], info["workers_per_job"], info["parallel_jobs"], info["cpus_per_task"]
    ('submitit_slurm', 8, 16, 8)
    """
    target = str(launcher.get("_target_", "none"))
    name = target.rsplit(".", 1)[-1].removesuffix("Launcher").lower() or "none"
    if "submitit" in target:
        name = f"submitit_{name}"  # LocalLauncher / SlurmLauncher
    n_jobs = launcher.get("n_jobs")  # joblib only; the basic launcher runs one job at a time
    cpus_per_task = launcher.get("cpus_per_task") if name == "submitit_slurm" else None
    at_once: int | None = None  # jobs sharing this machine's CPUs, when known
    if n_jobs is not None:
        user_n_jobs = any(o.startswith("hydra.launcher.n_jobs=") for o in hydra_overrides)
        if num_workers is None or not user_n_jobs:
            at_once = int(n_jobs)
    elif name == "submitit_local" and sweep_jobs:
        at_once = min(sweep_jobs, max_batch_size or sweep_jobs)
    workers = workers_per_job(
        num_workers, jobs_at_once=at_once, cpus_per_task=cpus_per_task, log=log
    )
    if name in ("basic", "none"):
        parallel: int | None = 1
    elif n_jobs is not None:  # joblib: a negative n_jobs counts back from the CPU count
        parallel = (
            int(n_jobs) if int(n_jobs) > 0 else max(1, default_num_workers() + 1 + int(n_jobs))
        )
    elif name == "submitit_local":  # every job at once (None: the count is unknown)
        parallel = at_once
    else:  # submitit_slurm: the array parallelism bounds it, the cluster decides
        parallel = launcher.get("array_parallelism")
    info = {
        "name": name,
        "n_jobs": n_jobs,
        "workers_per_job": workers,
        "parallel_jobs": parallel,
        "overrides": [
            o for o in hydra_overrides if o.startswith(("hydra/launcher=", "hydra.launcher."))
        ],
    }
    if name.startswith("submitit"):
        info["cpus_per_task"] = cpus_per_task
    return info
