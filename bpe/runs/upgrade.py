"""Older runs' metrics.json brought up to today's schema, once, as a run is read.

What it does: `read_metrics` is how the reports read a run directory's metrics.json: parsed,
checked (`bpe.runs.schema.malformed`) and passed through `upgrade`, which applies `STEPS` in
order. Each step fills one thing an older writer left out from what that run did record (its
own fields, its saved config), so every reader sees one schema and none keeps a fallback:

- `run.input_name`: runs before it was recorded are filed under the dataset they named, as
  their directories' names and their reports always said;
- `variant`: runs before the BPE family trained plain BPE; a run that failed before it wrote
  the section is of the variant its config asked for;
- `pattern`: runs before split patterns split with GPT-2's (a failed run: its config's
  choice), whose regex `bpe.text.patterns` names; complete runs from before engines split
  their text with the regex engine;
- the retired `read` stage: it only opened the input (about 0.000 s), which stage 1 now does,
  so its time, CPU time and memory samples are stage 1's (`pretokenize`);
- `memory.measure`: runs before it was recorded summed all of PSS (file pages included).

    >>> old = {"status": "complete", "run": {"dataset": "owt_sample"},
    ...        "timings": {"read": 0.25, "pretokenize": 1.0, "merge": 2.0}}
    >>> new = upgrade(old)
    >>> new["run"]["input_name"], new["variant"]["name"], new["pattern"]["name"]
    ('owt_sample', 'bpe', 'gpt2')
    >>> new["timings"]
    {'pretokenize': 1.25, 'merge': 2.0}
    >>> upgrade(new) == new  # a run of today's schema comes back as it was
    True

What it does not do: rewrite the file (a run directory is a record: the upgrade happens as it
is read, every time), or invent a measurement an older run did not make (those keys stay
absent, `always=False` in `bpe.runs.schema`, and reports say "not recorded").
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path

from bpe.runs import schema
from bpe.runs.layout import METRICS_FILE
from bpe.runs.saved_config import run_config
from bpe.runs.sections import VariantRecord
from bpe.text.patterns import resolve_pattern
from bpe.util.io import read_json_object

#: The stage older runs timed before stage 1 ("read": it checked that the input file exists)
#: and the stage that does its work today.
_RETIRED_STAGE, _ITS_STAGE = "read", "pretokenize"


def read_metrics(run_dir: str | Path, *, config: Mapping | None = None) -> dict:
    """A run's metrics.json, parsed and upgraded (`upgrade`, with the run's saved config:
    `config`, or read from the directory).

    Raises:
        FileNotFoundError: the directory has no metrics.json.
        ValueError: metrics.json is not a JSON object, or a field is not of its declared
            type; the message names the file.
    """
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(path.parent)!r} is not a run directory (no {METRICS_FILE}); pass a directory "
            "written by bpe-train"
        )
    try:
        metrics = read_json_object(path)
    except ValueError as err:
        raise ValueError(f"{err}; the run is corrupt") from None
    problem = schema.malformed(metrics)
    if problem is not None:
        raise ValueError(f"{path}: {problem}")
    return upgrade(metrics, run_config(run_dir) if config is None else config)


def upgrade(metrics: Mapping, config: Mapping | None = None) -> dict:
    """`metrics` laid out as today's writer lays it out (a new dict; `metrics` is left as it
    is). `config` is the run's saved config ({}: none), which some steps read."""
    out = copy.deepcopy(dict(metrics))
    for step in STEPS:
        step(out, config or {})
    return out


def _input_name(metrics: dict, config: Mapping) -> None:
    run = metrics.get("run")
    if isinstance(run, dict) and not run.get("input_name") and run.get("dataset"):
        run["input_name"] = str(run["dataset"])


def _variant(metrics: dict, config: Mapping) -> None:
    if isinstance(metrics.get("variant"), dict):
        return
    asked = (config.get("variant") or {}).get("name") or "bpe"
    # every field of the section the writer types, null but the name (plain BPE has none)
    metrics["variant"] = dict.fromkeys(VariantRecord.__annotations__) | {"name": str(asked)}


def _pattern(metrics: dict, config: Mapping) -> None:
    pattern = metrics.get("pattern")
    if isinstance(pattern, dict) and pattern.get("name"):
        return
    chosen = config.get("pretokenizer") or {}
    name = str(chosen.get("name") or "gpt2")
    regex = chosen.get("pattern") or resolve_pattern(name)
    metrics["pattern"] = {**(pattern if isinstance(pattern, dict) else {}), "name": name}
    metrics["pattern"].setdefault("regex", regex)


def _pattern_engine(metrics: dict, config: Mapping) -> None:
    pattern = metrics.get("pattern")
    if metrics.get("status") == "complete" and isinstance(pattern, dict):
        pattern.setdefault("engine", "regex")  # the one engine before engines were recorded


def _retired_read_stage(metrics: dict, config: Mapping) -> None:
    for section in ("timings", "cpu_timings"):
        times = metrics.get(section)
        if isinstance(times, dict) and _RETIRED_STAGE in times:
            spent = times.pop(_RETIRED_STAGE) or 0.0
            if times.get(_ITS_STAGE) is not None:
                times[_ITS_STAGE] = times[_ITS_STAGE] + spent
    memory = metrics.get("memory")
    if not isinstance(memory, dict):
        return
    peaks = memory.get("per_stage_peak_mb")
    if isinstance(peaks, dict) and _RETIRED_STAGE in peaks:
        highest = max(v for k, v in peaks.items() if k in (_RETIRED_STAGE, _ITS_STAGE))
        # in the retired stage's place: the table lists stages in the order they ran
        memory["per_stage_peak_mb"] = {
            (_ITS_STAGE if k == _RETIRED_STAGE else k): (highest if k == _RETIRED_STAGE else v)
            for k, v in peaks.items()
            if k != _ITS_STAGE
        }
    for sample in memory.get("timeline") or ():
        if isinstance(sample, list) and sample and sample[-1] == _RETIRED_STAGE:
            sample[-1] = _ITS_STAGE


#: The upgrade, step by step, oldest change first.
def _memory_measure(metrics: dict, config: Mapping) -> None:
    memory = metrics.get("memory")
    if isinstance(memory, dict):
        memory.setdefault("measure", schema.ALL_PSS)


STEPS: tuple[Callable[[dict, Mapping], None], ...] = (
    _input_name,
    _variant,
    _pattern,
    _pattern_engine,
    _retired_read_stage,
    _memory_measure,
)
