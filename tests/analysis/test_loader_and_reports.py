"""Analysis over run directories: the loader, figures, SWEEP.md and the reports/ set."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from bpe.analysis import load_runs
from bpe.analysis.loader import tidy
from bpe.analysis.pages.index import write_all_reports
from bpe.analysis.sweep.report import write_sweep_report
from bpe.cli.report import main as report_main
from tests.conftest import FIXTURES, ROOT

EXPERIMENTS = FIXTURES / "experiments"
GOLDEN = ROOT / "tests" / "golden"
COLUMNS = ["run", "status", "dataset", "trainer", "vocab_size", "merges", "merges_sha256"]
UPDATE = bool(os.environ.get("UPDATE_GOLDEN"))


@pytest.fixture
def experiments(tmp_path) -> Path:
    dst = tmp_path / "experiments"
    shutil.copytree(EXPERIMENTS, dst)
    return dst


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    assert text == path.read_text("utf-8"), f"{name} differs from its golden file"


def _frame_text(root: Path) -> str:
    runs = tidy(load_runs(root))
    runs["run"] = [Path(p).relative_to(root).as_posix() for p in runs["run_dir"]]
    runs["merges_sha256"] = runs["merges_sha256"].str[:12]
    return runs[COLUMNS].to_csv(index=False)


def test_load_runs_golden(experiments, caplog):
    _golden("runs_frame.csv", _frame_text(experiments))
    frame = load_runs(experiments)
    assert len(frame) == 8  # 6 sweep jobs, 1 single run, 1 failed run; the corrupt one skipped
    assert "corrupt" in caplog.text and "skipping run" in caplog.text
    (skipped,) = frame.attrs["skipped"]
    assert "corrupt" in skipped[0] and "not valid JSON" in skipped[1]
    assert {"complete", "failed"} == set(frame["status"])
    assert "config.trainer.name" in frame and "env.python" in frame
    assert "metrics.timings.merge" in frame and "metrics.memory.peak_mb" in frame


def test_load_runs_on_one_run_dir_and_a_glob(experiments):
    one = next(experiments.glob("*_owt_sample_heap_v320"))
    assert len(load_runs(one)) == 1
    assert len(load_runs(str(experiments / "sweeps" / "*" / "*_heap_*"))) == 2


def test_empty_and_missing_dirs(tmp_path, caplog):
    frame = load_runs(tmp_path)
    assert frame.empty and list(frame.columns) == ["run_dir", "run_name", "status"]
    assert "no runs found" in caplog.text
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_runs(tmp_path / "missing")


def test_load_runs_is_fast_on_hundreds_of_runs(tmp_path):
    src = next(EXPERIMENTS.glob("*_owt_sample_heap_v320"))
    for i in range(300):
        shutil.copytree(src, tmp_path / f"run_{i:03d}", ignore=shutil.ignore_patterns("*.txt"))
    frame = load_runs(tmp_path)
    assert len(frame) == 300 and frame["status"].eq("complete").all()


def test_sweep_report_golden_and_failed_rows(experiments):
    sweep = next((experiments / "sweeps").iterdir())
    # make one job fail, as a crashed job would leave it
    job = next(sweep.glob("2_*"))
    text = (job / "metrics.json").read_text("utf-8")
    (job / "metrics.json").write_text(
        text.replace('"status": "complete"', '"status": "failed"').replace(
            '"error": null',
            '"error": {"type": "RuntimeError", "message": "boom", "stage": "merge"}',
        ),
        "utf-8",
    )
    out = write_sweep_report(sweep)
    text = out.read_text("utf-8").replace(sweep.name, "SWEEP")
    _golden("SWEEP.md", text)
    assert "6 job(s): 5 complete, 1 failed" in text
    assert "| failed" in text and "boom" in text
    assert "produced identical merges" in text
    for png in (sweep / "figures").glob("*.png"):
        assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 2000
    assert len(list((sweep / "figures").glob("*.png"))) >= 3


def _set_launcher(sweep: Path, launcher: dict) -> None:
    for metrics_path in sweep.glob("*/metrics.json"):
        metrics = json.loads(metrics_path.read_text("utf-8"))
        metrics["run"]["launcher"] = launcher
        metrics_path.write_text(json.dumps(metrics), "utf-8")


def test_sweep_report_warns_when_joblib_jobs_overlapped(experiments):
    sweep = next((experiments / "sweeps").iterdir())
    overrides = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    _set_launcher(
        sweep,
        {
            "name": "joblib",
            "n_jobs": 2,
            "workers_per_job": 1,
            "parallel_jobs": 2,
            "overrides": overrides,
        },
    )
    text = write_sweep_report(sweep).read_text("utf-8")
    assert "> ⚠ **Timings are not comparable.** Launcher joblib: n_jobs=2, up to 2 jobs" in text
    assert "| merge s ⚠ " in text and "| total s ⚠ " in text
    assert "- ⚠ (overlapped jobs) tinystories_sample @ 300: **heap** merges fastest" in text
    assert "![Speedup over naive (⚠ overlapped jobs: timings not comparable)]" in text
    assert "\nbpe-train -m hydra/launcher=joblib hydra.launcher.n_jobs=2 progress=False " in text
    assert "basic launcher the jobs run one after another in one process" not in text


def test_sweep_report_says_slurm_timings_are_comparable_only_within_a_job(experiments):
    sweep = next((experiments / "sweeps").iterdir())
    overrides = ["hydra/launcher=slurm", "hydra.launcher.partition=cpu"]
    launcher = {
        "name": "submitit_slurm",
        "n_jobs": None,
        "workers_per_job": 8,
        "parallel_jobs": 1,
        "cpus_per_task": 8,
        "overrides": overrides,
    }
    _set_launcher(sweep, launcher)
    text = write_sweep_report(sweep).read_text("utf-8")
    # even one job at a time: the jobs may still land on different machines
    assert "> ⚠ **Timings are comparable only within a job.** Launcher submitit_slurm" in text
    assert "(8 CPU(s) each, up to 1 at once)" in text and "different machines" in text
    assert "| merge s ⚠ " in text
    assert "- ⚠ (separate SLURM jobs) tinystories_sample @ 300: **heap** merges fastest" in text
    assert "\nbpe-train -m hydra/launcher=slurm hydra.launcher.partition=cpu progress=False" in text


def test_sweep_report_says_sequential_timings_are_comparable(experiments):
    sweep = next((experiments / "sweeps").iterdir())
    _set_launcher(
        sweep,
        {
            "name": "basic",
            "n_jobs": None,
            "workers_per_job": 1,
            "parallel_jobs": 1,
            "overrides": [],
        },
    )
    text = write_sweep_report(sweep).read_text("utf-8")
    assert "*Timings are comparable: launcher basic ran the jobs one after another.*" in text
    assert "⚠" not in text and "\nbpe-train -m progress=False " in text


def test_sweep_report_via_cli(experiments):
    sweep = next((experiments / "sweeps").iterdir())
    assert report_main([str(sweep)]) == 0
    assert (sweep / "SWEEP.md").is_file()


def test_reports_golden_and_deterministic(experiments, tmp_path):
    out = tmp_path / "reports"
    paths = write_all_reports(experiments, out)
    assert sorted({p.name for p in paths}) == [
        "ANALYSIS.md",
        "README.md",
        "datasets.md",
        "manifest.json",
        "trainers.md",
    ]
    first = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    examples = sorted(p.parent.name for p in out.glob("runs/*/ANALYSIS.md"))
    assert len(examples) == 2  # one full run report per dataset
    assert all((out / "runs" / e / "figures" / "memory_timeline.png").is_file() for e in examples)
    for name in ("README.md", "trainers.md", "datasets.md"):
        _golden(f"reports/{name}", (out / name).read_text("utf-8"))
    write_all_reports(experiments, out)
    again = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert again == first  # regenerating unchanged runs changes no byte, figures included
    index = (out / "README.md").read_text("utf-8")
    assert "corrupt" in index and "failed" in index
    trainers = (out / "trainers.md").read_text("utf-8")
    assert "all produced the same merges" in trainers and "naive / heap time" in trainers


def test_reports_all_refuses_reports_of_other_runs_unless_forced(experiments, tmp_path, caplog):
    out = tmp_path / "reports"
    argv = ["--all", "--experiments-dir", str(experiments), "--out", str(out)]
    assert report_main(argv) == 0
    made_from = json.loads((out / "manifest.json").read_text("utf-8"))
    assert made_from["runs"] and len(made_from["sha256"]) == 64
    assert report_main(argv) == 0  # the same runs: regenerated in place
    shutil.rmtree(next((experiments / "sweeps").iterdir()))  # a different set of runs
    before = (out / "README.md").read_bytes()
    assert report_main(argv) == 2
    assert "pass --force to replace them, or --out DIR" in caplog.text
    assert (out / "README.md").read_bytes() == before
    assert report_main([*argv, "--force"]) == 0
    assert (out / "README.md").read_bytes() != before
    (out / "manifest.json").unlink()  # reports made before manifests existed: unknown runs
    caplog.clear()
    assert report_main(argv) == 2 and "without a readable manifest.json" in caplog.text


def test_reports_cli_and_empty_dir(experiments, tmp_path, caplog):
    assert (
        report_main(["--all", "--experiments-dir", str(experiments), "--out", str(tmp_path / "r")])
        == 0
    )
    assert (tmp_path / "r" / "trainers.md").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert report_main(["--all", "--experiments-dir", str(empty), "--out", str(tmp_path)]) == 2
    assert "no runs under" in caplog.text


def test_tidy_keeps_missing_measurements_missing(experiments):
    runs = tidy(load_runs(experiments))
    failed = runs[runs["status"] == "failed"].iloc[0]
    assert pd.isna(failed["merge_seconds"]) and pd.isna(failed["compression"])
    assert "too small" in failed["error"]


def test_names_from_run_files_never_choose_where_reports_are_written(experiments, tmp_path):
    """A downloaded run's metrics.json names its input; that name is data, never a path."""
    for metrics_path in experiments.rglob("metrics.json"):
        try:
            metrics = json.loads(metrics_path.read_text("utf-8"))
        except ValueError:  # the corrupt fixture run
            continue
        if isinstance(metrics.get("run"), dict):
            metrics["run"]["input_name"] = "x/../../../PWNED"
            metrics_path.write_text(json.dumps(metrics), "utf-8")
    out = tmp_path / "deep" / "reports"
    write_all_reports(experiments, out)
    assert [p for p in tmp_path.rglob("*PWNED*") if not p.is_relative_to(out)] == []
    assert list(out.glob("figures/trainers_time_*PWNED.png"))  # the figure is still drawn


def test_a_figure_that_links_out_of_its_run_is_not_copied(experiments, tmp_path):
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG not for the report")
    for metrics in experiments.rglob("metrics.json"):
        (metrics.parent / "figures").mkdir(exist_ok=True)
        (metrics.parent / "figures" / "zz_extra.png").symlink_to(secret)  # none regenerates it
    out = tmp_path / "reports"
    write_all_reports(experiments, out)
    copied = [p for p in out.rglob("*.png") if p.read_bytes() == secret.read_bytes()]
    assert copied == []


def test_runs_measured_on_other_held_out_documents_are_kept_apart(experiments, tmp_path):
    """A `debug=fast` run (10 held-out documents) never shares a curve or table with runs
    measured on more: datasets.md leaves it out and says so."""
    frame = load_runs(experiments)
    done = frame[frame["status"] == "complete"]
    target = Path(done.sort_values("run_dir")["run_dir"].iloc[-1]) / "metrics.json"
    metrics = json.loads(target.read_text("utf-8"))
    usual = metrics["compression"]["own"]["docs"]
    metrics["compression"]["own"]["docs"] = usual - 1
    target.write_text(json.dumps(metrics), "utf-8")
    out = tmp_path / "reports"
    write_all_reports(experiments, out)
    datasets = (out / "datasets.md").read_text("utf-8")
    assert "*Left out: 1 run(s) measured on another number of held-out documents" in datasets
    assert f"({usual - 1} docs)" in datasets


@pytest.mark.parametrize(
    ("field", "value"),
    [("vocab_size", "lots"), ("num_workers", [2]), ("special_tokens", "<|endoftext|>")],
)
def test_one_malformed_run_is_one_warning_and_breaks_no_other(
    experiments, tmp_path, caplog, field, value
):
    from bpe.analysis import loader

    loader._WARNED.clear()
    bad = None
    for metrics_path in sorted(experiments.rglob("metrics.json")):
        try:
            metrics = json.loads(metrics_path.read_text("utf-8"))
        except ValueError:  # the corrupt fixture run
            continue
        if metrics.get("status") == "complete" and bad is None:
            metrics["run"][field] = value
            metrics_path.write_text(json.dumps(metrics), "utf-8")
            bad = metrics_path
    assert bad is not None
    out = tmp_path / "reports"
    write_all_reports(experiments, out)
    warnings = [
        r for r in caplog.records if r.levelname == "WARNING" and str(bad.parent) in r.message
    ]
    assert len(warnings) == 1, [r.message for r in warnings]
    assert f"metrics.json: run.{field} is" in warnings[0].message
    assert (out / "README.md").is_file()
    assert len(load_runs(experiments)) == 7  # the fixture's 8 readable runs, but the bad one


@pytest.mark.slow
def test_a_run_trained_beside_a_malformed_one_completes(experiments, tmp_path):
    from tests.conftest import DATA, train_run

    for metrics_path in experiments.rglob("metrics.json"):
        try:
            metrics = json.loads(metrics_path.read_text("utf-8"))
        except ValueError:
            continue
        if isinstance(metrics.get("run"), dict):
            metrics["run"]["vocab_size"] = "lots"
            metrics_path.write_text(json.dumps(metrics), "utf-8")
    corpus = tmp_path / "c.txt"
    corpus.write_text((DATA / "tinystories_sample.txt").read_text("utf-8")[:200_000], "utf-8")
    run = train_run(experiments, "debug=fast", f"dataset.path={corpus}")
    assert json.loads((run / "metrics.json").read_text("utf-8"))["status"] == "complete"
    assert "skipping run" in (run / "train.log").read_text("utf-8")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_the_runs_table_exports_the_tidy_frame_and_reads_back(experiments, tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    path = tmp_path / f"runs{suffix}"
    assert report_main(["--table", str(path), "--experiments-dir", str(experiments)]) == 0
    back = pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
    frame = tidy(load_runs(experiments))
    assert list(back.columns) == list(frame.columns)
    assert back["run_dir"].tolist() == frame["run_dir"].tolist()
    assert back["merges_sha256"].tolist() == frame["merges_sha256"].tolist()
    # a record column travels as JSON text and reads back as the record
    assert [json.loads(h) for h in back["host"]] == frame["host"].tolist()


def test_the_runs_table_names_the_suffixes_it_writes(experiments, tmp_path, caplog):
    out = tmp_path / "runs.xlsx"
    assert report_main(["--table", str(out), "--experiments-dir", str(experiments)]) == 2
    assert "name it .csv or .parquet (e.g. runs.csv)" in caplog.text and not out.exists()


# --- figures for papers: nothing cut, SVG and PDF on request ------------------------------------


FIXTURE_RUN = FIXTURES / "runs" / "2026-01-01_00-00-00_000000_tinystories_sample_heap_v300"


def _saved_whole(fig) -> bool:
    """Whether the saved PNG holds every artist of the figure (its tight bounding box)."""
    import io

    from matplotlib.image import imread

    png = fig.png()
    height, width = imread(io.BytesIO(png)).shape[:2]
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    return width >= box.width * 100 - 2 and height >= box.height * 100 - 2


def test_no_figure_cuts_its_title_labels_or_legend():
    from bpe.analysis import figures

    long = "a run whose name is long " * 6
    timeline = figures.memory_timeline(
        {f"process tree of {long}": [(0.0, 10.0), (1.0, 30.0)]},
        stages=[("pretokenize with a long stage name", 0.0, 0.5), ("merge", 0.5, 1.0)],
        title=f"Memory during {long}",
    )
    names = [f"{long}{k}" for k in range(3)]
    heat = figures.heatmap(
        pd.DataFrame(0.5, index=names, columns=names), label="Jaccard", title="overlap"
    )
    assert _saved_whole(timeline) and _saved_whole(heat)


def test_a_run_s_figures_are_also_saved_as_svg_and_pdf_when_asked(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(
        FIXTURES / "runs" / "2026-01-01_00-00-00_000000_tinystories_sample_heap_v300", run
    )
    assert report_main([str(run)]) == 0
    pngs = sorted(p.stem for p in (run / "figures").glob("*.png"))
    assert pngs and not list((run / "figures").glob("*.svg"))
    assert report_main([str(run), "--figure-formats", "svg", "pdf"]) == 0
    for stem in pngs:
        svg = (run / "figures" / f"{stem}.svg").read_text("utf-8")
        assert svg.lstrip().startswith("<?xml") and "<svg" in svg
        assert (run / "figures" / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
    # the same bytes for the same data: no date in either
    first = (run / "figures" / f"{pngs[0]}.pdf").read_bytes()
    assert report_main([str(run), "--figure-formats", "pdf"]) == 0
    assert (run / "figures" / f"{pngs[0]}.pdf").read_bytes() == first


def test_the_run_s_config_asks_for_figure_formats_and_a_bad_one_is_refused(tmp_path):
    import yaml
    from omegaconf import OmegaConf

    from bpe.analysis.run.report import write_run_report
    from bpe.experiment.config_checks import check_config

    run = tmp_path / "run"
    shutil.copytree(
        FIXTURES / "runs" / "2026-01-01_00-00-00_000000_tinystories_sample_heap_v300", run
    )
    config = run / ".hydra" / "config.yaml"
    config.parent.mkdir(exist_ok=True)
    data = {"analysis": {"figure_formats": ["png", "svg"]}}
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    write_run_report(run)
    assert sorted(p.stem for p in (run / "figures").glob("*.svg")) == sorted(
        p.stem for p in (run / "figures").glob("*.png")
    )
    data["analysis"]["figure_formats"] = ["eps"]
    with pytest.raises(ValueError, match="analysis.figure_formats has \\['eps'\\]"):
        check_config(OmegaConf.create(data))
