"""Regenerate reports/variants.md from a real sweep of the BPE family on the bundled samples.

It runs `bpe-train -m experiment=bpe_family` (plain BPE, SuperBPE and PickyBPE on both bundled
samples at vocab 1,000 and 4,000, the indexed trainer) into an experiments directory, unless
it is given the directory of such a sweep, then writes reports/variants.md with
`bpe.analysis.variants_report`.

    python scripts/make_variants_report.py                       # run the sweep, then report
    python scripts/make_variants_report.py --sweep-dir DIR       # report an existing sweep
    python scripts/make_variants_report.py --quick --out OUT    # vocab 300, debug=fast

`--quick` is a plumbing check, not the report: the same sweep on the TinyStories sample at
vocab 300 with the `debug=fast` settings, written wherever `--out` says.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

from bpe.analysis.variants_report import write_variants

ROOT = Path(__file__).resolve().parent.parent


def run_sweep(root: Path, *, quick: bool) -> Path:
    """Run the bpe_family sweep under `root`; returns its sweep directory."""
    extra = ["debug=fast", "dataset=tinystories_sample", "vocab_size=300"] if quick else []
    cmd = [
        sys.executable,
        "-m",
        "bpe.cli.train",
        "-m",
        "experiment=bpe_family",
        *extra,
        f"experiments_dir={root}",
        "progress=false",
    ]
    subprocess.run(cmd, cwd=ROOT, check=True)
    sweeps = sorted((root / "sweeps").iterdir())
    return sweeps[-1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep-dir", type=Path, default=None, help="an existing sweep")
    parser.add_argument("--experiments-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "reports")
    parser.add_argument("--quick", action="store_true", help="vocab 300 with debug=fast")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    sweep = args.sweep_dir
    if sweep is None:
        root = args.experiments_dir or Path(tempfile.mkdtemp(prefix="variants_")) / "experiments"
        root.mkdir(parents=True, exist_ok=True)
        sweep = run_sweep(root, quick=args.quick)
    path = write_variants(sweep, args.out, command="python scripts/make_variants_report.py")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
