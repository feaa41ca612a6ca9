"""The Dask backend on a real cluster: identical counts and merges, the tree, failures, cleanup.

A real `LocalCluster` of two worker processes (one thread each) serves most tests through its
scheduler address, the way a user reaches a cluster dask-jobqueue started; the embedded default
(`scheduler=None`) is run by itself, in-process and through `bpe-train`. Workers really die
(`os._exit` inside a task) and a real closed port stands for an unreachable scheduler.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from bpe.corpus.chunks import plan_chunks
from bpe.corpus.datasets import load_named
from bpe.pipeline import train_bpe_detailed
from bpe.pretokenize import pretokenize
from bpe.pretokenize.dask_backend import (
    SPLIT_EVERY,
    TreeCount,
    check_backend,
    dask_cluster,
    merge_counts,
)
from bpe.text.patterns import GPT2_PATTERN
from bpe.text.specials import EOT
from bpe.util.io import DATA_DIR
from bpe.util.pool import Chunk
from tests.conftest import FAST_ANALYSIS, console_env
from tests.test_chunks import _count_chunk

distributed = pytest.importorskip("distributed")

SAMPLE = DATA_DIR / "tinystories_sample.txt"
#: small chunks, so the 1.3 MB sample makes a tree of more than one level
SMALL_CHUNKS = 48 * 1024
VOCAB = 290


@pytest.fixture(scope="module")
def scheduler():
    """The address of a running two-worker cluster (closed after this module's tests)."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def reference() -> Counter:
    """The sample's pretoken counts from the default (processes) backend."""
    return pretokenize(SAMPLE, [EOT], num_workers=2).counts


@pytest.fixture(scope="module")
def default_runs() -> dict:
    """TrainResult of the default backend per trainer, trained once for this module."""
    cache: dict = {}

    def get(trainer: str):
        if trainer not in cache:
            cache[trainer] = train_bpe_detailed(
                SAMPLE, VOCAB, [EOT], trainer=trainer, num_workers=2
            )
        return cache[trainer]

    return get


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_dask_counts_equal_the_processes_backend(scheduler, reference):
    got = pretokenize(
        SAMPLE, [EOT], backend="dask", scheduler=scheduler, max_chunk_bytes=SMALL_CHUNKS
    )
    assert got.num_chunks > SPLIT_EVERY  # a tree with more than one level of merges
    assert got.counts == reference
    assert (got.backend, got.scheduler, got.num_workers) == ("dask", scheduler, 2)


def test_dask_with_the_compiled_engine_counts_the_same(scheduler, reference):
    """Each Dask worker splits its chunks with the compiled scanner (loading it once)."""
    pytest.importorskip("numba")
    got = pretokenize(
        SAMPLE,
        [EOT],
        backend="dask",
        scheduler=scheduler,
        max_chunk_bytes=4 * SMALL_CHUNKS,
        engine="compiled",
    )
    assert got.counts == reference and got.engine == "compiled"


@pytest.mark.parametrize("trainer", ["naive", "indexed", "heap"])
def test_dask_merges_are_byte_identical(scheduler, default_runs, trainer):
    default = default_runs(trainer)
    dask = train_bpe_detailed(
        SAMPLE, VOCAB, [EOT], trainer=trainer, backend="dask", scheduler=scheduler
    )
    assert dask.merges == default.merges and dask.vocab == default.vocab
    d, p = dask.pretokenized, default.pretokenized
    assert (d.backend, d.scheduler) == ("dask", scheduler)
    assert (p.backend, p.scheduler) == ("processes", None)


def _die_once(context: tuple[str, tuple], chunk: Chunk) -> Counter:
    """Count a chunk, except that the first worker to get chunk 3 exits on the spot."""
    marker, inner = context
    if chunk.index == 3 and not os.path.exists(marker):
        Path(marker).touch()
        os._exit(17)  # no cleanup, no exception: the process is gone, as after SIGKILL
    return _count_chunk(inner, chunk)


def test_a_task_lost_with_its_worker_is_rerun_and_the_counts_stay_exact(
    scheduler, reference, tmp_path
):
    chunks = plan_chunks(SAMPLE, [EOT], max_chunk_bytes=SMALL_CHUNKS)
    marker = tmp_path / "died"
    with distributed.Client(scheduler) as client:
        before = set(client.scheduler_info()["workers"])
        context = (str(marker), (str(SAMPLE), (EOT,), GPT2_PATTERN))
        tree = TreeCount(client, _die_once, context, chunks, split_every=3)
        assert [c.index for c in tree] and marker.exists()
        assert tree.total == reference
        client.wait_for_workers(2, timeout=30)  # the nanny restarts the dead worker
        assert set(client.scheduler_info()["workers"]) != before


def test_a_failing_task_raises_its_own_error(scheduler, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"hello world " * 9000 + b"\xff\xfe broken " + b"more text " * 9000)
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=r"not valid UTF-8: bad byte\(s\) b'\\xff\\xfe.*offset"):
        pretokenize(bad, backend="dask", scheduler=scheduler, max_chunk_bytes=16 * 1024)
    assert time.monotonic() - t0 < 30


def test_an_unreachable_scheduler_fails_fast_naming_the_address():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    t0 = time.monotonic()
    with pytest.raises(ConnectionError) as err:  # train_bpe's path, with a shorter timeout
        with dask_cluster(address, connect_timeout=1):
            pass
    assert time.monotonic() - t0 < 10
    message = str(err.value)
    assert repr(address) in message and "pretokenize.scheduler=null" in message


def test_the_embedded_cluster_gives_identical_merges_and_leaves_no_process(default_runs):
    before = _children()
    dask = train_bpe_detailed(SAMPLE, VOCAB, [EOT], num_workers=2, backend="dask")
    assert dask.merges == default_runs("heap").merges
    stage1 = dask.pretokenized
    assert stage1.scheduler == "LocalCluster(2)" and stage1.num_workers == 2
    assert stage1.num_chunks >= 2  # one chunk per worker at least, even for a small file
    assert _children() <= before  # every worker and nanny of the LocalCluster is gone


def test_merge_counts_leaves_its_inputs_alone():
    a, b = Counter({b"x": 1}), Counter({b"x": 2, b"y": 3})
    assert merge_counts(a, b, Counter()) == Counter({b"x": 3, b"y": 3})
    assert a == Counter({b"x": 1}) and b == Counter({b"x": 2, b"y": 3})
    assert merge_counts() == Counter()


def test_backend_checks_name_the_value_and_the_fix():
    with pytest.raises(ValueError, match=r"choose one of \['processes', 'dask'\]"):
        check_backend("ray")
    with pytest.raises(ValueError, match="only used by the dask backend"):
        pretokenize(SAMPLE, [EOT], scheduler="tcp://head:8786")
    with pytest.raises(ValueError, match="scheduler address"):
        check_backend("dask", "  ")


def test_the_default_backend_never_imports_dask(tmp_path):
    code = (
        "import sys, bpe\n"
        "from bpe.util.io import DATA_DIR\n"
        "bpe.train_bpe(DATA_DIR / 'tinystories_sample.txt', 260, num_workers=1)\n"
        "assert not {'dask', 'distributed'} & set(sys.modules), 'dask was imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_bpe_train_with_the_dask_backend_defaults(tmp_path):
    """`bpe-train pretokenize.backend=dask` as a user types it: a LocalCluster of every CPU."""
    proc = subprocess.run(
        [
            "bpe-train",
            "pretokenize.backend=dask",
            "vocab_size=300",
            "progress=false",
            f"experiments_dir={tmp_path}",
            *FAST_ANALYSIS,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=console_env(),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    metrics_path = tmp_path / "latest" / "metrics.json"
    metrics = json.loads(metrics_path.read_text("utf-8"))
    assert metrics["status"] == "complete"
    assert metrics["backend"]["name"] == "dask"
    assert metrics["backend"]["scheduler"].startswith("LocalCluster(")
    # what bpe-train with no dataset override trains on: the default dataset's file
    default_input = load_named("tinystories_sample").path
    default = train_bpe_detailed(default_input, 300, [EOT], num_workers=2)
    assert metrics["merges_sha256"] == default.merges_sha256
    log = (metrics_path.parent / "train.log").read_text("utf-8")
    assert "dashboard http" in log and "worker(s)" in log
    # Dask's own INFO chatter stays out of the run log (its warnings may come through)
    assert "][distributed.nanny][INFO]" not in log and "][distributed.worker][INFO]" not in log
    analysis = (metrics_path.parent / "ANALYSIS.md").read_text("utf-8")
    assert "dask backend" in analysis


def test_dask_progress_is_logged_in_bytes(scheduler, caplog):
    caplog.set_level("INFO", logger="bpe.pretokenize")
    pretokenize(
        SAMPLE,
        [EOT],
        backend="dask",
        scheduler=scheduler,
        max_chunk_bytes=SMALL_CHUNKS,
        log_interval=0.01,
        label="stage 1 (count pretokens)",
    )
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("stage 1")]
    size_mb = f"of {SAMPLE.stat().st_size / 1e6:.1f} MB"
    # heartbeats until the first chunk completes, then bytes counted as chunks complete
    counted = [line for line in lines if size_mb in line]
    assert counted and all("MB/s" in line for line in counted), lines
