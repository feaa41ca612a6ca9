"""Scale benchmark: our trainers against Rust anchors (HF tokenizers, rustbpe, bpeasy, gigatoken).

For each corpus size (default 16M, 64M, 256M, 1G) it builds (or reuses, keyed by size, seed,
source and novelty) an OWT-like corpus with `scripts/make_scale_corpus.py`, then for each vocab
size (default 10,000 and 32,000) trains each system of `SYSTEMS` that is installed (or those
`--systems` names):

* ours: `bpe.train_bpe_detailed(..., trainer="heap")`, every CPU for pre-tokenization, no
  pretoken cache (the call never gets a cache directory, so no run measures a cache hit);
  `compiled`: the same with trainer compiled (the `compiled` extra), whose stage 1 splits
  GPT-2's pattern with the compiled scanner (`pretokenize.engine=auto`);
* HF: `tokenizers` BpeTrainer with GPT-2's byte-level pre-tokenizer
  (`ByteLevel(add_prefix_space=False)`, its 256-symbol initial alphabet) and the same special
  token, fed the same documents streamed from the file;
* rustbpe and bpeasy (the `bench` extra): GPT-2's split pattern, the same documents.
* gigatoken (the `bench` extra): its `train_bpe` reads the file and splits GPT-2's pattern itself.

Every vocabulary counts the special token, the 256 bytes and the merges (each system is asked
for the size that means the same number of merges), so the same `vocab_size` means the same
number of merges for all; each run records its merge count and the report checks they agree.
Each system breaks ties between equally frequent pairs its own way (the report's Systems table):
only ours follow CS336's order, so the anchors' merges differ from ours and only their time and
memory compare.

Every run is a fresh subprocess (`scripts/bench_scale_worker.py`, which imports only what its
trainer needs); the systems take turns (the order flips each time);
`--repeats` runs of each and the report shows medians. Memory is the process tree's peak
proportional set size (PSS, summed over the child and all its descendants, sampled every
25 ms): a page shared by n processes counts 1/n in each, so the libraries forked workers share
with their parent count once, as they occupy memory once (summed RSS, also recorded, counts
them once per process), the child's own peak
(VmHWM, and its workers' `ru_maxrss`) and its CPU time (workers and threads included: on a
busy machine wall time also measures the neighbours, CPU time much less).
Raw results go to `reports/scale/results.json`; `reports/scale.md` and its figures are made
from that file alone (`--report-only` remakes them without running anything).

Usage:

    python scripts/bench_scale.py                         # 16M..1G x 10K, 32K, 3 repeats
    python scripts/bench_scale.py --sizes 16M 64M --repeats 1
    python scripts/bench_scale.py --quick --out-dir /tmp/scale   # tiny plumbing check
    python scripts/bench_scale.py --report-only           # regenerate the report from JSON
    python scripts/bench_scale.py --sizes 16M 64M --vocabs 32000 --repeats 1 --name anchors
                                                          # every installed system -> anchors.md

What it does not do: decide anything about the trainers (see `bpe/trainers`), or run on
corpora other than the generated ones (point `bpe-train` at a real file for that).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bpe.util.io import atomic_open, atomic_write_text
from bpe.util.machine import host, host_line, versions

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_scale_corpus as corpus  # noqa: E402  (a sibling script, not a package)
from bench_scale_worker import SYSTEMS, TIE_BREAKS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
#: one training run in a fresh interpreter (a separate script so the child imports nothing but
#: what its trainer needs: this script's numpy, pandas and bpe would count in HF's memory)
WORKER = Path(__file__).resolve().parent / "bench_scale_worker.py"
DEFAULT_SIZES = ("16M", "64M", "256M", "1G")
DEFAULT_VOCABS = (10_000, 32_000)
QUICK_SIZES = ("256K", "1M")
QUICK_VOCABS = (300,)
#: every system the benchmark can run, in the report's order (bench_scale_worker.SYSTEMS)
IMPLS = ("ours", "compiled", "hf", "rustbpe", "bpeasy", "gigatoken")
#: the module each system needs: a system whose module is not installed is left out
REQUIRES = {
    "ours": "bpe",
    "compiled": "numba",
    "hf": "tokenizers",
    "rustbpe": "rustbpe",
    "bpeasy": "bpeasy",
    "gigatoken": "gigatoken",
}
#: our systems and the anchors they are compared with
OURS = ("ours", "compiled")
#: the system the headline tables call "ours", first found among those measured: the compiled
#: trainer where it ran (the one users train with at scale), heap otherwise
LEADS = ("compiled", "ours")
ANCHORS = ("hf", "rustbpe", "bpeasy", "gigatoken")
#: how each system appears in the report
LABELS = {
    "ours": "ours (heap)",
    "compiled": "ours (compiled)",
    "hf": "HF",
    "rustbpe": "rustbpe",
    "bpeasy": "bpeasy",
    "gigatoken": "gigatoken",
}
#: the distribution whose version the report records, per system
DISTRIBUTIONS = {
    "compiled": "numba",
    "hf": "tokenizers",
    "rustbpe": "rustbpe",
    "bpeasy": "bpeasy",
    "gigatoken": "gigatoken",
}
#: how often the parent samples the child's process tree (seconds)
SAMPLE_INTERVAL = 0.025
#: the report and its folder (results.json, figures) under --out-dir
REPORT_NAME = "scale"
#: the full runs the fits project: bytes, vocab, unique pretokens (None: not known)
PROJECTIONS = (
    ("TinyStories (full)", 2.1e9, 10_000, None),
    ("OpenWebText (full)", corpus.OWT_FULL_BYTES, 32_000, corpus.OWT_FULL_UNIQUE),
)
#: the scale goals: memory from this size up, time ratio at these sizes
MEMORY_FROM = "64M"
TIME_SIZES = ("64M", "256M", "1G")
TIME_RATIO = 0.6
MERGE_EXPONENT = 1.0


# --------------------------------------------------------------------------------------------
# the child: one training run
# the parent: corpora, runs, memory sampling
# --------------------------------------------------------------------------------------------


def available_systems() -> list[str]:
    """The systems of IMPLS whose libraries are installed, in IMPLS order."""
    import importlib.util

    return [s for s in IMPLS if importlib.util.find_spec(REQUIRES[s]) is not None]


def measure(impl: str, path: Path, vocab_size: int, *, timeout: float | None = None) -> dict:
    """Run one training in a fresh interpreter; sample its process tree's PSS meanwhile
    (TimeoutError after `timeout` seconds, the run stopped)."""
    spec = json.dumps({"impl": impl, "path": str(path), "vocab_size": vocab_size})
    out, run = run_sampled(
        [sys.executable, str(WORKER), spec],
        what=f"{impl} run on {path.name} @ {vocab_size}",
        timeout=timeout,
    )
    result = json.loads(out.strip().splitlines()[-1])
    return result | run


def run_sampled(command: list[str], *, what: str, timeout: float | None = None) -> tuple[str, dict]:
    """Run a command, sampling its process tree's memory; return its stdout and the measures.

    The measures: `process_seconds` (wall, start to exit), `peak_tree_mb` (the peak of the
    tree's summed PSS) and `peak_tree_rss_mb` (of its summed RSS). Raises RuntimeError naming
    `what` if the command fails, TimeoutError (the tree killed) once it has run `timeout`
    seconds.

    Sampling keeps to the budget of a run's own memory watcher
    (`bpe.experiment.memory.pause_after`: every `SAMPLE_INTERVAL` while it has spent under a
    tenth of the time, less often after): the kernel walks a process's page tables for each
    sample, and sampling a 1.7 GB trainer every 25 ms took a core from it (gigatoken's 1 GiB
    run: 26 s here, 15 s alone).
    """
    import psutil

    from bpe.experiment.memory import pause_after

    start, sampling = time.perf_counter(), time.process_time()
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = peak_rss = 0
    proc = psutil.Process(child.pid)
    while child.poll() is None:
        total = total_rss = 0
        try:
            members = [proc, *proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            members = []
        for member in members:
            try:
                info = member.memory_full_info()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue  # ended between listing and reading: its memory is gone too
            total += info.pss
            total_rss += info.rss
        peak = max(peak, total)
        peak_rss = max(peak_rss, total_rss)
        if timeout is not None and time.perf_counter() - start > timeout:
            for member in reversed(members):
                try:
                    member.kill()
                except psutil.NoSuchProcess:
                    pass
            child.communicate()
            raise TimeoutError(f"{what} stopped after {timeout:g} s")
        spent = time.process_time() - sampling  # this process does nothing but sample
        elapsed = time.perf_counter() - start
        time.sleep(pause_after(spent=spent, elapsed=elapsed, interval=SAMPLE_INTERVAL))
    out, err = child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{err[-3000:]}")
    return out, {
        "process_seconds": time.perf_counter() - start,
        "peak_tree_mb": peak / 2**20,
        "peak_tree_rss_mb": peak_rss / 2**20,
    }


def ensure_corpus(size: str, *, corpus_dir: Path, seed: int, source: str, novelty: str) -> dict:
    """The corpus for this size (built once; reused while its parameters are the same)."""
    num_bytes = corpus.parse_size(size)
    path = corpus_dir / f"{source}_{corpus.size_label(num_bytes)}_{novelty}_seed{seed}.txt"
    meta_path = path.with_suffix(".json")
    if path.is_file() and meta_path.is_file():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("bytes") == path.stat().st_size and meta.get("version") == CORPUS_VERSION:
            return meta
    print(f"building {path.name} ...", file=sys.stderr, flush=True)
    meta = corpus.make_corpus(  # a stale corpus of this cache, named by its parameters
        path, num_bytes, seed=seed, source=source, novelty=novelty, force=True
    )
    meta = {**meta, "version": CORPUS_VERSION, "size": size, "file": path.name}
    atomic_write_text(meta_path, json.dumps(meta, indent=2) + "\n")
    return meta


#: bump when make_scale_corpus.py would write different bytes for the same arguments
CORPUS_VERSION = 2


def code_version(root: Path) -> str:
    """The commit the code is at, marked when a tracked file outside `reports/` differs from it
    ("" outside git). Changes under `reports/` do not count: a benchmark measured in steps
    writes its results there, and the next step would otherwise call its own code changed.
    """
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!reports"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return ""
    return sha + (" (with uncommitted changes)" if sha and changed else "")


def machine() -> dict:
    """What the numbers were measured on: the host record every run and benchmark keeps
    (`bpe.util.machine.host`), the anchors' versions and the code's git sha."""
    import tokenizers

    installed = versions(DISTRIBUTIONS.values())
    return host() | {
        "tokenizers": tokenizers.__version__,
        "versions": {system: installed[dist] for system, dist in DISTRIBUTIONS.items()},
        "git": code_version(ROOT) or "unknown",
    }


def run_benchmark(
    *,
    sizes: Sequence[str],
    vocabs: Sequence[int],
    repeats: int,
    impls: Sequence[str],
    corpus_dir: Path,
    seed: int,
    source: str,
    novelty: str,
    command: str,
) -> dict:
    """Build the corpora, run every (size, vocab, impl) `repeats` times, return the results."""
    results: dict = {
        "schema": 1,
        "command": command,
        "machine": machine(),
        "settings": {
            "sizes": list(sizes),
            "vocabs": list(vocabs),
            "repeats": repeats,
            "impls": list(impls),
            "seed": seed,
            "source": source,
            "novelty": novelty,
            "sample_interval_s": SAMPLE_INTERVAL,
        },
        "corpora": [],
        "runs": [],
    }
    paths = {}
    for size in sizes:
        meta = ensure_corpus(size, corpus_dir=corpus_dir, seed=seed, source=source, novelty=novelty)
        paths[size] = corpus_dir / meta["file"]
        # the file's name, never its machine path (results.json is published)
        results["corpora"].append({k: v for k, v in meta.items() if k != "path"})
    order = 0
    for repeat in range(repeats):
        for s, size in enumerate(sizes):
            for v, vocab in enumerate(vocabs):
                turn = list(impls) if (repeat + s + v) % 2 == 0 else list(reversed(impls))
                for impl in turn:
                    run = measure(impl, paths[size], vocab)
                    row = {"impl": impl, "size": size, "bytes": paths[size].stat().st_size}
                    row |= {"vocab": vocab, "repeat": repeat, "order": order, **run}
                    results["runs"].append(row)
                    order += 1
                    print(
                        f"{impl:8} {size:>5} @ {vocab:>6}  {run['seconds']:8.2f} s  "
                        f"{run['peak_tree_mb']:8.0f} MB",
                        file=sys.stderr,
                        flush=True,
                    )
    return results


# --------------------------------------------------------------------------------------------
# the report: from results.json only
# --------------------------------------------------------------------------------------------


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


#: the per-run numbers the summary takes medians of
KEYS = (
    "seconds",
    "cpu_s",
    "peak_tree_mb",
    "peak_tree_rss_mb",
    "ru_maxrss_mb",
    "pretokenize_s",
    "merge_s",
)


def systems_of(results: dict) -> list[str]:
    """The systems a results file measured, in IMPLS order."""
    return [s for s in IMPLS if s in results["settings"]["impls"]]


def lead_of(results: dict) -> str:
    """The system the headline tables, fits, projections and goals call "ours".

    >>> lead_of({"settings": {"impls": ["ours", "hf"]}})
    'ours'
    >>> lead_of({"settings": {"impls": ["ours", "compiled", "hf"]}})
    'compiled'
    """
    measured = systems_of(results)
    return next((s for s in LEADS if s in measured), "ours")


def summarize(results: dict) -> list[dict]:
    """Medians per (size, vocab): one row with every system side by side, and the ratios."""
    unique = {c["size"]: None for c in results["corpora"]}
    lead = lead_of(results)
    for run in results["runs"]:
        if run["impl"] in OURS and run.get("unique_pretokens"):
            unique[run["size"]] = run["unique_pretokens"]
    rows = []
    for size in results["settings"]["sizes"]:
        for vocab in results["settings"]["vocabs"]:
            row: dict = {"size": size, "vocab": vocab, "unique_pretokens": unique.get(size)}
            row["lead"] = lead
            for impl in IMPLS:  # every system's keys, None where it was not measured
                runs = [
                    r
                    for r in results["runs"]
                    if r["impl"] == impl and r["size"] == size and r["vocab"] == vocab
                ]
                row["bytes"] = row.get("bytes") or (runs[0]["bytes"] if runs else None)
                for key in KEYS:
                    row[f"{impl}_{key}"] = _median([r.get(key) for r in runs])
                row[f"{impl}_merges"] = sorted({r["merges"] for r in runs})
                row[f"{impl}_tokens"] = sorted(
                    {r["tokens_sha256"] for r in runs if r.get("tokens_sha256")}
                )
                row[f"{impl}_n"] = len(runs)
            for key in KEYS:  # the headline system's numbers, whichever trainer it is
                row[f"lead_{key}"] = row[f"{lead}_{key}"]
            row["time_ratio"] = _ratio(row["lead_seconds"], row.get("hf_seconds"))
            row["memory_ratio"] = _ratio(row["lead_peak_tree_mb"], row.get("hf_peak_tree_mb"))
            for mine in OURS:
                for anchor in (*ANCHORS, "ours"):
                    if mine != anchor:
                        row[f"{mine}_vs_{anchor}_time"] = _ratio(
                            row.get(f"{mine}_seconds"), row.get(f"{anchor}_seconds")
                        )
                        row[f"{mine}_vs_{anchor}_memory"] = _ratio(
                            row.get(f"{mine}_peak_tree_mb"), row.get(f"{anchor}_peak_tree_mb")
                        )
                        row[f"{mine}_vs_{anchor}_cpu"] = _ratio(
                            row.get(f"{mine}_cpu_s"), row.get(f"{anchor}_cpu_s")
                        )
            rows.append(row)
    return rows


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _slope(xs: list, ys: list) -> tuple[float, float] | None:
    """(exponent, log intercept) of y ~ x**exponent; None under two distinct points."""
    pairs = [(x, y) for x, y in zip(xs, ys) if x and y]
    if len({x for x, _ in pairs}) < 2:
        return None
    slope, intercept = np.polyfit(np.log([x for x, _ in pairs]), np.log([y for _, y in pairs]), 1)
    return float(slope), float(intercept)


#: what the fits describe: (name, column of the summary rows)
FIT_QUANTITIES = (
    ("ours time", "lead_seconds"),
    ("HF time", "hf_seconds"),
    ("ours memory", "lead_peak_tree_mb"),
    ("HF memory", "hf_peak_tree_mb"),
    ("ours pretokenize", "lead_pretokenize_s"),
    ("ours merge", "lead_merge_s"),
)


def fit_growth(rows: list[dict]) -> list[dict]:
    """Log-log least-squares exponents of each quantity against bytes and unique pretokens."""
    fits = []
    for vocab in sorted({r["vocab"] for r in rows}):
        mine = [r for r in rows if r["vocab"] == vocab]
        for name, column in FIT_QUANTITIES:
            ys = [r[column] for r in mine]
            fits.append(
                {
                    "quantity": name,
                    "column": column,
                    "vocab": vocab,
                    "vs_bytes": _slope([r["bytes"] for r in mine], ys),
                    "vs_unique": _slope([r["unique_pretokens"] for r in mine], ys),
                }
            )
    return fits


def _predict(fit: tuple[float, float] | None, x: float | None) -> float | None:
    if fit is None or x is None:
        return None
    return float(np.exp(fit[1]) * x ** fit[0])


def project(fits: list[dict]) -> list[dict]:
    """The full runs, from the fits of the same vocab (nearest measured vocab otherwise)."""
    out = []
    vocabs = sorted({f["vocab"] for f in fits})
    for name, num_bytes, vocab, unique in PROJECTIONS:
        if not vocabs:
            break
        nearest = min(vocabs, key=lambda v: abs(v - vocab))
        by = {f["column"]: f for f in fits if f["vocab"] == nearest}
        row = {"run": name, "bytes": num_bytes, "vocab": vocab, "fit_vocab": nearest}
        row["unique_pretokens"] = unique
        for column in ("lead_seconds", "hf_seconds", "lead_peak_tree_mb", "hf_peak_tree_mb"):
            row[f"{column}_by_bytes"] = _predict(by[column]["vs_bytes"], num_bytes)
            row[f"{column}_by_unique"] = _predict(by[column]["vs_unique"], unique)
        pre = _predict(by["lead_pretokenize_s"]["vs_bytes"], num_bytes)
        merge = _predict(by["lead_merge_s"]["vs_unique"], unique)
        row["ours_split_s"] = pre + merge if pre is not None and merge is not None else None
        out.append(row)
    return out


def check_goals(rows: list[dict], fits: list[dict]) -> list[dict]:
    """The scale goals, each met / not met / not measured from the rows and fits."""
    memory_from = corpus.parse_size(MEMORY_FROM)
    mem_rows = [
        r for r in rows if corpus.parse_size(r["size"]) >= memory_from and r["memory_ratio"]
    ]
    mem_fail = [r for r in mem_rows if r["memory_ratio"] > 1.0]
    time_rows = [r for r in rows if r["size"] in TIME_SIZES and r["time_ratio"]]
    time_fail = [r for r in time_rows if r["time_ratio"] > TIME_RATIO]
    time_missing = [s for s in TIME_SIZES if s not in {r["size"] for r in time_rows}]
    merge_fits = [f for f in fits if f["column"] == "lead_merge_s" and f["vs_unique"]]
    merge_fail = [f for f in merge_fits if f["vs_unique"][0] > MERGE_EXPONENT]
    ours = f"ours ({_short(rows[0]['lead'])})" if rows else "ours"

    def cases(failing: list[dict], key: str, spec: str) -> str:
        return ", ".join(
            f"{_binary(r['size'])} @ {_vocab(r['vocab'])}: {r[key]:{spec}}" for r in failing
        )

    goals = [
        {
            "goal": f"{ours}: peak process-tree memory <= HF's at every size from "
            f"{_binary(MEMORY_FROM)} up",
            "status": _status(mem_rows, mem_fail, []),
            "detail": cases(mem_fail, "memory_ratio", ".3f") or _worst(mem_rows, "memory_ratio"),
        },
        {
            "goal": f"{ours}: total time <= {TIME_RATIO}x HF at "
            f"{', '.join(map(_binary, TIME_SIZES))} (both vocab sizes)",
            "status": _status(time_rows, time_fail, time_missing),
            "detail": "; ".join(
                part
                for part in (
                    cases(time_fail, "time_ratio", ".3f") or _worst(time_rows, "time_ratio"),
                    f"not measured: {', '.join(map(_binary, time_missing))}"
                    if time_missing
                    else "",
                )
                if part
            ),
        },
        {
            "goal": f"{ours}: merge stage growth exponent vs unique pretokens <= {MERGE_EXPONENT}",
            "status": _status(merge_fits, merge_fail, []),
            "detail": ", ".join(
                f"{_vocab(f['vocab'])}: {f['vs_unique'][0]:.2f}" for f in merge_fits
            ),
        },
    ]
    return goals + compiled_goals(rows)


#: the compiled trainer's goals: time against rustbpe at this size and vocab
COMPILED_TIME_AT = ("64M", 32_000)


def compiled_goals(rows: list[dict]) -> list[dict]:
    """The compiled trainer's goals, where the rows measured it (else none)."""
    if not any(r["compiled_seconds"] for r in rows):
        return []
    size, vocab = COMPILED_TIME_AT
    at = [r for r in rows if r["size"] == size and r["vocab"] == vocab]
    timed = [r for r in at if r["compiled_vs_rustbpe_time"]]
    slow = [r for r in timed if r["compiled_vs_rustbpe_time"] > 1.0]
    mem = [r for r in rows if r["compiled_vs_ours_memory"]]
    big = [r for r in mem if r["compiled_vs_ours_memory"] > 1.0]

    def cases(failing: list[dict], key: str) -> str:
        return ", ".join(
            f"{_binary(r['size'])} @ {_vocab(r['vocab'])}: {r[key]:.3f}" for r in failing
        )

    return [
        {
            "goal": f"compiled time <= rustbpe's at {_binary(size)} @ {_vocab(vocab)}",
            "status": _status(timed, slow, []),
            "detail": cases(timed, "compiled_vs_rustbpe_time"),
        },
        {
            "goal": "compiled peak process-tree memory <= heap's at every size",
            "status": _status(mem, big, []),
            "detail": cases(big, "compiled_vs_ours_memory")
            or _worst(mem, "compiled_vs_ours_memory"),
        },
    ]


def _status(measured: list, failing: list, missing: list) -> str:
    if not measured:
        return "not measured"
    if failing:
        return "not met"
    return "met (on the sizes measured)" if missing else "met"


def _worst(rows: list[dict], key: str) -> str:
    if not rows:
        return ""
    worst = max(rows, key=lambda r: r[key])
    return f"worst {_binary(worst['size'])} @ {_vocab(worst['vocab'])}: {worst[key]:.3f}"


def _f(value: float | None, spec: str) -> str:
    from bpe.analysis.markdown import fmt

    return fmt(value, spec)


def _binary(size: str) -> str:
    """`16M` -> `16 MiB` (binary units)."""
    label = corpus.size_label(corpus.parse_size(size))
    return f"{label[:-1]} {label[-1]}iB" if label[-1] in "KMG" else f"{label} B"


def _vocab(vocab: int) -> str:
    """`32000` -> `32K` as in the goals' tables; small sizes stay numbers."""
    return f"{vocab // 1000}K" if vocab % 1000 == 0 else str(vocab)


def _millions(value: float | None, spec: str) -> str:
    return "n/a" if value is None else f"{value / 1e6:{spec}} M"


def render_markdown(results: dict, *, figures: Sequence[str] = ()) -> str:
    """reports/scale.md from the results alone (deterministic: same JSON, same bytes).

    The page is its sections in order; each `_section_*` is a pure function of the results (and
    of the rows, fits and projections derived from them once here).
    """
    rows = summarize(results)
    fits = fit_growth(rows)
    sections = [
        _section_header(results, rows),
        _section_systems(results, rows),
        _section_time_memory(results, rows),
        _section_anchors(results, rows),
        _section_stage_split(results, rows),
        _section_growth(results, fits),
        _section_goals(check_goals(rows, fits)),
        _section_projections(project(fits)),
        _section_figures(figures, report_name(results)),
        _section_corpora(results),
    ]
    return "\n".join(line for section in sections for line in section)


def _table(rows: list[list[str]], headers: list[str]) -> list[str]:
    """A Markdown table (first column left, numbers right), then a blank line."""
    from bpe.analysis.markdown import table

    return [table(rows, headers, colalign=["left"] + ["right"] * (len(headers) - 1)), ""]


def _section_header(results: dict, rows: list[dict]) -> list[str]:
    """Title, how the page was made, the machine, and how each side was run and measured."""
    settings, m = results["settings"], results["machine"]
    systems = systems_of(results)
    name = report_name(results)
    lead = lead_of(results)
    ours = ", ".join(_short(s) for s in sorted(OURS, key=lambda s: s != lead) if s in systems)
    anchors = [ANCHOR_NAMES[s] for s in ANCHORS if s in systems]
    named = " and ".join([", ".join(anchors[:-1]), anchors[-1]] if len(anchors) > 1 else anchors)
    title = f"ours ({ours})" + (f" vs {named}" if anchors else "")
    again = "python scripts/bench_scale.py --report-only" + (
        f" --name {name}" if name != REPORT_NAME else ""
    )
    others = "".join(
        ANCHOR_SETUPS[s]
        for s in ("ours", "compiled", "rustbpe", "bpeasy")
        if s in systems and s != lead
    )
    turns = (
        "ours and HF alternating" if set(systems) == {"ours", "hf"} else "the systems taking turns"
    )
    return [
        f"# Scale: {title}",
        "",
        f"Generated by `{results['command']}` (from `{name}/results.json`; "
        f"`{again}` remakes this page); do not edit by hand.",
        "",
        f"Machine: {host_line(m)}. Code at git `{m['git']}`, tokenizers {m['tokenizers']}.",
        "",
        f"Corpora: `scripts/make_scale_corpus.py --source {settings['source']} --novelty "
        f"{settings['novelty']} --seed {settings['seed']}` (shuffled real documents, "
        f"{_share(results)} of "
        f"the words replaced by Heaps'-law new words). {LEAD_SETUPS[lead]} HF: BpeTrainer, "
        "`ByteLevel(add_prefix_space=False)`, "
        "the same special token and vocab size (both count the special token, 256 bytes and "
        f"the merges: {_merges_note(rows)}).{others} Each run in a fresh process, {turns}, "
        f"medians of {settings['repeats']}; memory is the peak proportional set "
        "size (PSS) of the process tree (the run and its workers; a page shared by n processes "
        "counts 1/n in each, so shared libraries count once), sampled every "
        f"{settings['sample_interval_s'] * 1000:.0f} ms.",
        "",
    ]


#: the anchors' names in the title, and how the header describes each extra system's setup
ANCHOR_NAMES = {
    "hf": "Hugging Face tokenizers",
    "rustbpe": "rustbpe",
    "bpeasy": "bpeasy",
    "gigatoken": "gigatoken",
}
ANCHOR_SETUPS = {
    "ours": " Ours (heap): the same call with trainer heap (pure Python, the readable reference "
    "the compiled trainer's merges are checked against).",
    "compiled": " Ours (compiled): the same call with trainer compiled (Numba; its first run in "
    "a fresh install compiles, later runs load the cached machine code).",
    "rustbpe": " rustbpe: `Tokenizer.train_from_iterator` with GPT-2's split pattern, the same "
    "documents, vocab size one less (it counts no special token).",
    "bpeasy": " bpeasy: `train_bpe` with GPT-2's split pattern, no token length limit, the "
    "same documents, vocab size one less (it counts no special token).",
    "gigatoken": " gigatoken: `train_bpe(path, vocab_size, [EOT])`, which reads the file itself "
    "and splits GPT-2's pattern with a hand-written pre-tokenizer on its own threads, the same "
    "vocab size (it counts the special token, as ours does).",
}


#: how the header describes the system the headline tables call "ours"
LEAD_SETUPS = {
    "ours": "Ours: `train_bpe_detailed`, trainer heap, every CPU, no pretoken cache.",
    "compiled": 'Ours (in every table that says only "ours"): `train_bpe_detailed`, trainer '
    "compiled (heap's algorithm in Numba; its first run in a fresh install compiles, later runs "
    "load the cached machine code), stage 1 on every CPU with the compiled scanner, no pretoken "
    "cache.",
}


def report_name(results: dict) -> str:
    """The report's file name (without .md) and its folder: `scale` unless --name said."""
    return results["settings"].get("report_name", REPORT_NAME)


def _section_systems(results: dict, rows: list[dict]) -> list[str]:
    """Each system measured: what it is, its version, its tie-break, whether its merges match."""
    versions = results["machine"].get("versions", {})
    table_rows = []
    for system in systems_of(results):
        version = versions.get(system)
        if system == "hf":
            version = version or results["machine"].get("tokenizers")
        elif system in OURS:
            numba = f", Numba {version}" if system == "compiled" and version else ""
            version = f"git `{results['machine']['git']}`{numba}"
        table_rows.append(
            [
                LABELS[system],
                SYSTEMS[system],
                version or "n/a",
                TIE_BREAKS[system],
                _same_counts(rows, system),
                _same_merges(rows, system),
            ]
        )
    headers = [
        "system",
        "what",
        "version",
        "tie-break (equal counts)",
        "merge count = ours'",
        "same merges as ours (heap)",
    ]
    from bpe.analysis.markdown import table

    return [
        "## Systems",
        "",
        "Only ours follow CS336's tie-break, so an anchor's merges may differ from ours after the "
        "first tie: its time and memory compare, its merges do not (the merge counts must be "
        "equal, and are checked per run).",
        "",
        table(table_rows, headers),
        "",
    ]


def _same_counts(rows: list[dict], system: str) -> str:
    """Whether the system made as many merges as ours in every row measured by both."""
    both = [r for r in rows if r[f"{system}_merges"] and r["ours_merges"]]
    if system == "ours" or not both:
        return "-" if system == "ours" else "n/a"
    differ = [r for r in both if r[f"{system}_merges"] != r["ours_merges"]]
    if differ:
        return "differs at " + ", ".join(
            f"{_binary(r['size'])} @ {_vocab(r['vocab'])}" for r in differ
        )
    return "yes"


def _same_merges(rows: list[dict], system: str) -> str:
    """Whether the system's merged tokens equal ours (heap's), in every row measured by both."""
    both = [r for r in rows if r[f"{system}_tokens"] and r["ours_tokens"]]
    if system == "ours" or not both:
        return "-" if system == "ours" else "n/a (not recorded)"
    same = [r for r in both if r[f"{system}_tokens"] == r["ours_tokens"]]
    if len(same) == len(both):
        return "yes"
    return f"no ({len(both) - len(same)} of {len(both)} rows differ)"


def _section_anchors(results: dict, rows: list[dict]) -> list[str]:
    """Time and memory of every system, and ours (each trainer) over each anchor."""
    systems = systems_of(results)
    mine = [s for s in OURS if s in systems]
    anchors = [s for s in (*ANCHORS, "ours") if s in systems]
    if set(systems) <= {"ours", "hf"}:
        return []  # the table above says it all
    pairs = [(m, a) for m in mine for a in anchors if m != a]
    novelty = results["settings"]["novelty"]
    out = ["## Against each anchor", ""]
    for what, key, spec, unit, measured, better in (
        ("time", "seconds", ".1f", "s", "wall seconds", "faster"),
        ("memory", "peak_tree_mb", ".0f", "MB", "peak PSS of the process tree", "smaller"),
        (
            "cpu",
            "cpu_s",
            ".1f",
            "CPU s",
            "user + system CPU seconds of the process tree, threads "
            "included: on a busy machine the steadier measure of work",
            "cheaper",
        ),
    ):
        table_rows = [
            [f"{novelty} {_binary(r['size'])}", _vocab(r["vocab"])]
            + [_f(r[f"{s}_{key}"], spec) for s in systems]
            + [_f(r[f"{m}_vs_{a}_{what}"], ".2f") for m, a in pairs]
            for r in rows
        ]
        headers = (
            ["corpus", "vocab"]
            + [f"{LABELS[s]} {unit}" for s in systems]
            + [f"{_short(m)}/{_short(a)} {what}" for m, a in pairs]
        )
        out += [
            f"{'CPU time' if what == 'cpu' else what.capitalize()} (medians; {measured}) and "
            f"the ratios of ours over each anchor (below 1: ours is {better}):",
            "",
            *_table(table_rows, headers),
        ]
    return out


def _short(system: str) -> str:
    return {"ours": "heap", "compiled": "compiled"}.get(system, LABELS[system])


def _section_time_memory(results: dict, rows: list[dict]) -> list[str]:
    """Wall time and process-tree peak memory per corpus and vocab, ours against HF."""
    novelty = results["settings"]["novelty"]
    table_rows = [
        [
            f"{novelty} {_binary(r['size'])}",
            _millions(r["unique_pretokens"], ".2f"),
            _vocab(r["vocab"]),
            _f(r["lead_seconds"], ".1f"),
            _f(r["hf_seconds"], ".1f"),
            _f(r["time_ratio"], ".2f"),
            _f(r["lead_peak_tree_mb"], ".0f"),
            _f(r["hf_peak_tree_mb"], ".0f"),
            _f(r["memory_ratio"], ".2f"),
        ]
        for r in rows
    ]
    headers = [
        "corpus",
        "unique pretokens",
        "vocab",
        "ours s",
        "HF s",
        "ours/HF time",
        "ours MB",
        "HF MB",
        "ours/HF memory",
    ]
    lead = '"Ours" here, and in the stage split, fits, goals and projections below: the '
    lead += f"{_short(lead_of(results))} trainer."
    return ["## Time and memory", "", lead, "", *_table(table_rows, headers)]


def _section_stage_split(results: dict, rows: list[dict]) -> list[str]:
    """Our pre-tokenization and merge seconds, each side's own peak RSS and CPU seconds."""
    split_rows = [
        [
            _binary(r["size"]),
            _vocab(r["vocab"]),
            _f(r["lead_pretokenize_s"], ".1f"),
            _f(r["lead_merge_s"], ".1f"),
            _f(
                r["lead_merge_s"] and r["lead_seconds"] and r["lead_merge_s"] / r["lead_seconds"],
                ".2f",
            ),
            _f(r["lead_ru_maxrss_mb"], ".0f"),
            _f(r["hf_ru_maxrss_mb"], ".0f"),
            _f(r["lead_cpu_s"], ".1f"),
            _f(r["hf_cpu_s"], ".1f"),
        ]
        for r in rows
    ]
    headers = [
        "size",
        "vocab",
        "pretokenize s",
        "merge s",
        "merge share",
        "ours own peak MB",
        "HF own peak MB",
        "ours CPU s",
        "HF CPU s",
    ]
    return [
        "Our stage split (medians; pre-tokenization on "
        f"{_workers(results)} worker(s)) and the run's own peak RSS (the larger of the process's "
        "VmHWM and its workers' `ru_maxrss`; the table above sums the tree), and CPU time "
        "(user + system, workers and threads included: less sensitive than wall time to a "
        "busy machine):",
        "",
        *_table(split_rows, headers),
    ]


def _section_growth(results: dict, fits: list[dict]) -> list[str]:
    """Growth exponents: log-log slopes against corpus bytes and unique pretokens."""
    sizes = results["settings"]["sizes"]
    fit_rows = [
        [
            f["quantity"],
            _vocab(f["vocab"]),
            _f(f["vs_bytes"] and f["vs_bytes"][0], ".2f"),
            _f(f["vs_unique"] and f["vs_unique"][0], ".2f"),
        ]
        for f in fits
    ]
    headers = ["quantity", "vocab", "vs bytes", "vs unique pretokens"]
    caveat = (
        ". With fewer than 3 sizes a slope is a line through two points: indicative only."
        if len(sizes) < 3
        else "."
    )
    return [
        "## Growth exponents",
        "",
        "Least-squares slopes of log(quantity) against log(corpus bytes) and log(unique "
        f"pretokens) over the {len(sizes)} sizes measured "
        f"({', '.join(map(_binary, sizes))}; 1.0 = linear)" + caveat,
        "",
        *_table(fit_rows, headers),
    ]


def _section_goals(goals: list[dict]) -> list[str]:
    """Each scale goal with its status and the measured ratio or exponent."""
    from bpe.analysis.markdown import table

    goal_rows = [[g["goal"], g["status"], g["detail"] or "n/a"] for g in goals]
    return [
        "## Goals (the scale goals; the compiled trainer's where it ran)",
        "",
        table(goal_rows, ["goal", "status", "measured (ours/HF, or exponent)"]),
        "",
    ]


def _section_projections(projections: list[dict]) -> list[str]:
    """Projected time and memory of the full datasets, by bytes and by unique pretokens."""
    proj_rows = [
        [
            p["run"],
            f"{p['bytes'] / 1e9:.1f} GB",
            _vocab(p["vocab"]),
            _millions(p["unique_pretokens"], ".1f"),
            _f(p["lead_seconds_by_bytes"], ",.0f"),
            _f(p["hf_seconds_by_bytes"], ",.0f"),
            _f(p["lead_seconds_by_unique"], ",.0f"),
            _f(p["hf_seconds_by_unique"], ",.0f"),
            _f(p["ours_split_s"], ",.0f"),
            _f(p["lead_peak_tree_mb_by_bytes"], ",.0f"),
            _f(p["hf_peak_tree_mb_by_bytes"], ",.0f"),
            _f(p["lead_peak_tree_mb_by_unique"], ",.0f"),
            _f(p["hf_peak_tree_mb_by_unique"], ",.0f"),
        ]
        for p in projections
    ]
    headers = [
        "run",
        "bytes",
        "vocab",
        "unique",
        "ours s (bytes)",
        "HF s (bytes)",
        "ours s (unique)",
        "HF s (unique)",
        "ours s (split)",
        "ours MB (bytes)",
        "HF MB (bytes)",
        "ours MB (unique)",
        "HF MB (unique)",
    ]
    return [
        "## Projections to the full datasets on this machine",
        "",
        "From the fits above (the same vocab size). By bytes: each quantity's fit against "
        "bytes. By unique pretokens: against unique pretokens (only where the full corpus's "
        "count is known: OpenWebText's 6.6 M); ours split = pre-tokenization by bytes + merge "
        "stage by unique pretokens. TinyStories' vocabulary grows far slower than these "
        "OWT-like corpora, so its projection is an upper bound. Fixed costs (starting the "
        "interpreter and the workers) flatten the slopes at the small sizes, so projections "
        "from fits without the 1 GiB point understate the full runs.",
        "",
        *_table(proj_rows, headers),
    ]


def _section_figures(figures: Sequence[str], name: str = REPORT_NAME) -> list[str]:
    """Links to the figures written beside the report (none: no section)."""
    if not figures:
        return []
    links = [f"![{Path(f).stem.replace('_', ' ')}]({name}/{Path(f).name})" for f in figures]
    return ["## Figures", "", *links, ""]


def _section_corpora(results: dict) -> list[str]:
    """The generated corpora: size, documents, predicted unique words, generator speed."""
    corpus_rows = [
        [
            _binary(c["size"]),
            f"{c['bytes']:,}",
            f"{c['documents']:,}",
            _f(c.get("predicted_unique"), ",.0f"),
            _f(c.get("mb_per_s"), ".1f"),
            _f(c.get("mb_per_cpu_s"), ".1f"),
        ]
        for c in results["corpora"]
    ]
    headers = [
        "size",
        "bytes",
        "documents",
        "predicted unique",
        "generator MB/s (wall)",
        "MB per CPU s",
    ]
    return ["## Corpora", "", *_table(corpus_rows, headers)]


def _share(results: dict) -> str:
    shares = {c["novelty"]["share"] for c in results["corpora"] if "novelty" in c}
    return ", ".join(f"{s:.0%}" for s in sorted(shares)) or "n/a"


def _workers(results: dict) -> str:
    workers = sorted({r["num_workers"] for r in results["runs"] if r.get("num_workers")})
    return ", ".join(str(w) for w in workers) or "n/a"


def _merges_note(rows: list[dict]) -> str:
    differ = [
        f"{r['size']} @ {r['vocab']}"
        for r in rows
        if r["ours_merges"] and r["hf_merges"] and r["ours_merges"] != r["hf_merges"]
    ]
    if differ:
        return "merge counts differ at " + ", ".join(differ)
    return "equal merge counts in every run"


#: each system's line in the figures
STYLES = {
    "ours": "o-",
    "compiled": "D-",
    "hf": "s--",
    "rustbpe": "^:",
    "bpeasy": "v-.",
    "gigatoken": "x--",
}


#: The figures of a report, in the order it shows them: (results column, axis label, file).
FIGURES = (
    ("seconds", "wall time (s)", "time_vs_bytes.png"),
    ("peak_tree_mb", "peak process-tree PSS (MB)", "memory_vs_bytes.png"),
)


def write_figures(results: dict, out_dir: Path) -> list[str]:
    """Time and memory against bytes, log-log, every system per vocab; returns the file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summarize(results)
    names = []
    for column, label, name in FIGURES:
        fig, ax = plt.subplots(figsize=(6, 4))
        for vocab in sorted({r["vocab"] for r in rows}):
            mine = [r for r in rows if r["vocab"] == vocab]
            for impl in systems_of(results):
                pts = [(r["bytes"], r[f"{impl}_{column}"]) for r in mine if r[f"{impl}_{column}"]]
                if pts:
                    ax.plot(*zip(*pts), STYLES[impl], label=f"{LABELS[impl]} {vocab:,}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("corpus bytes")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        with atomic_open(out_dir / name) as f:
            fig.savefig(f, format="png", dpi=100, metadata={"Software": None})
        plt.close(fig)
        names.append(name)
    return names


def write_report(results: dict, out_dir: Path) -> Path:
    """reports/<name>.md and reports/<name>/*.png from the results (name: `scale` by default)."""
    name = report_name(results)
    figures = write_figures(results, out_dir / name)
    path = out_dir / f"{name}.md"
    atomic_write_text(path, render_markdown(results, figures=figures))
    return path


# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", help=f"corpus sizes (default {DEFAULT_SIZES})")
    parser.add_argument("--vocabs", nargs="+", type=int, help=f"default {DEFAULT_VOCABS}")
    parser.add_argument("--repeats", type=int, default=None, help="runs of each (default 3)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a plumbing check")
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=IMPLS,
        help="the systems to run (default: every one installed: ours, and compiled, hf, "
        "rustbpe, bpeasy when their libraries are)",
    )
    parser.add_argument(
        "--name",
        default=REPORT_NAME,
        help=f"the report's name: <out-dir>/<name>.md and <out-dir>/<name>/ (default "
        f"{REPORT_NAME})",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--source", choices=sorted(corpus.SOURCES), default="owt")
    parser.add_argument("--novelty", choices=corpus.NOVELTY, default="owt")
    parser.add_argument("--corpus-dir", type=Path, default=ROOT / "data" / "scale")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "reports")
    parser.add_argument("--report-only", action="store_true", help="remake the report from JSON")
    args = parser.parse_args(argv)
    results_path = args.out_dir / args.name / "results.json"
    if not args.report_only:
        command = "python scripts/bench_scale.py" + "".join(
            f" {a}" for a in (sys.argv[1:] if argv is None else argv)
        )
        results = run_benchmark(
            sizes=args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES),
            vocabs=args.vocabs or (QUICK_VOCABS if args.quick else DEFAULT_VOCABS),
            repeats=args.repeats or (1 if args.quick else 3),
            impls=args.systems or available_systems(),
            corpus_dir=args.corpus_dir,
            seed=args.seed,
            source=args.source,
            novelty=args.novelty,
            command=command,
        )
        if args.name != REPORT_NAME:
            results["settings"]["report_name"] = args.name
        atomic_write_text(results_path, json.dumps(results, indent=2) + "\n")
    if not results_path.is_file():
        raise FileNotFoundError(f"{results_path} does not exist: run the benchmark first")
    results = json.loads(results_path.read_text(encoding="utf-8"))
    print(write_report(results, args.out_dir))


if __name__ == "__main__":
    main()
