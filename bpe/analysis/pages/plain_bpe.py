"""The pages of reports/ about plain BPE: trainers.md (each trainer's merge time and memory
against the reference, their merges checked equal) and datasets.md (what each dataset's
tokenizer learned: longest tokens, kinds, merge counts, compression).

What it does not do: find the runs or write the files (`bpe.analysis.pages.index`).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pandas as pd

from bpe.analysis import figures
from bpe.analysis.loader import comparable_measures, complete, trainer_order
from bpe.analysis.markdown import clip, fmt, runs_used, table
from bpe.analysis.sweep.facts import merge_agreement
from bpe.runs import schema
from bpe.runs.layout import MERGE_COUNTS_FILE
from bpe.runs.stages import TRAINER_ORDER
from bpe.util.io import safe_name
from bpe.util.machine import host_line, load_span

#: The command that regenerates reports/ (`bpe.analysis.pages.index.write_all_reports`).
REPORTS_COMMAND = "bpe-report --all"

logger = logging.getLogger(__name__)


#: The trainer the others are timed against in trainers.md (the default, and the fastest).
REFERENCE = "heap"


def render_trainers(runs: pd.DataFrame, root: Path, out_dir: Path) -> str:
    lines = [f"# Trainers: {' vs '.join(TRAINER_ORDER)}", ""]
    clean = complete(runs, unprofiled=True)
    lines += provenance(clean, root, "complete, unprofiled, not run side by side")
    if clean.empty:
        return "\n".join(
            lines
            + [
                "No complete unprofiled runs yet: run `bpe-train -m "
                "experiment=compare_trainers` first.",
                "",
            ]
        )
    lines += [
        "All trainers implement one contract and must produce identical merges; they "
        "differ in how they find the next pair. Times are the merge stage (pre-tokenization is "
        f"shared), the median over runs of the same configuration; `X / {REFERENCE} time` is how "
        f"many times longer X took than `{REFERENCE}` (below 1: X was faster). `X merge MB` is "
        "the memory the merge stage added to the process tree above the run's start (median), "
        "so a job that ran late in a sweep, in a process earlier jobs had used, compares with "
        "one that ran alone; runs cut from a vocab ladder have none of their own (n/a: "
        "`ladder=false` measures each size).",
        "",
        *_ladder_note(clean),
    ]
    for dataset, group in clean.groupby("dataset", sort=True):
        lines += [f"## {dataset}", "", *_trainers_on(str(dataset), group, out_dir)]
    return "\n".join(lines).rstrip() + "\n"


def _trainers_on(dataset: str, group: pd.DataFrame, out_dir: Path) -> list[str]:
    """One dataset's section of trainers.md: median merge times and memory per vocab size,
    whether the trainers agreed, the fastest, and the figures."""
    lines: list[str] = []
    med = group.groupby(["vocab_size", "trainer"]).agg(
        merge=("merge_seconds", "median"), peak=("merge_mb", "median"), n=("run_dir", "size")
    )
    trainers = trainer_order(group["trainer"])
    bases = [t for t in trainers if t != REFERENCE] if REFERENCE in trainers else []
    rows = []
    short = group[group["vocab"] < group["vocab_size"]]
    stopped = short.groupby("vocab_size")["vocab"].max().to_dict()
    for vocab in sorted(group["vocab_size"].unique()):
        row = [f"{int(vocab)}*" if vocab in stopped else str(int(vocab))]
        for t in trainers:
            row.append(fmt(med["merge"].get((vocab, t)), ".3f"))
        ref = med["merge"].get((vocab, REFERENCE))
        for base in bases:
            b = med["merge"].get((vocab, base))
            row.append(
                fmt(b / ref if b is not None and ref else None, ".1f") + "x"
                if b is not None and ref
                else "n/a"
            )
        for t in trainers:
            row.append(fmt(med["peak"].get((vocab, t)), ".0f"))
        rows.append(row)
    headers = ["vocab", *(f"{t} merge s" for t in trainers)]
    headers += [f"{b} / {REFERENCE} time" for b in bases]
    headers += [f"{t} merge MB" for t in trainers]
    lines += [table(rows, headers), ""]
    if stopped:
        lines += [
            "\\* The corpus ran out of pairs before this size: training stopped at "
            + ", ".join(f"{int(v)} tokens (asked {int(k)})" for k, v in sorted(stopped.items()))
            + ", so these rows time fewer merges.",
            "",
        ]
    lines += _agreement_lines(group)
    big = group["vocab_size"].max()
    at_big = med.loc[big] if big in med.index.get_level_values(0) else None
    if at_big is not None and len(at_big) > 1:
        fastest = at_big["merge"].idxmin()
        lines.append(
            f"At vocab {int(big)} the fastest trainer is **{fastest}** "
            f"({fmt(at_big['merge'].min(), '.3f')} s for the merges)."
        )
        lines.append("")
    return lines + _trainer_figures(dataset, group, out_dir)


def _agreement_lines(group: pd.DataFrame) -> list[str]:
    """Whether every trainer made the same merges, per input and vocab size of a dataset."""
    lines: list[str] = []
    agreement = merge_agreement(group)
    same = [a for a in agreement if a[3]]
    diff = [a for a in agreement if not a[3]]
    if agreement:
        if not diff:
            lines.append(
                f"Identical merges: at every vocab size where several trainers ran "
                f"({', '.join(str(a[1]) for a in same)}), all produced the same merges "
                "(equal merges sha256)."
            )
        else:
            lines.append(
                "**DIFFERENT merges** at vocab size(s) "
                + ", ".join(str(a[1]) for a in diff)
                + ": a trainer is wrong."
            )
        lines.append("")
    return lines


def _trainer_figures(dataset: str, group: pd.DataFrame, out_dir: Path) -> list[str]:
    """Merge time against vocab size (and naive's speed-up), where a dataset has several."""
    lines: list[str] = []
    trainers = trainer_order(group["trainer"])
    if group["vocab_size"].nunique() > 1:
        # subtle: a dataset's name comes from a run's files: data, never a path
        fig = out_dir / f"trainers_time_{safe_name(dataset)}.png"
        figures.time_vs_vocab(
            group,
            fig,
            time_col="merge_seconds",
            title=f"Merge time vs vocab size ({dataset})",
        )
        lines += [f"![merge time on {dataset}](figures/{fig.name})", ""]
        if "naive" in trainers and len(trainers) > 1:
            fig = out_dir / f"trainers_speedup_{safe_name(dataset)}.png"
            figures.speedup_vs_vocab(group, fig, time_col="merge_seconds")
            lines += [f"![speedup on {dataset}](figures/{fig.name})", ""]
    return lines


def _ladder_note(runs: pd.DataFrame) -> list[str]:
    """What the times of runs cut from a vocab ladder are (none: nothing to say)."""
    cut = runs.get("ladder_trained_in", pd.Series(dtype=object)).notna().sum()
    if not cut:
        return []
    return [
        f"{cut} of these runs were cut from a vocab ladder (one training to a sweep's largest "
        "vocab): their merge time is the time that training had spent in stages 2-3 when it "
        "reached their vocab.",
        "",
    ]


def _longest(frame: pd.DataFrame, run_dir: str, k: int) -> list[dict]:
    col = schema.LONGEST_TOKENS.column
    if col not in frame:
        return []
    value = frame.loc[frame["run_dir"] == run_dir, col].iloc[0]
    return list(value)[:k] if isinstance(value, list) else []


def _kinds(frame: pd.DataFrame, run_dir: str) -> dict[str, float]:
    row = frame.loc[frame["run_dir"] == run_dir].iloc[0]
    prefix = f"{schema.TOKEN_KINDS.column}."
    return {
        c[len(prefix) :]: float(row[c])
        for c in frame.columns
        if c.startswith(prefix) and pd.notna(row[c])
    }


def render_datasets(runs: pd.DataFrame, frame: pd.DataFrame, root: Path, out_dir: Path) -> str:
    lines = ["# Datasets: what the vocabularies look like and how well they compress", ""]
    done, apart = comparable_measures(complete(runs))
    # one representative run per (dataset, vocab): the REFERENCE trainer (registered last), then
    # the others from last registered to first, then the newest
    preference = {t: k for k, t in enumerate(reversed(TRAINER_ORDER))}
    reps = (
        done.assign(_pref=done["trainer"].map(preference).fillna(len(preference)))
        .sort_values(
            ["dataset", "vocab_size", "_pref", "run_dir"], ascending=[True, True, True, False]
        )
        .groupby(["dataset", "vocab_size"], sort=True)
        .head(1)
    )
    lines += provenance(reps, root, "representative (one per dataset and vocab size)")
    if not apart.empty:
        lines += [
            f"*Left out: {len(apart)} run(s) measured on another number of held-out documents "
            f"than the other runs of their dataset ({_apart_list(apart)}; `debug=fast` measures "
            "10): their numbers do not compare with these.*",
            "",
        ]
    if reps.empty:
        return "\n".join(
            lines
            + ["No complete runs yet: run `bpe-train -m experiment=compare_datasets` first.", ""]
        )

    lines += _dataset_compression(done, reps, out_dir)
    lines += _dataset_longest(reps, frame)
    lines += _vocab_contrast(reps, frame)
    lines += _merge_count_curves(reps, out_dir)
    return "\n".join(lines).rstrip() + "\n"


def _apart_list(apart: pd.DataFrame) -> str:
    """`dataset v300 (10 docs)` for each run left out, the first few."""
    said = [
        f"{r['dataset']} v{int(r['vocab_size'])} ({fmt(r['measured_docs'], '.0f')} docs)"
        for _, r in apart.head(5).iterrows()
    ]
    return ", ".join(said) + (", ..." if len(apart) > 5 else "")


def _dataset_compression(done: pd.DataFrame, reps: pd.DataFrame, out_dir: Path) -> list[str]:
    """Bytes per token on each held-out set, per dataset and vocab size, against GPT-2's."""
    lines = ["## Compression (bytes per token on held-out documents)", ""]
    rows = []
    for _, r in reps.iterrows():
        rows.append(
            [
                r["dataset"],
                str(int(r["vocab_size"])),
                fmt(r["compression"], ".3f"),
                fmt(r["gpt2_compression"], ".3f"),
                r["other_dataset"] or "n/a",
                fmt(r["other_compression"], ".3f"),
                fmt(r["other_gpt2_compression"], ".3f"),
            ]
        )
    lines += [
        table(
            rows,
            [
                "trained on",
                "vocab",
                "own domain",
                "GPT-2 own",
                "other domain",
                "other",
                "GPT-2 other",
            ],
        ),
        "",
    ]
    for dataset, group in reps.groupby("dataset", sort=True):
        top = group.loc[group["vocab_size"].idxmax()]
        if pd.notna(top["compression"]) and pd.notna(top["other_compression"]):
            loss = 100 * (1 - top["other_compression"] / top["compression"])
            rel = (
                f" GPT-2 gets {fmt(top['gpt2_compression'], '.2f')} on the same documents."
                if pd.notna(top["gpt2_compression"])
                else ""
            )
            lines.append(
                f"- A tokenizer trained on {dataset} (vocab {int(top['vocab_size'])}) packs "
                f"{fmt(top['compression'], '.2f')} bytes per token in its own domain and "
                f"{fmt(top['other_compression'], '.2f')} on {top['other_dataset']} "
                f"({fmt(abs(loss), '.0f')}% {'worse' if loss >= 0 else 'better'}).{rel}"
            )
    lines.append("")
    if done["vocab_size"].nunique() > 1 and done["compression"].notna().any():
        gpt2 = reps.groupby("dataset")["gpt2_compression"].median().dropna().to_dict()
        fig = out_dir / "datasets_compression.png"
        figures.compression_vs_vocab(reps, fig, gpt2=gpt2)
        lines += [f"![compression vs vocab size](figures/{fig.name})", ""]

    return lines


def _dataset_longest(reps: pd.DataFrame, frame: pd.DataFrame) -> list[str]:
    """The longest tokens and the kinds of learned tokens of each dataset's largest vocab."""
    lines = ["## Longest tokens", ""]
    for dataset, group in reps.groupby("dataset", sort=True):
        top = group.loc[group["vocab_size"].idxmax()]
        longest = _longest(frame, top["run_dir"], 10)
        kinds = _kinds(frame, top["run_dir"])
        lines += [f"### {dataset} (vocab {int(top['vocab_size'])})", ""]
        if longest:
            rows = [
                [str(t["bytes"]), f"`{clip(t['gpt2'])}`", clip(repr(t["text"]))] for t in longest
            ]
            lines += [table(rows, ["bytes", "GPT-2 rendering", "text"]), ""]
        if kinds:
            ordered = sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))
            lines.append(
                "Learned tokens: "
                + ", ".join(f"{fmt(100 * v, '.0f')}% {k.replace('_', ' ')}" for k, v in ordered)
                + "."
            )
            lines.append("")
    return lines


def _times(n: int) -> str:
    """How many times, in words.

    >>> _times(1), _times(2000)
    ('once', '2,000 times')
    """
    return "once" if n == 1 else f"{n:,} times"


def _merge_count_curves(reps: pd.DataFrame, out_dir: Path) -> list[str]:
    """How frequent the k-th merge is, for the largest run of each dataset (merge_counts.json)."""
    series = {}
    for dataset, group in reps.groupby("dataset", sort=True):
        top = group.loc[group["vocab_size"].idxmax()]
        path = Path(top["run_dir"]) / MERGE_COUNTS_FILE
        try:
            counts = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if counts:
            series[f"{dataset} (vocab {int(top['vocab_size'])})"] = counts
    if not series:
        return []
    fig = out_dir / "datasets_merge_counts.png"
    figures.line(
        series,
        fig,
        xlabel="merge step k",
        ylabel="occurrences of the k-th merged pair",
        title="How frequent the k-th merge is",
        log_y=True,
    )
    out = ["## How frequent the k-th merge is", ""]
    for label, counts in series.items():
        out.append(
            f"- {label}: the first merge joins a pair seen {_times(counts[0])}, the last "
            f"(merge {len(counts):,}) one seen {_times(counts[-1])}."
        )
    return out + ["", f"![merge counts](figures/{fig.name})", ""]


def _vocab_contrast(reps: pd.DataFrame, frame: pd.DataFrame) -> list[str]:
    """A sentence contrasting the datasets' vocabularies, from their token kinds."""
    if reps["dataset"].nunique() < 2:
        return []
    out = ["## What the vocabularies look like", ""]
    for dataset, group in reps.groupby("dataset", sort=True):
        top = group.loc[group["vocab_size"].idxmax()]
        kinds = _kinds(frame, top["run_dir"])
        longest = _longest(frame, top["run_dir"], 20)
        words = sum(1 for t in longest if t["text"].strip().isalpha())
        out.append(
            f"- **{dataset}**: {fmt(100 * kinds.get('word', 0), '.0f')}% of learned tokens "
            f"are letter-only, {fmt(100 * kinds.get('punctuation', 0), '.1f')}% punctuation, "
            f"{fmt(100 * kinds.get('number', 0), '.1f')}% digits, "
            f"{fmt(100 * kinds.get('partial_utf8', 0), '.1f')}% partial UTF-8; "
            f"{words} of its {len(longest)} longest tokens are words"
            + (f" (longest: `{clip(longest[0]['gpt2'])}`)." if longest else ".")
        )
    out.append("")
    return out


def provenance(runs: pd.DataFrame, root: Path, what: str) -> list[str]:
    """The lines a page of reports/ opens with: what generated it, from which runs, measured
    on which machines, code and load."""
    lines = [
        f"Generated by `{REPORTS_COMMAND}` from {len(runs)} {what} run(s) in `{root.name}/`; "
        "do not edit by hand.",
        "",
        *measured_on(runs),
    ]
    return lines + runs_used(sorted(runs["run_dir"]), root)


def measured_on(runs: pd.DataFrame) -> list[str]:
    """What the runs' numbers were measured on, from their environment records (the `tidy`
    columns `host`, `git_sha`, `git_dirty`, `numba`): each machine
    (`bpe.util.machine.host_line`) with its count of runs, the 1-minute load average at the
    runs' starts, the code's git shas and Numba's versions. Runs made before environment.json
    recorded a machine are counted, not guessed.

    >>> measured_on(pd.DataFrame({"host": [None]}))
    ['Measured on: 1 run(s) made before runs recorded their machine.', '']
    >>> measured_on(pd.DataFrame({"host": []}))
    ['Measured on: no runs.', '']
    """
    hosts = [h for h in runs.get("host", pd.Series(dtype=object)) if isinstance(h, dict)]
    machines = Counter(host_line(h, load=False) for h in hosts)
    parts = [f"{line} ({n} run{'s' * (n != 1)})" for line, n in sorted(machines.items())]
    if len(hosts) < len(runs):
        parts.append(f"{len(runs) - len(hosts)} run(s) made before runs recorded their machine")
    facts = []
    load = load_span(hosts)
    if load is not None:
        facts.append(f"load average (1 min) at the runs' starts {load}")
    shas = sorted({str(s)[:12] for s in runs.get("git_sha", []) if isinstance(s, str)})
    if shas:
        dirty = int((runs["git_dirty"] == True).sum())  # noqa: E712 - a column of True/False/None
        facts.append(
            f"code at git {', '.join(f'`{s}`' for s in shas)}"
            + (f" ({dirty} run(s) with uncommitted changes)" if dirty else "")
        )
    numba = sorted({str(v) for v in runs.get("numba", []) if isinstance(v, str)})
    if numba:
        facts.append(f"numba {', '.join(numba)}")
    lines = [f"Measured on: {'; '.join(parts) or 'no runs'}."]
    if facts:
        lines.append(f"Load and code: {'; '.join(facts)}.")
    return [*lines, ""]
