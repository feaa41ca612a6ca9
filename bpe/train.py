"""`bpe-train`: the Hydra command line for training runs (also `python -m bpe.train`).

    bpe-train                                        defaults: conf/config.yaml
    bpe-train dataset=owt_sample vocab_size=32000 trainer=indexed profiler=cprofile
    bpe-train experiment=owt_32k
    bpe-train -m trainer=naive,indexed,heap vocab_size=500,1000 dataset=tinystories_sample

A thin shell: `bpe.experiment.runner.train(cfg)` does the work and returns the metrics, so tests
call it without the command line. In a sweep (-m) a failing job is recorded as failed in its
run directory and the sweep goes on; a single run that fails exits with status 1.
"""

from __future__ import annotations

import logging
import sys

import hydra
from omegaconf import DictConfig

from bpe.datasets import CONF_DIR
from bpe.experiment.runner import train

logger = logging.getLogger("bpe.train")

__all__ = ["main", "train"]


# subtle: an absolute path, because inside a package Hydra would look for a `conf` module.
@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _app(cfg: DictConfig) -> str | None:
    from hydra.core.hydra_config import HydraConfig

    multirun = str(HydraConfig.get().mode) == "RunMode.MULTIRUN"
    try:
        metrics = train(cfg)
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


def main() -> None:
    """Console-script entry point."""
    _app()


if __name__ == "__main__":
    main()
