"""ANALYSIS.md for one run, computed from the files in its run directory only.

What it does: reads metrics.json, environment.json, merges.txt, merge_counts.json and
profile/summary.json of a run, draws its figures (memory timeline, token lengths, merge counts)
into `figures/`, compares it with sibling runs of the same dataset found in the experiments
directory, and writes ANALYSIS.md atomically. `bpe-report RUN_DIR` calls it again at any time
and, for unchanged inputs, writes the same bytes.

What it does not do: measure anything (training did), or touch any file but ANALYSIS.md and
figures/.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from bpe._io import atomic_write_text
from bpe.analysis import figures
from bpe.analysis.markdown import clip, fmt, table

logger = logging.getLogger(__name__)

STAGES = ("read", "pretokenize", "merge", "save", "analysis")
KIND_LABELS = {
    "word": "whole words or word pieces (letters only)",
    "number": "digit runs",
    "punctuation": "punctuation/symbol runs",
    "whitespace": "whitespace runs",
    "partial_utf8": "partial UTF-8 sequences",
    "mixed": "mixed (letters with punctuation, etc.)",
}


def _load_json(path: Path):
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def reproduce_command(run: dict, config: dict | None = None) -> str:
    """The command that reruns this run: every group choice and key that shapes the result.

    >>> reproduce_command({"dataset": "owt_sample", "trainer": "heap", "profiler": "none",
    ...                    "vocab_size": 500, "num_workers": None, "overrides": ["seed=3"]})
    'bpe-train dataset=owt_sample trainer=heap profiler=none vocab_size=500 num_workers=null seed=3'
    """
    workers = run.get("num_workers")
    parts = [
        f"dataset={run.get('dataset')}",
        f"trainer={run.get('trainer')}",
        f"profiler={run.get('profiler')}",
        f"vocab_size={run.get('vocab_size')}",
        f"num_workers={'null' if workers is None else workers}",
    ]
    covered = {p.split("=", 1)[0] for p in parts} | {"experiments_dir", "progress"}
    extra = list(run.get("overrides") or []) + list(run.get("extra_overrides") or [])
    for item in extra:
        key = item.split("=", 1)[0].lstrip("+~")
        if key not in covered:
            parts.append(item)
            covered.add(key)
    return "bpe-train " + " ".join(parts)


def experiments_root(run_dir: Path) -> Path:
    """The experiments dir holding run_dir (a sweep job lives two levels deeper)."""
    parent = run_dir.parent
    if parent.parent.name == "sweeps":
        return parent.parent.parent
    return parent


def _merges_lines(run_dir: Path) -> list[str] | None:
    try:
        lines = (run_dir / "merges.txt").read_text("utf-8").splitlines()
    except OSError:
        return None
    return [ln for ln in lines if ln and not ln.startswith("#version")]


def sibling_rows(run_dir: Path, metrics: dict) -> list[dict]:
    """Complete runs of the same dataset in the experiments dir, other than this one."""
    from bpe.analysis.loader import find_run_dirs

    dataset = metrics["run"].get("dataset")
    mine = _merges_lines(run_dir) or []
    rows = []
    for other in find_run_dirs(experiments_root(run_dir)):
        if other.resolve() == run_dir.resolve():
            continue
        m = _load_json(other / "metrics.json")
        if not isinstance(m, dict) or m.get("run", {}).get("dataset") != dataset:
            continue
        if m.get("status") != "complete":
            continue
        theirs = _merges_lines(other)
        if theirs is None:
            agree = "n/a"
        elif m.get("merges_sha256") == metrics.get("merges_sha256"):
            agree = "identical"
        else:
            n = min(len(theirs), len(mine))
            agree = f"same first {n}" if theirs[:n] == mine[:n] else "DIFFERENT"
        rows.append(
            {
                "name": other.name,
                "rel": other.relative_to(experiments_root(run_dir)).as_posix(),
                "trainer": m["run"].get("trainer"),
                "vocab_size": m["run"].get("vocab_size"),
                "profiled": bool(m.get("profiled")),
                "merge": (m.get("timings") or {}).get("merge"),
                "total": (m.get("timings") or {}).get("total"),
                "peak_mb": (m.get("memory") or {}).get("peak_mb"),
                "agree": agree,
            }
        )
    rows.sort(key=lambda r: (r["vocab_size"] or 0, r["trainer"] or "", r["rel"]))
    return rows


def _figures(run_dir: Path, metrics: dict) -> dict[str, str]:
    out_dir = run_dir / "figures"
    made: dict[str, str] = {}
    memory = metrics.get("memory") or {}
    timeline = memory.get("timeline") or []
    if timeline:
        spans = []
        for t, _mb, stage in timeline:
            if spans and spans[-1][0] == stage:
                spans[-1][2] = t
            else:
                spans.append([stage, t, t])
        figures.memory_timeline(
            {"process tree (PSS, MB)": [(t, mb) for t, mb, _ in timeline]},
            out_dir / "memory_timeline.png",
            stages=[tuple(s) for s in spans],
            title=f"Memory during {metrics['run'].get('name')}",
        )
        made["memory"] = "figures/memory_timeline.png"
    lengths = metrics.get("token_lengths") or {}
    if lengths:
        values = [int(k) for k, n in lengths.items() for _ in range(int(n))]
        figures.histogram(
            values,
            out_dir / "token_lengths.png",
            xlabel="token length (bytes)",
            title="Vocab entries by length",
            bins=range(1, max(values) + 2),
            log_y=True,
        )
        made["lengths"] = "figures/token_lengths.png"
    counts = _load_json(run_dir / "merge_counts.json")
    if counts:
        figures.line(
            {"count": counts},
            out_dir / "merge_counts.png",
            xlabel="merge step k",
            ylabel="occurrences of the k-th merged pair",
            title="How frequent the k-th merge is",
            log_y=True,
        )
        made["merge_counts"] = "figures/merge_counts.png"
    return made


def render(run_dir: Path, metrics: dict, env: dict | None, profile: dict | None) -> str:
    """The Markdown text of ANALYSIS.md (figures must already exist where referenced)."""
    run = metrics.get("run", {})
    counts = metrics.get("counts") or {}
    timings = metrics.get("timings") or {}
    memory = metrics.get("memory") or {}
    lines: list[str] = []
    add = lines.append

    add(f"# Run analysis: {run.get('name')}")
    add("")
    add(
        f"BPE training on **{run.get('dataset')}** with the **{run.get('trainer')}** trainer, "
        f"vocab size {run.get('vocab_size')} (profiler: {run.get('profiler')})."
    )
    add("")
    git = (env or {}).get("git") or {}
    sha = (git.get("sha") or "unknown")[:12]
    header_rows = [
        ["status", metrics.get("status")],
        ["started", metrics.get("started_at")],
        ["finished", metrics.get("finished_at")],
        ["code", f"{sha}{' (dirty, see diff.patch)' if git.get('dirty') else ''}"],
        [
            "python / cpus",
            f"{(env or {}).get('python', 'n/a')} / {(env or {}).get('usable_cpus', 'n/a')}",
        ],
        ["input", f"{run.get('input_path')} ({counts.get('bytes', 'n/a')} bytes)"],
        ["merges sha256", metrics.get("merges_sha256")],
    ]
    header_rows += _lineage_rows(metrics)
    add(table(header_rows, ["", ""]))
    add("")
    add("Reproduce:")
    add("")
    add("```bash")
    add(reproduce_command(run))
    add("```")
    add("")
    if metrics.get("status") == "failed":
        err = metrics.get("error") or {}
        add(
            f"**This run failed** in stage `{err.get('stage')}`: "
            f"{err.get('type')}: {err.get('message')}"
        )
        add("")

    # --- time
    add("## Time")
    add("")
    total = sum(timings.get(s, 0.0) for s in STAGES) or None
    rows = [
        [
            s,
            fmt(timings.get(s)),
            fmt(100 * timings[s] / total, ".1f") if total and s in timings else "n/a",
        ]
        for s in STAGES
    ]
    add(table(rows, ["stage", "seconds", "% of run"], colalign=("left", "right", "right")))
    add("")
    train_stages = {s: timings[s] for s in ("read", "pretokenize", "merge") if s in timings}
    if train_stages:
        top = max(train_stages, key=train_stages.get)
        train_total = sum(train_stages.values())
        add(
            f"Training took {fmt(train_total)} s; **{top}** dominates with "
            f"{fmt(100 * train_stages[top] / train_total, '.0f')}% of it "
            f"({counts.get('merges', 'n/a')} merges over {counts.get('unique_pretokens', 'n/a')} "
            f"unique pretokens, {counts.get('pretokens', 'n/a')} pretokens in "
            f"{counts.get('chunks', 'n/a')} chunk(s) on {counts.get('workers', 'n/a')} worker(s))."
        )
    if metrics.get("profiled"):
        add("")
        add(
            f"*Timings were measured under the {run.get('profiler')} profiler and include its "
            "overhead; compare speed only between runs with `profiler=none`.*"
        )
    if metrics.get("stopped_early"):
        add("")
        add(
            f"Training stopped early: the corpus ran out of pairs after {counts.get('merges')} "
            f"merges, so the vocab has {counts.get('vocab')} entries instead of "
            f"{run.get('vocab_size')}."
        )
    add("")

    # --- memory
    add("## Memory")
    add("")
    per_stage = memory.get("per_stage_peak_mb") or {}
    rows = [[s, fmt(per_stage.get(s), ".1f")] for s in ("start", *STAGES) if s in per_stage]
    add(table(rows, ["stage", "peak MB (process tree, PSS)"], colalign=("left", "right")))
    add("")
    if memory:
        add(
            f"Peak memory of the whole process tree was **{fmt(memory.get('peak_mb'), '.1f')} MB** "
            f"(sampled every {memory.get('interval_s')} s; the parent's own peak RSS was "
            f"{fmt(memory.get('ru_maxrss_mb'), '.1f')} MB, the largest worker's "
            f"{fmt(memory.get('children_ru_maxrss_mb'), '.1f')} MB)."
        )
        if per_stage:
            worst = max((s for s in per_stage if s in STAGES), key=per_stage.get, default=None)
            if worst:
                add(f"The most memory-hungry stage was **{worst}**.")
        add("")
    if (run_dir / "figures" / "memory_timeline.png").is_file():
        add("![memory timeline](figures/memory_timeline.png)")
        add("")

    # --- profile
    add("## Profile hot spots")
    add("")
    if profile and profile.get("functions"):
        kind = profile.get("profiler")
        if kind == "scalene":
            rows = [
                [f"`{r['file']}:{r['line']}`", r["code"] or "", fmt(r["cpu_percent"], ".1f"),
                 fmt(r["cpu_python_percent"], ".1f"), fmt(r["peak_mb"], ".1f")]
                for r in profile.get("lines", [])[:10]
            ]  # fmt: skip
            add("Top lines by CPU (scalene):")
            add("")
            add(table(rows, ["where", "code", "CPU %", "Python %", "peak MB"]))
            add("")
            top = (profile.get("lines") or profile["functions"])[0]
            add(
                f"The hottest line is `{top['file']}:{top['line']}` "
                f"({fmt(top['cpu_percent'], '.1f')}% of CPU time)."
            )
        else:
            rows = [
                [f"`{r['function']}`", f"`{r['file']}:{r['line']}`", r["calls"],
                 fmt(r["self_seconds"]), fmt(r["cumulative_seconds"]),
                 fmt(r["self_percent"], ".1f")]
                for r in profile["functions"][:10]
            ]  # fmt: skip
            add("Top functions by self time (cProfile, parent process only):")
            add("")
            add(table(rows, ["function", "where", "calls", "self s", "cum s", "self %"]))
            add("")
            top = profile["functions"][0]
            add(
                f"Most self time is spent in `{top['function']}` ({top['file']}), "
                f"{fmt(top['self_percent'], '.1f')}% of the profiled time."
            )
    else:
        add(f"Not profiled (profiler={run.get('profiler')}); rerun with `profiler=scalene` or "
            "`profiler=cprofile` to see where the time goes.")  # fmt: skip
    add("")

    # --- longest tokens
    add("## Longest tokens")
    add("")
    longest = metrics.get("longest_tokens") or []
    if longest:
        rows = [
            [k + 1, t["id"], t["bytes"], f"`{t['gpt2']}`", repr(t["text"])]
            for k, t in enumerate(longest)
        ]
        add(table(rows, ["#", "id", "bytes", "GPT-2 rendering", "text"]))
        add("")
        add(_longest_judgement(longest, metrics))
        add("")
    if (run_dir / "figures" / "token_lengths.png").is_file():
        add("![token lengths](figures/token_lengths.png)")
        add("")
    if (run_dir / "figures" / "merge_counts.png").is_file():
        add("![merge counts](figures/merge_counts.png)")
        add("")

    # --- compression
    add("## Compression")
    add("")
    comp = metrics.get("compression") or {}
    rows = []
    for side in ("own", "other"):
        c = comp.get(side)
        if not c:
            continue
        ratio = c.get("ratio")
        base = c.get("gpt2_ratio")
        rows.append([
            f"{c['dataset']} ({'same' if side == 'own' else 'other'} domain)",
            c["docs"], c["bytes"],
            fmt(ratio), fmt(base), fmt(ratio / base if ratio and base else None, ".2f"),
        ])  # fmt: skip
    if rows:
        add(table(rows, ["held-out documents", "docs", "bytes", "bytes/token (ours)",
                          "bytes/token (GPT-2)", "ours / GPT-2"]))  # fmt: skip
        add("")
        own, other = comp.get("own"), comp.get("other")
        if own and other and own.get("ratio") and other.get("ratio"):
            drop = 100 * (1 - other["ratio"] / own["ratio"])
            add(
                "On its own domain this tokenizer packs "
                f"{fmt(own['ratio'], '.2f')} bytes per token; "
                f"on {other['dataset']} {fmt(other['ratio'], '.2f')} "
                f"({fmt(abs(drop), '.0f')}% {'less' if drop >= 0 else 'more'})."
            )
        if own and own.get("gpt2_ratio"):
            rel = own["ratio"] / own["gpt2_ratio"]
            add(
                f"GPT-2's 50,257-token vocab gets {fmt(own['gpt2_ratio'], '.2f')} bytes per token "
                "on "
                f"the same documents: ours reaches {fmt(100 * rel, '.0f')}% of that."
            )
    else:
        add("No held-out documents were measured.")
    add("")
    if metrics.get("tiktoken"):
        add(_tiktoken_line(metrics["tiktoken"]))
        add("")

    # --- throughput
    add("## Throughput")
    add("")
    tp = metrics.get("throughput")
    if tp:
        rows = [
            ["ours", fmt(tp["bytes_per_second"] / 1e6, ".2f"), fmt(tp.get("pile_hours"), ".1f")]
        ]
        if tp.get("gpt2_bytes_per_second"):
            rows.append(["GPT-2 (same encoder)", fmt(tp["gpt2_bytes_per_second"] / 1e6, ".2f"),
                         fmt(tp.get("gpt2_pile_hours"), ".1f")])  # fmt: skip
        add(table(rows, ["tokenizer", "MB/s (one thread)", "hours for The Pile (825 GB)"]))
        add("")
        add(
            f"At {fmt(tp['bytes_per_second'] / 1e6, '.2f')} MB/s on one core, tokenizing The Pile "
            f"would take about {fmt(tp.get('pile_hours'), '.0f')} hours "
            f"({fmt((tp.get('pile_hours') or 0) / 24, '.1f')} days)."
        )
    else:
        add("Throughput was not measured.")
    add("")

    # --- siblings
    add("## Sibling runs (same dataset)")
    add("")
    sibs = sibling_rows(run_dir, metrics)
    if sibs:
        my_merge = timings.get("merge")
        rows = []
        for s in sibs:
            speed = fmt(s["merge"] / my_merge, ".2f") if s["merge"] and my_merge else "n/a"
            rows.append([s["rel"], s["trainer"], s["vocab_size"], fmt(s["merge"]), fmt(s["total"]),
                         fmt(s["peak_mb"], ".1f"), speed + (" (profiled)" if s["profiled"] else ""),
                         s["agree"]])  # fmt: skip
        add(table(rows, ["run", "trainer", "vocab", "merge s", "total s", "peak MB",
                          "their merge time / ours", "merges vs this run"]))  # fmt: skip
        add("")
        add(_sibling_summary(sibs, metrics))
    else:
        add("No other complete runs of this dataset in the experiments directory yet.")
    add("")
    return "\n".join(lines)


def _lineage_rows(metrics: dict) -> list[list]:
    """Header rows naming the corpus and held-out files by sha256 (runs that recorded them)."""
    lineage = metrics.get("lineage") or {}
    rows = []
    if (lineage.get("input") or {}).get("sha256"):
        rows.append(["input sha256", lineage["input"]["sha256"]])
    for name, ident in (lineage.get("heldout") or {}).items():
        rows.append(["held-out", f"{name} sha256 {ident.get('sha256')}"])
    return rows


def _tiktoken_line(tk: dict) -> str:
    """One sentence: does the tiktoken export (tokenizer.tiktoken) agree on held-out text?"""
    where = ", ".join(tk.get("heldout") or []) or "held-out text"
    head = (
        f"The tiktoken export (`tokenizer.tiktoken`) encodes {tk.get('mismatches')} of "
        f"{tk.get('pretokens')} held-out pretokens ({where}) differently from this tokenizer"
    )
    first = tk.get("first")
    if not first:
        return head + ": the ids are identical."
    return (
        f"{head} ({tk.get('unique_mismatches')} distinct; first {first['pretoken']!r}: "
        f"BPE {first['bpe']}, tiktoken {first['tiktoken']}); encode with `--backend python`."
    )


def _longest_judgement(longest: list[dict], metrics: dict) -> str:
    top = longest[0]
    text = top["text"].strip()
    kinds = metrics.get("token_kinds") or {}
    from bpe.experiment.measure_run import token_kind

    top_kind = (
        token_kind(top["text"].encode("utf-8")) if "\ufffd" not in top["text"] else "partial_utf8"
    )
    descr = {
        "word": "a whole word" if top["text"].startswith(" ") else "a word piece",
        "number": "a number",
        "punctuation": "a run of punctuation",
        "whitespace": "a run of whitespace",
        "partial_utf8": "a partial UTF-8 sequence",
        "mixed": "a mix of letters and symbols",
    }[top_kind]
    sense = (
        "it makes sense as a frequent unit of this corpus"
        if top_kind in ("word", "number")
        else "it is a formatting artefact of the corpus rather than language"
    )
    among = sum(1 for t in longest if token_kind(t["text"].encode("utf-8")) == "word")
    parts = ", ".join(
        f"{fmt(100 * share, '.0f')}% {KIND_LABELS[k]}"
        for k, share in sorted(kinds.items(), key=lambda kv: -kv[1])
        if share > 0
    )
    return (
        f"The longest token is `{clip(top['gpt2'])}` ({top['bytes']} bytes, {clip(repr(text))}): "
        f"{descr}; {sense}. "
        f"{among} of the {len(longest)} longest tokens are letter-only words. "
        f"Across all {metrics.get('learned_tokens', 'n/a')} learned tokens: {parts}; "
        f"{fmt(100 * (metrics.get('leading_space_share') or 0), '.0f')}% start with a space."
    )


def _sibling_summary(sibs: list[dict], metrics: dict) -> str:
    run = metrics["run"]
    same_size = [s for s in sibs if s["vocab_size"] == run.get("vocab_size")]
    sentences = []
    if same_size:
        different = [s for s in same_size if s["agree"] not in ("identical",)]
        if different:
            sentences.append(
                f"{len(different)} run(s) at the same vocab size produced DIFFERENT merges: "
                + ", ".join(s["rel"] for s in different)
                + "."
            )
        else:
            sentences.append(
                f"All {len(same_size)} other run(s) at vocab size {run.get('vocab_size')} produced "
                "identical merges."
            )
        clean = [s for s in same_size if s["merge"] and not s["profiled"]]
        mine = (metrics.get("timings") or {}).get("merge")
        if clean and mine and not metrics.get("profiled"):
            for s in sorted(clean, key=lambda s: s["trainer"] or ""):
                if s["trainer"] == run.get("trainer"):
                    continue
                ratio = s["merge"] / mine
                sentences.append(
                    f"Against {s['trainer']} at the same size, this run's merge stage is "
                    f"{fmt(ratio, '.1f')}x {'faster' if ratio >= 1 else 'slower'}."
                )
    return " ".join(sentences) or "No other run at the same vocab size to compare with."


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
    metrics_path = run_dir / "metrics.json"
    if not metrics_path.is_file():
        raise FileNotFoundError(
            f"{str(run_dir)!r} is not a run directory (no metrics.json); pass a directory "
            "written by bpe-train"
        )
    if metrics is None:
        metrics = _load_json(metrics_path)
    if not isinstance(metrics, dict):
        raise ValueError(f"{metrics_path} is not valid JSON; the run is corrupt")
    env = _load_json(run_dir / "environment.json")
    profile = _load_json(run_dir / "profile" / "summary.json")
    _figures(run_dir, metrics)
    text = render(run_dir, metrics, env, profile)
    out = run_dir / "ANALYSIS.md"
    atomic_write_text(out, text + "\n")
    return out
