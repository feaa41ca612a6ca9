"""A search's record: what an Optuna sweep (`bpe-train -m hparams_search=...`) optimized, over
which space, with which sampler, written once into its sweep directory as `search.json` when
the sweep starts, so SWEEP.md can say it afterwards from the sweep directory alone.

A grid sweep's jobs say their sweep between them (each job's overrides are one point of the
grid); a search's do not: each trial's overrides are the sampler's picks, and the space it
picked from (`vocab_size=int(interval(1000,8000))`) is in no job's files. Hence this record.

What it does not do: run the search (Hydra's Optuna sweeper) or render SWEEP.md
(`bpe.analysis.sweep.search`).
"""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bpe.runs import schema
from bpe.runs.layout import SEARCH_FILE
from bpe.util.io import atomic_write_text

logger = logging.getLogger(__name__)

#: The command-line overrides that say where a sweep's files went, not what it ran.
_WHERE = ("experiments_dir", "hydra.sweep.dir", "hydra.run.dir", "hydra.mode")


def is_search(cfg: Any) -> bool:
    """Whether a composed config (with its `hydra` node) runs a search: a sweeper that picks
    its trials as it goes (Optuna's), rather than a grid every job of which is known first."""
    from omegaconf import OmegaConf

    return "optuna" in str(OmegaConf.select(cfg, "hydra.sweeper._target_") or "").lower()


def search_record(cfg: Any) -> dict | None:
    """The record of the search a multirun's config starts (None for a grid): the metric and
    its direction, the sampler and its seed, the trials, the space (the config's
    `hydra.sweeper.params` with the command line's sweeps over them) and the command."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    if not is_search(cfg):
        return None
    sweeper = cfg.hydra.sweeper
    space = {str(k): str(v) for k, v in (sweeper.get("params") or {}).items()}
    task = [str(o) for o in cfg.hydra.overrides.task]
    for override in OverridesParser.create().parse_overrides(task):
        if override.is_sweep_override():
            space[override.get_key_element()] = override.input_line.split("=", 1)[1]
    given = [o for o in [*cfg.hydra.overrides.hydra, *task] if str(o).split("=")[0] not in _WHERE]
    sampler = OmegaConf.select(cfg, "hydra.sweeper.sampler._target_") or ""
    return {
        "sweeper": "optuna",
        "metric": OmegaConf.select(cfg, "search.metric"),
        "direction": str(OmegaConf.select(cfg, "search.direction") or sweeper.direction),
        "sampler": str(sampler).rsplit(".", 1)[-1],
        "seed": OmegaConf.select(cfg, "hydra.sweeper.sampler.seed"),
        "n_trials": int(sweeper.n_trials),
        "n_jobs": int(sweeper.n_jobs),
        "space": space,
        "command": shlex.join(["bpe-train", "-m", *map(str, given)]),
    }


def search_values(override: Any) -> list[str]:
    """The values of one search parameter (a parsed Hydra override) that a check composes
    before the search starts: every choice, or a range's two ends.

    >>> from hydra.core.override_parser.overrides_parser import OverridesParser
    >>> parse = OverridesParser.create().parse_override
    >>> search_values(parse("vocab_size=int(interval(300,600))"))
    ['300', '600']
    >>> search_values(parse("pretokenizer=choice(gpt2,o200k)"))
    ['gpt2', 'o200k']
    """
    from hydra.core.override_parser.types import IntervalSweep, RangeSweep

    value = override.value()
    if isinstance(value, IntervalSweep):
        return [str(int(v)) if float(v).is_integer() else str(v) for v in (value.start, value.end)]
    if isinstance(value, RangeSweep):
        found = list(override.sweep_string_iterator())
        return [found[0], found[-1]] if found else []
    if override.is_sweep_override():
        return list(override.sweep_string_iterator())
    return [override.get_value_element_as_str()]


def trial_value(cfg: Any, metrics: Mapping[str, Any]) -> float | str:
    """What a job returns to its sweeper: the value of `search.metric` when a search optimizes
    one (Optuna is told it, read through `bpe.runs.schema.objective`), else the run's status.
    A run that did not measure the metric returns why, which the search records as a failed
    trial.

    >>> from omegaconf import OmegaConf
    >>> trial_value(OmegaConf.create({"search": {"metric": "compression.own.ratio"}}),
    ...             {"status": "complete", "compression": {"own": {"ratio": 4.5}}})
    4.5
    """
    from omegaconf import OmegaConf

    metric = OmegaConf.select(cfg, "search.metric")
    if metric is None:
        return schema.get(metrics, schema.STATUS)
    value = schema.objective(metrics, metric)
    if value is None:
        logger.error(
            "this run did not measure search.metric=%s: the trial counts as failed", metric
        )
        return f"no {metric}"
    logger.info("search.metric %s = %.6g", metric, value)
    return value


def write_search(sweep_dir: Path, record: dict) -> Path:
    """Write the record into the sweep directory (atomically); returns its path."""
    path = Path(sweep_dir) / SEARCH_FILE
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return path


def read_search(sweep_dir: Path) -> dict | None:
    """The search record of a sweep directory; None for a grid sweep (no record).

    Raises:
        ValueError: the record is not a search record (names the file and the fix).
    """
    path = Path(sweep_dir) / SEARCH_FILE
    if not path.is_file():
        return None
    fix = "rerun the search, or delete the file to report the sweep as a grid"
    try:
        record = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a readable search record ({err}); {fix}") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: a search record is a JSON object; {fix}")
    missing = [k for k in ("metric", "direction", "space") if k not in record]
    if missing:
        raise ValueError(f"{path}: a search record without {missing}; {fix}")
    return record
