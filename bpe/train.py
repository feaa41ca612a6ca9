"""`bpe-train`: the Hydra command line for training runs (also `python -m bpe.train`).

    bpe-train                                        defaults: conf/config.yaml
    bpe-train dataset=owt_sample vocab_size=32000 trainer=indexed profiler=cprofile
    bpe-train experiment=owt_32k
    bpe-train -m trainer=naive,indexed,heap vocab_size=500,1000 dataset=tinystories_sample

A thin shell that wires the layers: `bpe.experiment.runner.run_experiment(cfg, report=...)` does
the work and returns the metrics (tests call it without the command line), and this module hands
it the report writer of `bpe.analysis.run_report`, so neither layer imports the other. In a sweep
(-m) a failing job is recorded as failed in its run directory and the sweep goes on; a single run
that fails exits with status 1.
"""

from __future__ import annotations

import logging
import sys

import hydra
import yaml
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from bpe._io import CONF_DIR
from bpe.analysis.run_report import write_run_report
from bpe.experiment.metrics import RESERVE_BYTES
from bpe.experiment.rundir import preflight
from bpe.experiment.runner import run_experiment

logger = logging.getLogger("bpe.train")

__all__ = ["main"]


# subtle: an absolute path, because inside a package Hydra would look for a `conf` module.
@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _app(cfg: DictConfig) -> str | None:
    multirun = str(HydraConfig.get().mode) == "RunMode.MULTIRUN"
    try:
        metrics = run_experiment(cfg, report=write_run_report)
    except KeyboardInterrupt:
        logger.error("interrupted: the run is marked failed in its metrics.json")
        raise
    except Exception as err:  # noqa: BLE001 - reported, recorded in metrics.json
        logger.error("run failed: %s", err)
        if multirun:
            return "failed"  # keep the sweep going; SWEEP.md lists the failure
        sys.exit(1)
    logger.info("wrote %s", metrics["run"]["dir"])
    return metrics["status"]


def unknown_keys(overrides: list[str]) -> list[str]:
    """Override keys whose first part is neither a config group nor a top-level key.

    >>> unknown_keys(["vocab_size=500", "dataset.path=x.txt", "vocab_sze=500", "-m"])
    ['vocab_sze']
    """
    config = yaml.safe_load((CONF_DIR / "config.yaml").read_text("utf-8"))
    groups = {p.name for p in CONF_DIR.iterdir() if p.is_dir()}
    known = groups | set(config) | {"hydra"}
    out = []
    for item in overrides:
        if item.startswith(("-", "+", "~")) or "=" not in item:
            continue
        key = item.split("=", 1)[0]
        if key.split(".", 1)[0].split("/", 1)[0] not in known:
            out.append(key)
    return out


def main() -> None:
    """Console-script entry point."""
    unknown = unknown_keys(sys.argv[1:])
    if unknown:
        # Hydra's own error follows; this says what the valid choices are.
        groups = sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir())
        sys.stderr.write(
            f"bpe-train: unknown key(s) {unknown}; config groups are {groups} "
            "(e.g. trainer=heap), top-level keys are vocab_size, num_workers, seed, "
            "experiments_dir, progress, analysis.* (see conf/config.yaml)\n"
        )
    try:
        # before Hydra writes into the run directory: a reused or full one stays untouched
        preflight(sys.argv[1:], min_free_bytes=RESERVE_BYTES)
    except OSError as err:
        sys.stderr.write(f"bpe-train: {err}\n")
        sys.exit(1)
    _app()


if __name__ == "__main__":
    main()
