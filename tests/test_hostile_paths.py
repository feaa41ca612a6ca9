"""Hostile paths: no command overwrites its input or writes outside its experiments directory.

Tried as a hostile (or hurried) user would: `bpe-encode --out` naming the input itself (also
through a symlink or a hard link), an existing file of the user's, or a directory; a dataset
name that climbs out of `experiments_dir`; a run placed outside `experiments_dir` moving its
`latest` link. Each goes through the real command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bpe import train_bpe
from bpe.cli.encode import main as encode_main
from bpe.experiment.rundir import update_latest
from bpe.formats.gpt2_format import save_tokenizer_files
from bpe.util.io import safe_name
from tests.conftest import EOT, FIXTURES, ROOT

TEXT = "Once upon a time there was a tiny tokenizer.<|endoftext|>It never ate its input.\n"
FAST = ["debug=fast", "progress=false", "num_workers=1"]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tok")
    vocab, merges = train_bpe(FIXTURES / "corpus.en", 300, [EOT])
    save_tokenizer_files(vocab, merges, out)
    return out


def _encode(tokenizer_dir: Path, src: Path, out: Path, *extra: str) -> int:
    return encode_main(
        [
            "--tokenizer",
            str(tokenizer_dir),
            "--input",
            str(src),
            "--out",
            str(out),
            "--no-progress",
            "--num-workers",
            "1",
            *extra,
        ]
    )


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link"])
@pytest.mark.parametrize("force", [False, True], ids=["", "--force"])
def test_the_output_is_never_the_input(tokenizer_dir, tmp_path, caplog, how, force):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    out = {"same path": corpus, "symlink": tmp_path / "link.txt", "hard link": tmp_path / "hard"}
    if how == "symlink":
        out[how].symlink_to(corpus)
    elif how == "hard link":
        os.link(corpus, out[how])
    code = _encode(tokenizer_dir, corpus, out[how], *(["--force"] if force else []))
    assert code == 2
    assert corpus.read_text(encoding="utf-8") == TEXT  # the user's text is intact
    assert "is the input file" in caplog.text and "write the ids to another path" in caplog.text


def test_an_existing_file_of_the_user_is_kept_unless_forced(tokenizer_dir, tmp_path, caplog):
    corpus, notes = tmp_path / "corpus.txt", tmp_path / "notes.npy"
    corpus.write_text(TEXT, encoding="utf-8")
    notes.write_text("my notes", encoding="utf-8")
    assert _encode(tokenizer_dir, corpus, notes) == 2
    assert notes.read_text(encoding="utf-8") == "my notes"
    assert "not a token array written by bpe-encode" in caplog.text and "--force" in caplog.text
    assert _encode(tokenizer_dir, corpus, notes, "--force") == 0
    assert np.load(notes).size > 0


def test_a_previous_output_is_replaced_without_force(tokenizer_dir, tmp_path):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "ids.npy"
    corpus.write_text(TEXT, encoding="utf-8")
    assert _encode(tokenizer_dir, corpus, out) == 0
    first = np.load(out)
    assert _encode(tokenizer_dir, corpus, out) == 0  # ours, with its sidecar: replaced
    assert np.array_equal(np.load(out), first)


def test_out_naming_a_directory_is_a_clear_error(tokenizer_dir, tmp_path, caplog):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    (tmp_path / "outdir").mkdir()
    assert _encode(tokenizer_dir, corpus, tmp_path / "outdir") == 2
    assert "is a directory; pass a file path inside it" in caplog.text
    assert "Traceback" not in caplog.text


@pytest.mark.parametrize("name", ["/../../../x", "../escape", "a/b", "..", "${oc.env:HOME}"])
def test_a_dataset_name_never_puts_the_run_outside_experiments_dir(tmp_path, name):
    exp = tmp_path / "deep" / "exp"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            *FAST,
            f"dataset.name={name}",
            f"dataset.path={FIXTURES / 'corpus.en'}",
            f"experiments_dir={exp}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = [p for p in exp.iterdir() if not p.is_symlink() and not p.name.startswith(".")]
    assert len(runs) == 1 and runs[0].resolve().parent == exp.resolve()
    assert json.loads((runs[0] / "metrics.json").read_text("utf-8"))["status"] == "complete"
    # nothing was written beside or above the experiments directory
    assert sorted(p.name for p in (tmp_path / "deep").iterdir()) == ["exp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep"]


def test_safe_name_keeps_no_separator_or_parent():
    for hostile in ["/../../../x", "..", "a/b\\c", "x\x00y", "\n", "é/ü", "." * 80]:
        name = safe_name(hostile)
        assert name and "/" not in name and "\\" not in name and name not in (".", "..")
        assert not name.startswith(".") and len(name) <= 60


def test_a_run_outside_experiments_dir_leaves_latest_alone(tmp_path):
    exp, outside = tmp_path / "exp", tmp_path / "elsewhere" / "X"
    inside = subprocess.run(
        [sys.executable, "-m", "bpe.cli.train", *FAST, f"experiments_dir={exp}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert inside.returncode == 0, inside.stderr[-2000:]
    before = os.readlink(exp / "latest")
    placed = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            *FAST,
            f"experiments_dir={exp}",
            f"hydra.run.dir={outside}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert placed.returncode == 0, placed.stderr[-2000:]
    assert json.loads((outside / "metrics.json").read_text("utf-8"))["status"] == "complete"
    assert os.readlink(exp / "latest") == before  # still the run inside
    assert (exp / "latest").resolve().parent == exp.resolve()


def test_latest_never_points_out_of_its_directory(tmp_path):
    (tmp_path / "exp" / "run").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    assert update_latest(tmp_path / "exp", tmp_path / "exp" / "run") is not None
    assert update_latest(tmp_path / "exp", tmp_path / "other") is None
    assert os.readlink(tmp_path / "exp" / "latest") == "run"
