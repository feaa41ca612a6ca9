"""Regenerate reports/languages.md from a real sweep on the bundled FLORES-200 languages.

It runs `bpe-train -m experiment=languages` (plain and parity-aware BPE on `dataset=flores_dev`
at vocab 2,000, 8,000 and 16,000, the heap trainer) into an experiments directory, unless it
is given the directory of such a sweep; then writes reports/languages.md with
`bpe.analysis.languages_report`.

    python scripts/make_languages_report.py                   # sweep, report
    python scripts/make_languages_report.py --sweep-dir DIR   # report a sweep
    python scripts/make_languages_report.py --quick --out OUT # vocab 400 and 600, debug=fast

`--quick` is a plumbing check, not the report: the same sweep at vocab 400 and 600 with the
`debug=fast` settings (50 lines per split), written wherever `--out` says.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

from bpe.analysis.languages_report import write_languages

ROOT = Path(__file__).resolve().parent.parent


def run_sweep(root: Path, *, quick: bool) -> Path:
    """Run the languages sweep under `root`; returns its sweep directory."""
    extra = ["debug=fast", "vocab_size=400,600", "analysis.gpt2_baseline=true"] if quick else []
    cmd = [sys.executable, "-m", "bpe.cli.train", "-m", "experiment=languages", *extra]
    subprocess.run([*cmd, f"experiments_dir={root}", "progress=false"], cwd=ROOT, check=True)
    return sorted((root / "sweeps").iterdir())[-1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep-dir", type=Path, default=None, help="an existing sweep")
    parser.add_argument("--experiments-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "reports")
    parser.add_argument("--quick", action="store_true", help="vocab 400 and 600, debug=fast")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    sweep = args.sweep_dir
    if sweep is None:
        root = args.experiments_dir or Path(tempfile.mkdtemp(prefix="languages_")) / "exp"
        root.mkdir(parents=True, exist_ok=True)
        sweep = run_sweep(root, quick=args.quick)
    path = write_languages(sweep, args.out, command="python scripts/make_languages_report.py")
    logging.getLogger(__name__).info("wrote %s", path)


if __name__ == "__main__":
    main()
