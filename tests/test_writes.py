"""Commands that write files never lose one: each output pointed at each input and at an
existing file.

The rule (`bpe.util.io.check_writable`): an output never replaces one of the command's inputs,
even with --force; it replaces an existing file only when the command wrote it before, or with
--force. bpe-encode's cases live in test_encode_dataset.py and test_hostile_paths.py; here are
bpe-compare's and bpe-report's, on copies of real run directories.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from bpe.cli.compare import main as compare_main
from bpe.cli.report import main as report_main
from tests.conftest import FIXTURES

EXPERIMENTS = FIXTURES / "experiments"
SWEEP = next((EXPERIMENTS / "sweeps").iterdir())


def snapshot(*dirs: Path) -> dict[Path, bytes]:
    """Every file under the directories, with its bytes."""
    return {p: p.read_bytes() for d in dirs for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture
def experiments(tmp_path) -> Path:
    dst = tmp_path / "experiments"
    shutil.copytree(EXPERIMENTS, dst)
    return dst


@pytest.fixture
def sides(experiments) -> list[Path]:
    sweep = next((experiments / "sweeps").iterdir())
    return [
        sweep / SWEEP.joinpath(name).name
        for name in ("0_tinystories_sample_naive_v300", "1_tinystories_sample_naive_v350")
    ]


def test_compare_into_a_compared_directory_changes_none_of_its_files(sides, caplog):
    for out in sides:
        before = snapshot(*sides)
        assert compare_main([*map(str, sides), "--out", str(out)]) == 0
        after = snapshot(*sides)
        new = set(after) - set(before)
        assert new <= {out / "COMPARE.md", out / "figures" / "compare_topk_overlap.png"}
        assert {p: after[p] for p in before} == before  # every input byte for byte


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_compare_never_writes_over_a_compared_file(sides, tmp_path, caplog, force):
    vocab = sides[0] / "merges.txt"
    before = snapshot(*sides)
    # --out naming an input file: refused (a file where a directory goes)
    with caplog.at_level(logging.ERROR):
        assert compare_main([*map(str, sides), "--out", str(vocab), *force]) == 2
    assert "which is a file, not a directory" in caplog.text
    # an output that is an input through a hard link: refused even with --force
    out = tmp_path / "linked"
    out.mkdir()
    os.link(vocab, out / "COMPARE.md")
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert compare_main([*map(str, sides), "--out", str(out), *force]) == 2
    assert "is the input file" in caplog.text and "--force never replaces" in caplog.text
    assert snapshot(*sides) == before


def test_compare_replaces_its_own_report_and_another_file_only_with_force(sides, tmp_path, caplog):
    out = tmp_path / "out"
    out.mkdir()
    (out / "COMPARE.md").write_text("my notes\n", "utf-8")
    args = [*map(str, sides), "--out", str(out)]
    with caplog.at_level(logging.ERROR):
        assert compare_main(args) == 2
    assert "not a comparison written by bpe-compare" in caplog.text and "--force" in caplog.text
    assert (out / "COMPARE.md").read_text("utf-8") == "my notes\n"
    assert compare_main([*args, "--force"]) == 0  # asked for
    first = (out / "COMPARE.md").read_text("utf-8")
    assert first.startswith("# Vocabulary comparison: ")
    assert compare_main([*args, "--labels", "a", "b"]) == 0  # its own report: regenerated
    assert (out / "COMPARE.md").read_text("utf-8") != first


@pytest.mark.parametrize("force", [[], ["--force"]])
@pytest.mark.parametrize("where", ["experiments", "a run", "a sweep"])
def test_reports_are_never_written_among_the_runs(experiments, caplog, where, force):
    out = {
        "experiments": experiments,
        "a run": next(experiments.glob("*_owt_sample_*")),
        "a sweep": next((experiments / "sweeps").iterdir()),
    }[where]
    before = snapshot(experiments)
    argv = ["--all", "--experiments-dir", str(experiments), "--out", str(out), *force]
    with caplog.at_level(logging.ERROR):
        assert report_main(argv) == 2
    assert "is inside the experiments directory" in caplog.text
    assert snapshot(experiments) == before


def test_reports_out_naming_a_file_or_an_unknown_readme(experiments, tmp_path, caplog):
    notes = tmp_path / "notes.md"
    notes.write_text("mine\n", "utf-8")
    argv = ["--all", "--experiments-dir", str(experiments)]
    with caplog.at_level(logging.ERROR):
        assert report_main([*argv, "--out", str(notes), "--force"]) == 2
    assert "is a file, not a directory" in caplog.text
    assert notes.read_text("utf-8") == "mine\n"
    # a directory whose README.md reports did not write (a project root, say)
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("# my project\n", "utf-8")
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert report_main([*argv, "--out", str(project)]) == 2
    assert "pass --force to replace them" in caplog.text
    assert (project / "README.md").read_text("utf-8") == "# my project\n"


def test_report_of_one_run_takes_no_out(experiments, tmp_path, capsys):
    run = next(experiments.glob("*_owt_sample_*"))
    with pytest.raises(SystemExit) as exit_info:
        report_main([str(run), "--out", str(tmp_path / "elsewhere")])
    assert exit_info.value.code == 2
    assert "--out and --force go with --all" in capsys.readouterr().err
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_parity_and_prune_into_a_run_change_none_of_its_files(tmp_path, force, caplog):
    """bpe-parity may add its own files beside a tokenizer's; bpe-prune, whose outputs carry
    the tokenizer's own names, is refused there, even with --force."""
    from bpe.cli.parity import main as parity_main
    from bpe.cli.prune import main as prune_main

    source = next((FIXTURES / "runs").iterdir())
    run = tmp_path / source.name
    shutil.copytree(source, run)
    before = snapshot(run)
    assert parity_main([str(run), "--out", str(run), "--languages", "deu_Latn", *force]) == 0
    caplog.clear()
    assert prune_main([str(run), "--vocab-size", "280", "--out", str(run), *force]) == 2
    assert "input" in caplog.text  # refused as an input of the command, before any work
    after = snapshot(run)
    assert {p: after[p] for p in before} == before
    assert set(after) - set(before) == {run / n for n in ("parity.csv", "parity.json", "PARITY.md")}
