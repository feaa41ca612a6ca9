"""Custom inputs (`dataset.path=`): identified by sha256, compared only with runs on the same
bytes, measured on their own text, and filed under their own name.

Before, a run on another file kept the dataset's name: a sweep over two files said the trainers
produced DIFFERENT merges (they agree on each file), ANALYSIS.md listed runs on other files as
siblings, and compression was measured on the named dataset's held-out text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from bpe.analysis.loader import input_key, load_runs, tidy
from bpe.analysis.run.report import write_run_report
from bpe.analysis.sweep.facts import merge_agreement
from bpe.corpus import datasets
from bpe.corpus.documents import tail_documents
from bpe.corpus.sources import resolve_source
from bpe.evaluation.measured import TAIL_MAX_BYTES
from bpe.runs.upgrade import upgrade
from bpe.util.io import sha256_file
from tests.conftest import EOT, FAST_ANALYSIS, FIXTURES, ROOT

FAST = [
    "progress=false",
    "num_workers=1",
    *FAST_ANALYSIS,
]


def _two_files(tmp_path: Path) -> tuple[Path, Path]:
    text = (FIXTURES / "corpus.en").read_text("utf-8")
    half = len(text) // 2
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(text[:half], "utf-8")
    b.write_text(text[half:], "utf-8")
    return a, b


def test_sweep_over_two_files_compares_trainers_per_input(tmp_path):
    a, b = _two_files(tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "-m",
            f"experiments_dir={tmp_path / 'exp'}",
            *FAST,
            f"dataset.path={a},{b}",
            "trainer=indexed,heap",
            "vocab_size=300",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (sweep,) = (tmp_path / "exp" / "sweeps").iterdir()
    jobs = {p.name: p for p in sweep.iterdir() if (p / "metrics.json").is_file()}
    assert sorted(jobs) == [
        "0_custom-a_indexed_v300",
        "1_custom-a_heap_v300",
        "2_custom-b_indexed_v300",
        "3_custom-b_heap_v300",
    ]

    report = (sweep / "SWEEP.md").read_text("utf-8")
    assert "- custom-a @ 300: heap, indexed produced identical merges." in report
    assert "- custom-b @ 300: heap, indexed produced identical merges." in report
    assert "DIFFERENT" not in report

    for name, job in jobs.items():
        path = a if "custom-a" in name else b
        metrics = json.loads((job / "metrics.json").read_text("utf-8"))
        assert metrics["lineage"]["input"]["sha256"] == sha256_file(path)
        assert metrics["run"]["input_name"] == f"custom-{path.stem}"
        assert metrics["run"]["dataset"] == "tinystories_sample"  # the config group, to rerun
        own = metrics["compression"]["own"]
        docs, file = tail_documents(resolve_source(path), EOT, max_bytes=TAIL_MAX_BYTES, max_docs=5)
        assert own["dataset"] == f"custom-{path.stem}" and own["source"] == "input_tail"
        assert own["seen_in_training"] and own["file"] == file == str(path.resolve())
        assert own["bytes"] == sum(len(d.encode("utf-8")) for d in docs)
        # every measure reads the same documents: efficiency, under-trained tokens and the
        # tiktoken check are measured on the tail too, not left out
        assert metrics["efficiency"]["own"]["dataset"] == f"custom-{path.stem}"
        assert metrics["undertrained"]["heldout_docs"] == len(docs)
        assert metrics["tiktoken"]["heldout"][0] == f"custom-{path.stem} (input tail)"
        assert metrics["tiktoken"]["mismatches"] == 0 and metrics["tiktoken"]["pretokens"] > 0

        analysis = (job / "ANALYSIS.md").read_text("utf-8")
        assert "end of the training input, seen in training" in analysis
        assert "overstates" in analysis

    # Each ANALYSIS.md was written when its job ended: job 2 (the first on b) ran after the two
    # jobs on a, and must not call them siblings.
    assert _siblings(jobs["2_custom-b_indexed_v300"]) == []
    assert _siblings(jobs["3_custom-b_heap_v300"]) == ["2_custom-b_indexed_v300"]
    assert _siblings(jobs["1_custom-a_heap_v300"]) == ["0_custom-a_indexed_v300"]
    write_run_report(jobs["0_custom-a_indexed_v300"])  # now that every job exists
    assert _siblings(jobs["0_custom-a_indexed_v300"]) == ["1_custom-a_heap_v300"]
    assert "produced identical merges" in (
        jobs["0_custom-a_indexed_v300"] / "ANALYSIS.md"
    ).read_text("utf-8")


def _siblings(job: Path) -> list[str]:
    """The run names in the siblings table of a job's ANALYSIS.md."""
    text = (job / "ANALYSIS.md").read_text("utf-8").split("## Sibling runs (same input)", 1)[1]
    rows = [line for line in text.splitlines() if line.startswith("| sweeps/")]
    return sorted(line.split("|")[1].strip().rsplit("/", 1)[1] for line in rows)


def test_same_bytes_at_two_paths_are_one_input_and_old_runs_fall_back_to_the_path():
    # what the loader reads of an older run, which recorded its dataset but no input name
    old = upgrade({"run": {"dataset": "tinystories_sample"}})["run"]["input_name"]
    frame = pd.DataFrame(
        {
            "run_dir": ["r1", "r2", "r3", "r4"],
            "run_name": ["r1", "r2", "r3", "r4"],
            "status": ["complete"] * 4,
            "metrics.run.dataset": ["tinystories_sample"] * 4,
            "metrics.run.input_name": ["custom-x", "custom-y", old, old],
            "metrics.run.input_path": ["/a/x.txt", "/b/y.txt", "old.txt", "other.txt"],
            "metrics.lineage.input.sha256": ["ab" * 32, "ab" * 32, None, None],
            "metrics.run.trainer": ["heap", "indexed", "heap", "indexed"],
            "metrics.variant.name": ["bpe"] * 4,
            "metrics.pattern.name": ["gpt2"] * 4,
            "metrics.run.vocab_size": [300] * 4,
            "metrics.profiled": [False] * 4,
            "metrics.merges_sha256": ["m1", "m1", "m2", "m3"],
        }
    )
    runs = tidy(frame)
    keys = dict(zip(runs["run_dir"], runs["input_key"], strict=True))
    assert keys["r1"] == keys["r2"] == "sha256:" + "ab" * 32
    assert keys["r3"] == "path:old.txt" and keys["r4"] == "path:other.txt"
    assert dict(zip(runs["run_dir"], runs["dataset"], strict=True))["r3"] == "tinystories_sample"
    # the two old runs saw different files: their merges are not compared with each other
    assert [(v, t, same) for _, v, t, same in merge_agreement(runs)] == [
        (300, ["heap", "indexed"], True)
    ]
    assert input_key(None, None) is None


def test_checked_in_runs_without_sha256_still_load_and_group_by_path():
    runs = tidy(load_runs(FIXTURES / "experiments"))
    assert runs["input_sha256"].isna().all()
    assert runs["input_key"].str.startswith("path:").all()
    assert any(label == "tinystories_sample" for label, *_ in merge_agreement(runs))


def test_a_custom_path_is_named_after_its_file_and_drops_the_named_held_out_text(tmp_path):
    own = datasets.load_named("owt_sample")
    assert not own.custom and own.name == "owt_sample" and own.heldout_path is not None
    cfg = {
        "name": "owt_sample",
        "path": str(tmp_path / "my corpus.txt"),
        "heldout_path": "data/owt_heldout.txt",
        "download": None,
    }
    ds = datasets.from_config(cfg)
    assert ds.custom and ds.name == "custom-my-corpus" and ds.heldout_path is None
    mine = tmp_path / "mine_heldout.txt"
    kept = datasets.from_config({**cfg, "heldout_path": str(mine)})
    assert kept.heldout_path == mine  # a held-out file given with the path is used
    missing = datasets.from_config({**cfg, "name": "owt"})
    try:
        missing.check()
    except FileNotFoundError as err:
        assert "dataset.path" in str(err) and "download_data" not in str(err)
    else:
        raise AssertionError("a missing custom file must fail")


def test_the_input_tail_is_whole_documents_whatever_the_parts(tmp_path):
    """A text file's tail is read from its last part backwards: a part that starts inside a
    document (or inside an é) never gives half a document."""
    path = tmp_path / "t.txt"
    path.write_text("é" * 300_000 + EOT + "second" + EOT + "last doc", "utf-8")
    corpus = resolve_source(path)
    assert tail_documents(corpus, EOT, max_bytes=100) == (["second", "last doc"], str(path))
    assert tail_documents(corpus, EOT, max_bytes=100, max_docs=1)[0] == ["last doc"]
    assert tail_documents(corpus, EOT, max_bytes=10)[0] == ["last doc"]
