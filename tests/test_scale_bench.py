"""scripts/make_scale_corpus.py and scripts/bench_scale.py: smoke tests, no timing asserted.

The generator: same seed same bytes, another seed other bytes, the size it was asked for, a
write that an interrupt leaves undone (no file, no temp file), and unique pretokens that follow
the calibrated Heaps curve. The benchmark: a real `--quick` run in subprocesses writes its
results and report, `--report-only` remakes the same report, and the report of a hand-written
results file matches its golden file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bpe.pretokenize import pretokenize
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden"
UPDATE = bool(os.environ.get("UPDATE_GOLDEN"))
SCRIPTS = ROOT / "scripts"


def _load(name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # bench_scale imports its sibling by this name
    spec.loader.exec_module(module)
    return module


corpus = _load("make_scale_corpus")
bench = _load("bench_scale")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    size = 200_000
    a = corpus.make_corpus(tmp_path / "a.txt", size, seed=0)
    corpus.make_corpus(tmp_path / "b.txt", size, seed=0)
    corpus.make_corpus(tmp_path / "c.txt", size, seed=1)
    assert _sha(tmp_path / "a.txt") == _sha(tmp_path / "b.txt")
    assert _sha(tmp_path / "a.txt") != _sha(tmp_path / "c.txt")
    # the size asked for, overshooting by at most the last document; nothing else left behind
    longest = max(len(d.encode("utf-8")) for d in corpus.load_documents("owt"))
    assert size <= a["bytes"] <= size + longest + len(corpus.EOT)
    assert a["bytes"] == (tmp_path / "a.txt").stat().st_size
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt", "c.txt"]
    text = (tmp_path / "a.txt").read_text(encoding="utf-8")
    assert text.endswith(corpus.EOT) and text.count(corpus.EOT) == a["documents"]


def test_the_corpus_never_replaces_a_sample_or_an_unknown_file(tmp_path):
    for source in corpus.SOURCES.values():
        before = _sha(source)
        with pytest.raises(ValueError, match="is the input file"):
            corpus.make_corpus(source, 1000, force=True)
        assert _sha(source) == before
    notes = tmp_path / "notes.txt"
    notes.write_text("mine", "utf-8")
    with pytest.raises(FileExistsError, match="--force"):
        corpus.make_corpus(notes, 1000)
    assert notes.read_text("utf-8") == "mine"
    corpus.make_corpus(notes, 1000, force=True)  # asked for
    assert notes.stat().st_size >= 1000


def test_interrupted_write_leaves_nothing(tmp_path):
    """Written through a temp file renamed at the end: Ctrl-C mid-way leaves no file at all."""
    out = tmp_path / "big.txt"
    # as in a terminal, whatever started the tests: a background job of a non-interactive
    # shell (and so its children) starts with SIGINT ignored
    script = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    args = [str(SCRIPTS / "make_scale_corpus.py"), "--size", "4G", "--out", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".big.txt.*.tmp")):
        assert proc.poll() is None and time.monotonic() < deadline, "no temp file appeared"
        time.sleep(0.05)
    # Ctrl-C, pressed again every 2 s as a user would until it stops (on a loaded machine the
    # first one once went unanswered for 30 s)
    for _ in range(30):
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=2)
            break
        except subprocess.TimeoutExpired:
            continue
    else:
        proc.kill()
        pytest.fail("make_scale_corpus.py did not stop on Ctrl-C within 60 s")
    assert proc.returncode != 0
    assert list(tmp_path.iterdir()) == []


def test_unique_pretokens_follow_the_heaps_curve(tmp_path):
    novelty, sample_fit = corpus.calibrate("owt")
    assert 0.6 < sample_fit.beta < 0.8  # the OWT sample's own growth (docstring: 0.69)
    measured = {}
    for size in (1 << 20, 3 << 20):
        path = tmp_path / f"{size}.txt"
        stats = corpus.make_corpus(path, size, seed=3)
        unique = pretokenize(path, [corpus.EOT], num_workers=1).num_unique
        assert unique == pytest.approx(novelty.predicted_unique(stats["bytes"]), rel=0.1)
        measured[stats["bytes"]] = unique
    (b1, u1), (b2, u2) = sorted(measured.items())
    growth = math.log(u2 / u1) / math.log(b2 / b1)
    expected = math.log(novelty.predicted_unique(b2) / novelty.predicted_unique(b1)) / math.log(
        b2 / b1
    )
    assert growth == pytest.approx(expected, abs=0.1)


def test_no_novelty_stops_at_the_sample_vocabulary(tmp_path):
    path = tmp_path / "repeat.txt"
    corpus.make_corpus(path, 3 << 20, novelty="none")
    sample = pretokenize(corpus.SOURCES["owt"], [corpus.EOT], num_workers=1).num_unique
    assert pretokenize(path, [corpus.EOT], num_workers=1).num_unique <= sample


def test_quick_benchmark_writes_results_and_report(tmp_path):
    out_dir, corpus_dir = tmp_path / "reports", tmp_path / "corpora"
    command = [
        sys.executable,
        str(SCRIPTS / "bench_scale.py"),
        "--quick",
        "--systems",
        "ours",
        "hf",
    ]
    command += ["--out-dir", str(out_dir), "--corpus-dir", str(corpus_dir)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out_dir / "scale" / "results.json").read_text(encoding="utf-8"))
    # published: the corpora by name, never by a machine path
    assert str(tmp_path) not in json.dumps(results["corpora"])
    runs = results["runs"]
    assert sorted((r["impl"], r["size"]) for r in runs) == [
        ("hf", "1M"),
        ("hf", "256K"),
        ("ours", "1M"),
        ("ours", "256K"),
    ]
    for run in runs:
        assert run["merges"] == 300 - 257  # both count the special token and the 256 bytes
        assert run["peak_tree_mb"] > 0 and run["ru_maxrss_mb"] > 0 and run["seconds"] > 0
        assert run["cpu_s"] > 0
    ours = [r for r in runs if r["impl"] == "ours"]
    assert all(r["unique_pretokens"] > 0 and r["merge_s"] >= 0 for r in ours)
    report = out_dir / "scale.md"
    text = report.read_text(encoding="utf-8")
    assert "| owt 256 KiB |" in text and "## Goals" in text
    assert (out_dir / "scale" / "time_vs_bytes.png").stat().st_size > 0
    assert (out_dir / "scale" / "memory_vs_bytes.png").stat().st_size > 0
    # the corpora are reused, and the report is remade from the JSON alone, byte for byte
    assert sorted(p.suffix for p in corpus_dir.iterdir()) == [".json", ".json", ".txt", ".txt"]
    again = subprocess.run([*command, "--report-only"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert report.read_text(encoding="utf-8") == text


def test_the_code_version_ignores_results_written_under_reports(tmp_path):
    """A benchmark measured in steps writes reports/ between them; only code marks a change."""

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "results.json").write_text("{}\n", encoding="utf-8")
    (tmp_path / "code.py").write_text("x = 1\n", encoding="utf-8")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start")
    clean = bench.code_version(tmp_path)
    assert clean and "uncommitted" not in clean
    (tmp_path / "reports" / "results.json").write_text('{"step": 1}\n', encoding="utf-8")
    assert bench.code_version(tmp_path) == clean
    (tmp_path / "code.py").write_text("x = 2\n", encoding="utf-8")
    assert bench.code_version(tmp_path) == clean + " (with uncommitted changes)"
    assert bench.code_version(tmp_path / "reports" / "missing") == ""


def test_report_golden():
    results = json.loads((ROOT / "tests" / "fixtures" / "scale" / "results.json").read_text())
    text = bench.render_markdown(results, figures=["time_vs_bytes.png", "memory_vs_bytes.png"])
    path = GOLDEN / "scale.md"
    if UPDATE:
        path.write_text(text, "utf-8")
    assert text == path.read_text("utf-8"), "scale.md differs from its golden file"


def test_the_worker_sets_up_the_anchors_as_bpe_does():
    """The worker does not import bpe (memory): its GPT-2 pattern, end-of-text token and byte
    table must match."""
    worker = _load("bench_scale_worker")
    from bpe.formats.gpt2_format import unicode_to_bytes
    from bpe.text.patterns import GPT2_PATTERN
    from bpe.text.specials import EOT

    assert worker.GPT2_PATTERN == GPT2_PATTERN and worker.EOT == EOT
    assert worker.hf_byte_table() == unicode_to_bytes()
    assert set(worker.SYSTEMS) == set(worker.TIE_BREAKS) == set(bench.IMPLS)


def test_quick_benchmark_with_the_anchors(tmp_path):
    """Every system, rustbpe and bpeasy included (the bench extra), in a --quick run."""
    for module in ("rustbpe", "bpeasy"):
        pytest.importorskip(module, reason=f"{module} is in the bench extra, not installed")
    systems = bench.available_systems()
    out_dir, corpus_dir = tmp_path / "reports", tmp_path / "corpora"
    command = [sys.executable, str(SCRIPTS / "bench_scale.py"), "--quick", "--sizes", "256K"]
    command += ["--out-dir", str(out_dir), "--corpus-dir", str(corpus_dir), "--name", "anchors"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out_dir / "anchors" / "results.json").read_text(encoding="utf-8"))
    assert sorted(r["impl"] for r in results["runs"]) == sorted(systems)
    assert {"rustbpe", "bpeasy", "hf", "ours"} <= set(systems)
    for run in results["runs"]:
        assert run["merges"] == 300 - 257, run["impl"]  # the same count for every system
        assert run["peak_tree_mb"] > 0 and run["seconds"] > 0 and run["tokens_sha256"]
    by = {r["impl"]: r["tokens_sha256"] for r in results["runs"]}
    assert by["rustbpe"] == by["bpeasy"]  # what the Systems table says of their tie-breaks
    text = (out_dir / "anchors.md").read_text(encoding="utf-8")
    assert "## Systems" in text and "## Against each anchor" in text
    assert "heap/rustbpe time" in text and "bpeasy MB" in text
    assert "--report-only --name anchors" in text


@pytest.mark.parametrize("name", ["scale", "anchors"])
def test_a_published_report_is_its_json_rendered(name):
    """reports/<name>.md is exactly what its results.json renders to: a row edited by hand,
    or a report left behind when its JSON was remade, fails here."""
    folder = ROOT / "reports" / name
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    figures = [name for _, _, name in bench.FIGURES if (folder / name).is_file()]
    text = bench.render_markdown(results, figures=figures)
    assert (ROOT / "reports" / f"{name}.md").read_text(encoding="utf-8") == text, (
        f"reports/{name}.md differs from its results.json: remake it with "
        f"`python scripts/bench_scale.py --report-only --name {name}`"
    )


full = _load("bench_full_size")


def test_the_full_size_report_is_its_json_rendered():
    """reports/full_size.md is exactly what its results.json renders to, and holds both
    full-size corpora, each run by bpe-train to its vocab with ANALYSIS.md written."""
    results = json.loads((ROOT / "reports" / "full_size" / "results.json").read_text("utf-8"))
    text = (ROOT / "reports" / "full_size.md").read_text(encoding="utf-8")
    assert text == full.render_markdown(results), (
        "reports/full_size.md differs from its results.json: remake it with "
        "`python scripts/bench_full_size.py --report-only`"
    )
    by = {c["name"]: c for c in results["corpora"]}
    assert set(by) == {"owt", "tinystories"}
    for name, spec in full.CORPORA.items():
        ours = by[name]["ours"]
        assert by[name]["bytes"] >= int(spec["size"]) and by[name]["remake"]
        assert ours["merges"] == spec["vocab_size"] - 257 and ours["analysis_md"]
        assert set(ours["cpu_timings"]) == set(ours["timings"])


@pytest.mark.slow
def test_the_full_size_benchmark_measures_every_step_on_a_small_corpus(tmp_path):
    """`bench_full_size.py --quick`: bpe-train, both encoders with equal ids, every installed
    anchor with our merge count, and the report from the JSON; the corpus deleted after."""
    out_dir, corpus_dir = tmp_path / "reports", tmp_path / "corpora"
    command = [sys.executable, str(SCRIPTS / "bench_full_size.py"), "--quick"]
    command += ["--out-dir", str(out_dir), "--corpus-dir", str(corpus_dir)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out_dir / "full_size" / "results.json").read_text("utf-8"))
    (entry,) = results["corpora"]
    assert entry["ours"]["merges"] == 1000 - 257 and entry["ours"]["analysis_md"]
    assert entry["ours"]["training_cpu_s"] > 0 and entry["ours"]["peak_tree_mb"] > 0
    assert [e["backend"] for e in entry["encode"]] == ["ours", "tiktoken"]
    assert entry["encode_ids_equal"] is True
    anchors = [s for s in full.ANCHOR_ORDER if s in bench.available_systems()]
    assert [a["impl"] for a in entry["anchors"]] == anchors
    assert all(a["merges_equal_ours"] for a in entry["anchors"])
    assert not list(corpus_dir.glob("*.txt"))  # deleted after measuring
    text = (out_dir / "full_size.md").read_text("utf-8")
    assert text == full.render_markdown(results) and "## Encoding the corpus" in text
