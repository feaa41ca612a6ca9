"""reports/vocabularies.md: how the datasets' vocabularies differ, and how each compares with GPT-2.

What it does: `pick_runs` chooses one complete run per dataset at one vocab size (10,000 when
every dataset has it, else the largest size they share; the heap trainer and then the newest run
preferred); `render_vocabularies` writes the headline numbers (shared learned tokens, top-k
overlap, under-trained tokens and efficiency per run, from metrics.json) followed by the full
comparison of `bpe.analysis.compare.measures` with GPT-2 (data/gpt2) as the last side;
`write_vocabularies` writes the report and its figure. `bpe-report --all` calls it, and
`bpe-report --page vocabularies` trains the two runs on the bundled samples and calls it.

What it does not do: train anything; with fewer than two datasets at a shared vocab size it
writes nothing.
"""

from __future__ import annotations

import logging
import os
from functools import partial
from itertools import combinations
from pathlib import Path

import pandas as pd

from bpe.analysis.compare.measures import compare, jaccard, topk_overlap
from bpe.analysis.compare.report import draw_topk_overlap, render_compare
from bpe.analysis.compare.sides import Side, load_side
from bpe.analysis.loader import complete, read_run
from bpe.analysis.markdown import fmt, generated_by, runs_used, table
from bpe.measures import GPT2_DIR
from bpe.runs import schema
from bpe.runs.layout import MERGES_FILE
from bpe.util.io import atomic_write_text

logger = logging.getLogger(__name__)

#: The vocab size compared when every dataset has a run at it.
PREFERRED_VOCAB = 10000
FIGURE = "figures/vocabularies_topk_overlap.png"


def pick_runs(runs: pd.DataFrame) -> list[Path]:
    """One complete run per dataset at one vocab size (see the module docstring); [] if none.

    `runs` is a `tidy` frame. Runs without merges.txt are left out.
    """
    done = complete(runs)
    done = done[[(Path(d) / MERGES_FILE).is_file() for d in done["run_dir"]]]
    if done["dataset"].nunique() < 2:
        return []
    sizes = set.intersection(*(set(g["vocab_size"]) for _, g in done.groupby("dataset")))
    if not sizes:
        return []
    size = PREFERRED_VOCAB if PREFERRED_VOCAB in sizes else max(sizes)
    chosen = done[done["vocab_size"] == size].assign(_other=lambda f: f["trainer"] != "heap")
    chosen = chosen.sort_values(["dataset", "_other", "run_dir"], ascending=[True, True, False])
    return [Path(p) for p in chosen.groupby("dataset", sort=True).head(1)["run_dir"]]


def render_vocabularies(
    run_dirs: list[Path], sides: list[Side], body: str, *, root: Path, made_by: str
) -> str:
    """The report's Markdown: provenance (`made_by`: `bpe.analysis.markdown.generated_by`),
    headline numbers, then the comparison body.

    `sides` are the runs' sides in the order of run_dirs, then any others (GPT-2).
    """
    metrics = {d: read_run(d)["metrics"] for d in run_dirs}
    labels = [s.label for s in sides]
    lines = [
        f"# Vocabularies: {' vs '.join(labels)}",
        "",
        f"{made_by} from {len(run_dirs)} run(s) in `{root.name}/` and "
        "GPT-2's "
        "files (`data/gpt2`); do not edit by hand. Every number below is computed from the "
        "run directories (vocab, merges, metrics.json) and the held-out files they name.",
        "",
        *runs_used(run_dirs, root),
        "## Headline",
        "",
    ]
    for a, b in combinations(sides, 2):
        la, lb = set(a.learned), set(b.learned)
        curve = topk_overlap(a.learned, b.learned)
        k = min(1000, len(curve))
        lines.append(
            f"- **{a.label} vs {b.label}**: {len(la & lb)} shared learned tokens "
            f"({fmt(100 * len(la & lb) / len(la), '.1f')}% of {a.label}'s {len(la)}; Jaccard "
            f"{fmt(jaccard(la, lb), '.3f')}); of the first {k} merges of each, "
            f"{fmt(100 * curve[k - 1], '.1f') if curve else 'n/a'}% are shared."
        )
    lines += ["", "### Under-trained tokens and efficiency (from each run's metrics.json)", ""]
    rows = []
    for d, side in zip(run_dirs, sides):
        value = partial(schema.get, metrics[d])

        share = value(schema.UNDERTRAINED_INTERMEDIATE_ONLY_SHARE)
        stopped = " (stopped early)" if value(schema.STOPPED_EARLY) else ""
        used = value(schema.EFFICIENCY_VOCAB_USED_SHARE, side="own")
        rows.append(
            [
                side.label,
                f"{value(schema.VOCAB)}"
                + (f" of {value(schema.VOCAB_SIZE)}{stopped}" if stopped else ""),
                value(schema.UNDERTRAINED_INTERMEDIATE_ONLY, "n/a"),
                fmt(100 * share, ".2f") if share is not None else "n/a",
                value(schema.UNDERTRAINED_NEVER_PRODUCED, "n/a"),
                value(schema.UNDERTRAINED_SELF_UNREACHABLE, "n/a"),
                fmt(value(schema.EFFICIENCY_RENYI, side="own"), ".3f"),
                fmt(value(schema.EFFICIENCY_SHANNON, side="own"), ".3f"),
                fmt(value(schema.EFFICIENCY_FERTILITY, side="own"), ".2f"),
                fmt(100 * used, ".1f") if used else "n/a",
            ]
        )
    lines += [
        table(
            rows,
            [
                "run",
                "vocab",
                "intermediate only",
                "% of vocab",
                "never produced",
                "self-unreachable",
                "Rényi eff. (own held-out)",
                "Shannon eff.",
                "tokens/word",
                "% vocab used",
            ],
        ),
        "",
        "Intermediate-only tokens have count 0 when the run's training file is encoded: every "
        "occurrence was merged further, so a model trained on that text never sees them; "
        "never-produced ones are absent from the held-out text as well (see the glossary of a "
        "run's ANALYSIS.md). `n/a`: the run predates these measures. A run that stopped early "
        "ran out of pairs: its last merges join whole rare words, whose pieces then never "
        "occur on their own.",
        "",
        body,
    ]
    return "\n".join(lines)


def write_vocabularies(
    run_dirs: list[Path],
    out_dir: str | os.PathLike,
    *,
    root: Path,
    command: str = "bpe-report --all",
    code: str | None = None,
    gpt2_dir: Path = GPT2_DIR,
) -> Path | None:
    """Write out_dir/vocabularies.md (+ figure) comparing the runs and GPT-2; None if < 2 runs."""
    if len(run_dirs) < 2:
        logger.info("vocabularies.md: fewer than two datasets share a vocab size; skipped")
        return None
    sides = [load_side(d) for d in run_dirs]
    everything = [*sides, load_side(gpt2_dir, label="gpt2")]
    out = Path(out_dir)
    drawn = draw_topk_overlap(everything, out / FIGURE)
    body = render_compare(compare(everything), figure=FIGURE if drawn else None, level=2)
    path = out / "vocabularies.md"
    made_by = generated_by(command, code)
    text = render_vocabularies(run_dirs, everything, body, root=root, made_by=made_by)
    atomic_write_text(path, text + "\n")
    return path
