"""ANALYSIS.md for one run, computed from the files in its run directory only.

What it does, in three steps that `write_run_report` runs in order:

    draw     the run's figures (memory timeline, token lengths, merge counts) into `figures/`
    gather   `gather_run`: reads metrics.json, environment.json and profile/summary.json, which
             figures exist, and the sibling runs on the same input (equal sha256, see
             `loader.input_key`) in the experiments directory (with whether their merges
             agree) into one `RunFacts`
    render   `render_analysis`: pure `section_*` functions over the `RunFacts`, no file access

and writes ANALYSIS.md atomically. `bpe-report RUN_DIR` calls it again at any time and, for
unchanged inputs, writes the same bytes. Stages are listed in the order metrics.json recorded
them; stages older runs recorded but that no longer exist (`read`) are left out.

What it does not do: measure anything (training did), or touch any file but ANALYSIS.md and
figures/.
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
    observed,
    shown_stages,
    tidy,
    variant_column,
)
from bpe.analysis.markdown import clip, fmt, input_summary, table
from bpe.analysis.vocab_report import section_efficiency, section_glossary, section_undertrained
from bpe.measures import RARE_MERGE_COUNT, TOKEN_KINDS, pile_projection, token_kind
from bpe.runs import schema
from bpe.runs.command import rerun_command
from bpe.runs.layout import (
    ANALYSIS_FILE,
    ENVIRONMENT_FILE,
    FIGURES,
    MERGE_COUNTS_FILE,
    MERGES_FILE,
    METRICS_FILE,
    PROFILE_DIR,
    PROFILE_SUMMARY,
    experiments_root,
)
from bpe.runs.stages import COMPILE, RETIRED_STAGES, TIMED_STAGES, TRAIN_STAGES
from bpe.util.io import atomic_write_text

logger = logging.getLogger(__name__)

#: Characters of a token shown in a table cell (longer ones are clipped, see `shown`).
CELL_WIDTH = 40


def _load_json(path: Path):
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
    lineage_input = (metrics.get("lineage") or {}).get("input") or {}
    return input_key(lineage_input.get("sha256"), (metrics.get("run") or {}).get("input_path"))


def sibling_rows(run_dir: Path, metrics: dict) -> list[dict]:
    """Complete runs on the same input in the experiments dir, other than this one; each
    says its variant, and whether it is this run's (`same_variant`): another member of the
    BPE family learns other merges by design, so its merges are compared only as such."""
    root = experiments_root(run_dir)
    runs = complete(tidy(load_runs(root)))
    mine_key = run_input_key(metrics)
    runs = runs[runs["input_key"] == mine_key] if mine_key else runs.iloc[0:0]
    my_variant = schema.get(metrics, schema.VARIANT_NAME, default="bpe")
    variants = variant_column(runs)
    mine = _merges_lines(run_dir) or []  # a run that failed early has no merges.txt
    rows = []
    for idx, r in runs.iterrows():
        other = Path(r["run_dir"])
        if other.resolve() == run_dir.resolve():
            continue
        variant = str(variants[idx])
        if variant != my_variant:
            rows.append(_other_variant_row(r, other, root, variant))
            continue
        same = merges_agree(metrics.get("merges_sha256"), _value(r["merges_sha256"]))
        vocab_size = _value(r["vocab_size"])
        rows.append(
            {
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
                "agree": merges_verdict(same, mine, None if same else _merges_lines(other)),
                "variant": variant,
                "same_variant": True,
            }
        )
    rows.sort(
        key=lambda r: (not r["same_variant"], r["vocab_size"] or 0, r["trainer"] or "", r["rel"])
    )
    return rows


def _other_variant_row(r, other: Path, root: Path, variant: str) -> dict:
    """A sibling of another BPE-family member: listed, never compared merge for merge."""
    vocab_size = _value(r["vocab_size"])
    return {
        "name": other.name,
        "rel": other.relative_to(root).as_posix(),
        "trainer": _value(r["trainer"]),
        "vocab_size": None if vocab_size is None else int(vocab_size),
        "profiled": bool(r["profiled"]),
        "merge": _value(r["merge_seconds"]),
        "total": _value(r["total_seconds"]),
        "train_mb": _value(r["train_mb"]),
        "same_merges": None,
        "agree": f"{variant}: differs by design",
        "variant": variant,
        "same_variant": False,
    }


def draw_figures(run_dir: Path, metrics: dict) -> None:
    """Draw the run's figures into run_dir/figures (those its files have data for)."""
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
            run_dir / FIGURES["memory"],
            stages=[tuple(s) for s in spans],
            title=f"Memory during {metrics['run'].get('name')}",
        )
    lengths = metrics.get("token_lengths") or {}
    if lengths:
        figures.token_lengths(
            lengths, run_dir / FIGURES["lengths"], title="Vocab entries by length"
        )
    counts = _load_json(run_dir / MERGE_COUNTS_FILE)
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
        env=_load_json(run_dir / ENVIRONMENT_FILE) or {},
        profile=_load_json(run_dir / PROFILE_DIR / PROFILE_SUMMARY),
        figures=frozenset(k for k, rel in FIGURES.items() if (run_dir / rel).is_file()),
        siblings=sibling_rows(run_dir, metrics),
    )


def render_analysis(facts: RunFacts) -> str:
    """The Markdown text of ANALYSIS.md: its sections in order (no file is read)."""
    sections = (
        section_header(facts.metrics, facts.env),
        section_time(facts.metrics),
        section_memory(facts.metrics, facts.figures),
        section_profile(facts.metrics, facts.profile),
        section_longest_tokens(facts.metrics, facts.figures),
        section_compression(facts.metrics),
        section_efficiency(facts.metrics),
        section_bits_per_byte(facts.metrics),
        section_undertrained(facts.metrics),
        section_throughput(facts.metrics),
        section_siblings(facts.metrics, facts.siblings),
        section_glossary(),
    )
    return "\n".join(line for section in sections for line in section)


def section_header(metrics: dict, env: dict) -> list[str]:
    run = metrics.get("run", {})
    counts = metrics.get("counts") or {}
    git = env.get("git") or {}
    sha = (git.get("sha") or "unknown")[:12]
    header_rows = [
        ["status", metrics.get("status")],
        ["started", metrics.get("started_at")],
        ["finished", metrics.get("finished_at")],
        ["code", f"{sha}{' (dirty, see diff.patch)' if git.get('dirty') else ''}"],
        ["python / cpus", f"{env.get('python', 'n/a')} / {env.get('usable_cpus', 'n/a')}"],
        ["input", _input_cell(run.get("input_path"), counts.get("bytes", "n/a"), metrics)],
        ["merges sha256", metrics.get("merges_sha256")],
    ]
    header_rows += _lineage_rows(metrics)
    lines = [
        f"# Run analysis: {run.get('name')}",
        "",
        f"BPE training on **{run.get('input_name') or run.get('dataset')}** with the "
        f"**{run.get('trainer')}** trainer, "
        f"vocab size {run.get('vocab_size')} (profiler: {run.get('profiler')}).",
        "",
        *_pattern_lines(metrics),
        *variant_lines(metrics),
        table(header_rows, ["", ""]),
        "",
        "Reproduce:",
        "",
        "```bash",
        rerun_command(run),
        "```",
        "",
    ]
    if metrics.get("status") == "failed":
        err = metrics.get("error") or {}
        lines += [
            f"**This run failed** in stage `{err.get('stage')}`: "
            f"{err.get('type')}: {err.get('message')}",
            "",
        ]
    if metrics.get("status_reason"):
        verdict = "crashed" if metrics["status"] == "crashed" else f"is {metrics['status']}"
        lines += [f"**This run {verdict}**: {metrics['status_reason']}.", ""]
    return lines


def variant_lines(metrics: dict) -> list[str]:
    """What a run of a BPE-family variant did differently (nothing for plain BPE).

    >>> variant_lines({"variant": {"name": "picky", "threshold": 0.9, "removals": 12}})[0][:45]
    'Variant: **picky** (PickyBPE, Chizhov et al.,'
    >>> variant_lines({"variant": {"name": "bpe"}}), variant_lines({})
    ([], [])
    """
    name = schema.get(metrics, schema.VARIANT_NAME, default="bpe")
    if name == "picky":
        return [
            f"Variant: **picky** (PickyBPE, Chizhov et al., 2024): intersection-over-self "
            f"threshold {schema.get(metrics, schema.VARIANT_THRESHOLD)}; "
            f"{schema.get(metrics, schema.VARIANT_REMOVALS, default='n/a')} tokens were "
            "removed during training and their slots went to later merges.",
            "",
        ]
    if name == "superbpe":
        two = schema.get(metrics, schema.VARIANT_STAGE_TWO, default={})
        return [
            f"Variant: **superbpe** (SuperBPE, Liu et al., 2025): ordinary BPE to "
            f"{schema.get(metrics, schema.VARIANT_TRANSITION_VOCAB)} tokens, then "
            f"{two.get('merges', 'n/a')} superword merges under the stage-two pattern above, "
            f"over {two.get('unique_pretokens', 'n/a')} unique pretokens "
            f"({two.get('unique_ratio', 'n/a')}x stage one's; longest "
            f"{two.get('longest_pretoken_bytes', 'n/a')} bytes).",
            "",
        ]
    return []


def _pattern_lines(metrics: dict) -> list[str]:
    """The split pattern and the tokenizer the run continued from, for runs that record them."""
    lines = []
    pattern = metrics.get("pattern")
    if pattern:
        # Not a table cell: the regex holds `|`.
        engine = schema.get(metrics, schema.PATTERN_ENGINE)
        split_by = " (split by the compiled scanner)" if engine == "compiled" else ""
        lines += [f"Split pattern: **{pattern['name']}** `{pattern['regex']}`{split_by}", ""]
    parent = metrics.get("init_from")
    if parent:
        lines += [
            f"Continued from `{parent['path']}` ({parent['vocab_size']} tokens, "
            f"{parent['merges']} merges, merges sha256 `{parent['merges_sha256'][:16]}`): its "
            f"ids are kept and {parent.get('new_tokens', 'n/a')} tokens were added.",
            "",
        ]
    return lines


def backend_text(metrics: dict) -> str:
    """Where pre-tokenization ran, as a clause for the timing sentence ("" for older runs).

    >>> backend_text({"backend": {"name": "dask", "scheduler": "LocalCluster(2)"}})
    ', dask backend on LocalCluster(2), cluster start included'
    >>> backend_text({"backend": {"name": "processes", "scheduler": None}}), backend_text({})
    (', processes backend', '')
    """
    backend = metrics.get("backend") or {}
    name = backend.get("name")
    if not name:
        return ""
    if name != "dask":
        return f", {name} backend"
    scheduler = backend.get("scheduler") or "n/a"
    # a LocalCluster is started inside the timed stage; a remote one was running before it
    started = ", cluster start included" if scheduler.startswith("LocalCluster") else ""
    return f", dask backend on {scheduler}{started}"


def section_time(metrics: dict) -> list[str]:
    run = metrics.get("run", {})
    counts = metrics.get("counts") or {}
    timings = metrics.get("timings") or {}
    # a run that failed before its timings were written still gets the table, as n/a
    stages = shown_stages(timings) or list(TIMED_STAGES)
    total = sum(v for s, v in timings.items() if s != "total") or None
    rows = [
        [
            s,
            fmt(timings.get(s)),
            fmt(100 * timings[s] / total, ".1f") if total and s in timings else "n/a",
        ]
        for s in stages
    ]
    lines = ["## Time", ""]
    lines += [table(rows, ["stage", "seconds", "% of run"], colalign=("left", "right", "right"))]
    lines.append("")
    # older runs timed a `read` step inside the training call: it counts toward training, as
    # a compiling trainer's `compile` does
    train_stages = {
        s: v for s, v in timings.items() if s in TRAIN_STAGES or s in RETIRED_STAGES or s == COMPILE
    }
    if train_stages:
        top = max(train_stages, key=train_stages.get)
        train_total = sum(train_stages.values())
        source = (
            "loaded from the pretoken cache"
            if _cache_status(metrics) == "hit"
            else f"in {counts.get('chunks', 'n/a')} chunk(s) on {counts.get('workers', 'n/a')} "
            f"worker(s){backend_text(metrics)}"
        )
        lines.append(
            f"Training took {fmt(train_total)} s; **{top}** dominates with "
            f"{fmt(100 * train_stages[top] / train_total, '.0f')}% of it "
            f"({counts.get('merges', 'n/a')} merges over {counts.get('unique_pretokens', 'n/a')} "
            f"unique pretokens, {counts.get('pretokens', 'n/a')} pretokens {source})."
        )
        lines += ["", stage1_sentence(metrics)]
    if COMPILE in timings:
        lines += ["", compile_sentence(metrics)]
    if metrics.get("profiled"):
        lines += [
            "",
            f"*Timings were measured under the {run.get('profiler')} profiler and include its "
            "overhead; compare speed only between runs with `profiler=none`.*",
        ]
    if metrics.get("stopped_early"):
        lines += [
            "",
            f"Training stopped early: the corpus ran out of pairs after {counts.get('merges')} "
            f"merges, so the vocab has {counts.get('vocab')} entries instead of "
            f"{run.get('vocab_size')}.",
        ]
    lines.append("")
    return lines


def compile_sentence(metrics: dict) -> str:
    """Where a compiling trainer's machine code came from, and what its `compile` time means.

    >>> compile_sentence({"timings": {"compile": 0.41}, "compile": {"cached": True}})
    "**compile** (0.410 s): the merge loop's machine code was loaded from Numba's cache."
    >>> compile_sentence({"timings": {"compile": 1.2}, "compile": {"cached": True},
    ...                   "run": {"trainer": "heap"}, "pattern": {"engine": "compiled"}})
    "**compile** (1.200 s): the pre-tokenizer's machine code was loaded from Numba's cache."
    """
    seconds = fmt(schema.get(metrics, schema.COMPILE_SECONDS))
    cached = schema.get(metrics, schema.COMPILE_CACHED)
    what = "the merge loop"
    if schema.get(metrics, schema.PATTERN_ENGINE) == "compiled":  # stage 1's scanner too
        compiled_loop = schema.get(metrics, schema.TRAINER) == "compiled"
        what = "the pre-tokenizer and the merge loop" if compiled_loop else "the pre-tokenizer"
    if cached is None:
        where = f"{what}'s machine code was compiled or loaded (not recorded which)"
    elif cached:
        where = f"{what}'s machine code was loaded from Numba's cache"
    else:
        where = (
            f"{what} was compiled in this run (the first run after an install or a "
            "change to the kernels; later runs load it from the cache in a fraction of this)"
        )
    return f"**compile** ({seconds} s): {where}."


def _cache_status(metrics: dict) -> str | None:
    """The pretoken cache's status for this run ("hit", "miss", "rebuilt", "off"; None when the
    run predates the cache)."""
    return (metrics.get("pretoken_cache") or {}).get("status")


def stage1_sentence(metrics: dict) -> str:
    """What stage 1 (count pretokens) was: its speed, or that it was a cache hit (no speed).

    A hit's seconds are hashing plus loading, so they are never shown as MB/s; otherwise the
    speed is over the counting alone (the stage's seconds minus the cache's hashing and saving).

    >>> stage1_sentence({"pretoken_cache": {"status": "hit", "load_seconds": 0.02,
    ...                  "hash_seconds": 0.01, "key": "ab" * 32}})  # doctest: +ELLIPSIS
    'Stage 1, count pretokens: **cache hit**: loaded in 0.020 s (input hashed in 0.010 s)...'
    >>> stage1_sentence({"timings": {"pretokenize": 2.0}, "counts": {"bytes": 4_000_000},
    ...                  "pretoken_cache": {"status": "miss"}})  # doctest: +ELLIPSIS
    'Stage 1, count pretokens: 4.00 MB at 2.00 MB/s (pretoken cache: miss, counts saved...'
    """
    cache = metrics.get("pretoken_cache") or {}
    status = cache.get("status")
    key = (cache.get("key") or "")[:12]
    if status == "hit":
        return (
            f"Stage 1, count pretokens: **cache hit**: loaded in {fmt(cache.get('load_seconds'))} "
            f"s (input hashed in {fmt(cache.get('hash_seconds'))} s) from the pretoken cache "
            f"(key `{key}`); nothing was counted, so this run measures no pre-tokenization speed."
        )
    seconds = (metrics.get("timings") or {}).get("pretokenize")
    num_bytes = (metrics.get("counts") or {}).get("bytes")
    if seconds is not None:
        seconds -= (cache.get("hash_seconds") or 0) + (cache.get("save_seconds") or 0)
    speed = num_bytes / seconds / 1e6 if seconds and seconds > 0 and num_bytes else None
    notes = {
        "miss": f"pretoken cache: miss, counts saved for later runs (key `{key}`)",
        "rebuilt": f"pretoken cache: the cached file failed its checksum and was rebuilt "
        f"(key `{key}`)",
        "off": "pretoken cache off",
    }
    note = f" ({notes[status]})" if status in notes else ""
    mb = fmt(num_bytes / 1e6 if num_bytes else None, ".2f")
    return f"Stage 1, count pretokens: {mb} MB at {fmt(speed, '.2f')} MB/s{note}."


def section_memory(metrics: dict, figures_made: frozenset[str]) -> list[str]:
    memory = metrics.get("memory") or {}
    # subtle: this file is written during the report stage, so it shows the figures taken
    # before it (`before_report`); metrics.json's own figures cover the whole run
    headline = {**memory, **(memory.get("before_report") or {})}
    per_stage = memory.get("per_stage_peak_mb") or {}
    if "before_report" in memory:
        per_stage = {s: mb for s, mb in per_stage.items() if s != "report"}
    baseline = schema.get(metrics, schema.BASELINE_MB, default=None)
    rows = [
        [
            s,
            fmt(per_stage[s], ".1f"),
            fmt(None if baseline is None else per_stage[s] - baseline, "+.1f"),
        ]
        for s in shown_stages(per_stage)
    ]
    lines = ["## Memory", ""]
    lines += [
        table(
            rows,
            ["stage", "peak MB (process tree, PSS)", "above the run's start"],
            colalign=("left", "right", "right"),
        )
    ]
    lines.append("")
    if memory:
        lines += _memory_headline(metrics, headline)
        if "before_report" in memory:
            lines.append(
                "These figures stop where the report stage (figures and this file) begins; "
                "metrics.json's `memory` covers the whole run, report included."
            )
        lines.append("")
    if "memory" in figures_made:
        lines += [f"![memory timeline]({FIGURES['memory']})", ""]
    return lines


def _memory_headline(metrics: dict, headline: dict) -> list[str]:
    """Training's memory first (what it added, where it peaked), analysis apart; runs from
    before training was reported apart get the whole tree's peak, labelled as such."""
    memory = metrics.get("memory") or {}
    added = schema.get(metrics, schema.TRAINING_ADDED_MB, default=None)
    interval = f"sampled every {memory.get('interval_s')} s"
    if added is None:
        return [
            f"Peak memory of the whole process tree, analysis included, was "
            f"**{fmt(headline.get('peak_mb'), '.1f')} MB** ({interval}); this run predates "
            "training's memory being reported apart."
        ]
    trained_in = schema.get(metrics, schema.LADDER_TRAINED_IN, default=None)
    if trained_in is not None and trained_in != (metrics.get("run") or {}).get("name"):
        return [
            f"This run was cut from the vocab ladder trained in `{trained_in}`: it trained "
            "nothing itself, so its memory says nothing of training; that run's ANALYSIS.md "
            "has the ladder training's memory (to the sweep's largest vocab)."
        ]
    stage = schema.get(metrics, schema.TRAINING_PEAK_STAGE, default=None)
    lines = [
        f"Training (stages 1-3) added **{fmt(added, '.1f')} MB** to the process tree at its "
        f"peak, in {stage} ({fmt(schema.get(metrics, schema.TRAINING_PEAK_MB), '.1f')} MB "
        f"in all, above the {fmt(schema.get(metrics, schema.BASELINE_MB), '.1f')} MB the "
        f"run's process held when it began; {interval}). What training adds is the figure to "
        "compare across runs: the starting memory includes whatever the process loaded before "
        "(in a sweep, earlier jobs' modules and caches)."
    ]
    analysis = schema.get(metrics, schema.ANALYSIS_PEAK_MB, default=None)
    if analysis is not None:
        lines.append(
            f"Analysis (GPT-2's tokenizer, the held-out measures), not part of training, "
            f"peaked at {fmt(analysis, '.1f')} MB."
        )
    return lines


def section_profile(metrics: dict, profile: dict | None) -> list[str]:
    run = metrics.get("run", {})
    lines = ["## Profile hot spots", ""]
    if profile and profile.get("functions"):
        if profile.get("profiler") == "scalene":
            rows = [
                [
                    f"`{r['file']}:{r['line']}`",
                    r["code"] or "",
                    fmt(r["cpu_percent"], ".1f"),
                    fmt(r["cpu_python_percent"], ".1f"),
                    fmt(r["peak_mb"], ".1f"),
                ]
                for r in profile.get("lines", [])[:10]
            ]
            top = (profile.get("lines") or profile["functions"])[0]
            lines += [
                "Top lines by CPU (scalene):",
                "",
                table(rows, ["where", "code", "CPU %", "Python %", "peak MB"]),
                "",
                f"The hottest line is `{top['file']}:{top['line']}` "
                f"({fmt(top['cpu_percent'], '.1f')}% of CPU time).",
            ]
        else:
            rows = [
                [
                    f"`{r['function']}`",
                    f"`{r['file']}:{r['line']}`",
                    r["calls"],
                    fmt(r["self_seconds"]),
                    fmt(r["cumulative_seconds"]),
                    fmt(r["self_percent"], ".1f"),
                ]
                for r in profile["functions"][:10]
            ]
            top = profile["functions"][0]
            lines += [
                "Top functions by self time (cProfile, parent process only):",
                "",
                table(rows, ["function", "where", "calls", "self s", "cum s", "self %"]),
                "",
                f"Most self time is spent in `{top['function']}` ({top['file']}), "
                f"{fmt(top['self_percent'], '.1f')}% of the profiled time.",
            ]
    else:
        lines.append(
            f"Not profiled (profiler={run.get('profiler')}); rerun with `profiler=scalene` or "
            "`profiler=cprofile` to see where the time goes."
        )
    lines.append("")
    return lines


def section_longest_tokens(metrics: dict, figures_made: frozenset[str]) -> list[str]:
    lines = ["## Longest tokens", ""]
    longest = metrics.get("longest_tokens") or []
    if longest:
        rows = [
            [
                k + 1,
                t["id"],
                t["bytes"],
                fmt(t.get("merge_count"), "d"),
                f"`{shown(t, 'gpt2')}`",
                shown(t, "text", repr),
            ]
            for k, t in enumerate(longest)
        ]
        headers = ["#", "id", "bytes", "merge count", "GPT-2 rendering", "text"]
        lines += [table(rows, headers), ""]
        lines += [_longest_judgement(longest, metrics), ""]
    support = merge_support_sentence(metrics)
    if support:
        lines += [support, ""]
    if "lengths" in figures_made:
        lines += [f"![token lengths]({FIGURES['lengths']})", ""]
    if "merge_counts" in figures_made:
        lines += [f"![merge counts]({FIGURES['merge_counts']})", ""]
    return lines


def shown(token: dict, key: str, how=str) -> str:
    """A longest-tokens cell: the recorded preview, clipped to a table's width with `…`.

    metrics.json keeps at most a preview of long tokens (`clipped`; the full bytes are in
    vocab.json); older runs kept the whole token, which this clips too.

    >>> shown({"text": "ab", "clipped": False}, "text", repr)
    "'ab'"
    >>> shown({"text": "ab", "clipped": True}, "text")
    'ab…'
    """
    cell = how(token[key])
    if token.get("clipped"):  # the bytes column says how long it really is
        return cell[:CELL_WIDTH] + "…"
    return clip(cell, CELL_WIDTH)


def _origin(side: dict, name: str) -> str:
    """Where a measured side's documents come from, for a table cell.

    >>> _origin({"source": "input_tail", "seen_in_training": False}, "own")
    'held out: the end of the training input, not trained on'
    """
    if side.get("source") != "input_tail":
        return f"{'same' if name == 'own' else 'other'} domain"
    if side.get("seen_in_training", True):
        return "end of the training input, seen in training"
    return "held out: the end of the training input, not trained on"


def _held_out(side: dict) -> str:
    """`held out: the last 40 documents (0.21 MB) of the input, not trained on`.

    >>> _held_out({"heldout_docs": 40, "heldout_bytes": 210_000})
    'held out: the last 40 documents (0.21 MB) of the input, not trained on'
    """
    return (
        f"held out: the last {side.get('heldout_docs')} documents "
        f"({fmt(side.get('heldout_bytes', 0) / 1e6, '.2f')} MB) of the input, not trained on"
    )


def section_compression(metrics: dict) -> list[str]:
    lines = ["## Compression", ""]
    comp = metrics.get("compression") or {}
    rows = []
    # "other" is the run's cross-domain dataset (the key metrics.json stores it under)
    for side in ("own", "other"):
        c = comp.get(side)
        if not c:
            continue
        ratio = c.get("ratio")
        base = c.get("gpt2_ratio")
        where = f"{c['dataset']} ({_origin(c, side)})"
        rows.append(
            [
                where,
                c["docs"],
                c["bytes"],
                fmt(ratio),
                fmt(base),
                fmt(ratio / base if ratio and base else None, ".2f"),
            ]
        )
    if not rows:
        return [*lines, "No held-out documents were measured.", "", *_tiktoken_lines(metrics)]
    lines += [
        table(
            rows,
            [
                "held-out documents",
                "docs",
                "bytes",
                "bytes/token (ours)",
                "bytes/token (GPT-2)",
                "ours / GPT-2",
            ],
        ),
        "",
    ]
    own, other = comp.get("own"), comp.get("other")
    if own and own.get("source") == "input_tail" and not own.get("seen_in_training", True):
        lines += [
            f"*{own['dataset']} has no held-out file; {_held_out(own)}. {own['docs']} of them "
            f"were measured here (from {Path(own['file']).name}). `dataset.heldout_fraction` "
            "and `dataset.heldout_max_bytes` set how many are held out; "
            "`dataset.heldout_path=...` names held-out text instead.*",
            "",
        ]
    elif own and own.get("source") == "input_tail":
        where = (
            f"from byte {own.get('offset', 'n/a')} on"
            if "file" not in own
            else f"its last {own['docs']} documents, from {Path(own['file']).name}"
        )
        lines += [
            f"*{own['dataset']} has no held-out file, so its own compression was measured on the "
            f"end of the training input ({where}, "
            f"{own['bytes']} bytes), which training saw: it overstates how well this tokenizer "
            "compresses unseen text of the kind. Nothing was held out (`dataset.heldout_fraction"
            "=0`, an input of one document, or a last document larger than "
            "`dataset.heldout_max_bytes`): pass `dataset.heldout_path=...`, or split the input "
            "into documents, to measure on unseen text.*",
            "",
        ]
    elif not own:
        lines += ["No held-out text of the training input was available to measure.", ""]
    if own and other and own.get("ratio") and other.get("ratio"):
        drop = 100 * (1 - other["ratio"] / own["ratio"])
        lines.append(
            "On its own domain this tokenizer packs "
            f"{fmt(own['ratio'], '.2f')} bytes per token; "
            f"on {other['dataset']} {fmt(other['ratio'], '.2f')} "
            f"({fmt(abs(drop), '.0f')}% {'less' if drop >= 0 else 'more'})."
        )
    if own and own.get("gpt2_ratio"):
        rel = own["ratio"] / own["gpt2_ratio"]
        lines.append(
            f"GPT-2's 50,257-token vocab gets {fmt(own['gpt2_ratio'], '.2f')} bytes per token "
            f"on the same documents: ours reaches {fmt(100 * rel, '.0f')}% of that."
        )
    lines.append("")
    return lines + _parent_lines(metrics) + _tiktoken_lines(metrics)


def section_bits_per_byte(metrics: dict) -> list[str]:
    """Bits per byte of the held-out text under an n-gram model of the run's ids."""
    lines = ["## Bits per byte (an n-gram model of the ids)", ""]
    bpb = schema.get(metrics, schema.BITS_PER_BYTE_SECTION)
    if not bpb:
        why = (
            "its training file could not be read (train.log says why)"
            if schema.has(metrics, schema.BITS_PER_BYTE_SECTION)
            else "it predates the bits-per-byte measure"
        )
        return [*lines, f"Not measured for this run ({why}).", ""]
    model = bpb.get("model") or {}
    order = model.get("order")
    rows = []
    for side in ("own", "other"):
        b = bpb.get(side)
        if not b:
            continue
        spread = b.get("splits") or {}
        where = f"{b['dataset']} ({_origin(b, side)})"
        rows.append(
            [
                where,
                b["docs"],
                b["tokens"],
                fmt(b["bits_per_byte"], ".3f"),
                f"{fmt(spread.get('min'), '.3f')} to {fmt(spread.get('max'), '.3f')}",
                fmt(b["unigram_bits_per_byte"], ".3f"),
                fmt(b["bits_per_token"], ".2f"),
            ]
        )
    if not rows:
        return [*lines, "No held-out documents were measured.", ""]
    splits = f"over {model.get('splits')} splits"
    headers = [
        "held-out documents",
        "docs",
        "tokens",
        f"bits/byte ({order}-gram)",
        splits,
        "bits/byte (unigram)",
        "bits/token",
    ]
    train = model.get("train") or {}
    scope = "all" if train.get("whole_file") else f"the first {train.get('bytes')} bytes"
    lines += [
        table(rows, headers),
        "",
        f"An interpolated Kneser-Ney {order}-gram model of this tokenizer's ids, fitted on "
        f"{scope} of {train.get('file')} ({train.get('tokens')} tokens, discounts "
        f"{', '.join(fmt(d, '.2f') for d in model.get('discounts') or [])} from unigrams up), "
        "scores the held-out documents; the splits are the documents dealt round-robin into "
        "parts. Lower is better. Bits per byte, unlike loss per token, compare tokenizers "
        "with different vocabularies: a model of this tokenizer's ids would likely prefer the "
        "one with fewer bits per byte on the same text.",
        "",
    ]
    return lines


def _parent_lines(metrics: dict) -> list[str]:
    """The extended tokenizer against its parent on held-out text (continued runs only)."""
    held = (metrics.get("init_from") or {}).get("heldout")
    if not held:
        return []
    gain = 100 * (held["ratio"] / held["parent_ratio"] - 1) if held.get("parent_ratio") else None
    return [
        f"Against the tokenizer it continued from, on {held['docs']} {held['dataset']} held-out "
        f"documents: parent {fmt(held['parent_ratio'], '.3f')} bytes per token, extended "
        f"{fmt(held['ratio'], '.3f')} ({fmt(gain, '+.1f')}%); "
        f"{fmt(100 * held['new_token_share'], '.1f')}% of the extended tokenizer's tokens there "
        "are new ids.",
        "",
    ]


def section_throughput(metrics: dict) -> list[str]:
    lines = ["## Throughput", ""]
    tp = metrics.get("throughput")
    if not tp:
        return [*lines, "Throughput was not measured.", ""]
    rows = [["ours", *_throughput_cells(tp, "")]]
    if tp.get("gpt2_bytes_per_second"):
        rows.append(["GPT-2 (same encoder)", *_throughput_cells(tp, "gpt2_")])
    first, first_hours = tp.get("first_pass_bytes_per_second"), _pile_hours(tp, "", "first_pass_")
    warm_hours = _pile_hours(tp, "", "")
    if first:
        projection = (
            f"At the first-pass speed ({fmt(first / 1e6, '.2f')} MB/s on one core, starting "
            f"from an empty pretoken cache) tokenizing The Pile would take about "
            f"{fmt(first_hours, '.0f')} hours ({fmt((first_hours or 0) / 24, '.1f')} days). The "
            f"warm speed ({fmt(tp['bytes_per_second'] / 1e6, '.2f')} MB/s, every pretoken "
            f"already cached) gives about {fmt(warm_hours, '.0f')} hours: optimistic, since new "
            "text keeps bringing pretokens the cache has not seen."
        )
    else:  # runs from before first-pass throughput was recorded
        projection = (
            f"At {fmt(tp['bytes_per_second'] / 1e6, '.2f')} MB/s on one core (warm cache), "
            f"tokenizing The Pile would take about {fmt(warm_hours, '.0f')} hours "
            f"({fmt((warm_hours or 0) / 24, '.1f')} days)."
        )
    headers = [
        "tokenizer",
        "first pass MB/s",
        "warm MB/s",
        "Pile hours (first pass)",
        "Pile hours (warm)",
    ]
    measured_on = schema.get(metrics, schema.DATASET, default="this run's")
    caveat = (
        f"The speed was measured on {measured_on} held-out text with a vocab trained on it; "
        "The Pile's text is of other domains, whose longer and rarer words change the rate "
        "too, so read the hours as an order of magnitude."
    )
    return [
        *lines,
        table(rows, headers),
        "",
        "MB/s on one thread; The Pile is 825 GB.",
        "",
        f"{projection} {caveat}",
        "",
    ]


def _pile_hours(tp: dict, who: str, speed: str) -> float | None:
    """Hours for The Pile at `speed` ("" warm, "first_pass_") for `who` ("" ours, "gpt2_")."""
    hours = tp.get(f"{who}{speed}pile_hours")
    if hours is None and tp.get(f"{who}{speed}bytes_per_second"):
        hours = pile_projection(tp[f"{who}{speed}bytes_per_second"])["hours"]
    return hours


def _throughput_cells(tp: dict, who: str) -> list[str]:
    first = tp.get(f"{who}first_pass_bytes_per_second")
    return [
        fmt(first / 1e6 if first else None, ".2f"),
        fmt(tp[f"{who}bytes_per_second"] / 1e6, ".2f"),
        fmt(_pile_hours(tp, who, "first_pass_"), ".1f"),
        fmt(_pile_hours(tp, who, ""), ".1f"),
    ]


def section_siblings(metrics: dict, sibs: list[dict]) -> list[str]:
    lines = ["## Sibling runs (same input)", ""]
    if not sibs:
        lines.append("No other complete runs on the same input in the experiments directory yet.")
        return [*lines, ""]
    my_merge = (metrics.get("timings") or {}).get("merge")
    rows = []
    for s in sibs:
        speed = fmt(s["merge"] / my_merge, ".2f") if s["merge"] and my_merge else "n/a"
        rows.append(
            [
                s["rel"],
                s["variant"],
                s["trainer"],
                s["vocab_size"],
                fmt(s["merge"]),
                fmt(s["total"]),
                fmt(s["train_mb"], ".1f"),
                speed + (" (profiled)" if s["profiled"] else ""),
                s["agree"],
            ]
        )
    headers = [
        "run",
        "variant",
        "trainer",
        "vocab",
        "merge s",
        "total s",
        "training MB added",
        "their merge time / ours",
        "merges vs this run",
    ]
    return [*lines, table(rows, headers), "", _sibling_summary(sibs, metrics), ""]


def _input_cell(path: str | None, text_bytes: object, metrics: dict) -> str:
    """`path (N bytes)`; for a corpus of several files or of records also how many files, their
    size on disk, their format (`input_summary`) and the records read:
    `shards (3 files, 1.20 GB, parquet; ...)`.
    """
    said = input_summary(metrics)
    if said is None:
        return f"{path} ({text_bytes} bytes)"
    records = schema.get(metrics, schema.INPUT_RECORDS)
    read = f"{text_bytes} bytes of text" + (f" in {records} records" if records else "")
    return f"{path} ({said}; {read})"


def _lineage_rows(metrics: dict) -> list[list]:
    """Header rows naming the corpus and held-out files by sha256 (runs that recorded them)."""
    lineage = metrics.get("lineage") or {}
    rows = []
    if (lineage.get("input") or {}).get("sha256"):
        rows.append(["input sha256", lineage["input"]["sha256"]])
    for name, ident in (lineage.get("heldout") or {}).items():
        rows.append(["held-out", f"{name} sha256 {ident.get('sha256')}"])
    return rows


def _tiktoken_lines(metrics: dict) -> list[str]:
    """The tiktoken agreement sentence and a blank line, for runs that measured it."""
    return [_tiktoken_line(metrics["tiktoken"]), ""] if metrics.get("tiktoken") else []


def _tiktoken_line(tk: dict) -> str:
    """One sentence: does the tiktoken export (tokenizer.tiktoken) agree on held-out text?"""
    if tk.get("not_exported"):
        return f"No tokenizer.json or tiktoken export: {tk['not_exported']}."
    names = tk.get("heldout") or []
    where = ", ".join(names) or "held-out text"
    # runs without a held-out file are measured on their input's tail, seen in training
    kind = "measured" if any(n.endswith("(input tail)") for n in names) else "held-out"
    head = (
        f"The tiktoken export (`tokenizer.tiktoken`) encodes {tk.get('mismatches')} of "
        f"{tk.get('pretokens')} {kind} pretokens ({where}) differently from this tokenizer"
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
    by_name = {kind.name: kind for kind in TOKEN_KINDS}
    # runs since long tokens are clipped record each token's kind (of its full bytes)
    top_kind = top.get("kind") or (
        token_kind(top["text"].encode("utf-8")) if "\ufffd" not in top["text"] else "partial_utf8"
    )
    if top_kind == "word" and not top["text"].startswith(" "):
        descr = "a word piece"
    else:
        descr = by_name[top_kind].one
    sense = _sense(top, top_kind, metrics)
    among = sum(1 for t in longest if (t.get("kind") or token_kind(t["text"].encode())) == "word")
    parts = ", ".join(
        f"{fmt(100 * share, '.0f')}% {by_name[k].label}"
        for k, share in sorted(kinds.items(), key=lambda kv: -kv[1])
        if share > 0
    )
    return (
        f"The longest token is `{shown(top, 'gpt2')}` ({top['bytes']} bytes, "
        f"{shown({**top, 'text': text}, 'text', repr)}): "
        f"{descr}; {sense}. "
        f"{among} of the {len(longest)} longest tokens are letter-only words. "
        f"Across all {metrics.get('learned_tokens', 'n/a')} learned tokens: {parts}; "
        f"{fmt(100 * (metrics.get('leading_space_share') or 0), '.0f')}% start with a space."
    )


def _sense(top: dict, kind: str, metrics: dict) -> str:
    """What the longest token says about the corpus, read from its merge count: a token made
    from a pair seen at most `RARE_MERGE_COUNT` times is never called frequent.

    >>> _sense({"merge_count": 1, "text": "xy"}, "word", {})[:60]
    'its last merge joined a pair seen only once in training: a r'
    >>> _sense({"merge_count": 40, "text": " once upon a time"}, "mixed",
    ...        {"variant": {"name": "superbpe"}})[:50]
    'a superword (several words in one token, as SuperB'
    """
    count = top.get("merge_count")
    if count is not None and count <= RARE_MERGE_COUNT:
        times = "once" if count == 1 else f"{count} times"
        return (
            f"its last merge joined a pair seen only {times} in training: a rare string the "
            "vocab had room for, not a frequent unit of the corpus"
        )
    seen = "" if count is None else f", its last merge seen {count} times"
    variant = schema.get(metrics, schema.VARIANT_NAME, default=None)
    if variant == "superbpe" and len(top["text"].split()) > 1:
        return (
            "a superword (several words in one token, as SuperBPE's second stage makes them)" + seen
        )
    if kind in ("word", "number"):
        if count is None:  # runs from before longest tokens recorded their merge count
            return "how often it occurred was not recorded (an older run)"
        return f"a frequent unit of this corpus{seen}"
    return f"a recurring string of the corpus's layout or markup rather than a word{seen}"


def merge_support_sentence(metrics: dict) -> str | None:
    """Whether the corpus supports the vocab (metrics.json's `merge_support`), with the
    numbers and the remedy when it has outgrown it; None for runs that did not record it."""
    support = schema.get(metrics, schema.MERGE_SUPPORT, default=None)
    if not support or not support.get("merges"):
        return None
    said = (
        f"{support['rare']:,} of the {support['merges']:,} merges "
        f"({fmt(100 * support['rare_share'], '.1f')}%) joined a pair seen at most "
        f"{RARE_MERGE_COUNT} times in training ({support['count_1']:,} of them once); the "
        f"training text has {support['unique_pretokens']:,} distinct pretokens"
    )
    if not support.get("outgrown"):
        return f"The corpus supports this vocab: {said}."
    return (
        f"**This vocab has outgrown its corpus**: {said}, so many tokens are strings met once "
        f"or twice (a model would rarely see them). Every merge up to vocab size "
        f"{support['supported_vocab']:,} joined a pair seen more than {RARE_MERGE_COUNT} times: "
        f"train with `vocab_size={support['supported_vocab']}` or less, or on more text."
    )


def _sibling_summary(sibs: list[dict], metrics: dict) -> str:
    run = metrics["run"]
    others = sorted({s["variant"] for s in sibs if not s["same_variant"]})
    sibs = [s for s in sibs if s["same_variant"]]
    same_size = [s for s in sibs if s["vocab_size"] == run.get("vocab_size")]
    sentences = []
    if others:
        sentences.append(
            f"Runs of other BPE-family members on this input ({', '.join(others)}) are listed "
            "for their time and memory; they learn other merges by design (reports/variants.md "
            "or `bpe-compare` compares their vocabularies)."
        )
    if same_size:
        different = [s for s in same_size if not s["same_merges"]]
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
    metrics_path = run_dir / METRICS_FILE
    if not metrics_path.is_file():
        raise FileNotFoundError(
            f"{str(run_dir)!r} is not a run directory (no metrics.json); pass a directory "
            "written by bpe-train"
        )
    if metrics is None:
        metrics = _load_json(metrics_path)
    if not isinstance(metrics, dict):
        raise ValueError(f"{metrics_path} is not valid JSON; the run is corrupt")
    metrics = observed(metrics)  # a `running` run whose process is gone shows as crashed
    draw_figures(run_dir, metrics)
    text = render_analysis(gather_run(run_dir, metrics))
    out = run_dir / ANALYSIS_FILE
    atomic_write_text(out, text + "\n")
    return out
