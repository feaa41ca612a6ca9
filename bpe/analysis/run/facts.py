"""What ANALYSIS.md is made from: one run's files read into a `RunFacts` (metrics.json,
environment.json, the profile's summary, which figures exist, and the sibling runs on the same
input with whether their merges agree), and its figures drawn.

What it does not do: render Markdown (`bpe.analysis.run.report` and its sections do).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

from bpe.analysis import figures
from bpe.analysis.loader import (
    complete,
    input_key,
    load_runs,
    merges_agree,
    tidy,
)
from bpe.analysis.markdown import measure_label
from bpe.runs import schema
from bpe.runs.layout import (
    ENVIRONMENT_FILE,
    FIGURES,
    MERGE_COUNTS_FILE,
    MERGES_FILE,
    PROFILE_DIR,
    PROFILE_SUMMARY,
    experiments_root,
)
from bpe.runs.saved_config import run_config
from bpe.runs.settings import analysis_setting

logger = logging.getLogger(__name__)


def load_json(path: Path):
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _merges_lines(run_dir: Path) -> list[str] | None:
    try:
        lines = (run_dir / MERGES_FILE).read_text("utf-8").splitlines()
    except OSError:
        return None
    return [ln for ln in lines if ln and not ln.startswith("#version")]


def _value(x):
    """A pandas cell as a plain Python value; NaN and None become None."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return x.item() if hasattr(x, "item") else x


def merges_verdict(same: bool, mine: list[str], theirs: list[str] | None) -> str:
    """How a sibling's merges compare with this run's, for the siblings table.

    `same` is `merges_agree` of the two runs; otherwise the merge lists are compared, since a
    run with a smaller vocab should hold the first merges of a larger one.

    >>> merges_verdict(True, [], None), merges_verdict(False, ["a b"], None)
    ('identical', 'n/a')
    >>> merges_verdict(False, ["a b", "c d"], ["a b"]), merges_verdict(False, ["a b"], ["c d"])
    ('same first 1', 'DIFFERENT')
    """
    if same:
        return "identical"
    if theirs is None:
        return "n/a"
    n = min(len(theirs), len(mine))
    return f"same first {n}" if theirs[:n] == mine[:n] else "DIFFERENT"


def run_input_key(metrics: dict) -> str | None:
    """`loader.input_key` of a run's metrics (older runs: their input path)."""
    return input_key(
        schema.get(metrics, schema.INPUT_SHA256), schema.get(metrics, schema.INPUT_PATH)
    )


def sibling_rows(run_dir: Path, metrics: dict) -> list[dict]:
    """Complete runs on the same input in the experiments dir, other than this one; each
    says its variant, and whether it is this run's (`same_variant`): another member of the
    BPE family learns other merges by design, so its merges are compared only as such."""
    root = experiments_root(run_dir)
    runs = complete(tidy(load_runs(root)))
    mine_key = run_input_key(metrics)
    runs = runs[runs["input_key"] == mine_key] if mine_key else runs.iloc[0:0]
    my_variant = schema.get(metrics, schema.VARIANT_NAME)
    variants = runs["variant"]
    mine = _merges_lines(run_dir) or []  # a run that failed early has no merges.txt
    rows = []
    for idx, r in runs.iterrows():
        other = Path(r["run_dir"])
        if other.resolve() == run_dir.resolve():
            continue
        variant = str(variants[idx])
        if variant != my_variant:  # another BPE-family member: listed, never compared
            rows.append(
                _sibling_row(
                    r,
                    other,
                    root,
                    variant,
                    None,
                    f"{variant}: differs by design",
                    same_variant=False,
                )
            )
            continue
        same = merges_agree(schema.get(metrics, schema.MERGES_SHA256), _value(r["merges_sha256"]))
        agree = merges_verdict(same, mine, None if same else _merges_lines(other))
        rows.append(_sibling_row(r, other, root, variant, same, agree, same_variant=True))
    rows.sort(
        key=lambda r: (not r["same_variant"], r["vocab_size"] or 0, r["trainer"] or "", r["rel"])
    )
    return rows


def _sibling_row(
    r, other: Path, root: Path, variant: str, same: bool | None, agree: str, *, same_variant: bool
) -> dict:
    """One sibling run as the siblings table shows it: `same` whether its merges equal this
    run's (None: unknown, or another member of the BPE family, whose merges differ by design),
    `agree` the verdict shown."""
    vocab_size = _value(r["vocab_size"])
    return {
        "name": other.name,
        "rel": other.relative_to(root).as_posix(),
        "trainer": _value(r["trainer"]),
        # a float column when any run lacks it; the table shows whole numbers
        "vocab_size": None if vocab_size is None else int(vocab_size),
        "profiled": bool(r["profiled"]),
        "merge": _value(r["merge_seconds"]),
        "total": _value(r["total_seconds"]),
        "train_mb": _value(r["train_mb"]),
        "same_merges": same,
        "agree": agree,
        "variant": variant,
        "same_variant": same_variant,
    }


def draw_figures(run_dir: Path, metrics: dict) -> None:
    """Draw the run's figures into run_dir/figures (those its files have data for), each as a
    PNG and in the other formats its `analysis.figure_formats` names (`bpe-report
    --figure-formats` adds to them)."""
    try:
        asked = analysis_setting(run_config(run_dir).get("analysis"), "figure_formats")
    except ValueError:  # a damaged config.yaml: the report says so elsewhere; PNGs still drawn
        asked = []
    with figures.also_as([*(asked or []), *figures.saved_also()]):
        _draw_figures(run_dir, metrics)


def _draw_figures(run_dir: Path, metrics: dict) -> None:
    timeline = schema.get(metrics, schema.MEMORY_TIMELINE) or []
    if timeline:
        spans = []
        for t, _mb, stage in timeline:
            if spans and spans[-1][0] == stage:
                spans[-1][2] = t
            else:
                spans.append([stage, t, t])
        label = f"process tree ({measure_label(metrics)}, MB)"
        figures.memory_timeline(
            {label: [(t, mb) for t, mb, _ in timeline]},
            run_dir / FIGURES["memory"],
            stages=[tuple(s) for s in spans],
            title=f"Memory during {schema.get(metrics, schema.RUN_NAME)}",
        )
    lengths = schema.get(metrics, schema.TOKEN_LENGTHS) or {}
    if lengths:
        figures.token_lengths(
            lengths, run_dir / FIGURES["lengths"], title="Vocab entries by length"
        )
    counts = load_json(run_dir / MERGE_COUNTS_FILE)
    if counts:
        figures.line(
            {"count": counts},
            run_dir / FIGURES["merge_counts"],
            xlabel="merge step k",
            ylabel="occurrences of the k-th merged pair",
            title="How frequent the k-th merge is",
            log_y=True,
        )


@dataclass(frozen=True)
class RunFacts:
    """Everything ANALYSIS.md says, read from the run directory before rendering."""

    metrics: dict
    env: dict = field(default_factory=dict)
    profile: dict | None = None
    #: the keys of FIGURES whose file exists
    figures: frozenset[str] = frozenset()
    siblings: list[dict] = field(default_factory=list)


def gather_run(run_dir: Path, metrics: dict) -> RunFacts:
    """Read what the report of run_dir shows besides its metrics (drawn figures included)."""
    return RunFacts(
        metrics=metrics,
        env=load_json(run_dir / ENVIRONMENT_FILE) or {},
        profile=load_json(run_dir / PROFILE_DIR / PROFILE_SUMMARY),
        figures=frozenset(k for k, rel in FIGURES.items() if (run_dir / rel).is_file()),
        siblings=sibling_rows(run_dir, metrics),
    )
