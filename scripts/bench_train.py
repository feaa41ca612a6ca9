"""Benchmark: wall time and peak memory of each trainer against the Rust anchors.

Every measurement runs in a fresh subprocess (`scripts/bench_scale_worker.py`, which imports
only what its system needs), whose process tree's proportional set size (PSS) is sampled
while it runs (`bench_scale.run_sampled`, the scale benchmark's sampler: a run and its
pre-tokenization workers, shared pages counted once). The systems of a row take turns (the
order flips from row to row and repeat to repeat), all in one run, so the ratios compare like
with like on the same machine at the same moment:

    TinyStories sample @ 10,000: heap, indexed, compiled, and the anchors
    OWT sample @ 32,000:         heap, compiled, (indexed), and the anchors
    small sizes (TinyStories @ 1,000, OWT @ 600): naive vs heap

The anchors are Hugging Face `tokenizers`' BpeTrainer (a dependency), karpathy's rustbpe,
bpeasy and gigatoken's `train_bpe` (the `bench` extra); `compiled` needs the `compiled` extra.
A system whose library is not installed is left out, with a line saying so. Every system sees
the same documents (split on <|endoftext|>) with GPT-2's split pattern and makes the same
number of merges; only ours follow CS336's tie-break, so an anchor's merges differ from ours
after the first tie: their time and memory compare, their merges do not (the counts are checked).

The TinyStories sample is the `tinystories_sample` dataset's training file
(data/tinystories_train_sample.txt, 3.1 MB), the one `bpe-train` trains by default: it reaches
vocab 10,000, which the 1.3 MB V2-only data/tinystories_sample.txt does not (7,568 merges).

Each of our runs says which engine split stage 1's text (`engine`: `regex`, or `compiled`, the
Numba scanner `trainer=compiled` uses by default, `bpe.pretokenize.engines`); a kind
`TRAINER:ENGINE` forces one (`compiled:regex` is the compiled merge loop after the regex
pre-tokenizer). Times are wall seconds and CPU seconds of the process tree (workers
included: on a shared machine CPU time measures the neighbours much less than wall time);
`--corpus` measures chosen kinds on any file, with every ratio against rustbpe.

The exit status is 1 if any of our trainers' merges differ from the heap trainer's (the first
of ours in a `--corpus` row), or any system's merge count from it. Usage:

    python scripts/bench_train.py            # everything (indexed @ 32K takes a few minutes)
    python scripts/bench_train.py --quick    # skip indexed on OWT 32K and naive
    python scripts/bench_train.py --smoke    # seconds: ~300 KB of each sample, vocab 500
    python scripts/bench_train.py --repeats 3   # medians of 3 runs of each
    python scripts/bench_train.py --corpus data/owt_sample.txt --vocab 32000 \
        --kinds compiled compiled:regex heap rustbpe --repeats 3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import ANCHORS, REQUIRES, WORKER, run_sampled  # noqa: E402  (sibling scripts, not a package)
from bench_scale_worker import EOT, TIE_BREAKS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# --smoke: each sample's documents within its first SMOKE_BYTES, trained to SMOKE_VOCAB
SMOKE_BYTES, SMOKE_VOCAB = 300_000, 500
#: our trainers (the worker's "ours" with this trainer); the anchors and the module each system
#: needs are the scale benchmark's (`bench_scale.ANCHORS`, `bench_scale.REQUIRES`)
OURS = ("heap", "indexed", "naive", "compiled")


def installed(kind: str) -> bool:
    """Whether the library `kind` needs is installed (ours need nothing beyond bpe)."""
    trainer, _, engine = kind.partition(":")
    needs = [REQUIRES.get(trainer)] + (["numba"] if engine == "compiled" else [])
    return all(n is None or importlib.util.find_spec(n) is not None for n in needs)


def is_ours(kind: str) -> bool:
    """Whether `kind` is one of our trainers, with or without a `:ENGINE` suffix."""
    return kind.partition(":")[0] in OURS


def measure(kind: str, path: str, vocab_size: int) -> dict:
    """One training run in a fresh interpreter, its process tree's memory sampled."""
    spec = {"path": path, "vocab_size": vocab_size}
    trainer, _, engine = kind.partition(":")
    if is_ours(kind):
        spec |= {"impl": "ours", "trainer": trainer, "engine": engine or "auto"}
    else:
        spec |= {"impl": kind}
    out, sampled = run_sampled(
        [sys.executable, str(WORKER), json.dumps(spec)], what=f"{kind} on {path} @ {vocab_size}"
    )
    return json.loads(out.strip().splitlines()[-1]) | sampled


def head_of(src: Path, limit: int, dest: Path) -> str:
    """Write the documents of `src` that end within its first `limit` bytes to `dest`."""
    data = src.read_bytes()
    end = data.rfind(EOT.encode("utf-8"), 0, limit - len(EOT) + 1)
    if end < 0:
        raise ValueError(f"{str(src)!r} has no document end in its first {limit} bytes")
    dest.write_bytes(data[: end + len(EOT)])
    return str(dest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the slow indexed/naive runs")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help=f"a plumbing check: every trainer and anchor on ~{SMOKE_BYTES:,} bytes, vocab "
        f"{SMOKE_VOCAB}",
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs of each (medians shown)")
    parser.add_argument("--corpus", type=Path, help="measure --kinds on this file only")
    parser.add_argument("--vocab", type=int, default=32_000, help="--corpus: the vocab size")
    parser.add_argument(
        "--kinds",
        nargs="+",
        default=["compiled", "compiled:regex", "heap", "rustbpe"],
        help="--corpus: ours (heap, compiled, ... with an optional :regex or :compiled engine) "
        "and anchors (hf, rustbpe, bpeasy, gigatoken)",
    )
    args = parser.parse_args(argv)
    if args.corpus is not None:
        kinds = [k for k in args.kinds if installed(k)]
        if len(kinds) < len(args.kinds):
            print(f"not installed, left out: {sorted(set(args.kinds) - set(kinds))}")
        plan = [(args.corpus.name, str(args.corpus), args.vocab, kinds)]
        return 0 if report(plan, repeats=max(1, args.repeats)) else 1

    ts = str(ROOT / "data" / "tinystories_train_sample.txt")
    owt = str(ROOT / "data" / "owt_sample.txt")
    fast = ["heap", "compiled", *ANCHORS]
    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:
            ts, owt = (head_of(Path(p), SMOKE_BYTES, Path(tmp) / Path(p).name) for p in (ts, owt))
            plan = [
                (
                    "TinyStories",
                    ts,
                    SMOKE_VOCAB,
                    ["heap", "indexed", "naive", "compiled", *ANCHORS],
                ),
                ("OWT", owt, SMOKE_VOCAB, fast),
            ]
        else:
            plan = [
                ("TinyStories", ts, 10_000, ["heap", "indexed", "compiled", *ANCHORS]),
                ("OWT", owt, 32_000, fast + ([] if args.quick else ["indexed"])),
            ]
        if not (args.quick or args.smoke):
            plan += [
                ("TinyStories", ts, 1_000, ["heap", "naive"]),
                ("OWT", owt, 600, ["heap", "naive"]),
            ]
        missing = sorted({k for *_, kinds in plan for k in kinds if not installed(k)})
        if missing:
            print(
                f"not installed, left out: {', '.join(missing)} (pip install -e '.[bench]' "
                "for rustbpe, bpeasy and gigatoken, '.[compiled]' for compiled)"
            )
        plan = [(n, p, v, [k for k in kinds if installed(k)]) for n, p, v, kinds in plan]
        return 0 if report(plan, repeats=max(1, args.repeats)) else 1


def run_plan(plan: list[tuple[str, str, int, list[str]]], repeats: int) -> dict:
    """Every (row, kind) `repeats` times, taking turns: {(name, vocab): {kind: [results]}}."""
    results: dict = {}
    turn = 0
    for _ in range(repeats):
        for name, path, vocab, kinds in plan:
            order = kinds if turn % 2 == 0 else kinds[::-1]
            turn += 1
            row = results.setdefault((name, vocab), {})
            for kind in order:
                row.setdefault(kind, []).append(measure(kind, path, vocab))
    return results


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _spread(runs: list[dict], key: str) -> str:
    """The median, and the range of the runs when there are several: `2.41 [2.30-2.95]`."""
    values = [r[key] for r in runs]
    median = f"{statistics.median(values):.2f}"
    return median if len(values) < 2 else f"{median} [{min(values):.2f}-{max(values):.2f}]"


def report(plan: list[tuple[str, str, int, list[str]]], *, repeats: int = 1) -> bool:
    """Measure every (sample, vocab, kind) of the plan, print the table and the ratios.

    Returns:
        whether every trainer of ours made the heap trainer's merges and every system as many
        merges as heap.
    """
    results = run_plan(plan, repeats)
    rows, ok = [], True
    for name, _path, vocab, kinds in plan:
        runs = results[(name, vocab)]
        ref_kind = "heap" if "heap" in kinds else next(k for k in kinds if is_ours(k))
        heap = runs[ref_kind][0]
        heap_s = _median(runs[ref_kind], "seconds")
        for kind in kinds:
            first = runs[kind][0]
            same_count = all(r["merges"] == heap["merges"] for r in runs[kind])
            same = all(r["tokens_sha256"] == heap["tokens_sha256"] for r in runs[kind])
            if is_ours(kind):
                ok &= same
            ok &= same_count
            compile_s = first.get("timings", {}).get("compile")
            rows.append(
                [
                    name,
                    vocab,
                    kind,
                    first.get("engine", ""),
                    _spread(runs[kind], "seconds"),
                    _spread(runs[kind], "cpu_s"),
                    f"{_median(runs[kind], 'peak_tree_mb'):.0f}",
                    first["merges"],
                    "yes" if same else ("NO" if is_ours(kind) else "no (own tie-break)"),
                    f"{_median(runs[kind], 'seconds') / heap_s:.2f}",
                    "" if compile_s is None else f"{compile_s:.2f}",
                    TIE_BREAKS["ours" if is_ours(kind) else kind],
                ]
            )
    header = [
        "data",
        "vocab",
        "impl",
        "stage 1 engine",
        "wall s",
        "CPU s",
        "peak tree MB (PSS)",
        "merges",
        "same merges as heap (else our first)",
        "time / heap",
        "compile s (in wall)",
        "tie-break",
    ]
    from tabulate import tabulate

    print(tabulate(rows, headers=header, tablefmt="github"))
    print(
        f"(medians of {repeats}, with [min-max] when repeated; merge counts equal across "
        f"systems: {_counts_note(rows)})"
    )
    for name, _path, vocab, kinds in plan:
        runs = results[(name, vocab)]
        if "rustbpe" in kinds:
            for m in (k for k in kinds if is_ours(k)):
                wall = _median(runs[m], "seconds") / _median(runs["rustbpe"], "seconds")
                cpu = _median(runs[m], "cpu_s") / _median(runs["rustbpe"], "cpu_s")
                print(f"{name} @ {vocab}: {m} / rustbpe = {wall:.2f} wall, {cpu:.2f} CPU")
        mine = [k for k in ("heap", "compiled") if k in kinds]
        for m in mine:
            for anchor in (a for a in ANCHORS if a in kinds):
                ratio = _median(runs[m], "seconds") / _median(runs[anchor], "seconds")
                memory = _median(runs[m], "peak_tree_mb") / _median(runs[anchor], "peak_tree_mb")
                target = _TARGETS.get((m, anchor), "")
                print(
                    f"{name} @ {vocab}: {m} / {_LABEL[anchor]} = {ratio:.2f} time, "
                    f"{memory:.2f} memory{target}"
                )
        if "indexed" in kinds and vocab == 32_000:
            idx = _median(runs["indexed"], "seconds") / _median(runs["heap"], "seconds")
            print(f"{name} @ {vocab}: indexed / heap = {idx:.1f} (target >= 20)")
    return ok


_LABEL = {"hf": "HF", "rustbpe": "rustbpe", "bpeasy": "bpeasy", "gigatoken": "gigatoken"}
#: the project's goals, printed beside the ratios they concern
_TARGETS = {
    ("heap", "hf"): " (target <= 1.5)",
    ("compiled", "rustbpe"): " (goal: <= 1.5 on the OWT sample, <= 1 on a 64 MiB corpus)",
}


def _counts_note(rows: list[list]) -> str:
    groups: dict[tuple, set] = {}
    for row in rows:
        groups.setdefault((row[0], row[1]), set()).add(row[7])
    differ = [f"{n} @ {v}" for (n, v), counts in groups.items() if len(counts) > 1]
    return "no, at " + ", ".join(differ) if differ else "yes"


if __name__ == "__main__":
    sys.exit(main())
