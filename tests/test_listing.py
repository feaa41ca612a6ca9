"""Listing a corpus: each real file once, every skip said, bounded whatever the links.

The reproductions of the hostile review: a link to a file in the same folder read twice, a
dangling link skipped silently, `ln -s . self` turning one file into 41, `ln -s ../l up`
making a `**` glob endless, a linked folder of shards ignored by a folder source but followed by
a glob, a FIFO or `/dev/zero` reported as "not found", and a corpus folder holding the
experiments directory feeding a run its own outputs.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bpe.corpus.listing import glob_regex, list_files
from bpe.corpus.sources import resolve_source
from bpe.pretokenize import pretokenize
from tests.conftest import EOT, FIXTURES, ROOT

TEXT = (FIXTURES / "corpus.en").read_text("utf-8")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """d/: a.txt, b.txt -> a.txt, x.txt -> nope; l/: a.txt, self -> ., up -> ../l;
    s/: own.txt, linked -> ../shards (shards/s1.txt)."""
    os.chdir(tmp_path)
    for name in ("d", "l", "s", "shards"):
        (tmp_path / name).mkdir()
    for f in ("d/a.txt", "l/a.txt", "s/own.txt", "shards/s1.txt"):
        (tmp_path / f).write_text(TEXT, "utf-8")
    (tmp_path / "d" / "b.txt").symlink_to("a.txt")
    (tmp_path / "d" / "x.txt").symlink_to("nope")
    (tmp_path / "l" / "self").symlink_to(".")
    (tmp_path / "l" / "up").symlink_to("../l")
    (tmp_path / "s" / "linked").symlink_to("../shards")
    return tmp_path


def _names(source: str, root: Path) -> list[str]:
    return [Path(f.path).relative_to(root).as_posix() for f in resolve_source(source).files]


@pytest.mark.parametrize("source", ["d", "d/*.txt", "d/**/*.txt"])
def test_a_link_to_a_listed_file_is_read_once_and_a_dangling_link_is_said(tree, source, caplog):
    with caplog.at_level(logging.WARNING, logger="bpe.corpus.listing"):
        assert _names(source, tree) == ["d/a.txt"]
    said = caplog.text
    assert "b.txt: the same file as" in said and "x.txt: a dangling link (to 'nope')" in said
    # the counts are the file's own, not twice them
    once = pretokenize(resolve_source("d/a.txt"), [EOT], num_workers=1).counts
    assert pretokenize(resolve_source(source), [EOT], num_workers=1).counts == once


@pytest.mark.parametrize("source", ["l", "l/**/*.txt"])
def test_links_to_a_folder_itself_or_its_parent_end_and_list_the_file_once(tree, source, caplog):
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="bpe.corpus.listing"):
        assert _names(source, tree) == ["l/a.txt"]
    assert time.monotonic() - t0 < 5
    assert "self: the same folder as" in caplog.text and "up: the same folder as" in caplog.text


def test_a_linked_folder_of_shards_is_read_by_a_folder_source_as_by_a_glob(tree):
    assert _names("s", tree) == _names("s/**/*.txt", tree) == ["shards/s1.txt", "s/own.txt"]


def test_listing_is_linear_in_real_folders_whatever_the_links(tmp_path):
    """Ten levels, each folder holding two links to the next: 2^10 paths, 11 real folders."""
    levels = [tmp_path / f"L{k}" for k in range(11)]
    for d in levels:
        d.mkdir()
        (d / f"{d.name}.txt").write_text("x", "utf-8")
    for here, there in zip(levels, levels[1:]):
        (here / "one").symlink_to(there)
        (here / "two").symlink_to(there)
    t0 = time.monotonic()
    listing = list_files(levels[0], pattern="**/*.txt")
    assert len(listing.files) == 11 and time.monotonic() - t0 < 5


def test_glob_regex_keeps_single_stars_within_a_folder():
    assert glob_regex("*.txt").fullmatch("a.txt") and not glob_regex("*.txt").fullmatch("d/a.txt")
    assert glob_regex("**/*.txt").fullmatch("x/y/a.txt") and glob_regex("**/*.txt").fullmatch(
        "a.txt"
    )
    assert glob_regex("[ab].txt").fullmatch("b.txt") and not glob_regex("[!ab].txt").fullmatch(
        "a.txt"
    )


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_device_is_not_a_regular_file_not_missing(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "pipe"
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "debug=fast",
            f"dataset.path={path}",
            f"experiments_dir={tmp_path / 'exp'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "is not a regular file (a FIFO, socket or device)" in proc.stderr, proc.stderr[-2000:]
    assert "not found" not in proc.stderr


def test_a_corpus_folder_holding_the_experiments_directory_leaves_the_runs_out(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(TEXT, "utf-8")
    args = [
        sys.executable,
        "-m",
        "bpe.cli.train",
        "debug=fast",
        f"dataset.path={corpus}",
        f"experiments_dir={corpus / 'experiments'}",
    ]
    for _ in range(2):  # the second run finds the first's merges.txt and train.log in the folder
        proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
    runs = sorted((corpus / "experiments").glob("2*/metrics.json"))
    first, second = (json.loads(p.read_text("utf-8")) for p in runs)
    assert first["merges_sha256"] == second["merges_sha256"]
    assert second["lineage"]["input"]["files"] == first["lineage"]["input"]["files"]
    assert "a run directory (it holds metrics.json)" in proc.stderr
