"""Benchmark: pre-tokenization alone, the `regex` engine against the compiled scanner.

Counts the pretokens of a file (GPT-2's pattern, split on <|endoftext|>) in this process, one
thread, with each engine of `bpe.pretokenize.engines`, and prints MB/s of CPU time (the best
of `--repeats`, the engines taking turns) and their ratio. The counts are checked equal. The
compiled scanner is loaded (Numba imported, machine code loaded or compiled) before timing:
its load is printed apart, as training times it apart (`timings.compile`).

    python scripts/bench_pretokenize.py                        # the bundled OWT sample
    python scripts/bench_pretokenize.py --input big.txt --repeats 5
    python scripts/bench_pretokenize.py --smoke                # ~300 KB, one repeat

What it does not do: chunks or workers (`bpe-train` adds those), or other patterns (they use
`regex` only).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bpe.pretokenize.counting import count_pretokens
from bpe.pretokenize.engines import load_scanner
from bpe.text.specials import EOT

ROOT = Path(__file__).resolve().parent.parent
SMOKE_BYTES = 300_000


def best_cpu(work, repeats: int) -> float:
    """The least CPU seconds of `repeats` calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, default=ROOT / "data" / "owt_sample.txt")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help=f"the first {SMOKE_BYTES:,} bytes")
    args = parser.parse_args(argv)
    data = args.input.read_bytes()
    if args.smoke:
        data = data[:SMOKE_BYTES]
        args.repeats = 1
    text = data.decode("utf-8", errors="ignore")
    megabytes = len(text.encode("utf-8")) / 1e6
    info = load_scanner()
    print(f"compiled scanner loaded in {info.seconds:.2f} s (from Numba's cache: {info.cached})")
    seconds = {"regex": float("inf"), "compiled": float("inf")}
    results = {}
    for turn in range(max(1, args.repeats)):
        order = ["regex", "compiled"] if turn % 2 == 0 else ["compiled", "regex"]
        for engine in order:

            def work(engine: str = engine) -> None:
                results[engine] = count_pretokens(text, [EOT], engine=engine)

            seconds[engine] = min(seconds[engine], best_cpu(work, 1))
    if results["regex"] != results["compiled"]:
        print("the engines' counts DIFFER", file=sys.stderr)
        return 1
    print(f"{args.input.name}: {megabytes:.2f} MB, {len(results['regex']):,} distinct pretokens")
    for engine, s in seconds.items():
        print(f"| {engine} | {megabytes / s:.1f} MB/s | {s:.3f} CPU s |")
    print(f"compiled / regex: {seconds['regex'] / seconds['compiled']:.1f}x the throughput")
    return 0


if __name__ == "__main__":
    sys.exit(main())
