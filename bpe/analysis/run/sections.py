"""ANALYSIS.md's sections about the run itself: its header, timings, memory, profile and
siblings, each a pure function of metrics.json's content (and the facts gathered beside it).

What it does not do: read files (`bpe.analysis.run.facts`) or describe the vocabulary
(`bpe.analysis.run.token_sections`).
"""

from __future__ import annotations

import logging
from functools import partial

from bpe.analysis.loader import (
    shown_stages,
)
from bpe.analysis.markdown import fmt, input_summary, measure_label, table
from bpe.analysis.run.variant_sections import variant_lines
from bpe.runs import schema
from bpe.runs.command import rerun_command
from bpe.runs.layout import (
    FIGURES,
)
from bpe.runs.stages import COMPILE, TIMED_STAGES, TRAIN_STAGES
from bpe.util.machine import ENV_KEY, host_line

logger = logging.getLogger(__name__)


def _machine_row(env: dict) -> list[str]:
    """The header's machine row: `bpe.util.machine.host_line` of the run's host record, or the
    interpreter and CPUs that runs recorded before they recorded their machine."""
    if isinstance(env.get(ENV_KEY), dict):
        return ["machine", host_line(env[ENV_KEY])]
    return ["python / cpus", f"{env.get('python', 'n/a')} / {env.get('usable_cpus', 'n/a')}"]


def section_header(metrics: dict, env: dict) -> list[str]:
    get = partial(schema.get, metrics)
    run = get(schema.RUN, default={})
    git = env.get("git") or {}
    sha = (git.get("sha") or "unknown")[:12]
    header_rows = [
        ["status", get(schema.STATUS)],
        ["started", get(schema.STARTED_AT)],
        ["finished", get(schema.FINISHED_AT)],
        ["code", f"{sha}{' (dirty, see diff.patch)' if git.get('dirty') else ''}"],
        _machine_row(env),
        [
            "input",
            _input_cell(
                get(schema.INPUT_PATH),
                get(schema.COUNTS_BYTES, default="n/a"),
                metrics,
            ),
        ],
        ["merges sha256", get(schema.MERGES_SHA256)],
    ]
    header_rows += _lineage_rows(metrics)
    lines = [
        f"# Run analysis: {get(schema.RUN_NAME)}",
        "",
        f"BPE training on **{get(schema.INPUT_NAME)}** with the "
        f"**{get(schema.TRAINER)}** trainer, "
        f"vocab size {get(schema.VOCAB_SIZE)} (profiler: {get(schema.PROFILER)}).",
        "",
        *_pattern_lines(metrics),
        *variant_lines(metrics),
        *limits_lines(metrics),
        table(header_rows, ["", ""]),
        "",
        "Reproduce:",
        "",
        "```bash",
        rerun_command(run),
        "```",
        "",
    ]
    if get(schema.STATUS) == "failed":
        lines += [
            f"**This run failed** in stage `{get(schema.ERROR_STAGE)}`: "
            f"{get(schema.ERROR_TYPE)}: {get(schema.ERROR_MESSAGE)}",
            "",
        ]
    if get(schema.STATUS_REASON):
        verdict = "crashed" if get(schema.STATUS) == "crashed" else f"is {get(schema.STATUS)}"
        lines += [f"**This run {verdict}**: {get(schema.STATUS_REASON)}.", ""]
    return lines


def _pattern_lines(metrics: dict) -> list[str]:
    """The split pattern and the tokenizer the run continued from, for runs that record them."""
    get = partial(schema.get, metrics)
    lines = []
    pattern = get(schema.PATTERN)
    if pattern:
        # Not a table cell: the regex holds `|`.
        engine = get(schema.PATTERN_ENGINE)
        split_by = " (split by the compiled scanner)" if engine == "compiled" else ""
        lines += [
            f"Split pattern: **{get(schema.PATTERN_NAME)}** "
            f"`{get(schema.PATTERN_REGEX)}`{split_by}",
            "",
        ]
    parent = get(schema.INIT_FROM)
    if parent:
        lines += [
            f"Continued from `{get(schema.INIT_FROM_PATH)}` ({get(schema.INIT_FROM_VOCAB_SIZE)} "
            "tokens, "
            f"{get(schema.INIT_FROM_MERGES)} merges, merges sha256 "
            f"`{get(schema.INIT_FROM_MERGES_SHA256)[:16]}`): its "
            f"ids are kept and {get(schema.INIT_FROM_NEW_TOKENS, default='n/a')} tokens were "
            "added.",
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
    get = partial(schema.get, metrics)
    name = get(schema.BACKEND_NAME)
    if not name:
        return ""
    if name != "dask":
        return f", {name} backend"
    scheduler = get(schema.BACKEND_SCHEDULER) or "n/a"
    # a LocalCluster is started inside the timed stage; a remote one was running before it
    started = ", cluster start included" if scheduler.startswith("LocalCluster") else ""
    return f", dask backend on {scheduler}{started}"


def section_time(metrics: dict) -> list[str]:
    get = partial(schema.get, metrics)
    timings = get(schema.TIMINGS) or {}
    # a run that failed before its timings were written still gets the table, as n/a
    stages = shown_stages(timings) or list(TIMED_STAGES)
    total = sum(v for s, v in timings.items() if s != "total") or None
    cpu = get(schema.CPU_TIMINGS) or {}  # runs since CPU time per stage
    rows = [
        [
            s,
            fmt(timings.get(s)),
            fmt(100 * timings[s] / total, ".1f") if total and s in timings else "n/a",
            *([fmt(get(schema.CPU_SECONDS_OF, stage=s))] if cpu else []),
        ]
        for s in stages
    ]
    heads = ["stage", "seconds", "% of run", *(["CPU seconds"] if cpu else [])]
    lines = ["## Time", ""]
    lines += [table(rows, heads, colalign=("left", "right", "right", "right")[: len(heads)])]
    lines.append("")
    if cpu:
        lines += [
            "CPU seconds: the stage's CPU time, this process's threads and its workers (over "
            "the wall seconds: the cores it kept busy).",
            "",
        ]
    # a compiling trainer's `compile` counts toward training
    train_stages = {s: v for s, v in timings.items() if s in TRAIN_STAGES or s == COMPILE}
    if train_stages:
        top = max(train_stages, key=train_stages.get)
        train_total = sum(train_stages.values())
        source = (
            "loaded from the pretoken cache"
            if _cache_status(metrics) == "hit"
            else f"in {get(schema.COUNTS_CHUNKS, default='n/a')} chunk(s) on "
            f"{get(schema.WORKERS, default='n/a')} "
            f"worker(s){backend_text(metrics)}"
        )
        lines.append(
            f"Training took {fmt(train_total)} s; **{top}** dominates with "
            f"{fmt(100 * train_stages[top] / train_total, '.0f')}% of it "
            f"({get(schema.MERGES, default='n/a')} merges over "
            f"{get(schema.UNIQUE_PRETOKENS, default='n/a')} "
            f"unique pretokens, {get(schema.PRETOKENS, default='n/a')} pretokens {source})."
        )
        lines += ["", stage1_sentence(metrics)]
    if COMPILE in timings:
        lines += ["", compile_sentence(metrics)]
    if get(schema.PROFILED):
        lines += [
            "",
            f"*Timings were measured under the {get(schema.PROFILER)} profiler and include its "
            "overhead; compare speed only between runs with `profiler=none`.*",
        ]
    if get(schema.STOPPED_EARLY):
        lines += ["", stop_sentence(metrics)]
    lines.append("")
    return lines


def stop_sentence(metrics: dict) -> str:
    """Why a run that stopped early stopped, with its numbers.

    >>> stop_sentence({"stopped_by": "min_frequency", "counts": {"merges": 9, "vocab": 266},
    ...                "run": {"vocab_size": 300, "min_frequency": 40}})[:60]
    'Training stopped early: the best pair left occurred fewer th'
    """
    get = partial(schema.get, metrics)
    if get(schema.STOPPED_BY) == schema.STOPPED_MIN_FREQUENCY:
        why = (
            "the best pair left occurred fewer than "
            f"`min_frequency={get(schema.MIN_FREQUENCY)}` times"
        )
    elif get(schema.MAX_TOKEN_LENGTH) is not None:
        why = (
            "no pair was left whose token fits "
            f"`max_token_length={get(schema.MAX_TOKEN_LENGTH)}` bytes"
        )
    else:
        why = "the corpus ran out of pairs"
    return (
        f"Training stopped early: {why} after {get(schema.MERGES)} merges, so the vocab has "
        f"{get(schema.VOCAB)} entries instead of {get(schema.VOCAB_SIZE)}."
    )


def limits_lines(metrics: dict) -> list[str]:
    """The training limits a run set (nothing when it set none).

    >>> limits_lines({"run": {"max_token_length": 8, "min_frequency": None}})[0][:52]
    'Limits: merges make tokens of at most 8 bytes (`max_'
    >>> limits_lines({"run": {}})
    []
    """
    get = partial(schema.get, metrics)
    said = []
    if get(schema.MAX_TOKEN_LENGTH) is not None:
        said.append(
            f"merges make tokens of at most {get(schema.MAX_TOKEN_LENGTH)} bytes "
            f"(`max_token_length={get(schema.MAX_TOKEN_LENGTH)}`; a longer one is never made, "
            "the next best pair is merged instead)"
        )
    if get(schema.MIN_FREQUENCY) is not None:
        said.append(
            f"merging stops once the best pair occurs fewer than {get(schema.MIN_FREQUENCY)} "
            f"times (`min_frequency={get(schema.MIN_FREQUENCY)}`)"
        )
    seeds = ", ".join(f"`{s!r}`" for s in get(schema.SEED_TOKENS) or [])
    seeded = [f"Seed tokens, in the vocab before the first merge (`seed_tokens`): {seeds}.", ""]
    kept = ", ".join(f"`{c}`" for c in get(schema.PROTECT) or [])
    protected = [f"Protected characters, each its own pretoken (`protect`): {kept}.", ""]
    return (
        ([f"Limits: {'; '.join(said)}.", ""] if said else [])
        + (seeded if seeds else [])
        + (protected if kept else [])
    )


def compile_sentence(metrics: dict) -> str:
    """Where a compiling trainer's machine code came from, and what its `compile` time means.

    >>> compile_sentence({"timings": {"compile": 0.41}, "compile": {"cached": True}})
    "**compile** (0.410 s): the merge loop's machine code was loaded from Numba's cache."
    >>> compile_sentence({"timings": {"compile": 1.2}, "compile": {"cached": True},
    ...                   "run": {"trainer": "heap"}, "pattern": {"engine": "compiled"}})
    "**compile** (1.200 s): the pre-tokenizer's machine code was loaded from Numba's cache."
    """
    get = partial(schema.get, metrics)
    seconds = fmt(get(schema.COMPILE_SECONDS))
    cached = get(schema.COMPILE_CACHED)
    what = "the merge loop"
    if get(schema.PATTERN_ENGINE) == "compiled":  # stage 1's scanner too
        compiled_loop = get(schema.TRAINER) == "compiled"
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
    return schema.get(metrics, schema.PRETOKEN_CACHE_STATUS)


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
    get = partial(schema.get, metrics)
    status = get(schema.PRETOKEN_CACHE_STATUS)
    key = (get(schema.PRETOKEN_CACHE_KEY) or "")[:12]
    if status == "hit":
        return (
            "Stage 1, count pretokens: **cache hit**: loaded in "
            f"{fmt(get(schema.PRETOKEN_CACHE_LOAD_SECONDS))} "
            f"s (input hashed in {fmt(get(schema.PRETOKEN_CACHE_HASH_SECONDS))} s) from the "
            "pretoken cache "
            f"(key `{key}`); nothing was counted, so this run measures no pre-tokenization speed."
        )
    seconds = get(schema.PRETOKENIZE_SECONDS)
    num_bytes = get(schema.COUNTS_BYTES)
    if seconds is not None:
        seconds -= (get(schema.PRETOKEN_CACHE_HASH_SECONDS) or 0) + (
            get(schema.PRETOKEN_CACHE_SAVE_SECONDS) or 0
        )
    speed = num_bytes / seconds / 1e6 if seconds and seconds > 0 and num_bytes else None
    notes = {
        "miss": f"pretoken cache: miss, counts saved for later runs (key `{key}`)",
        "rebuilt": f"pretoken cache: the cached file failed its checksum and was rebuilt "
        f"(key `{key}`)",
        "off": "pretoken cache off",
    }
    note = f" ({notes[status]})" if status in notes else ""
    mb = fmt(num_bytes / 1e6 if num_bytes else None, ".2f")
    startup = get(schema.WORKER_STARTUP_SECONDS)
    workers = (
        ""
        if startup is None
        else f" Its {get(schema.WORKERS)} worker processes took {fmt(startup)} s to start, "
        "included in that speed (smaller inputs are counted in the run's own process)."
    )
    return f"Stage 1, count pretokens: {mb} MB at {fmt(speed, '.2f')} MB/s{note}.{workers}"


def section_memory(metrics: dict, figures_made: frozenset[str]) -> list[str]:
    get = partial(schema.get, metrics)
    memory = get(schema.MEMORY) or {}
    # subtle: this file is written during the report stage, so it shows the figures taken
    # before it (`before_report`); metrics.json's own figures cover the whole run
    headline = {**memory, **(get(schema.MEMORY_BEFORE_REPORT) or {})}
    per_stage = get(schema.PEAK_MB_PER_STAGE) or {}
    if "before_report" in memory:
        per_stage = {s: mb for s, mb in per_stage.items() if s != "report"}
    baseline, measure = get(schema.BASELINE_MB, default=None), measure_label(metrics)
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
            ["stage", f"peak MB (process tree, {measure})", "above the run's start"],
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
    get = partial(schema.get, metrics)
    added = get(schema.TRAINING_ADDED_MB, default=None)
    every, widest = get(schema.MEMORY_INTERVAL_S), get(schema.TRAINING_WIDEST_GAP_S, default=None)
    if widest is not None and widest > 2 * every:  # the watcher slowed down in a large tree
        every = f"{every}-{widest:.2f}"
    interval = f"{measure_label(metrics)}, sampled every {every} s"
    if added is None:
        return [
            f"Peak memory of the whole process tree, analysis included, was "
            f"**{fmt(headline.get('peak_mb'), '.1f')} MB** ({interval}); this run predates "
            "training's memory being reported apart."
        ]
    trained_in = get(schema.LADDER_TRAINED_IN, default=None)
    if trained_in is not None and trained_in != get(schema.RUN_NAME):
        return [
            f"This run was cut from the vocab ladder trained in `{trained_in}`: it trained "
            "nothing itself, so its memory says nothing of training; that run's ANALYSIS.md "
            "has the ladder training's memory (to the sweep's largest vocab)."
        ]
    stage = get(schema.TRAINING_PEAK_STAGE, default=None)
    lines = [
        f"Training (stages 1-3) added **{fmt(added, '.1f')} MB** to the process tree at its "
        f"peak, in {stage} ({fmt(get(schema.TRAINING_PEAK_MB), '.1f')} MB "
        f"in all, above the {fmt(get(schema.BASELINE_MB), '.1f')} MB the "
        f"run's process held when it began; {interval}). What training adds is the figure to "
        "compare across runs: the starting memory includes whatever the process loaded before "
        "(in a sweep, earlier jobs' modules and caches)."
    ]
    analysis = get(schema.ANALYSIS_PEAK_MB, default=None)
    if analysis is not None:
        lines.append(
            f"Analysis (GPT-2's tokenizer, the held-out measures), not part of training, "
            f"peaked at {fmt(analysis, '.1f')} MB."
        )
    return lines


def section_profile(metrics: dict, profile: dict | None) -> list[str]:
    get = partial(schema.get, metrics)
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
            if profile.get("waiting_percent"):
                lines.append(
                    f"Left out: {fmt(profile['waiting_percent'], '.1f')}% that scalene "
                    "counted in the progress clock's thread while it waited (a sleeping "
                    "thread's time reads as native CPU), not BPE's work."
                )
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
            f"Not profiled (profiler={get(schema.PROFILER)}); rerun with `profiler=scalene` or "
            "`profiler=cprofile` to see where the time goes."
        )
    lines.append("")
    return lines


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
    get = partial(schema.get, metrics)
    rows = []
    if get(schema.INPUT_SHA256):
        rows.append(["input sha256", get(schema.INPUT_SHA256)])
    for name, ident in (get(schema.LINEAGE_HELDOUT) or {}).items():
        rows.append(["held-out", f"{name} sha256 {ident.get('sha256')}"])
    return rows
