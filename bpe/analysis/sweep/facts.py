"""What SWEEP.md is made from: a sweep's jobs loaded and grouped by input, whether trainers on
the same input and vocab produced the same merges, the figures drawn, into one `SweepFacts`.

What it does not do: render Markdown (`bpe.analysis.sweep.sections`, `bpe.analysis.sweep.report`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bpe.analysis import figures
from bpe.analysis.loader import complete, merges_agree, shown_stages
from bpe.analysis.sweep.search import SearchFacts, best_first, search_facts
from bpe.runs import schema
from bpe.runs.stages import COMPILE, TRAIN_STAGES

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
    done = done.assign(_parent=done["init_from"].fillna(""), _variant=done["variant"])
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


def draw_sweep_figures(
    runs: pd.DataFrame, frame: pd.DataFrame, out_dir: Path
) -> list[tuple[str, str]]:
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
    # training's stages only: save, analysis and the report load what training never needs
    training = (TRAIN_STAGES[0], COMPILE, *TRAIN_STAGES[1:])
    stages = shown_stages(c[len(prefix) :] for c in frame.columns if c.startswith(prefix))
    stage_cols = [prefix + s for s in stages if s in training]
    if stage_cols:
        values = {}
        # a rung cut from a vocab ladder did not train: its memory is not its own
        own = done if "ladder_trained_in" not in done else done[done["ladder_trained_in"].isna()]
        for _, row in own.iterrows():
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
                title="Memory each training stage added",
            )
            made.append(("Memory each training stage added", "figures/memory_by_stage.png"))
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
    search: SearchFacts | None = None  # a search's record and trials; None for a grid

    @property
    def warn(self) -> str:
        return " ⚠" if self.overlapped else ""


def gather_sweep(sweep_dir: Path, frame: pd.DataFrame, runs: pd.DataFrame, fig_list) -> SweepFacts:
    """The facts every section of SWEEP.md reads, worked out once."""
    overlapped, launcher_line = launcher_note(frame)
    launched = frame.get(schema.LAUNCHER_NAME.column, pd.Series(dtype=object)).dropna()
    why = "separate SLURM jobs" if (launched == "submitit_slurm").any() else "overlapped jobs"
    search = search_facts(sweep_dir, frame, runs)
    runs = best_first(runs, search)  # a search's jobs: best trial first
    return SweepFacts(
        sweep_dir, frame, runs, list(fig_list or []), overlapped, launcher_line, why, search
    )


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
