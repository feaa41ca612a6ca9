"""Benchmark: wall time and peak memory of each trainer against Hugging Face tokenizers.

Every measurement runs in a fresh subprocess (so peak RSS is its own: the max of the process and
its pre-tokenization workers), on the bundled samples, all in one run, so the ratios compare
like with like on the same machine at the same moment:

    TinyStories sample @ 10,000  and  OWT sample @ 32,000:  heap, indexed, HF BpeTrainer
    small sizes (TinyStories @ 1,000, OWT @ 600):           naive vs heap

The TinyStories sample is the `tinystories_sample` dataset's training file
(data/tinystories_train_sample.txt, 3.1 MB), the one `bpe-train` trains by default: it reaches
vocab 10,000, which the 1.3 MB V2-only data/tinystories_sample.txt does not (7,568 merges).

HF's trainer sees the same documents (split on <|endoftext|>, which it keeps as a special
token) with GPT-2's byte-level pre-tokenizer. The exit status is 1 if any trainer's merges differ
from the heap trainer's. Usage:

    python scripts/bench_train.py            # everything (indexed @ 32K takes a few minutes)
    python scripts/bench_train.py --quick    # skip indexed on OWT 32K and naive
    python scripts/bench_train.py --smoke    # seconds: ~300 KB of each sample, vocab 500
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EOT = "<|endoftext|>"
# --smoke: each sample's documents within its first SMOKE_BYTES, trained to SMOKE_VOCAB
SMOKE_BYTES, SMOKE_VOCAB = 300_000, 500


def _peak_rss_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024  # Linux reports KiB


def run_ours(path: str, vocab_size: int, trainer: str) -> dict:
    from bpe import train_bpe_detailed

    start = time.perf_counter()
    result = train_bpe_detailed(path, vocab_size, [EOT], trainer=trainer)
    wall = time.perf_counter() - start
    return {
        "wall": wall,
        "peak_mb": _peak_rss_mb(),
        "merges": result.num_merges,
        "sha": result.merges_sha256,
        "stages": result.timings,
    }


def run_hf(path: str, vocab_size: int) -> dict:
    from bench_scale_worker import hf_gpt2_trainer

    start = time.perf_counter()
    text = Path(path).read_text(encoding="utf-8")
    docs = [d for d in text.split(EOT) if d]
    tok, trainer = hf_gpt2_trainer(vocab_size)
    tok.train_from_iterator(docs, trainer=trainer)
    wall = time.perf_counter() - start
    return {"wall": wall, "peak_mb": _peak_rss_mb(), "merges": tok.get_vocab_size() - 257}


def measure(kind: str, path: str, vocab_size: int) -> dict:
    """Run one measurement in a fresh interpreter and return its JSON result."""
    spec = json.dumps({"kind": kind, "path": path, "vocab_size": vocab_size})
    out = subprocess.run(
        [sys.executable, __file__, "--worker", spec], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


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
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="skip the slow indexed/naive runs")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help=f"a plumbing check: every trainer and HF on ~{SMOKE_BYTES:,} bytes, vocab "
        f"{SMOKE_VOCAB}",
    )
    args = parser.parse_args(argv)
    if args.worker:
        spec = json.loads(args.worker)
        if spec["kind"] == "hf":
            print(json.dumps(run_hf(spec["path"], spec["vocab_size"])))
        else:
            print(json.dumps(run_ours(spec["path"], spec["vocab_size"], spec["kind"])))
        return 0

    ts = str(ROOT / "data" / "tinystories_train_sample.txt")
    owt = str(ROOT / "data" / "owt_sample.txt")
    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:
            ts, owt = (head_of(Path(p), SMOKE_BYTES, Path(tmp) / Path(p).name) for p in (ts, owt))
            plan = [
                ("TinyStories", ts, SMOKE_VOCAB, ["heap", "indexed", "naive", "hf"]),
                ("OWT", owt, SMOKE_VOCAB, ["heap", "hf"]),
            ]
        else:
            plan = [
                ("TinyStories", ts, 10_000, ["heap", "indexed", "hf"]),
                ("OWT", owt, 32_000, ["heap", "hf"] + ([] if args.quick else ["indexed"])),
            ]
        if not (args.quick or args.smoke):
            plan += [
                ("TinyStories", ts, 1_000, ["heap", "naive"]),
                ("OWT", owt, 600, ["heap", "naive"]),
            ]
        return 0 if report(plan) else 1


def report(plan: list[tuple[str, str, int, list[str]]]) -> bool:
    """Measure every (sample, vocab, kind) of the plan, print the table and the ratios.

    Returns:
        whether every trainer of every row made the heap trainer's merges.
    """
    rows = []
    for name, path, vocab, kinds in plan:
        results = {kind: measure(kind, path, vocab) for kind in kinds}
        heap = results["heap"]
        for kind, res in results.items():
            same = "" if kind == "hf" else ("yes" if res["sha"] == heap["sha"] else "NO")
            ref = results.get("hf") or heap
            rows.append(
                [name, vocab, kind, f"{res['wall']:.2f}", f"{res['peak_mb']:.0f}",
                 res["merges"], same, f"{res['wall'] / ref['wall']:.2f}",
                 f"{res['wall'] / heap['wall']:.1f}"]
            )  # fmt: skip
    header = ["data", "vocab", "impl", "wall s", "peak MB", "merges", "same merges as heap",
              "time / HF (or / heap)", "time / heap"]  # fmt: skip
    from tabulate import tabulate

    print(tabulate(rows, headers=header, tablefmt="github"))
    for name, _path, vocab, kinds in plan:
        if "hf" in kinds:
            heap_row = next(r for r in rows if r[0] == name and r[1] == vocab and r[2] == "heap")
            print(f"{name} @ {vocab}: heap / HF = {heap_row[7]} (target <= 1.5)")
        if "indexed" in kinds and vocab == 32_000:
            idx = next(r for r in rows if r[0] == name and r[1] == vocab and r[2] == "indexed")
            print(f"{name} @ {vocab}: indexed / heap = {idx[8]} (target >= 20)")
    return all(r[6] != "NO" for r in rows)


if __name__ == "__main__":
    sys.exit(main())
