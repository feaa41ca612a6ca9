"""SWEEP.md's sections: pure functions of a `SweepFacts` (the jobs table, patterns, variants,
notes, the ladder, failures, findings, memory and figures).

What it does not do: read files (`bpe.analysis.sweep.facts`) or write SWEEP.md.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from bpe.analysis.loader import complete
from bpe.analysis.markdown import fmt, table
from bpe.analysis.sweep.facts import (
    SweepFacts,
    input_groups,
    merge_agreement,
    sweep_command,
    trainer_label,
)
from bpe.runs import schema
from bpe.runs.stages import VARIANT_ORDER

logger = logging.getLogger(__name__)


def section_patterns(runs: pd.DataFrame) -> list[str]:
    """Split patterns side by side (sweeps over more than one pattern only)."""
    done = complete(runs)
    if done.empty or done["pattern"].nunique() < 2:
        return []
    rows = [
        [
            r["dataset"],
            r["pattern"],
            fmt(r["vocab_size"], "d"),
            fmt(r["pretokens"], ".0f"),
            fmt(r["unique_pretokens"], ".0f"),
            fmt(r["compression"], ".3f"),
            f"{fmt(r['other_compression'], '.3f')} ({r['other_dataset']})"
            if isinstance(r["other_dataset"], str)
            else "n/a",
        ]
        for _, r in done.sort_values(["dataset", "vocab_size", "pattern"]).iterrows()
    ]
    return [
        "## Split patterns",
        "",
        "Pretokens of the training corpus and held-out compression (bytes per token) per split "
        "pattern; each run's ANALYSIS.md shows its regex.",
        "",
        table(
            rows,
            [
                "dataset",
                "pattern",
                "vocab",
                "pretokens",
                "unique pretokens",
                "bytes/token (own)",
                "bytes/token (other)",
            ],
        ),
        "",
    ]


def speed_sentences(runs: pd.DataFrame) -> list[str]:
    """Per input and vocab: the fastest unprofiled trainer and its speedup over the others."""
    sentences = []
    clean = runs[~runs["profiled"]]
    for label, vocab, group in input_groups(clean):
        med = group.groupby("trainer")["merge_seconds"].median().dropna()
        if len(med) < 2:
            continue
        best = med.idxmin()
        others = ", ".join(
            f"{fmt(med[t] / med[best], '.1f')}x faster than {t}"
            for t in sorted(med.index)
            if t != best
        )
        sentences.append(
            f"{label} @ {vocab}: **{best}** merges fastest ({fmt(med[best], '.3f')} s), {others}."
        )
    return sentences


def backend_note(frame: pd.DataFrame) -> str | None:
    """What SWEEP.md says about the pre-tokenization backend (None when no job recorded one).

    Total times include pre-tokenization, so a backend that differs between jobs makes them
    unlike; a LocalCluster's start is part of each job's time.

    >>> backend_note(pd.DataFrame({"metrics.backend.name": ["dask", "dask"],
    ...                            "metrics.backend.scheduler": ["LocalCluster(2)"] * 2}))
    '*Pre-tokenization backend: dask on LocalCluster(2) in every job (total times include starting the cluster).*'
    """  # noqa: E501
    names = frame.get(schema.BACKEND_NAME.column, pd.Series(dtype=object)).dropna()
    if names.empty:
        return None
    schedulers = frame.get(
        schema.BACKEND_SCHEDULER.column, pd.Series(index=frame.index, dtype=object)
    )
    labels = sorted(
        {
            f"{n} on {schedulers[i]}" if n == "dask" and pd.notna(schedulers[i]) else str(n)
            for i, n in names.items()
        }
    )
    if len(labels) > 1:
        return (
            f"> ⚠ **Pre-tokenization backends differ between jobs** ({', '.join(labels)}): "
            "their pre-tokenization and total times are not like for like."
        )
    local = "LocalCluster" in labels[0]
    started = " (total times include starting the cluster)" if local else ""
    return f"*Pre-tokenization backend: {labels[0]} in every job{started}.*"


def _job_label(row: pd.Series, sweep_dir: Path) -> str:
    try:
        return Path(row["run_dir"]).relative_to(sweep_dir).as_posix()
    except ValueError:
        return row["run_name"]


def section_variants(runs: pd.DataFrame) -> list[str]:
    """The BPE family side by side per input and vocab size (sweeps over 2+ variants only)."""
    done = complete(runs)
    if done.empty or done["variant"].nunique() < 2:
        return []
    done = done.assign(_variant=done["variant"])
    order = {v: k for k, v in enumerate(VARIANT_ORDER)}
    rows = []
    for (dataset, vocab), group in done.groupby(["dataset", "vocab_size"], sort=True):
        for _, r in group.sort_values("_variant", key=lambda s: s.map(order)).iterrows():
            rows.append(
                [
                    dataset,
                    fmt(vocab, "d"),
                    r["_variant"],
                    r["trainer"],
                    fmt(r["compression"], ".3f"),
                    fmt(r["merges"], ".0f"),
                    fmt(r["train_seconds"], ".2f"),
                    fmt(r["train_mb"], ".1f"),
                ]
            )
    header = [
        "dataset",
        "vocab",
        "variant",
        "trainer",
        "bytes/token",
        "merges",
        "train s",
        "training MB added",
    ]
    return [
        "## Variants",
        "",
        "The members of the BPE family at the same vocab size (bytes/token on held-out "
        "documents: higher is fewer tokens; a PickyBPE run makes more merges than its vocab "
        "holds, as removed tokens free their slots).",
        "",
        table(rows, header),
        "",
    ]


def _sweep_arg(sweep_dir: Path) -> str:
    """The sweep directory as `bpe-report` takes it from where the experiments directory is
    (the repository, for the default `experiments/`).

    >>> _sweep_arg(Path("/x/experiments/sweeps/2026-01-01_00-00-00_000000"))
    'experiments/sweeps/2026-01-01_00-00-00_000000'
    """
    return Path(sweep_dir.parent.parent.name, sweep_dir.parent.name, sweep_dir.name).as_posix()


def section_header(facts: SweepFacts) -> list[str]:
    """Title, job counts by status, and the command that reruns the sweep."""
    runs, name = facts.runs, facts.sweep_dir.name
    status_counts = runs["status"].value_counts().to_dict()
    counts = ", ".join(f"{status_counts[s]} {s}" for s in sorted(status_counts))
    return [
        f"# Sweep {name}",
        "",
        f"{len(runs)} job(s): {counts}. Generated from the job directories by `bpe-report "
        f"{_sweep_arg(facts.sweep_dir)}` (or the sweep callback).",
        "",
        *_memory_caveat(runs),
        "Reproduce:",
        "",
        "```bash",
        facts.search.record["command"] if facts.search else sweep_command(runs, facts.frame),
        "```",
        "",
    ]


def _laddered(runs: pd.DataFrame) -> pd.Series:
    """Which jobs were cut from a vocab ladder's one training (their memory is not theirs)."""
    column = runs.get("ladder_trained_in")
    return pd.Series(False, index=runs.index) if column is None else column.notna()


def _memory_caveat(runs: pd.DataFrame) -> list[str]:
    """The first lines' warning when the jobs' training memory cannot be compared, and the one
    setting that makes it comparable (none when every job measured its own)."""
    laddered = int(_laddered(runs).sum())
    if not laddered:
        return []
    return [
        f"> **Training memory is not compared:** {laddered} job(s) were cut from one training "
        "of the vocab ladder, whose memory is that training's, not each vocab's. Rerun with "
        "`ladder=false` to train (and measure) every job on its own.",
        "",
    ]


def section_jobs(facts: SweepFacts) -> list[str]:
    """One row per job: what it trained, how long it took, its memory, merges and compression."""
    rows = []
    for _, r in facts.runs.iterrows():
        rows.append(
            [
                _job_label(r, facts.sweep_dir),
                _dataset_cell(r),
                trainer_label(r),
                fmt(r["vocab_size"], "d"),
                r["status"],
                fmt(r["merge_seconds"], ".3f"),
                fmt(r["total_seconds"], ".3f") + (" ¹" if r["pretoken_cache"] == "hit" else ""),
                fmt(r["train_mb"], ".1f") + (" ¹" if r["pretoken_cache"] == "hit" else ""),
                fmt(r["merges"], ".0f"),
                (r["merges_sha256"] or "")[:12] if isinstance(r["merges_sha256"], str) else "n/a",
                fmt(r["compression"], ".3f"),
                fmt(r["bits_per_byte"], ".3f"),
            ]
        )
    warn = facts.warn
    header = [
        "job",
        "dataset",
        "trainer",
        "vocab",
        "status",
        f"merge s{warn}",
        f"total s{warn}",
        "training MB added",
        "merges",
        "merges sha256",
        "bytes/token",
        "bits/byte",
    ]
    return ["## Jobs", "", table(rows, header), ""]


def _dataset_cell(row: pd.Series) -> object:
    """The input's name, and for a corpus of several files or of records what it holds:
    `custom-shards (3 files, 1.57 MB, parquet)`; a single text file shows its name alone."""
    said = row.get("input_summary")
    return f"{row['dataset']} ({said})" if isinstance(said, str) and said else row["dataset"]


def section_notes(facts: SweepFacts) -> list[str]:
    """What qualifies the table: cache hits, the launcher, the backend, shared memory, profiling."""
    runs, frame = facts.runs, facts.frame
    lines: list[str] = []
    if (runs["pretoken_cache"] == "hit").any():
        lines += [
            "¹ Pretoken cache hit: the job loaded its pretoken counts instead of counting them, "
            "so its total and its training memory hold no pre-tokenization; compare them only "
            "between jobs marked alike (merge seconds compare across both).",
            "",
        ]
    lines += [facts.launcher_line, ""]
    lines += [
        "Training MB added: what the job's training (stages 1-3) added to its process tree "
        "above the memory the process held when the job began, so a job that ran late in a "
        "process earlier jobs used compares with one that ran alone; metrics.json's "
        "`memory.peak_mb` is the whole run's, analysis included.",
        "",
    ]
    backends = backend_note(frame)
    if backends is not None:
        lines += [backends, ""]
    older = runs["train_mb"].isna() & ~_laddered(runs) & (runs["status"] == "complete")
    if runs["job_num"].notna().sum() > 1 and older.any():
        lines += [
            "*Jobs without training MB added predate it: their memory was the whole process "
            "tree's, which in a sweep includes what earlier jobs left behind (imports, "
            "caches), so it is not shown or ranked.*",
            "",
        ]
    if runs["profiled"].any():
        lines += ["*Some jobs ran under a profiler: their times include its overhead.*", ""]
    return lines


def section_ladder(facts: SweepFacts) -> list[str]:
    """Which runs were cut from one training (the vocab ladder), and what their times mean."""
    frame = facts.frame
    if schema.LADDER_TRAINED_IN.column not in frame.columns:
        return []
    by_dir = frame.set_index("run_dir")
    ladders: dict[str, list[tuple[str, int, float, float]]] = {}
    for _, r in facts.runs.iterrows():
        if r["run_dir"] not in by_dir.index:
            continue
        src = by_dir.loc[r["run_dir"]]
        trained_in = src.get(schema.LADDER_TRAINED_IN.column)
        if not isinstance(trained_in, str):
            continue
        largest = int(src[schema.LADDER_LARGEST_VOCAB.column])
        ladders.setdefault(f"{trained_in}\0{largest}", []).append(
            (
                _job_label(r, facts.sweep_dir),
                int(r["vocab_size"]),
                src.get(schema.LADDER_RUNG_SECONDS.column),
                src.get(schema.LADDER_MERGES_PER_SECOND.column),
            )
        )
    if not ladders:
        return []
    lines = [
        "## Vocab ladder",
        "",
        "BPE's merges are a prefix sequence, so these runs were cut from one training to the "
        "largest vocab (`ladder: true`, the default; `ladder=false` trains each job directly). "
        "Each cut run's *merge s* is the time at which that one training reached its vocab "
        "(stages 2-3, as a direct run times them); its pre-tokenization is the training's.",
        "",
    ]
    for both, rungs in ladders.items():
        trained_in, largest = both.split("\0")
        cut = ", ".join(
            f"`{job}` (v{vocab}: {fmt(seconds, '.3f')} s, {fmt(rate, ',.0f')} merges/s)"
            for job, vocab, seconds, rate in rungs
        )
        lines.append(f"- One training to v{largest} in `{trained_in}` served: {cut}.")
    return [*lines, ""]


def section_failed(facts: SweepFacts) -> list[str]:
    failed = facts.runs[facts.runs["status"] != "complete"]
    if failed.empty:
        return []
    lines = ["## Failed or unfinished jobs", ""]
    for _, r in failed.iterrows():
        err = r["error"] if isinstance(r["error"], str) else "no error recorded (killed?)"
        lines.append(f"- `{_job_label(r, facts.sweep_dir)}`: **{r['status']}**: {err}")
    return [*lines, ""]


def section_skipped(facts: SweepFacts) -> list[str]:
    skipped = facts.frame.attrs.get("skipped") or []
    if not skipped:
        return []
    lines = ["## Skipped (corrupt) job directories", ""]
    for path, reason in skipped:
        name = Path(path).name
        lines.append(f"- `{name}`: {reason.replace(str(Path(path)), name)}")
    return [*lines, ""]


def section_findings(facts: SweepFacts) -> list[str]:
    """Whether trainers agreed, who was faster, who needed the most memory."""
    runs = facts.runs
    lines = ["## Findings", ""]
    agreement = merge_agreement(runs)
    for dataset, vocab, trainers, same in agreement:
        verdict = "identical merges" if same else "**DIFFERENT merges**"
        lines.append(f"- {dataset} @ {vocab}: {', '.join(trainers)} produced {verdict}.")
    for sentence in speed_sentences(runs):
        lines.append(f"- {f'⚠ ({facts.why}) ' if facts.overlapped else ''}{sentence}")
    done = complete(runs)
    lines += memory_sentences(done)
    if not agreement and done.empty:
        lines.append("- No job completed, so there is nothing to compare.")
    return [*lines, ""]


#: Differences in memory added below this (or 10%) are not called a ranking: allocator pages,
#: imports done on first use and the sampling interval move a stage's figure by a few MB.
MEMORY_NOISE_MB = 5.0


def memory_sentences(done: pd.DataFrame) -> list[str]:
    """Which job's merge stage added the most memory, among jobs whose figures compare: each
    trained itself (not cut from a vocab ladder, whose training ran in another job) and
    unprofiled (a profiler adds its own memory), with training's memory recorded."""
    if done.empty or "merge_mb" not in done:
        return []
    # ladder rungs have no memory of their own (`tidy` leaves it out)
    fair = done[~done["profiled"].fillna(False).astype(bool) & done["merge_mb"].notna()]
    left_out = len(done) - len(fair)
    if len(fair) < 2:
        return (
            []
            if left_out == 0
            else [
                f"- Memory: no ranking ({len(fair)} job(s) with comparable training memory; "
                f"{left_out} cut from a vocab ladder, profiled or from before training's memory "
                "was recorded apart)."
            ]
        )
    added = fair["merge_mb"].astype(float).sort_values(ascending=False)
    if added.iloc[0] - added.iloc[1] < max(MEMORY_NOISE_MB, 0.1 * added.iloc[0]):
        return [
            f"- Memory: no job's merge stage stood out (the two largest added "
            f"{fmt(added.iloc[0], '.1f')} and {fmt(added.iloc[1], '.1f')} MB, within the "
            f"sampler's noise of {MEMORY_NOISE_MB:.0f} MB or 10%)."
        ]
    top = fair.loc[added.index[0]]
    note = f" ({left_out} job(s) not ranked: ladder rungs, profiled or older)" if left_out else ""
    return [
        f"- Most memory added by the merge stage (stages 2-3, where trainers differ): "
        f"{top['trainer']} @ {int(top['vocab_size'])} on {top['dataset']}, "
        f"+{fmt(top['merge_mb'], '.1f')} MB above its run's start{note}."
    ]


def section_figures(facts: SweepFacts) -> list[str]:
    if not facts.figures:
        return []
    lines = ["## Figures", ""]
    for title, path in facts.figures:
        if facts.overlapped and path in ("figures/time_vs_vocab.png", "figures/speedup.png"):
            title += f" (⚠ {facts.why}: timings not comparable)"
        lines += [f"![{title}]({path})", ""]
    return lines
