"""The full-size runs, measured: `bpe-train` end to end at OpenWebText's and TinyStories' sizes,
the Rust anchors on the same files, and encoding the corpus to uint16, ours against tiktoken.

For each corpus of `CORPORA` (an 11.9 GB OpenWebText-like corpus at vocab 32,000 and a 2.2 GB
TinyStories-like one at 10,000, the real datasets' sizes in bytes, built by
`scripts/make_scale_corpus.py` through `bench_scale.ensure_corpus`; the JSON records the
command that remakes each), it measures, each in a fresh process whose tree's memory is sampled
every 25 ms (peak PSS, `bench_scale.run_sampled`):

1. `bpe-train trainer=compiled vocab_size=V dataset.path=FILE` with everything else a user's
   default (every core, the analysis with its caps, no pretoken cache): wall and CPU seconds
   of the whole command and of each stage (metrics.json's `timings` and `cpu_timings`), the
   tree's peak memory, training's own memory (`memory.training`), and the goal it is held to;
2. each anchor installed (HF `tokenizers`, rustbpe, bpeasy: `bench_scale_worker.py`), with an
   hour's limit each: wall, CPU, peak memory, and its merge count checked equal to ours;
3. `bpe-encode` of the whole corpus to uint16 on every core with the run's tokenizer, ours and
   `--backend tiktoken`: MB/s each, and whether the two id arrays are equal.

Results go to `reports/full_size/results.json` (rewritten after every step, so a long session
keeps what it measured) and `reports/full_size.md` is rendered from that file alone
(`--report-only`). The corpora and the encoded arrays are deleted after measuring
(`--keep` keeps them); they never go in the repository.

    python scripts/bench_full_size.py                         # both corpora, everything
    python scripts/bench_full_size.py --corpora tinystories --skip-anchors
    python scripts/bench_full_size.py --report-only
    python scripts/bench_full_size.py --quick --out-dir /tmp/full   # 4 MiB: a plumbing check

What it does not do: decide anything about the trainers, or compare merges with the anchors
(their tie-breaks differ: `bench_scale.py` says how).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_scale  # noqa: E402  (a sibling script, not a package)

from bpe.util.io import atomic_write_text  # noqa: E402
from bpe.util.machine import host_line  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
REPORT_NAME = "full_size"
#: The full-size corpora: the real datasets' sizes in bytes (OpenWebText's owt_train.txt and
#: TinyStoriesV2-GPT4-train.txt), the vocab each is trained to, and the goals they are held to.
CORPORA = {
    "owt": {
        "size": "11920511059",
        "source": "owt",
        "novelty": "owt",
        "vocab_size": 32_000,
        "goal_seconds": 600,
        "goal_mb": 2048,
    },
    "tinystories": {
        "size": "2227753162",
        "source": "tinystories",
        "novelty": "sample",
        "vocab_size": 10_000,
        "goal_seconds": 120,
        "goal_mb": None,
    },
}
QUICK = {
    "quick": {
        "size": "4M",
        "source": "owt",
        "novelty": "owt",
        "vocab_size": 1000,
        "goal_seconds": None,
        "goal_mb": None,
    }
}
#: An anchor that takes longer than this is stopped and recorded as such.
ANCHOR_TIMEOUT_S = 3600
ENCODERS = ("ours", "tiktoken")
#: The anchors in the order they run: the fastest first, so a session that must stop early
#: has measured the most.
ANCHOR_ORDER = ("rustbpe", "bpeasy", "hf")


def public_command(argv: Sequence[str]) -> str:
    """The command as the report shows it: where corpora and reports go is left out (it
    changes no number, and names a machine's directories).

    >>> public_command(["--corpora", "owt", "--corpus-dir", "/scratch", "--out-dir=/tmp/r"])
    'python scripts/bench_full_size.py --corpora owt'
    """
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--corpus-dir", "--out-dir"):
            skip = True
        elif not arg.startswith(("--corpus-dir=", "--out-dir=")):
            kept.append(arg)
    return " ".join(["python scripts/bench_full_size.py", *kept])


def remake_command(spec: dict, meta: dict) -> str:
    """The command that rebuilds the corpus byte for byte."""
    return (
        f"python scripts/make_scale_corpus.py --source {spec['source']} --novelty "
        f"{spec['novelty']} --size {spec['size']} --seed {meta['seed']} --out {meta['file']}"
    )


def ours_command(spec: dict) -> str:
    """Our training command as the results show it (the corpus's path left out).

    >>> ours_command({"vocab_size": 32000})
    'bpe-train trainer=compiled vocab_size=32000 dataset.path=<corpus>'
    """
    return f"bpe-train trainer=compiled vocab_size={spec['vocab_size']} dataset.path=<corpus>"


def warm_page_cache(path: Path, *, block: int = 1 << 24) -> float:
    """Read the corpus once, untimed, so that each measured process reads it from the page
    cache, as every earlier one did: without this, whichever process runs first after the
    corpus was made (or after other work pushed it out of memory) also measures the disk (an
    11.9 GB stage 1 took 405 s with most of the file to be read from disk, 272 s from memory).
    Returns the seconds it took."""
    t0 = time.perf_counter()
    with path.open("rb", buffering=0) as f:
        while f.read(block):
            pass
    return time.perf_counter() - t0


def drop_from_page_cache(path: Path) -> None:
    """Ask the kernel to drop a written file's pages (`posix_fadvise`, where there is one), so
    that a 5.5 GB array of ids does not push the corpus out of memory before the next encoder
    reads it (the first encoder would read it from memory and the second from the disk)."""
    if not hasattr(os, "posix_fadvise"):
        return
    with path.open("rb") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def _warm(path: Path) -> None:
    seconds = warm_page_cache(path)
    print(f"{path.name}: read once in {seconds:.1f} s (page cache warmed)", file=sys.stderr)


def train_ours(path: Path, spec: dict, exp: Path) -> tuple[dict, Path]:
    """`bpe-train trainer=compiled` on the corpus with a user's defaults: what it measured,
    and its run directory (a temporary one: not recorded)."""
    command = [
        sys.executable,
        "-m",
        "bpe.cli.train",
        "trainer=compiled",
        f"vocab_size={spec['vocab_size']}",
        f"dataset.path={path}",
        f"experiments_dir={exp}",
        "cache=false",
        "progress=false",
    ]
    _, sampled = bench_scale.run_sampled(command, what=f"bpe-train on {path.name}")
    run_dir = (exp / "latest").resolve()
    metrics = json.loads((run_dir / "metrics.json").read_text("utf-8"))
    memory = metrics.get("memory") or {}
    training = ("pretokenize", "compile", "merge")  # the stages an anchor's call also runs
    cpu = metrics.get("cpu_timings") or {}
    return {
        "command": ours_command(spec),
        "wall_s": sampled["process_seconds"],
        # the run's own record (its threads, and its workers as they report at their stop):
        # the kernel's count of the command's children misses workers a forkserver started
        "cpu_s": cpu.get("total"),
        "peak_tree_mb": sampled["peak_tree_mb"],
        "training_wall_s": sum(metrics["timings"].get(s, 0.0) for s in training),
        "training_cpu_s": sum(cpu.get(s, 0.0) for s in training) if cpu else None,
        "timings": metrics["timings"],
        "cpu_timings": metrics.get("cpu_timings"),
        "training_peak_mb": (memory.get("training") or {}).get("peak_mb"),
        "training_added_mb": (memory.get("training") or {}).get("added_mb"),
        "analysis_peak_mb": (memory.get("analysis") or {}).get("peak_mb"),
        "merges": metrics["counts"]["merges"],
        "unique_pretokens": metrics["counts"]["unique_pretokens"],
        "pretokens": metrics["counts"]["pretokens"],
        "workers": metrics["counts"]["workers"],
        "analysis_md": (run_dir / "ANALYSIS.md").is_file(),
    }, run_dir


def train_anchor(
    impl: str, path: Path, spec: dict, merges: int, *, timeout: float = ANCHOR_TIMEOUT_S
) -> dict:
    """One anchor on the corpus, within `timeout` seconds; its merge count against ours."""
    try:
        result = bench_scale.measure(impl, path, spec["vocab_size"], timeout=timeout)
    except TimeoutError:
        return {"impl": impl, "timed_out": True, "timeout_s": timeout}
    return {
        "impl": impl,
        "timed_out": False,
        "wall_s": result["process_seconds"],
        "cpu_s": result["cpu_s"],
        "peak_tree_mb": result["peak_tree_mb"],
        "merges": result["merges"],
        "merges_equal_ours": result["merges"] == merges,
    }


def encode(path: Path, run_dir: str, backend: str, out: Path) -> dict:
    """`bpe-encode` of the whole corpus to uint16 on every core; MB/s of the whole command."""
    command = [
        sys.executable,
        "-m",
        "bpe.cli.encode",
        "--tokenizer",
        run_dir,
        "--input",
        str(path),
        "--out",
        str(out),
        "--backend",
        "python" if backend == "ours" else "tiktoken",
        "--no-progress",
        "--force",
    ]
    _, sampled = bench_scale.run_sampled(command, what=f"bpe-encode ({backend}) {path.name}")
    size = path.stat().st_size
    ids = np.load(out, mmap_mode="r")
    drop_from_page_cache(out)
    return {
        "backend": backend,
        "wall_s": sampled["process_seconds"],
        "mb_per_s": size / 1e6 / sampled["process_seconds"],
        "peak_tree_mb": sampled["peak_tree_mb"],
        "tokens": int(ids.shape[0]),
    }


def same_ids(a: Path, b: Path, *, block: int = 1 << 26) -> bool:
    """Whether two .npy id arrays are equal, compared a block at a time."""
    x, y = np.load(a, mmap_mode="r"), np.load(b, mmap_mode="r")
    if x.shape != y.shape:
        return False
    return all(np.array_equal(x[i : i + block], y[i : i + block]) for i in range(0, len(x), block))


STEPS = ("ours", "encode", "anchors")


def measure_corpus(
    name: str, spec: dict, *, corpus_dir: Path, work: Path, args, save, previous: dict | None
) -> dict:
    """Every measurement of one corpus (the `args.only` steps, the rest kept from `previous`:
    encoding needs our run, so `ours` runs unless only the anchors are asked for), saved after
    each step through `save(entry)`."""
    meta = bench_scale.ensure_corpus(
        spec["size"], corpus_dir=corpus_dir, seed=0, source=spec["source"], novelty=spec["novelty"]
    )
    path = Path(meta["path"])
    entry = {
        "name": name,
        **spec,
        "bytes": path.stat().st_size,
        "documents": meta.get("documents"),
        "remake": remake_command(spec, meta),
    }
    only = set(args.only or STEPS)
    skipped = (("encode", args.skip_encode), ("anchors", args.skip_anchors))
    only -= {step for step, skip in skipped if skip}
    if only == {"anchors"} and previous and "ours" in previous:
        entry["ours"], run_dir = previous["ours"], None  # the anchors need only its merges
    else:
        _warm(path)
        entry["ours"], run_dir = train_ours(path, spec, work / f"exp_{name}")
        entry["ours"]["page_cache_warmed"] = True
    for step in ("encode", "encode_ids_equal", "anchors"):
        if step.split("_")[0] not in only and previous and step in previous:
            entry[step] = previous[step]
    save(entry)
    if "encode" in only:
        outs = {b: work / f"{name}_{b}.npy" for b in ENCODERS}
        entry["encode"] = []
        for backend in ENCODERS:
            _warm(path)
            entry["encode"].append(encode(path, str(run_dir), backend, outs[backend]))
            entry["encode"][-1]["page_cache_warmed"] = True
        entry["encode_ids_equal"] = same_ids(outs["ours"], outs["tiktoken"])
        if not args.keep:
            for out in outs.values():
                out.unlink(missing_ok=True)
        save(entry)
    if "anchors" in only:  # last: each may take up to an hour
        installed = set(bench_scale.available_systems())
        chosen = [s for s in args.anchors or ANCHOR_ORDER if s in installed]  # in the order asked
        kept = [a for a in (previous or {}).get("anchors") or [] if a["impl"] not in chosen]
        entry["anchors"] = kept
        for impl in chosen:
            merges = entry["ours"]["merges"]
            _warm(path)
            measured = train_anchor(impl, path, spec, merges, timeout=args.anchor_timeout)
            entry["anchors"].append({**measured, "page_cache_warmed": True})
            entry["anchors"].sort(key=lambda a: ANCHOR_ORDER.index(a["impl"]))
            save(entry)
    if not args.keep:
        path.unlink(missing_ok=True)
    return entry


# ------------------------------------------------------------------------------------------
# The report: a pure function of results.json
# ------------------------------------------------------------------------------------------


#: the mark of a row measured without the untimed read of the corpus first (`_warm`)
NOT_WARMED = " †"


def _name(corpus: dict, row: dict) -> str:
    """The corpus's name, marked when this row's process may have read it from the disk."""
    return corpus["name"] + ("" if row.get("page_cache_warmed") else NOT_WARMED)


def _f(value, spec: str = ".1f") -> str:
    return "n/a" if value is None else format(value, spec)


def _goal(measured, goal) -> str:
    if goal is None or measured is None:
        return "n/a"
    return f"{'met' if measured <= goal else 'not met'} (goal {goal:g})"


def render_markdown(results: dict) -> str:
    """reports/full_size.md from results.json."""
    m = results["machine"]
    lines = [
        "# Full size: bpe-train at OpenWebText's and TinyStories' sizes, anchors, encoding",
        "",
        f"Generated by `{results['command']}` (from `{REPORT_NAME}/results.json`; "
        f"`python scripts/bench_full_size.py --report-only` remakes this page); do not edit by "
        "hand." + _invocations(results),
        "",
        f"Machine: {host_line(m)}. Code at git `{m['git']}`.",
        "",
        "Corpora: `scripts/make_scale_corpus.py` (shuffled real documents of the bundled sample, "
        "a share of the words replaced by Heaps'-law new words), at the real datasets' sizes in "
        "bytes; each was deleted after measuring and is remade by the command in the last "
        "table. Every process is timed from start to exit, after the corpus was read once "
        "untimed (so each reads it from the page cache, not the disk; a row marked "
        f"{NOT_WARMED.strip()} was measured before the benchmark did that, after the corpus was "
        "made); memory is the peak PSS of its process tree, sampled every 25 ms.",
        "",
        "## Training: `bpe-train trainer=compiled`, end to end",
        "",
        "`wall s`: the whole command (stage 1 to ANALYSIS.md); `CPU s`: its stages' CPU time "
        "as the run records it (metrics.json's `cpu_timings`: its threads and its workers); "
        "`training wall s`: stages 1-3 and compile; the goals hold the whole command.",
        "",
    ]
    rows = []
    for c in results["corpora"]:
        o = c["ours"]
        rows.append(
            [
                _name(c, o),
                f"{c['bytes'] / 1e9:.2f} GB",
                f"{c['vocab_size']:,}",
                f"{o['unique_pretokens'] / 1e6:.2f} M",
                _f(o["wall_s"]),
                _f(o["training_wall_s"]),
                _f((o["cpu_timings"] or {}).get("total")),
                _f(o["peak_tree_mb"], ".0f"),
                _f(o["training_peak_mb"], ".0f"),
                _goal(o["wall_s"], c["goal_seconds"]),
                _goal(o["peak_tree_mb"], c["goal_mb"]),
            ]
        )
    heads = [
        "corpus",
        "bytes",
        "vocab",
        "unique pretokens",
        "wall s",
        "training wall s",
        "CPU s",
        "peak MB (tree)",
        "training peak MB",
        "time goal",
        "memory goal",
    ]
    lines += [*bench_scale._table(rows, heads), "", *_stage_lines(results), ""]
    lines += _anchor_lines(results)
    lines += _encode_lines(results)
    lines += [
        "## Remaking the corpora",
        "",
        *(f"- {c['name']}: `{c['remake']}`" for c in results["corpora"]),
        "",
    ]
    return "\n".join(lines).rstrip() + "\n"


def _invocations(results: dict) -> str:
    """Which calls measured the corpora, when more than one did (each keeps what the earlier
    ones measured of the other corpora and steps: `--only`)."""
    calls = results.get("invocations") or []
    if len(calls) < 2:
        return ""
    return " Measured in steps, in this order: " + "; ".join(f"`{c}`" for c in calls) + "."


def _stage_lines(results: dict) -> list[str]:
    rows = []
    for c in results["corpora"]:
        wall, cpu = c["ours"]["timings"], c["ours"]["cpu_timings"] or {}
        for stage in [s for s in wall if s != "total"]:
            w, u = wall[stage], cpu.get(stage)
            busy = None if u is None or not w else u / w
            rows.append([_name(c, c["ours"]), stage, _f(w, ".2f"), _f(u, ".2f"), _f(busy, ".2f")])
    heads = ["corpus", "stage", "wall s", "CPU s", "cores busy"]
    return [
        "Each stage of the run (metrics.json's `timings` and `cpu_timings`; `cores busy` is "
        "CPU over wall):",
        "",
        *bench_scale._table(rows, heads),
    ]


def _anchor_lines(results: dict) -> list[str]:
    rows = []
    for c in results["corpora"]:
        o = c["ours"]
        for a in c.get("anchors") or []:
            if a["timed_out"]:
                stopped = f"> {a['timeout_s']} (stopped)"
                rows.append([_name(c, a), a["impl"], stopped, *["n/a"] * 5])
                continue
            rows.append(
                [
                    _name(c, a),
                    a["impl"],
                    _f(a["wall_s"]),
                    _f(a["cpu_s"]),
                    _f(a["peak_tree_mb"], ".0f"),
                    _f(o["training_wall_s"] / a["wall_s"], ".2f"),
                    _f(o["training_cpu_s"] / a["cpu_s"], ".2f")
                    if a["cpu_s"] and o["training_cpu_s"]
                    else "n/a",
                    "yes" if a["merges_equal_ours"] else f"no ({a['merges']})",
                ]
            )
    if not rows:
        return []
    heads = [
        "corpus",
        "anchor",
        "wall s",
        "CPU s",
        "peak MB",
        "ours/anchor wall",
        "ours/anchor CPU",
        "merge count = ours",
    ]
    return [
        "## The anchors on the same files",
        "",
        "Each with a time limit (an hour unless `--anchor-timeout` says otherwise; `> N "
        "(stopped)`: it had not finished after N seconds), its training call in a fresh "
        "interpreter "
        "(`scripts/bench_scale_worker.py`: wall and CPU of the whole process, interpreter "
        "start and reading included). The ratios take ours as the run's training stages "
        "(stage 1, compile, stages 2-3: wall and CPU from metrics.json), which is what an "
        "anchor's call does; below 1: ours is faster or cheaper.",
        "",
        *bench_scale._table(rows, heads),
        "",
    ]


def _encode_lines(results: dict) -> list[str]:
    rows = []
    for c in results["corpora"]:
        for e in c.get("encode") or []:
            rows.append(
                [
                    _name(c, e),
                    e["backend"],
                    _f(e["wall_s"]),
                    _f(e["mb_per_s"], ".2f"),
                    _f(e["peak_tree_mb"], ".0f"),
                    f"{e['tokens']:,}",
                ]
            )
        if c.get("encode"):
            rows.append(
                [c["name"], "ids equal", "yes" if c["encode_ids_equal"] else "NO", "", "", ""]
            )
    if not rows:
        return []
    return [
        "## Encoding the corpus to uint16 on every core",
        "",
        "`bpe-encode --tokenizer <the run> --input <corpus> --out ids.npy`, with our encoder and "
        "with `--backend tiktoken` (the same vocab loaded into tiktoken); MB/s of the whole "
        "command, corpus bytes over wall seconds.",
        "",
        *bench_scale._table(rows, ["corpus", "encoder", "wall s", "MB/s", "peak MB", "tokens"]),
        "",
    ]


def write_report(results: dict, out_dir: Path) -> Path:
    path = out_dir / f"{REPORT_NAME}.md"
    atomic_write_text(path, render_markdown(results))
    return path


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", nargs="+", choices=sorted(CORPORA), default=None)
    parser.add_argument("--quick", action="store_true", help="a 4 MiB corpus: plumbing check")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=STEPS,
        help="measure these steps again, keep the others from results.json (ours runs "
        "unless only the anchors are asked for)",
    )
    parser.add_argument("--skip-anchors", action="store_true")
    parser.add_argument("--skip-encode", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the corpora and the arrays")
    parser.add_argument("--corpus-dir", type=Path, default=ROOT / "data" / "scale")
    parser.add_argument("--anchor-timeout", type=float, default=ANCHOR_TIMEOUT_S)
    parser.add_argument(
        "--anchors",
        nargs="+",
        choices=ANCHOR_ORDER,
        help="run these anchors only, in this order (default: every one installed); the "
        "others' results stay",
    )
    parser.add_argument("--out-dir", type=Path, default=ROOT / "reports")
    parser.add_argument("--report-only", action="store_true", help="remake the report from JSON")
    args = parser.parse_args(argv)
    results_path = args.out_dir / REPORT_NAME / "results.json"
    if not args.report_only:
        specs = QUICK if args.quick else {k: CORPORA[k] for k in (args.corpora or CORPORA)}
        command = public_command(sys.argv[1:] if argv is None else argv)
        results = {"command": command, "machine": bench_scale.machine(), "corpora": []}
        earlier = {}
        if results_path.is_file() and not args.quick:  # keep corpora measured by earlier calls
            before = json.loads(results_path.read_text("utf-8"))
            earlier = {c["name"]: c for c in before["corpora"]}
            results["corpora"] = [c for n, c in earlier.items() if n not in specs]
            results["invocations"] = [*before.get("invocations", [before["command"]]), command]

        def save(entry: dict) -> None:
            done = [c for c in results["corpora"] if c["name"] != entry["name"]]
            results["corpora"] = sorted([*done, entry], key=lambda c: c["name"])
            for c in results["corpora"]:  # results of older versions named the corpus's path
                c["ours"]["command"] = ours_command(c)
            results_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(results_path, json.dumps(results, indent=2) + "\n")

        with tempfile.TemporaryDirectory(prefix="full_size_") as tmp:
            for name, spec in specs.items():
                t0 = time.perf_counter()
                measure_corpus(
                    name,
                    spec,
                    corpus_dir=args.corpus_dir,
                    work=Path(tmp),
                    args=args,
                    save=save,
                    previous=earlier.get(name),
                )
                print(f"{name}: measured in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if not results_path.is_file():
        raise FileNotFoundError(f"{results_path} does not exist: run the benchmark first")
    print(write_report(json.loads(results_path.read_text("utf-8")), args.out_dir))


if __name__ == "__main__":
    main()
