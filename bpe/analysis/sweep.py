"""SWEEP.md: one report comparing every job of a Hydra multirun, from the job directories only.

What it does, in the steps `write_sweep_report` runs: loads the sweep's job run directories
(`bpe.analysis.loader`); draws figures into `<sweep>/figures/`; gathers the facts every section
reads, once (`gather_sweep`); renders pure `section_*` functions over them (`render_sweep`): a
table of all jobs (failed and unfinished ones as such, never dropped; corrupt ones named),
whether trainers that ran the same input (equal sha256, `loader.input_key`) and vocab size
produced identical merges, which trainer is fastest and by how much; and writes
`<sweep>/SWEEP.md` atomically. `SweepReportCallback` runs it when a multirun ends; since Hydra
skips `on_multirun_end` when a job raises, `bpe-report SWEEP_DIR` produces the same report by
hand.

What it does not do: run jobs, or read anything outside the sweep directory.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bpe.analysis import figures
from bpe.analysis.loader import complete, load_tidy, merges_agree, shown_stages, variant_column
from bpe.analysis.markdown import fmt, table
from bpe.analysis.vocab_report import section_sweep_usage
from bpe.runs import schema
from bpe.runs.layout import FIGURES_DIR, SWEEP_FILE
from bpe.runs.stages import VARIANT_ORDER
from bpe.util.io import atomic_write_text

logger = logging.getLogger(__name__)


def sweep_command(runs: pd.DataFrame, frame: pd.DataFrame) -> str:
    """The `bpe-train -m` command that reproduces the sweep, rebuilt from the jobs' overrides.

    The launcher's overrides (e.g. `hydra/launcher=joblib hydra.launcher.n_jobs=2`) come first.

    >>> jobs = pd.DataFrame({"metrics.run.overrides": [["trainer=naive", "vocab_size=300"],
    ...                                                ["trainer=heap", "vocab_size=300"]]})
    >>> sweep_command(jobs, jobs)
    'bpe-train -m trainer=naive,heap vocab_size=300'
    >>> jobs["metrics.run.launcher.overrides"] = [["hydra/launcher=joblib"]] * 2
    >>> sweep_command(jobs, jobs)
    'bpe-train -m hydra/launcher=joblib trainer=naive,heap vocab_size=300'
    """
    values: dict[str, list[str]] = {}
    columns = [c for c in (schema.LAUNCHER_OVERRIDES.column, schema.OVERRIDES.column) if c in frame]
    for overrides in (item for column in columns for item in frame[column]):
        for item in overrides if isinstance(overrides, list) else []:
            key, _, value = item.partition("=")
            if key in ("experiments_dir", "hydra.sweep.dir", "hydra.run.dir"):
                continue  # where the runs went, not what they were
            bucket = values.setdefault(key, [])
            if value not in bucket:
                bucket.append(value)
    parts = [f"{k}={','.join(v)}" for k, v in values.items()]
    return "bpe-train -m " + " ".join(parts) if parts else "bpe-train -m (overrides unknown)"


def input_groups(runs: pd.DataFrame) -> list[tuple[str, int, pd.DataFrame]]:
    """Complete runs grouped by input (`input_key`) and vocab size: (label, vocab, group).

    The label is the input's name (names, joined by "/", when the same bytes ran under several),
    followed by its short sha256 (or file name, for runs without one) when several inputs share
    that label. Runs whose input is unknown are left out: nothing says they saw the same text.
    Sorted by label, then vocab size. Runs of another split pattern or parent (`init_from`)
    form their own groups, labelled `[pattern]` / `[from parent]`, and so do runs of another
    member of the BPE family (`[picky]`, `[superbpe]`).
    """
    done = complete(runs)
    # Runs with another split pattern, parent or variant learn other merges by design: never
    # one group.
    done = done.assign(_parent=done["init_from"].fillna(""), _variant=variant_column(done))
    groups = []
    by = ["input_key", "vocab_size", "pattern", "_parent", "_variant"]
    for (key, vocab, pattern, parent, variant), group in done.groupby(by, sort=True):
        label = "/".join(sorted({str(d) for d in group["dataset"]}))
        if variant != "bpe":
            label += f" [{variant}]"
        elif pattern != "gpt2":
            label += f" [{pattern}]"
        if parent:
            label += f" [from {Path(parent).name}]"
        groups.append((label, str(key), int(vocab), group.drop(columns=["_parent", "_variant"])))
    keys_per_label: dict[str, set[str]] = {}
    for label, key, _, _ in groups:
        keys_per_label.setdefault(label, set()).add(key)
    out = []
    for label, key, vocab, group in groups:
        if len(keys_per_label[label]) > 1:
            kind, _, value = key.partition(":")
            label += f" ({kind} {value[:12] if kind == 'sha256' else Path(value).name})"
        out.append((label, vocab, group))
    return sorted(out, key=lambda g: (g[0], g[1]))


def trainer_label(row: pd.Series) -> str:
    """A job's trainer, with its variant when it is not plain BPE: `indexed (picky)`."""
    variant = row.get("variant") or "bpe"
    return str(row["trainer"]) if variant == "bpe" else f"{row['trainer']} ({variant})"


def merge_agreement(runs: pd.DataFrame) -> list[tuple[str, int, list[str], bool]]:
    """For each input and vocab size with 2+ complete runs: trainers and whether merges agree.

    Each tuple is (input label, vocab size, trainers, agree); see `input_groups`.
    """
    out = []
    for label, vocab, group in input_groups(runs):
        if len(group) < 2:
            continue
        trainers = sorted(set(group["trainer"]))
        out.append((label, vocab, trainers, merges_agree(*group["merges_sha256"])))
    return out


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


def launcher_note(frame: pd.DataFrame) -> tuple[bool, str]:
    """Whether jobs' timings are not like for like (overlapped, or separate machines), and why.

    >>> launcher_note(pd.DataFrame({"metrics.run.launcher.name": ["basic", "basic"],
    ...                             "metrics.run.launcher.parallel_jobs": [1, 1]}))[1]
    '*Timings are comparable: launcher basic ran the jobs one after another.*'
    """
    names = frame.get(schema.LAUNCHER_NAME.column, pd.Series(dtype=object)).dropna()
    if names.empty:
        return False, (
            "*Launcher not recorded (jobs from an older bpe-lab): timings are comparable only "
            "if the jobs ran one after another, as Hydra's basic launcher runs them.*"
        )
    first = frame.loc[names.index[0]]
    name = str(first[schema.LAUNCHER_NAME.column])
    parallel = frame.get(schema.LAUNCHER_PARALLEL_JOBS.column, pd.Series(dtype=float)).dropna()
    at_once = int(parallel.max()) if not parallel.empty else None
    up_to = f"up to {at_once}" if at_once is not None else "an unknown number of"
    if name == "submitit_slurm":
        cpus = first.get(schema.LAUNCHER_CPUS_PER_TASK.column)
        cpus = f"{int(cpus)} CPU(s) each" if pd.notna(cpus) else "the cluster's default CPUs"
        return True, (
            "> ⚠ **Timings are comparable only within a job.** Launcher submitit_slurm: each "
            f"job ran as its own SLURM job ({cpus}, {up_to} at once), and jobs may run on "
            "different machines (other CPUs, other load), so the times and speedups between "
            "jobs below (marked ⚠) are not like for like; the stage split inside one job is. "
            "To compare trainers' timings, run them in one job, one after another (without "
            "`hydra/launcher=...` on one node)."
        )
    if at_once == 1:
        how = " (n_jobs=1)" if name == "joblib" else ""
        return (
            False,
            f"*Timings are comparable: launcher {name}{how} ran the jobs one after another.*",
        )
    workers = first.get(schema.LAUNCHER_WORKERS_PER_JOB.column)
    workers = (
        f"{int(workers)} pre-tokenization worker(s) per job"
        if pd.notna(workers)
        else "pre-tokenization on every usable CPU of each job"
    )
    start = first.get(schema.START_METHOD.column, "n/a")
    if name == "submitit_local":
        return True, (
            "> ⚠ **Timings are not comparable.** Launcher submitit_local: the jobs ran as "
            f"separate local processes, possibly at the same time ({up_to} at once, {workers}, "
            f"{start}), so they shared this machine's CPUs "
            "and the times and speedups below (marked ⚠) are not like for like. To compare "
            "timings, rerun without `hydra/launcher=...` (one job after another)."
        )
    n_jobs = first.get(schema.LAUNCHER_N_JOBS.column)
    n_jobs = n_jobs if pd.notna(n_jobs) else "n/a"
    return True, (
        f"> ⚠ **Timings are not comparable.** Launcher {name}: n_jobs={n_jobs}, {up_to} "
        f"jobs at once, {workers} ({start}), so jobs shared "
        "the CPUs and the times and speedups below (marked ⚠) are not like for like. To "
        "compare timings, rerun without `hydra/launcher=...` (one job after another) or with "
        "`hydra.launcher.n_jobs=1`."
    )


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


def _figures(runs: pd.DataFrame, frame: pd.DataFrame, out_dir: Path) -> list[tuple[str, str]]:
    made = []
    done = complete(runs)
    if done.empty:
        return made
    if done["vocab_size"].nunique() > 1:
        figures.time_vs_vocab(done, out_dir / "time_vs_vocab.png", time_col="merge_seconds")
        made.append(("Merge time vs vocab size", "figures/time_vs_vocab.png"))
        if "naive" in set(done["trainer"]) and done["trainer"].nunique() > 1:
            figures.speedup_vs_vocab(done, out_dir / "speedup.png", time_col="merge_seconds")
            made.append(("Speedup over naive", "figures/speedup.png"))
        if done["compression"].notna().any():
            gpt2 = done.groupby("dataset")["gpt2_compression"].median().dropna().to_dict()
            figures.compression_vs_vocab(done, out_dir / "compression.png", gpt2=gpt2)
            made.append(("Compression vs vocab size", "figures/compression.png"))
    prefix = f"{schema.PEAK_MB_PER_STAGE.column}."
    stages = shown_stages(c[len(prefix) :] for c in frame.columns if c.startswith(prefix))
    stage_cols = [prefix + s for s in stages]
    if stage_cols:
        values = {}
        for _, row in done.iterrows():
            label = f"{row['trainer']} v{row['vocab_size']}"
            src = frame.loc[frame["run_dir"] == row["run_dir"]].iloc[0]
            base = src.get(schema.BASELINE_MB.column)
            if base is None or pd.isna(base):
                continue  # older runs: absolute peaks do not compare across a sweep's jobs
            values[label] = {
                c.rsplit(".", 1)[1]: max(0.0, float(src[c]) - float(base))
                for c in stage_cols
                if pd.notna(src[c]) and c.rsplit(".", 1)[1] != "setup"
            }
        if values:
            figures.stage_bars(
                values,
                out_dir / "memory_by_stage.png",
                ylabel="MB added above the run's start (process tree)",
                title="Memory each stage added",
            )
            made.append(("Memory each stage added", "figures/memory_by_stage.png"))
    return made


@dataclass(frozen=True)
class SweepFacts:
    """What SWEEP.md is rendered from: the jobs (tidy and raw) and how they were launched."""

    sweep_dir: Path
    frame: pd.DataFrame  # raw metrics, one row per job
    runs: pd.DataFrame  # tidy, one row per job, in job order
    figures: list[tuple[str, str]]  # (title, path relative to the sweep dir)
    overlapped: bool  # jobs ran side by side on one machine: timings not comparable
    launcher_line: str
    why: str  # why timings may not compare ("overlapped jobs", "separate SLURM jobs")

    @property
    def warn(self) -> str:
        return " ⚠" if self.overlapped else ""


def gather_sweep(sweep_dir: Path, frame: pd.DataFrame, runs: pd.DataFrame, fig_list) -> SweepFacts:
    """The facts every section of SWEEP.md reads, worked out once."""
    overlapped, launcher_line = launcher_note(frame)
    launched = frame.get(schema.LAUNCHER_NAME.column, pd.Series(dtype=object)).dropna()
    why = "separate SLURM jobs" if (launched == "submitit_slurm").any() else "overlapped jobs"
    return SweepFacts(sweep_dir, frame, runs, list(fig_list or []), overlapped, launcher_line, why)


def render_sweep(sweep_dir: Path, frame: pd.DataFrame, runs: pd.DataFrame, fig_list) -> str:
    """SWEEP.md text for the jobs in runs (tidy) / frame (raw): its sections, in order."""
    facts = gather_sweep(sweep_dir, frame, runs, fig_list)
    lines = [
        *section_header(facts),
        *section_jobs(facts),
        *section_notes(facts),
        *section_ladder(facts),
        *section_failed(facts),
        *section_skipped(facts),
        *section_findings(facts),
        *section_patterns(runs),
        *section_variants(runs),
        *section_sweep_usage(runs, frame),
        *section_figures(facts),
    ]
    return "\n".join(lines).rstrip() + "\n"


def section_variants(runs: pd.DataFrame) -> list[str]:
    """The BPE family side by side per input and vocab size (sweeps over 2+ variants only)."""
    done = complete(runs)
    if done.empty or variant_column(done).nunique() < 2:
        return []
    done = done.assign(_variant=variant_column(done))
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


def section_header(facts: SweepFacts) -> list[str]:
    """Title, job counts by status, and the command that reruns the sweep."""
    runs, name = facts.runs, facts.sweep_dir.name
    status_counts = runs["status"].value_counts().to_dict()
    counts = ", ".join(f"{status_counts[s]} {s}" for s in sorted(status_counts))
    return [
        f"# Sweep {name}",
        "",
        f"{len(runs)} job(s): {counts}. Generated from the job directories by `bpe-report "
        f"{name}` (or the sweep callback).",
        "",
        "Reproduce:",
        "",
        "```bash",
        sweep_command(runs, facts.frame),
        "```",
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
    if runs["job_num"].notna().sum() > 1 and runs["train_mb"].isna().any():
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
    fig_list = _figures(runs, frame, sweep_dir / FIGURES_DIR)
    out = sweep_dir / SWEEP_FILE
    atomic_write_text(out, render_sweep(sweep_dir, frame, runs, fig_list))
    logger.info("wrote %s", out)
    return out


try:
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover - hydra is a dependency
    Callback = object  # type: ignore[assignment,misc]


#: What the last multirun of this process left: its directory and the jobs that did not
#: complete (`SweepOutcome`), read by `bpe-train` to set its exit status.
LAST_SWEEP: dict[str, object] = {}


@dataclass(frozen=True)
class SweepOutcome:
    """How a sweep's jobs ended: `(job directory name, status, error or None)` for each job
    that did not complete; empty when every job completed."""

    sweep_dir: Path
    jobs: int
    unfinished: tuple[tuple[str, str, str | None], ...]

    def message(self) -> str:
        """One line for stderr: how many jobs did not complete, each with why, and SWEEP.md.

        >>> SweepOutcome(Path("s"), 2, (("0_a", "failed", "boom"),)).message()
        '1 of 2 job(s) did not complete: 0_a failed (boom); see s/SWEEP.md'
        """
        said = "; ".join(
            f"{name} {status}" + (f" ({error})" if error else "")
            for name, status, error in self.unfinished
        )
        return (
            f"{len(self.unfinished)} of {self.jobs} job(s) did not complete: {said}; "
            f"see {self.sweep_dir / SWEEP_FILE}"
        )


def sweep_outcome(sweep_dir: Path) -> SweepOutcome:
    """Read each job's status (a `running` job whose process is gone reads crashed)."""
    _, runs = load_tidy(sweep_dir, hint="pass a sweep directory written by `bpe-train -m`")
    bad = runs[runs["status"] != "complete"]
    unfinished = tuple(
        (
            Path(r["run_dir"]).name,
            str(r["status"]),
            r["error"] if isinstance(r["error"], str) else None,
        )
        for _, r in bad.sort_values("run_dir").iterrows()
    )
    return SweepOutcome(sweep_dir, len(runs), unfinished)


#: The file a running sweep holds in its directory: `{"pid": ...}` of its `bpe-train -m`.
SWEEP_LOCK = ".sweep.lock"


def claim_sweep_dir(sweep_dir: Path) -> None:
    """Take the sweep directory for this process, or refuse it while another live sweep holds
    it (two sweeps into one directory would mix their jobs and logs). A lock left by a sweep
    whose process is gone is taken over.

    Raises:
        FileExistsError: another running sweep holds sweep_dir.
    """
    sweep_dir.mkdir(parents=True, exist_ok=True)
    lock = sweep_dir / SWEEP_LOCK
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                pid = int(json.loads(lock.read_text("utf-8"))["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                pid = None
            if pid is not None and pid != os.getpid() and _alive(pid):
                raise FileExistsError(
                    f"sweep directory {str(sweep_dir)!r} is used by another running sweep "
                    f"(process {pid}); pass another hydra.sweep.dir, or wait for it to end"
                ) from None
            lock.unlink(missing_ok=True)  # left by a sweep that is gone (or by this process)
            continue
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps({"pid": os.getpid()}))
        return


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SweepReportCallback(Callback):
    """Hydra callback: write SWEEP.md when a multirun ends (never raises), and record in
    `LAST_SWEEP` which jobs did not complete, so `bpe-train -m` exits non-zero for them."""

    def on_multirun_start(self, config, **kwargs) -> None:  # noqa: ARG002
        LAST_SWEEP.clear()
        LAST_SWEEP["sweep_dir"] = Path(config.hydra.sweep.dir)
        claim_sweep_dir(Path(config.hydra.sweep.dir))

    def on_multirun_end(self, config, **kwargs) -> None:  # noqa: ARG002
        sweep_dir = Path(config.hydra.sweep.dir)
        try:
            write_sweep_report(sweep_dir)
            LAST_SWEEP["outcome"] = sweep_outcome(sweep_dir)
        except Exception as err:  # noqa: BLE001 - a report failure must not fail the sweep
            logger.error("could not write the sweep report: %s (run bpe-report SWEEP_DIR)", err)
