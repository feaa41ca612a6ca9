"""Compile helpers (bpe.experiment.compile_ahead): the stamp that says a machine is warm, the
helpers' start and stop, and what a warmed process still compiles (nothing, for the ways it
warmed).

A default first run with an empty kernel cache is tested in tests/test_first_run.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from bpe.experiment import compile_ahead
from tests.conftest import DATA, ROOT

numba = pytest.importorskip("numba")


@pytest.fixture
def stamp(tmp_path, monkeypatch):
    """The stamp and its lock moved to a temporary folder."""
    path = tmp_path / "pycache" / "encoder_warm.json"
    path.parent.mkdir()
    monkeypatch.setattr(compile_ahead, "STAMP", path)
    monkeypatch.setattr(compile_ahead, "LOCK", path.with_suffix(".lock"))
    return path


def test_a_way_is_warm_only_for_its_key_and_while_its_cache_files_exist(stamp, tmp_path):
    index = tmp_path / "kernel.nbi"
    index.write_bytes(b"")
    key = compile_ahead.stamp_key()
    compile_ahead._record(key, "merges", [str(index)])
    compile_ahead._record(key, "cut", [])
    assert compile_ahead.warm_ways(key) == {"merges", "cut"}
    assert compile_ahead.warm_ways({**key, "cache_dir": "/elsewhere"}) == set()
    assert compile_ahead.warm_ways({**key, "numba": "0.0"}) == set()
    index.unlink()  # a cleared cache: the way is cold again
    assert compile_ahead.warm_ways(key) == {"cut"}


def test_a_corrupt_or_foreign_stamp_reads_as_cold(stamp):
    key = compile_ahead.stamp_key()
    for text in ("{", "[]", '{"entries": 3}', '{"entries": [{"key": 1, "ways": []}]}'):
        stamp.write_text(text, encoding="utf-8")
        assert compile_ahead.warm_ways(key) == set(), text
    stamp.write_text(json.dumps({"entries": [{"key": key, "ways": ["merges"]}]}), "utf-8")
    assert compile_ahead.warm_ways(key) == set()  # an older stamp's list: no files to check


def test_the_stamp_keeps_the_latest_keys(stamp):
    key = compile_ahead.stamp_key()
    for n in range(compile_ahead.STAMP_ENTRIES + 3):
        compile_ahead._record({**key, "cache_dir": str(n)}, "merges", [])
    entries = json.loads(stamp.read_text("utf-8"))["entries"]
    assert len(entries) == compile_ahead.STAMP_ENTRIES
    assert entries[-1]["key"]["cache_dir"] == str(compile_ahead.STAMP_ENTRIES + 2)


def test_a_warm_machine_starts_no_helper(stamp, monkeypatch):
    monkeypatch.setattr(compile_ahead, "warm_ways", lambda key=None: {"merges", "cut"})
    assert compile_ahead.start(["merges", "cut"]) is None


def test_a_helper_runs_outside_the_process_tree_and_stops_when_told(stamp, tmp_path, monkeypatch):
    """What a failed run does with a helper it no longer needs: stop it, leave nothing."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "empty-cache"))  # it has work to do
    ahead = compile_ahead.start(["replay"])
    assert ahead is not None
    (helper,) = ahead.helpers
    proc = psutil.Process(helper.pid)
    assert helper.pid not in {p.pid for p in psutil.Process().children(recursive=True)}
    assert proc.nice() == 19 or _niced_soon(proc)
    ahead.stop()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _alive(proc):
        time.sleep(0.1)
    assert not _alive(proc)


def _niced_soon(proc: psutil.Process) -> bool:
    """The helper lowers its priority just after it detaches."""
    for _ in range(50):
        if proc.nice() == 19:
            return True
        time.sleep(0.05)
    return False


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


WARMED_THEN_ENCODED = """
import sys
from bpe.experiment.compile_ahead import warm_and_record
from bpe.util import compile_clock
warm_and_record(["merges", "cut"])
before = compile_clock.seconds()
from bpe.measures import gpt2_tokenizer
tok = gpt2_tokenizer()
text = open(sys.argv[1], encoding="utf-8").read()[:300_000]
tok.encode(text)
for doc in text.split("<|endoftext|>")[:50]:
    tok.encode(doc)
    tok.encode(doc, segmentation="fewest")
tok.encode(text, segmentation="longest_prefix")
print(compile_clock.seconds() - before)
"""


@pytest.mark.slow
def test_a_warmed_process_compiles_nothing_when_it_encodes_for_real(tmp_path):
    """The warm-up's argument types are those of real encodes: a process that warmed the two
    ways a default analysis uses compiles nothing more (GPT-2's vocab, real text, both the
    whole-text and the per-document path)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", WARMED_THEN_ENCODED, str(DATA / "owt_sample.txt")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert float(out.stdout.split()[-1]) == 0.0, out.stderr[-3000:]
