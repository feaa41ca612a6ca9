"""Weights & Biases view of finished runs, offline: no account, no network, files only.

What it does: `log_run(run_dir)` writes one W&B run of a run directory, from the same record the
MLflow view logs (`bpe.tracking.to_mlflow.tracked_run`: params as its config, the measures as its
summary, the status, dataset, trainer and git sha as tags, ANALYSIS.md, metrics.json, the logs,
figures and tokenizer files as its files), in W&B's offline mode under
`<experiments_dir>/wandb/offline-run-*`; `wandb sync <that folder>` uploads it later, from any
machine with an account. `WandbCallback` does it from Hydra when each job ends
(`bpe-train hydra/callbacks=wandb`), and `python -m bpe.tracking.to_wandb RUN_DIR...`
for runs made without it. A run that is not `complete` ends with a non-zero exit code, which
W&B shows as failed.

What it does not do: change a run directory, go online (the mode is `offline` unless
`WANDB_MODE` says otherwise), or make anything else depend on W&B: `wandb` (the `wandb` extra)
is imported only when a run is logged.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from types import ModuleType

from bpe.runs.layout import experiments_root
from bpe.tracking.callback import TrackerCallback
from bpe.tracking.to_mlflow import DEFAULT_EXPERIMENT, tracked_run

logger = logging.getLogger(__name__)

#: The tags a W&B run is labelled with, to filter by (W&B caps a tag at 64 characters).
SHORT_TAGS = ("status", "dataset", "trainer")
#: What to install when `wandb` is missing.
INSTALL_HINT = "pip install 'bpe-lab[wandb]'"


def _import_wandb() -> ModuleType:
    try:
        import wandb
    except ImportError as err:
        raise ImportError(f"the W&B view needs the wandb package ({err}); {INSTALL_HINT}") from None
    return wandb


def log_run(
    run_dir: str | os.PathLike,
    *,
    project: str = DEFAULT_EXPERIMENT,
    directory: str | os.PathLike | None = None,
    artifacts: bool = True,
) -> Path:
    """Write one run directory as a W&B run (offline unless `WANDB_MODE` says otherwise);
    returns the W&B run's folder, which `wandb sync` uploads.

    Args:
        project: the W&B project the run goes to when synced.
        directory: where W&B writes (its `wandb/` folder goes inside); None: the run's
            experiments directory.
        artifacts: also save the run's records, figures and tokenizer files with it.

    Raises:
        FileNotFoundError: run_dir is not a directory.
        ImportError: wandb is not installed (the message says how to install it).
    """
    record = tracked_run(run_dir)
    wandb = _import_wandb()
    where = Path(directory) if directory is not None else experiments_root(record.run_dir)
    where.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("WANDB_SILENT", "true")  # its banner is not a log line of ours
    run = wandb.init(
        mode=os.environ.get("WANDB_MODE", "offline"),
        dir=str(where),
        project=project,
        name=record.name,
        job_type="train",
        # W&B tags are short labels to filter by; the whole tag record goes with the config
        config={**record.params, **{f"tag.{k}": v for k, v in record.tags.items()}},
        tags=[record.tags[k][:64] for k in SHORT_TAGS if record.tags.get(k)],
        notes=record.tags.get("error"),
        reinit="create_new",
    )
    try:
        run.summary.update(record.metrics)
        if artifacts:
            # named as in the run directory (`figures/x.png`); W&B links them until synced
            for path, _folder in record.artifacts:
                run.save(str(path), base_path=str(record.run_dir), policy="now")
    finally:
        run.finish(exit_code=0 if record.status == "FINISHED" else 1)
    folder = Path(run.dir).parent
    logger.info("logged %s to W&B: %s (upload it: wandb sync %s)", record.name, folder, folder)
    return folder


class WandbCallback(TrackerCallback):
    """Hydra callback: log each job's run directory to W&B, offline, when the job ends.

    Selected with `hydra/callbacks=wandb` (bpe/conf/hydra/callbacks/wandb.yaml); the options are
    those of `log_run`. A null directory writes under the sweep's experiments directory.
    """

    tracker = "W&B"

    def __init__(
        self,
        *,
        project: str = DEFAULT_EXPERIMENT,
        directory: str | None = None,
        artifacts: bool = True,
    ) -> None:
        super().__init__()
        self.options = {"project": project, "directory": directory, "artifacts": artifacts}
        _import_wandb()  # a missing extra fails at startup, not after the first run

    def log(self, run_dir: Path, experiments_dir: Path) -> None:
        options = dict(self.options)
        if options["directory"] is None:
            options["directory"] = experiments_dir
        log_run(run_dir, **options)


def main(argv: list[str] | None = None) -> int:
    """`python -m bpe.tracking.to_wandb RUN_DIR...`: log existing run directories to
    W&B, offline."""
    parser = argparse.ArgumentParser(description=main.__doc__.split(": ", 1)[1])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--project", default=DEFAULT_EXPERIMENT)
    parser.add_argument("--dir", dest="directory", default=None, help="default: experiments dir")
    parser.add_argument("--no-artifacts", dest="artifacts", action="store_false")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    for run_dir in args.run_dirs:
        log_run(run_dir, project=args.project, directory=args.directory, artifacts=args.artifacts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
