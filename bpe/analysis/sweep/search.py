"""SWEEP.md of a search (`bpe-train -m hparams_search=...`): its trials ranked best first by
the metric it optimized, the space it searched, and whether Optuna's own result agrees with
the jobs' metrics.json.

What it reads: the sweep's `search.json` (`bpe.runs.search`, written when the search started),
the jobs' metrics.json through the loader (each trial's value is `bpe.runs.schema.measure` of
the searched metric, the key `bpe-train` told Optuna), and Optuna's `optimization_results.yaml`
when the search got as far as writing it.

What it does not do: run trials, or render the rest of SWEEP.md (`bpe.analysis.sweep.report`).
"""

from __future__ import annotations

import logging
import math
import numbers
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from bpe.analysis.markdown import fmt, table
from bpe.runs import schema
from bpe.runs.layout import OPTUNA_RESULTS_FILE, SEARCH_FILE
from bpe.runs.search import read_search

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchFacts:
    """A search's record and its trials, best first."""

    record: dict
    #: one row per job, best first: job (its directory name), num, value, status, and one
    #: column per searched key (the value this trial took)
    trials: pd.DataFrame
    #: Optuna's own best value (`optimization_results.yaml`), None when it wrote none
    optuna_best: float | None

    @property
    def metric(self) -> str:
        return str(self.record["metric"])

    @property
    def keys(self) -> list[str]:
        return list(self.record["space"])


def search_facts(sweep_dir: Path, frame: pd.DataFrame, runs: pd.DataFrame) -> SearchFacts | None:
    """The facts of a search, or None when the sweep is a grid (it has no search record)."""
    record = read_search(sweep_dir)
    if record is None:
        return None
    column = schema.measure(record["metric"]).column
    raw = frame.set_index("run_dir")
    values = raw[column] if column in raw else pd.Series(dtype=float)
    overrides = raw.get(schema.OVERRIDES.column)
    rows = []
    for _, run in runs.iterrows():
        value = values.get(run["run_dir"])
        picked = _picked(overrides.get(run["run_dir"]) if overrides is not None else None)
        rows.append(
            {
                "job": Path(run["run_dir"]).name,
                "run_dir": run["run_dir"],
                "num": run.get("job_num"),
                "value": float(value) if _number(value) else math.nan,
                "status": run["status"],
                **{k: picked.get(k, "n/a") for k in record["space"]},
            }
        )
    trials = pd.DataFrame(
        rows, columns=["job", "run_dir", "num", "value", "status", *record["space"]]
    )
    descending = record["direction"] == "maximize"
    trials = trials.sort_values(
        ["value", "num"], ascending=[not descending, True], na_position="last", kind="stable"
    ).reset_index(drop=True)
    return SearchFacts(record, trials, _optuna_best(sweep_dir))


def best_first(runs: pd.DataFrame, facts: SearchFacts | None) -> pd.DataFrame:
    """The jobs in the order of the search's trials, best first (a grid's jobs unchanged)."""
    if facts is None:
        return runs
    order = {d: i for i, d in enumerate(facts.trials["run_dir"])}
    return runs.sort_values("run_dir", key=lambda s: s.map(order), kind="stable")


def section_search(facts: SearchFacts | None) -> list[str]:
    """The search: what it optimized over which space, the best trial, and every trial ranked."""
    if facts is None:
        return []
    record, trials, metric = facts.record, facts.trials, facts.metric
    measured = trials[trials["value"].notna()]
    way = "lowest" if record["direction"] == "minimize" else "highest"
    seed = f" (seed {record['seed']})" if record.get("seed") is not None else ""
    at_once = "one at a time" if record.get("n_jobs") == 1 else f"{record.get('n_jobs')} at once"
    lines = [
        "## Search",
        "",
        f"Optuna's {record.get('sampler') or 'sampler'}{seed} ran {len(trials)} of "
        f"{record.get('n_trials', 'n/a')} trials ({at_once}) for the {way} `{metric}`, over:",
        "",
        table([[k, f"`{v}`"] for k, v in record["space"].items()], ["key", "searched over"]),
        "",
    ]
    if measured.empty:
        lines += [f"> ⚠ **No trial measured `{metric}`**: see the failed jobs below.", ""]
    else:
        best = measured.iloc[0]
        picks = ", ".join(f"{k}={best[k]}" for k in facts.keys)
        lines += [
            f"**Best: trial {_num(best['num'])}** (`{best['job']}`), `{metric}` = "
            f"{fmt(best['value'], '.6g')}, with {picks}.",
            "",
            *_agreement(facts, float(best["value"])),
        ]
    rows = [
        [
            str(i + 1),
            _num(t["num"]),
            fmt(t["value"], ".6g"),
            *(str(t[k]) for k in facts.keys),
            str(t["status"]),
        ]
        for i, t in trials.iterrows()
    ]
    lines += [
        table(rows, ["rank", "trial", metric, *facts.keys, "status"]),
        "",
        f"Trials without a value did not complete or did not measure `{metric}`; the search "
        f"went on without them. The jobs below are listed in this order, best first; "
        f"`{SEARCH_FILE}` holds the search's record, and the command above reruns it (with "
        "its seed, the same trials).",
        "",
    ]
    return lines


def _agreement(facts: SearchFacts, best: float) -> list[str]:
    """Whether Optuna's own best value is the best the jobs' metrics.json hold."""
    told = facts.optuna_best
    if told is None:
        return [f"*Optuna wrote no {OPTUNA_RESULTS_FILE} (the search did not finish).*", ""]
    if math.isclose(told, best, rel_tol=1e-9, abs_tol=1e-12):
        return [f"*Optuna's own record ({OPTUNA_RESULTS_FILE}) names the same best value.*", ""]
    return [
        f"> ⚠ **Optuna's {OPTUNA_RESULTS_FILE} says the best value is {told:.6g}, the jobs' "
        f"metrics.json say {best:.6g}**: the jobs were changed or rerun after the search.",
        "",
    ]


def _optuna_best(sweep_dir: Path) -> float | None:
    path = Path(sweep_dir) / OPTUNA_RESULTS_FILE
    try:
        value = (yaml.safe_load(path.read_text("utf-8")) or {}).get("best_value")
    except (OSError, yaml.YAMLError, AttributeError):
        return None
    return float(value) if _number(value) else None


def _picked(overrides: object) -> dict[str, str]:
    """key -> value of a job's overrides (`["vocab_size=470", ...]`)."""
    if not isinstance(overrides, list):
        return {}
    return dict(str(o).split("=", 1) for o in overrides if "=" in str(o))


def _number(value: object) -> bool:
    """A real number (numpy's too), not a bool or NaN."""
    real = isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)
    return real and not math.isnan(float(value))


def _num(value: object) -> str:
    return str(int(value)) if _number(value) else "n/a"
