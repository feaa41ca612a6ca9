"""Regenerate reports/segmentation.md from a real sweep on the bundled samples.

It runs `bpe-train -m experiment=segmentation` (plain BPE and `max_token_length=8` on both
bundled samples at vocab 2,000 and 8,000, the heap trainer) into an experiments directory,
unless it is given the directory of such a sweep; prunes each plain run to 75% of its vocab
with `bpe-prune` (into `<sweep>/pruned/<run>/`); then writes reports/segmentation.md with
`bpe.analysis.segmentation_report`.

    python scripts/make_segmentation_report.py                   # sweep, prune, report
    python scripts/make_segmentation_report.py --sweep-dir DIR   # prune and report a sweep
    python scripts/make_segmentation_report.py --quick --out OUT # vocab 600, debug=fast

`--quick` is a plumbing check, not the report: the same sweep on the TinyStories sample at
vocab 600 with the `debug=fast` settings, written wherever `--out` says.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

from bpe.analysis.segmentation_report import write_segmentation
from bpe.runs.layout import METRICS_FILE, PRUNE_RECORD, PRUNED_DIR

ROOT = Path(__file__).resolve().parent.parent
#: The share of a plain run's vocab its pruned copy keeps.
KEEP = 0.75


def run_sweep(root: Path, *, quick: bool) -> Path:
    """Run the segmentation sweep under `root`; returns its sweep directory."""
    extra = ["debug=fast", "dataset=tinystories_sample", "vocab_size=600"] if quick else []
    cmd = [sys.executable, "-m", "bpe.cli.train", "-m", "experiment=segmentation", *extra]
    subprocess.run([*cmd, f"experiments_dir={root}", "progress=false"], cwd=ROOT, check=True)
    return sorted((root / "sweeps").iterdir())[-1]


def prune_plain_runs(sweep: Path) -> None:
    """`bpe-prune` each complete plain run of the sweep to KEEP of its vocab (skipped when
    its pruned copy is there)."""
    for metrics_path in sorted(sweep.glob(f"*/{METRICS_FILE}")):
        metrics = json.loads(metrics_path.read_text("utf-8"))
        run = metrics.get("run") or {}
        if metrics.get("status") != "complete" or run.get("max_token_length") is not None:
            continue
        out = sweep / PRUNED_DIR / metrics_path.parent.name
        if (out / PRUNE_RECORD).is_file():
            continue
        size = int(KEEP * int(metrics["counts"]["vocab"]))
        cmd = [sys.executable, "-m", "bpe.cli.prune", str(metrics_path.parent)]
        subprocess.run([*cmd, "--vocab-size", str(size), "--out", str(out)], cwd=ROOT, check=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep-dir", type=Path, default=None, help="an existing sweep")
    parser.add_argument("--experiments-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "reports")
    parser.add_argument("--quick", action="store_true", help="vocab 600 with debug=fast")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    sweep = args.sweep_dir
    if sweep is None:
        root = args.experiments_dir or Path(tempfile.mkdtemp(prefix="segmentation_")) / "exp"
        root.mkdir(parents=True, exist_ok=True)
        sweep = run_sweep(root, quick=args.quick)
    prune_plain_runs(sweep)
    path = write_segmentation(sweep, args.out, command="python scripts/make_segmentation_report.py")
    logging.getLogger(__name__).info("wrote %s", path)


if __name__ == "__main__":
    main()
