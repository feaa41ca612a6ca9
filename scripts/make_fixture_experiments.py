"""Regenerate tests/fixtures/experiments: a small, real experiments directory for the tests.

It runs real jobs: a sweep of the three trainers at two vocab sizes on the tiny CS336 fixture
corpus, one run on the bundled OWT sample, and one run that fails, then shrinks the run
directories (drops vocab.json, figures and ANALYSIS.md, thins the memory timeline) so the
fixture stays a few hundred KB, and adds one deliberately corrupt run directory.

    python scripts/make_fixture_experiments.py                 # replaces tests/fixtures/experiments
    python scripts/make_fixture_experiments.py --dest /tmp/x   # the same runs, written elsewhere
    python scripts/make_fixture_experiments.py --quick --dest /tmp/x   # a smoke run (see below)

`--quick` (a plumbing check, never the fixture: it needs `--dest`) sweeps two trainers at one
size and skips the OWT run; the failed run, the corrupt one and the shrinking are the same.

Paths inside the fixture are made relative to the repository (to the parent of `--dest` when it
lies outside the repository), so no machine path is left in it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEST = ROOT / "tests" / "fixtures" / "experiments"
CORPUS = "tests/fixtures/corpus.en"
COMMON = [
    "progress=false",
    "num_workers=1",
    "analysis.max_docs=10",
    "analysis.throughput_seconds=0.05",
]


def bpe_train(dest: Path, *args: str, multirun: bool = False, check: bool = True) -> None:
    flags = ["-m"] if multirun else []
    cmd = [sys.executable, "-m", "bpe.cli.train", *flags, f"experiments_dir={dest}", *COMMON, *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SystemExit(proc.stderr)


#: The machine every fixture run records (a real one's load and model would change the goldens).
FIXTURE_HOST = {
    "cpu_model": "fixture CPU",
    "cpus": 2,
    "cpus_usable": 2,
    "ram_gb": 25.3,
    "platform": "Linux-fixture",
    "python": "3.11.7",
    "load_average_at_start": [0.25, 0.5, 0.75],
}


def shrink(run_dir: Path, base: Path) -> None:
    for name in ("vocab.json", "ANALYSIS.md", "diff.patch", ".hydra/hydra.yaml"):
        (run_dir / name).unlink(missing_ok=True)
    shutil.rmtree(run_dir / "figures", ignore_errors=True)
    metrics_path = run_dir / "metrics.json"
    metrics = json.loads(metrics_path.read_text("utf-8"))
    if metrics.get("memory"):
        timeline = metrics["memory"]["timeline"]
        metrics["memory"]["timeline"] = timeline[:: max(1, len(timeline) // 20)]
    metrics["run"]["dir"] = str(run_dir.relative_to(base))
    if metrics.get("error"):
        metrics["error"]["traceback"] = "(trimmed)"
    metrics_path.write_text(json.dumps(metrics, indent=1) + "\n", "utf-8")
    env_path = run_dir / "environment.json"
    env = json.loads(env_path.read_text("utf-8"))
    env.update(hostname="fixture-host", argv=["bpe-train"], host=FIXTURE_HOST)
    env["git"] = {"sha": "0" * 40, "dirty": False}
    env_path.write_text(json.dumps(env, indent=1) + "\n", "utf-8")
    # no machine paths in the fixture: make every path relative to the repository
    for path in [p for p in run_dir.rglob("*") if p.is_file()]:
        text = path.read_text("utf-8")
        path.write_text(text.replace(f"{base}/", ""), "utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=DEST, help="experiments directory to replace")
    parser.add_argument("--quick", action="store_true", help="fewer runs; needs --dest")
    args = parser.parse_args(argv)
    dest = args.dest.resolve()
    if args.quick and dest == DEST:
        parser.error(f"--quick would replace the fixture {DEST}; add --dest DIR")
    base = ROOT if dest.is_relative_to(ROOT) else dest.parent
    shutil.rmtree(dest, ignore_errors=True)
    tiny = f"dataset.path={CORPUS}"
    if args.quick:
        bpe_train(dest, tiny, "trainer=indexed,heap", "vocab_size=300", multirun=True)
    else:
        bpe_train(dest, tiny, "trainer=naive,indexed,heap", "vocab_size=300,350", multirun=True)
        bpe_train(dest, "dataset=owt_sample", "vocab_size=320")
    bpe_train(dest, tiny, "vocab_size=10", check=False)  # fails: vocab size too small
    for metrics in dest.rglob("metrics.json"):
        shrink(metrics.parent, base)
    for sweep in (dest / "sweeps").iterdir():
        (sweep / "SWEEP.md").unlink(missing_ok=True)
        (sweep / "multirun.yaml").unlink(missing_ok=True)  # Hydra's copy, with machine paths
        shutil.rmtree(sweep / "figures", ignore_errors=True)
    corrupt = dest / "2000-01-01_00-00-00_000000_corrupt_heap_v300"
    corrupt.mkdir()
    (corrupt / "metrics.json").write_text('{"status": "complete", "run": {', "utf-8")
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()
