"""MLflow view of finished runs: params, metrics, tags and artifacts read from run directories.

What it does: `tracked_run(run_dir)` turns a run directory (`metrics.json`, `environment.json`,
`.hydra/config.yaml`) into the params, metrics, tags and artifact files an experiment tracker
shows; `log_run(run_dir, ...)` sends one record to MLflow (by default a local SQLite store
`<experiments_dir>/mlflow.db` with artifacts under `<experiments_dir>/mlruns/`);
`MlflowCallback` does it from Hydra when each job ends (`bpe-train hydra/callbacks=mlflow`),
and `python -m bpe.tracking.to_mlflow RUN_DIR...` for runs made without it. A run whose metrics
say anything but `complete` is logged with MLflow status FAILED. A SQLite store that is locked,
not a database or not writable raises `StoreUnavailable`, one sentence naming the file and the
fix, which the callback logs as a warning (the run itself is already complete).

What it does not do: change a run directory (it only reads), or make anything else depend on
MLflow: run directories stay the source of truth, `bpe-report` never imports this module, and
`mlflow` (the `mlflow` extra) is imported only when a run is actually logged.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sqlite3
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from bpe.runs import schema
from bpe.runs.layout import (
    ENVIRONMENT_FILE,
    FIGURES_DIR,
    METRICS_FILE,
    RECORD_FILES,
    TOKENIZER_FILES,
    experiments_root,
)
from bpe.runs.saved_config import run_config
from bpe.runs.upgrade import read_metrics
from bpe.tracking.callback import TrackerCallback, TrackerUnavailable

logger = logging.getLogger(__name__)

DEFAULT_EXPERIMENT = "bpe-lab"
STORE_NAME = "mlflow.db"  # under experiments_dir
ARTIFACTS_NAME = "mlruns"  # under experiments_dir

# Fields of metrics.json's "run" section logged as params (what a run was asked to do), each
# under its field name.
RUN_PARAMS = (
    schema.DATASET,
    schema.TRAINER,
    schema.VOCAB_SIZE,
    schema.PROFILER,
    schema.NUM_WORKERS,
    schema.SEED,
    schema.SPECIAL_TOKENS,
    schema.INPUT_PATH,
    schema.INPUT_NAME,
    schema.PRETOKENIZER,
    schema.INIT_FROM_ARG,
    schema.COMMAND,
)
PARAM_LIMIT = 6000  # MLflow rejects longer param values


@dataclass
class TrackedRun:
    """What the tracker shows of one run directory (plain data: no MLflow types)."""

    run_dir: Path
    name: str
    status: str  # "FINISHED" or "FAILED" (MLflow's words)
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: list[tuple[Path, str | None]] = field(default_factory=list)  # (file, folder)
    start_ms: int | None = None
    end_ms: int | None = None


def flatten_numbers(data: Any, prefix: str = "") -> dict[str, float]:
    """Numeric leaves of nested dicts as `a.b.c` -> float (booleans and lists are skipped).

    >>> flatten_numbers({"timings": {"merge": 0.5, "total": 1}, "ok": True, "xs": [1]})
    {'timings.merge': 0.5, 'timings.total': 1.0}
    """
    out: dict[str, float] = {}
    if isinstance(data, Mapping):
        for key, value in data.items():
            out.update(flatten_numbers(value, f"{prefix}{key}."))
    elif isinstance(data, int | float) and not isinstance(data, bool):
        out[prefix.rstrip(".")] = float(data)
    return out


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as err:
        logger.warning("cannot read %s (%s): logging the run without it", path, err)
        return {}
    return data if isinstance(data, dict) else {}


def _millis(stamp: object) -> int | None:
    try:
        return int(datetime.fromisoformat(str(stamp)).timestamp() * 1000)
    except ValueError:
        return None


def _param(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text[:PARAM_LIMIT]


def tracked_run(run_dir: str | os.PathLike) -> TrackedRun:
    """Read a run directory into a TrackedRun (never writes to it).

    Raises:
        FileNotFoundError: run_dir is not a directory.
    """
    run_dir = Path(run_dir).resolve()
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {str(run_dir)!r} does not exist")
    config = run_config(run_dir)
    metrics = {}
    has_metrics = (run_dir / METRICS_FILE).is_file()
    if has_metrics:
        try:  # today's schema, whatever the writer's age
            metrics = read_metrics(run_dir, config=config)
        except (OSError, ValueError) as err:
            logger.warning("cannot read %s (%s): logging the run without it", METRICS_FILE, err)
    env_path = run_dir / ENVIRONMENT_FILE
    env = _read_json(env_path) if env_path.is_file() else {}
    status = str(schema.get(metrics, schema.STATUS) or "missing")

    params = _params(metrics, config)
    numbers = _numbers(metrics)

    git = env.get("git") or {}
    tags = {
        "dataset": params.get("dataset"),
        "trainer": params.get("trainer"),
        "git_sha": git.get("sha"),
        "git_dirty": git.get("dirty"),
        "run_dir": str(run_dir),
        "status": status,
        "profiled": schema.get(metrics, schema.PROFILED),
        "stopped_early": schema.get(metrics, schema.STOPPED_EARLY),
        "merges_sha256": schema.get(metrics, schema.MERGES_SHA256),
        "sweep_dir": schema.get(metrics, schema.SWEEP_DIR),
        "job_num": schema.get(metrics, schema.JOB_NUM),
        "pretoken_cache": schema.get(metrics, schema.PRETOKEN_CACHE_STATUS),
        "error": schema.get(metrics, schema.ERROR_MESSAGE),
    }
    if not has_metrics:
        tags["error"] = "no metrics.json: the run stopped before it started"
    tags = {
        k: str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in tags.items()
        if v is not None
    }

    return TrackedRun(
        run_dir=run_dir,
        name=str(schema.get(metrics, schema.RUN_NAME) or run_dir.name),
        status="FINISHED" if status == "complete" else "FAILED",
        params=params,
        metrics=numbers,
        tags=tags,
        artifacts=_artifacts(run_dir),
        start_ms=_millis(schema.get(metrics, schema.STARTED_AT)),
        end_ms=_millis(schema.get(metrics, schema.FINISHED_AT)),
    )


def _params(metrics: dict, config: dict) -> dict[str, str]:
    """What the run was asked to do, as MLflow params (the config fills in for a run that
    failed before it wrote them)."""
    # None is logged as "null": num_workers=null (every CPU) is a choice worth seeing
    params = {
        k.path[-1]: _param(schema.get(metrics, k)) for k in RUN_PARAMS if schema.has(metrics, k)
    }
    if schema.get(metrics, schema.WORKERS) is not None:
        params["workers"] = _param(schema.get(metrics, schema.WORKERS))  # what num_workers became
    for key in ("dataset", "trainer", "profiler"):  # a run that failed early: the config knows
        if key not in params and isinstance(config.get(key), Mapping) and config[key].get("name"):
            params[key] = _param(config[key]["name"])
    for key in ("vocab_size", "num_workers", "seed"):
        if key not in params and key in config:
            params[key] = _param(config[key])
    for key, value in (config.get("analysis") or {}).items():
        params[f"analysis.{key}"] = _param(value)
    for key, value in schema.get(metrics, schema.LAUNCHER, {}).items():
        if value is not None:
            params[f"launcher.{key}"] = _param(value)
    return params


def _numbers(metrics: dict) -> dict[str, float]:
    """Every numeric leaf of the measure sections, as MLflow metrics."""
    numbers: dict[str, float] = {}
    for section in schema.MEASURE_SECTIONS:
        if section in metrics:
            numbers.update(flatten_numbers({section: metrics[section]}))
    if schema.get(metrics, schema.PRETOKEN_CACHE_STATUS) == "hit":
        # a hit loaded its counts: that is not a pre-tokenization time to chart against others
        numbers.pop("timings.pretokenize", None)
        load_seconds = schema.get(metrics, schema.PRETOKEN_CACHE_LOAD_SECONDS)
        if load_seconds is not None:
            numbers[schema.PRETOKEN_CACHE_LOAD_SECONDS.dotted] = float(load_seconds)
    return numbers


def _artifacts(run_dir: Path) -> list[tuple[Path, str | None]]:
    """The run's records, figures and tokenizer files, each with its artifact folder."""
    artifacts: list[tuple[Path, str | None]] = [
        (run_dir / name, None) for name in RECORD_FILES if (run_dir / name).is_file()
    ]
    artifacts += [
        (p, FIGURES_DIR) for p in sorted((run_dir / FIGURES_DIR).glob("*")) if p.is_file()
    ]
    artifacts += [
        (run_dir / name, "tokenizer") for name in TOKENIZER_FILES if (run_dir / name).is_file()
    ]
    return artifacts


def default_tracking_uri(experiments_dir: str | os.PathLike) -> str:
    """The local SQLite store under experiments_dir, as an MLflow tracking URI.

    >>> default_tracking_uri("/tmp/exp")
    'sqlite:////tmp/exp/mlflow.db'
    """
    return f"sqlite:///{Path(experiments_dir).resolve() / STORE_NAME}"


class StoreUnavailable(TrackerUnavailable):
    """The SQLite store cannot be used (locked, not a database, not writable): names the file
    and the fix."""


def _sqlite_file(uri: str) -> Path | None:
    """The file of a `sqlite:///` tracking URI, without its query (`?timeout=...`).

    >>> _sqlite_file("sqlite:////tmp/exp/mlflow.db?timeout=1"), _sqlite_file("http://host:5000")
    (PosixPath('/tmp/exp/mlflow.db'), None)
    """
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri.removeprefix("sqlite:///").split("?", 1)[0])


def _sqlite_error(err: BaseException) -> sqlite3.Error | None:
    """The sqlite3 error behind an MLflow or SQLAlchemy error (None when there is none)."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, sqlite3.Error):
            return current
        seen.add(id(current))
        orig = getattr(current, "orig", None)  # SQLAlchemy keeps the driver's error there
        if isinstance(orig, BaseException):
            current = orig
        else:
            current = current.__cause__ or current.__context__
    return None


def _store_unavailable(store: Path, error: sqlite3.Error, record: TrackedRun) -> StoreUnavailable:
    """One sentence: which store, what is wrong with it, that the run is fine, and the fix."""
    again = f"`python -m bpe.tracking.to_mlflow {record.run_dir}`"
    text = str(error)
    if "locked" in text or "busy" in text:
        fix = (
            f"log it later with {again}, or, if no process is using the store, move the file "
            f"aside (mv {store} {store}.bak)"
        )
        what = f"is locked by another process ({text})"
    elif isinstance(error, sqlite3.OperationalError):  # cannot open, read-only, disk full...
        fix = f"check that {store.parent} is writable and has room, then log it with {again}"
        what = f"cannot be written ({text})"
    else:  # file is not a database, database disk image is malformed
        fix = (
            f"move or delete the file (mv {store} {store}.bak; the next run creates a new "
            f"store), then log it with {again}"
        )
        what = f"is not a usable SQLite database ({text})"
    return StoreUnavailable(
        f"MLflow store {str(store)!r} {what}: run {record.name} was not logged to MLflow (the "
        f"run itself is unaffected); {fix}"
    )


def _import_mlflow():
    try:
        import mlflow  # the optional `mlflow` extra
    except ImportError as err:
        raise ImportError(
            "logging runs to MLflow needs the mlflow extra: pip install -e '.[mlflow]' "
            "(or drop hydra/callbacks=mlflow)"
        ) from err
    return mlflow


def _experiment_id(client, name: str, artifact_location: str | None) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    try:
        return client.create_experiment(name, artifact_location=artifact_location)
    except Exception:  # noqa: BLE001 - a parallel job created it first
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return found.experiment_id


def log_run(
    run_dir: str | os.PathLike,
    *,
    tracking_uri: str | None = None,
    experiment_name: str = DEFAULT_EXPERIMENT,
    artifact_location: str | os.PathLike | None = None,
    artifacts: bool = True,
) -> str:
    """Log one run directory to MLflow; returns the MLflow run id.

    Args:
        run_dir: a run directory written by `bpe-train`.
        tracking_uri: where to log; None uses `$MLFLOW_TRACKING_URI` if set, else the SQLite
            store `mlflow.db` in the run directory's experiments directory.
        experiment_name: the MLflow experiment (created on first use).
        artifact_location: where a newly created experiment stores artifacts; None puts them
            in `mlruns/` beside the SQLite store (ignored for an existing experiment).
        artifacts: also upload ANALYSIS.md, metrics, logs, figures and tokenizer files.

    Raises:
        StoreUnavailable: a SQLite store is locked by another process, is not a database, or
            cannot be written.
    """
    record = tracked_run(run_dir)
    mlflow = _import_mlflow()

    home = experiments_root(record.run_dir)
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(home)
    store = _sqlite_file(uri)
    if artifact_location is None and store is not None:
        artifact_location = (store.parent / ARTIFACTS_NAME).resolve().as_uri()
    elif artifact_location is not None and "://" not in str(artifact_location):
        artifact_location = Path(artifact_location).resolve().as_uri()
    try:
        run_id = _send(
            mlflow,
            record,
            uri=uri,
            experiment_name=experiment_name,
            artifact_location=artifact_location,
            artifacts=_artifacts(run_dir),
        )
    except Exception as err:
        cause = _sqlite_error(err)
        if store is None or cause is None:
            raise
        # subtle: from None, so the SQL statement and its traceback stay out of the message
        raise _store_unavailable(store, cause, record) from None
    logger.info("logged %s to MLflow %s (run %s, %s)", record.name, uri, run_id, record.status)
    return run_id


def _send(
    mlflow: ModuleType,
    record: TrackedRun,
    *,
    uri: str,
    experiment_name: str,
    artifact_location: str | None,
    artifacts: bool,
) -> str:
    """Create the MLflow run of record and log everything into it; returns its id."""
    from mlflow.entities import Metric, Param, RunTag

    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment_id = _experiment_id(client, experiment_name, artifact_location)
    run = client.create_run(
        experiment_id, start_time=record.start_ms, tags=record.tags, run_name=record.name
    )
    run_id = run.info.run_id
    stamp = record.end_ms or record.start_ms or 0
    client.log_batch(
        run_id,
        metrics=[Metric(k, v, stamp, 0) for k, v in sorted(record.metrics.items())],
        params=[Param(k, v) for k, v in sorted(record.params.items())],
        tags=[RunTag(k, v) for k, v in sorted(record.tags.items())],
    )
    if artifacts:
        for path, folder in record.artifacts:
            client.log_artifact(run_id, str(path), folder)
    client.set_terminated(run_id, status=record.status, end_time=record.end_ms)
    return run_id


class MlflowCallback(TrackerCallback):
    """Hydra callback: log each job's run directory to MLflow when the job ends (never raises).

    Selected with `hydra/callbacks=mlflow` (bpe/conf/hydra/callbacks/mlflow.yaml); the options are
    those of `log_run`. A null tracking_uri uses `$MLFLOW_TRACKING_URI` or, failing that,
    `<experiments_dir>/mlflow.db`.
    """

    tracker = "MLflow"

    def __init__(
        self,
        *,
        tracking_uri: str | None = None,
        experiment_name: str = DEFAULT_EXPERIMENT,
        artifact_location: str | None = None,
        artifacts: bool = True,
    ) -> None:
        super().__init__()
        self.options = {
            "tracking_uri": tracking_uri,
            "experiment_name": experiment_name,
            "artifact_location": artifact_location,
            "artifacts": artifacts,
        }
        _import_mlflow()  # a missing extra fails at startup, not after the first run

    def log(self, run_dir: Path, experiments_dir: Path) -> None:
        options = dict(self.options)
        if options["tracking_uri"] is None and not os.environ.get("MLFLOW_TRACKING_URI"):
            options["tracking_uri"] = default_tracking_uri(experiments_dir)
        log_run(run_dir, **options)


def main(argv: list[str] | None = None) -> int:
    """`python -m bpe.tracking.to_mlflow RUN_DIR...`: log existing run directories to MLflow."""
    parser = argparse.ArgumentParser(description=main.__doc__.split(": ", 1)[1])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument(
        "--tracking-uri",
        default=None,
        help="default: $MLFLOW_TRACKING_URI, else <experiments_dir>/mlflow.db",
    )
    parser.add_argument("--experiment-name", default=DEFAULT_EXPERIMENT)
    parser.add_argument("--no-artifacts", dest="artifacts", action="store_false")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    for run_dir in args.run_dirs:
        try:
            log_run(
                run_dir,
                tracking_uri=args.tracking_uri,
                experiment_name=args.experiment_name,
                artifacts=args.artifacts,
            )
        except StoreUnavailable as err:
            logger.error("%s", err)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
