"""Regenerate reports/vocabularies.md from fresh real runs on the bundled samples.

It trains one run per bundled sample (TinyStories, OWT) at vocab 10,000 with the default heap
trainer into an experiments directory (a new temporary one unless --experiments-dir names one
that already holds them), then writes reports/vocabularies.md and its figure with
`bpe.analysis.vocabularies` (the same writer `bpe-report --all` uses over your own runs).

    python scripts/make_vocab_report.py [--experiments-dir DIR] [--out reports]
    python scripts/make_vocab_report.py --quick --out /tmp/vocab   # vocab 500, debug=fast runs

`--quick` is a plumbing check, not the report: the same runs and writer at vocab 500 with the
`debug=fast` settings (one worker, a short evaluation), written wherever `--out` says.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

from bpe.analysis.loader import complete, load_tidy
from bpe.analysis.vocabularies import PREFERRED_VOCAB, pick_runs, write_vocabularies

ROOT = Path(__file__).resolve().parent.parent
DATASETS = ("tinystories_sample", "owt_sample")
QUICK_VOCAB = 500


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "reports")
    parser.add_argument(
        "--quick", action="store_true", help=f"vocab {QUICK_VOCAB} with debug=fast: a smoke run"
    )
    args = parser.parse_args(argv)
    vocab_size = QUICK_VOCAB if args.quick else PREFERRED_VOCAB
    extra = ["debug=fast"] if args.quick else []
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    root = args.experiments_dir or Path(tempfile.mkdtemp(prefix="vocab_report_")) / "experiments"
    root.mkdir(parents=True, exist_ok=True)
    have: set[str] = set()
    if any(root.rglob("metrics.json")):
        _, runs = load_tidy(root, hint="")
        done = complete(runs)
        have = set(done.loc[done["vocab_size"] == vocab_size, "dataset"])
    for dataset in DATASETS:
        if dataset in have:
            continue
        cmd = [
            sys.executable,
            "-m",
            "bpe.cli.train",
            f"dataset={dataset}",
            *extra,
            f"vocab_size={vocab_size}",
            f"experiments_dir={root}",
            "progress=false",
        ]
        subprocess.run(cmd, cwd=ROOT, check=True)
    _, runs = load_tidy(root, hint="training failed")
    command = "python scripts/make_vocab_report.py"
    path = write_vocabularies(pick_runs(runs), args.out, root=root, command=command)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
