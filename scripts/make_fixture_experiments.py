"""Regenerate tests/fixtures/experiments: a small, real experiments directory for the tests.

It runs real jobs: a sweep of the three trainers at two vocab sizes on the tiny CS336 fixture
corpus, one run on the bundled OWT sample, and one run that fails, then shrinks the run
directories (drops vocab.json, figures and ANALYSIS.md, thins the memory timeline) so the
fixture stays a few hundred KB, and adds one deliberately corrupt run directory.

    python scripts/make_fixture_experiments.py
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEST = ROOT / "tests" / "fixtures" / "experiments"
CORPUS = "tests/fixtures/corpus.en"
COMMON = [
    "progress=false", "num_workers=1",
    "analysis.max_docs=10", "analysis.throughput_seconds=0.05",
]  # fmt: skip


def bpe_train(*args: str, multirun: bool = False, check: bool = True) -> None:
    flags = ["-m"] if multirun else []
    cmd = [sys.executable, "-m", "bpe.train", *flags, f"experiments_dir={DEST}", *COMMON, *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SystemExit(proc.stderr)


def shrink(run_dir: Path) -> None:
    for name in ("vocab.json", "ANALYSIS.md", "diff.patch", ".hydra/hydra.yaml"):
        (run_dir / name).unlink(missing_ok=True)
    shutil.rmtree(run_dir / "figures", ignore_errors=True)
    metrics_path = run_dir / "metrics.json"
    metrics = json.loads(metrics_path.read_text("utf-8"))
    if metrics.get("memory"):
        timeline = metrics["memory"]["timeline"]
        metrics["memory"]["timeline"] = timeline[:: max(1, len(timeline) // 20)]
    metrics["run"]["dir"] = str(run_dir.relative_to(ROOT))
    if metrics.get("error"):
        metrics["error"]["traceback"] = "(trimmed)"
    metrics_path.write_text(json.dumps(metrics, indent=1) + "\n", "utf-8")
    env_path = run_dir / "environment.json"
    env = json.loads(env_path.read_text("utf-8"))
    env.update(hostname="fixture-host", argv=["bpe-train"])
    env["git"] = {"sha": "0" * 40, "dirty": False}
    env_path.write_text(json.dumps(env, indent=1) + "\n", "utf-8")
    # no machine paths in the fixture: make every path relative to the repository
    for path in [p for p in run_dir.rglob("*") if p.is_file()]:
        text = path.read_text("utf-8")
        path.write_text(text.replace(f"{ROOT}/", ""), "utf-8")


def main() -> None:
    shutil.rmtree(DEST, ignore_errors=True)
    tiny = f"dataset.path={CORPUS}"
    bpe_train(tiny, "trainer=naive,indexed,heap", "vocab_size=300,350", multirun=True)
    bpe_train("dataset=owt_sample", "vocab_size=320")
    bpe_train(tiny, "vocab_size=10", check=False)  # fails: vocab size too small
    for metrics in DEST.rglob("metrics.json"):
        shrink(metrics.parent)
    for sweep in (DEST / "sweeps").iterdir():
        (sweep / "SWEEP.md").unlink(missing_ok=True)
        (sweep / "multirun.yaml").unlink(missing_ok=True)  # Hydra's copy, with machine paths
        shutil.rmtree(sweep / "figures", ignore_errors=True)
    corrupt = DEST / "2000-01-01_00-00-00_000000_corrupt_heap_v300"
    corrupt.mkdir()
    (corrupt / "metrics.json").write_text('{"status": "complete", "run": {', "utf-8")
    print(f"wrote {DEST}")


if __name__ == "__main__":
    main()
