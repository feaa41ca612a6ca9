"""ANALYSIS.md for one run, computed from the files in its run directory only.

What it does, in three steps that `write_run_report` runs in order:

    draw     the run's figures (memory timeline, token lengths, merge counts) into `figures/`
             (`bpe.analysis.run.facts.draw_figures`)
    gather   `gather_run` (`bpe.analysis.run.facts`): reads metrics.json, environment.json and
             profile/summary.json, which figures exist, and the sibling runs on the same input
             (equal sha256, see `loader.input_key`) in the experiments directory (with whether
             their merges agree) into one `RunFacts`
    render   `render_analysis`: pure `section_*` functions over the `RunFacts`, no file access:
             the run's (`bpe.analysis.run.sections`), the tokenizer's
             (`bpe.analysis.run.token_sections`) and the vocabulary's
             (`bpe.analysis.vocab_sections`)

and writes ANALYSIS.md atomically. `bpe-report RUN_DIR` calls it again at any time and, for
unchanged inputs, writes the same bytes. Stages are listed in the order metrics.json recorded
them, as `bpe.runs.upgrade` reads an older run (its retired `read` stage is stage 1's).

What it does not do: measure anything (training did), or touch any file but ANALYSIS.md and
figures/.
"""

from __future__ import annotations

import logging
from pathlib import Path

from bpe.analysis.language_sections import section_languages
from bpe.analysis.loader import observed
from bpe.analysis.run.facts import RunFacts, draw_figures, gather_run
from bpe.analysis.run.sections import (
    section_header,
    section_memory,
    section_profile,
    section_time,
)
from bpe.analysis.run.sibling_sections import section_siblings
from bpe.analysis.run.summary import section_summary
from bpe.analysis.run.token_sections import (
    section_bits_per_byte,
    section_compression,
    section_longest_tokens,
    section_throughput,
)
from bpe.analysis.vocab_sections import (
    section_efficiency,
    section_glossary,
    section_segmentation,
    section_undertrained,
)
from bpe.runs.layout import (
    ANALYSIS_FILE,
)
from bpe.runs.saved_config import run_config
from bpe.runs.upgrade import read_metrics, upgrade
from bpe.util.io import atomic_write_text

logger = logging.getLogger(__name__)


def render_analysis(facts: RunFacts) -> str:
    """The Markdown text of ANALYSIS.md: its sections in order (no file is read)."""
    sections = (
        section_header(facts.metrics, facts.env),
        section_summary(facts.metrics),
        section_time(facts.metrics),
        section_memory(facts.metrics, facts.figures),
        section_profile(facts.metrics, facts.profile),
        section_longest_tokens(facts.metrics, facts.figures),
        section_compression(facts.metrics),
        section_efficiency(facts.metrics),
        section_bits_per_byte(facts.metrics),
        section_segmentation(facts.metrics),
        section_languages(facts.metrics),
        section_undertrained(facts.metrics),
        section_throughput(facts.metrics),
        section_siblings(facts.metrics, facts.siblings),
        section_glossary(),
    )
    return "\n".join(line for section in sections for line in section)


def write_run_report(run_dir: str | Path, *, metrics: dict | None = None) -> Path:
    """(Re)generate figures and ANALYSIS.md of a run directory; returns the report path.

    Args:
        metrics: the run's metrics when the caller holds a newer copy than metrics.json
            (training renders the report just before it flips the status to complete).

    Raises:
        FileNotFoundError: run_dir has no metrics.json.
        ValueError: metrics.json is not valid JSON.
    """
    run_dir = Path(run_dir)
    # today's schema, whatever the writer's age (`bpe.runs.upgrade`)
    metrics = read_metrics(run_dir) if metrics is None else upgrade(metrics, run_config(run_dir))
    metrics = observed(metrics)  # a `running` run whose process is gone shows as crashed
    draw_figures(run_dir, metrics)
    text = render_analysis(gather_run(run_dir, metrics))
    out = run_dir / ANALYSIS_FILE
    atomic_write_text(out, text + "\n")
    return out
