"""SWEEP.md: one report comparing every job of a Hydra multirun, from the job directories only.

What it does, in the steps `write_sweep_report` runs: loads the sweep's job run directories
(`bpe.analysis.loader`); draws figures into `<sweep>/figures/`; gathers the facts every section
reads, once (`gather_sweep`); renders pure `section_*` functions over them (`render_sweep`): a
table of all jobs (failed and unfinished ones as such, never dropped; corrupt ones named),
whether trainers that ran the same input (equal sha256, `loader.input_key`) and vocab size
produced identical merges, which trainer is fastest and by how much; and writes
`<sweep>/SWEEP.md` atomically. The facts are gathered in `bpe.analysis.sweep.facts`, the
sections live in `bpe.analysis.sweep.sections`; a search's trials, ranked best first, in
`bpe.analysis.sweep.search`. `SweepReportCallback`
(`bpe.cli.sweep_process`) runs it when a multirun ends; since Hydra skips
`on_multirun_end` when a job raises, `bpe-report SWEEP_DIR` produces the same report by hand.

What it does not do: run jobs, or read anything outside the sweep directory.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from bpe.analysis.loader import load_tidy
from bpe.analysis.pages.data_curve import section_data_curve
from bpe.analysis.sweep.facts import draw_sweep_figures, gather_sweep
from bpe.analysis.sweep.search import section_search
from bpe.analysis.sweep.sections import (
    section_failed,
    section_figures,
    section_findings,
    section_header,
    section_jobs,
    section_ladder,
    section_notes,
    section_patterns,
    section_skipped,
    section_variants,
)
from bpe.analysis.vocab_sections import section_sweep_usage
from bpe.runs.layout import FIGURES_DIR, SWEEP_FILE
from bpe.util.io import atomic_write_text, shown_path

logger = logging.getLogger(__name__)


def render_sweep(sweep_dir: Path, frame: pd.DataFrame, runs: pd.DataFrame, fig_list) -> str:
    """SWEEP.md text for the jobs in runs (tidy) / frame (raw): its sections, in order."""
    facts = gather_sweep(sweep_dir, frame, runs, fig_list)
    lines = [
        *section_header(facts),
        *section_search(facts.search),
        *section_jobs(facts),
        *section_notes(facts),
        *section_ladder(facts),
        *section_failed(facts),
        *section_skipped(facts),
        *section_findings(facts),
        *section_patterns(runs),
        *section_variants(runs),
        *section_data_curve(frame, runs),
        *section_sweep_usage(runs, frame),
        *section_figures(facts),
    ]
    return "\n".join(lines).rstrip() + "\n"


def write_sweep_report(sweep_dir: str | Path) -> Path:
    """Write SWEEP.md (+ figures) for the job directories in sweep_dir; returns its path.

    Raises:
        FileNotFoundError: sweep_dir does not exist.
        ValueError: sweep_dir holds no job directories.
    """
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise FileNotFoundError(f"sweep directory {str(sweep_dir)!r} does not exist")
    frame, runs = load_tidy(sweep_dir, hint="pass a sweep directory written by `bpe-train -m`")
    runs = runs.sort_values(["job_num", "run_dir"], kind="stable", na_position="last")
    fig_list = draw_sweep_figures(runs, frame, sweep_dir / FIGURES_DIR)
    out = sweep_dir / SWEEP_FILE
    atomic_write_text(out, render_sweep(sweep_dir, frame, runs, fig_list))
    logger.info("wrote %s", shown_path(out))
    return out
