"""The chunk pipeline: safe cuts (proved by hypothesis), bounded chunks, the worker policy, and
worker processes that die, fail to start or are interrupted, tried with real processes and signals.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.corpus.chunks import plan_chunks, read_chunk_text
from bpe.corpus.parts import plan_work
from bpe.corpus.sources import resolve_source
from bpe.pretokenize import pretokenize
from bpe.pretokenize.counting import count_pretokens
from bpe.text.cuts import safe_cuts
from bpe.text.patterns import GPT2_PATTERN, GPT2_REGEX
from bpe.text.pretokens import find_pretokens
from bpe.util.pool import Chunk, ChunkWorkerError, map_chunks
from bpe.util.workers import WorkerPlan, default_num_workers, fair_share
from tests.conftest import DATA, EOT, ROOT, sigint_as_in_a_terminal

# ---------------------------------------------------------------------------------------------
# Safe cuts
# ---------------------------------------------------------------------------------------------

# Letters, digits, punctuation, apostrophes (contractions), spaces of several kinds, CJK,
# Cyrillic, emoji and combining marks: every class boundary the GPT-2 pattern knows.
_PIECES = list("aZé'sdmtlvre09٣²½.,!?-+/=「」。、") + [
    " ",
    "  ",
    "\n",
    "\t",
    "\r\n",
    "\u00a0",
    "\u3000",
    "日本",
    "語",
    "Привет",
    "мир",
    "🙂",
    "👍🏽",
    "e\u0301",
    "'ll",
    "'ve",
    "'re",
    "x'",
    "1'",
    "''",
]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_every_safe_cut_leaves_the_pretokens_unchanged(text):
    """The proof in bpe.corpus.chunks (`_CUT`) checked: cutting at any safe cut changes no
    pretoken."""
    whole = GPT2_REGEX.findall(text)
    for k in safe_cuts(text):
        assert 0 < k < len(text)
        left, right = text[:k], text[k:]
        assert GPT2_REGEX.findall(left) + GPT2_REGEX.findall(right) == whole, (text, k)
        assert find_pretokens(left) + find_pretokens(right) == whole, (text, k)


def test_a_contraction_is_never_cut_but_a_letter_digit_change_is():
    assert list(safe_cuts("x's")) == [1]  # before the apostrophe, never between ' and s
    assert list(safe_cuts("ab12")) == [2]
    assert list(safe_cuts("мир日本。x")) == [5, 6]  # letters run on across scripts
    assert list(safe_cuts("  a")) == []  # never after whitespace


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_a_base64_line_is_cut_into_bounded_chunks_with_the_same_counts(tmp_path):
    line = base64.b64encode(os.urandom(600_000))  # 800 KB, one line, no space, no special
    path = _write(tmp_path / "b64.txt", line)
    chunks = plan_chunks(path, max_chunk_bytes=64 * 1024, window_bytes=64 * 1024)
    assert len(chunks) >= 12
    assert max(c.size for c in chunks) <= 2 * 64 * 1024
    counted = pretokenize(path, num_workers=2, max_chunk_bytes=64 * 1024)
    assert counted.counts == count_pretokens(line.decode())


@pytest.mark.parametrize(
    "text",
    [
        "Съешь же ещё этих мягких французских булок да выпей чаю\n",  # Cyrillic, no ASCII marks
        "我能吞下玻璃而不伤身体。私はガラスを食べられます、それは私を傷つけません。",  # CJK
    ],
)
def test_text_without_ascii_punctuation_is_still_cut(tmp_path, text):
    path = _write(tmp_path / "t.txt", (text * 4000).encode())
    chunks = plan_chunks(path, max_chunk_bytes=16 * 1024, window_bytes=4096)
    assert len(chunks) >= path.stat().st_size // (16 * 1024)
    got: Counter[bytes] = Counter()
    data = path.read_bytes()
    for c in chunks:
        got.update(count_pretokens(data[c.start : c.end].decode("utf-8")))
    assert got == count_pretokens(text * 4000)


def test_a_chunk_without_any_safe_cut_is_a_warning(tmp_path, caplog):
    path = _write(tmp_path / "a.txt", b"a" * 50_000)
    with caplog.at_level(logging.WARNING, logger="bpe.corpus.chunks"):
        chunks = plan_chunks(path, max_chunk_bytes=1000, window_bytes=1000)
    assert len(chunks) == 1
    assert "no safe cut" in caplog.text and "chunk 0 (bytes 0-50000)" in caplog.text


# ---------------------------------------------------------------------------------------------
# Worker policy
# ---------------------------------------------------------------------------------------------


def test_num_workers_is_capped_at_the_usable_cpus_and_the_chunks(tmp_path, caplog):
    path = DATA / "owt_sample.txt"
    with caplog.at_level(logging.INFO, logger="bpe"):
        chunks, workers = plan_work(
            resolve_source(path), [EOT], num_workers=1000, max_chunk_bytes=4 << 20
        )
    assert workers.workers <= min(default_num_workers(), len(chunks))
    assert f"num_workers=1000 capped at {default_num_workers()}: the usable CPUs" in caplog.text
    result = pretokenize(path, [EOT], num_workers=1000)
    assert result.num_workers <= default_num_workers()
    assert result.counts == pretokenize(path, [EOT], num_workers=1).counts


def test_fair_share_keeps_jobs_times_workers_within_the_cpus():
    cpus = default_num_workers()
    for n_jobs in (-1, 1, 2, 3, cpus, 2 * cpus):
        at_once = n_jobs if n_jobs > 0 else cpus
        assert fair_share(n_jobs) >= 1
        assert fair_share(n_jobs) * min(at_once, cpus) <= max(cpus, min(at_once, cpus))


def test_a_daemonic_process_counts_in_process(tmp_path):
    """A multiprocessing.Pool worker may not have children: counting falls back, and works."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(1) as pool:
        method, counts = pool.apply(_count_in_daemon, (str(DATA / "owt_sample.txt"),))
    assert method == "in-process"
    assert counts == pretokenize(DATA / "owt_sample.txt", [EOT], num_workers=1).counts


def _count_chunk(context: tuple[str, tuple[str, ...], str], chunk: Chunk) -> Counter[bytes]:
    """A chunk's pretoken counts: what a worker of the pool runs (any function would do)."""
    path, specials, pattern = context
    text = read_chunk_text(path, chunk.start, chunk.end)
    return count_pretokens(text, specials, pattern=pattern)


def _count_in_daemon(path: str) -> tuple[str, Counter[bytes]]:
    result = pretokenize(path, [EOT], num_workers=2)
    return result.start_method, result.counts


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_counts_are_identical_for_every_start_method(method):
    path = DATA / "owt_sample.txt"
    chunks, _ = plan_work(resolve_source(path), [EOT], num_workers=1, max_chunk_bytes=256 * 1024)
    context = (str(path), (EOT,), GPT2_PATTERN)
    total: Counter[bytes] = Counter()
    for counts in map_chunks(_count_chunk, context, chunks, WorkerPlan(2, method), ordered=False):
        total.update(counts)
    assert total == pretokenize(path, [EOT], num_workers=1).counts


def _size_of(context, chunk: Chunk) -> tuple[int, int]:
    return chunk.index, chunk.size * context


def test_ordered_map_yields_in_chunk_order():
    chunks = [Chunk(i, i * 10, i * 10 + i) for i in range(12)]
    got = list(map_chunks(_size_of, 3, chunks, WorkerPlan(2, "fork"), ordered=True))
    assert got == [(i, 3 * i) for i in range(12)]


class _Unpicklable:
    """Pickles fine here; unpickling it (in a spawned worker) raises, so the worker cannot start."""

    def __reduce__(self):
        return (_refuse, ())


def _refuse():
    raise RuntimeError("this worker refuses to start")


def test_a_worker_that_cannot_start_fails_at_once_and_is_not_retried():
    chunks = [Chunk(i, 0, 1) for i in range(4)]
    t0 = time.monotonic()
    with pytest.raises(ChunkWorkerError, match="could not start .*exited with code 1"):
        list(map_chunks(_size_of, _Unpicklable(), chunks, WorkerPlan(2, "spawn"), ordered=True))
    assert time.monotonic() - t0 < 30
    assert not _workers_of(psutil.Process()), "a worker outlived the map"


def test_an_error_in_a_worker_is_raised_here_and_stops_the_workers():
    chunks = [Chunk(i, 0, 1) for i in range(6)]
    with pytest.raises(TypeError):
        list(map_chunks(_size_of, None, chunks, WorkerPlan(2, "fork"), ordered=False))
    assert not _workers_of(psutil.Process())


# ---------------------------------------------------------------------------------------------
# Real processes, real signals: kill -9 a worker, Ctrl-C the parent
# ---------------------------------------------------------------------------------------------

needs_two_cpus = pytest.mark.skipif(
    default_num_workers() < 2, reason="needs 2 usable CPUs to run 2 workers"
)


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory) -> Path:
    """About 40 MB of real text built from the bundled samples."""
    path = tmp_path_factory.mktemp("big") / "corpus40.txt"
    sample = (DATA / "owt_sample.txt").read_bytes() + (DATA / "tinystories_sample.txt").read_bytes()
    with open(path, "wb") as f:
        for _ in range(-(-40_000_000 // len(sample))):
            f.write(sample)
    return path


def _workers_of(main: psutil.Process) -> list[psutil.Process]:
    """Chunk workers: forked children of main, or children of its fork server."""
    found = []
    for child in main.children():
        try:
            cmd = " ".join(child.cmdline())
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue  # a short-lived helper (a probe, a finished child) that already exited
        if "forkserver" in cmd:
            found += child.children()
        elif "resource_tracker" not in cmd:
            found.append(child)
    return found


def _holds_a_chunk(worker: psutil.Process) -> bool:
    """A worker names itself `bpe-chunk-<index>` once it holds a chunk (see
    bpe.corpus.chunks)."""
    try:
        return worker.name().startswith("bpe-chunk-")
    except psutil.NoSuchProcess:
        return False


def _wait_for_workers(proc: subprocess.Popen, n: int, timeout: float = 60) -> list:
    main = psutil.Process(proc.pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        workers = _workers_of(main)
        busy = [w for w in workers if _holds_a_chunk(w)]
        if len(busy) >= n:
            return busy  # started, reported ready and working on a chunk each
        time.sleep(0.1)
    raise AssertionError(f"no {n} workers appeared within {timeout} s")


def _descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def _assert_gone(procs: list[psutil.Process], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    alive = procs
    while time.monotonic() < deadline:
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return
        time.sleep(0.2)
    raise AssertionError(f"left running: {[(p.pid, p.cmdline()) for p in alive]}")


_PRETOKENIZE = textwrap.dedent(
    """
    import sys
    from bpe.pretokenize import pretokenize
    pretokenize(sys.argv[1], ["<|endoftext|>"], num_workers=2)
    """
)


def _kill_9_one_worker(cmd: list[str]) -> tuple[int, str, float]:
    """Run cmd, SIGKILL one of its 2 chunk workers; return exit code, output, seconds to exit."""
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        victim = _wait_for_workers(proc, 2)[0]
        others = _descendants(proc.pid)
        t0 = time.monotonic()
        victim.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        proc.kill()
    _assert_gone(others)
    return proc.returncode, out, elapsed


@needs_two_cpus
def test_kill_9_of_a_worker_fails_the_count_within_seconds_naming_chunk_and_signal(big_corpus):
    code, out, elapsed = _kill_9_one_worker([sys.executable, "-c", _PRETOKENIZE, str(big_corpus)])
    assert code != 0 and elapsed < 30
    assert "ChunkWorkerError" in out and "SIGKILL" in out, out
    assert "part " in out and ", bytes " in out, out  # the part, its file and its bytes


@needs_two_cpus
def test_ctrl_c_during_the_pool_stops_everything_without_deadlock(big_corpus):
    proc = subprocess.Popen(
        [sys.executable, "-c", _PRETOKENIZE, str(big_corpus)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=sigint_as_in_a_terminal,
    )
    try:
        _wait_for_workers(proc, 2)
        others = _descendants(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert "KeyboardInterrupt" in err
    _assert_gone(others)


@needs_two_cpus
def test_kill_9_of_a_training_worker_marks_the_run_failed(big_corpus, tmp_path):
    import json

    code, out, elapsed = _kill_9_one_worker(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            f"experiments_dir={tmp_path}",
            "progress=false",
            f"dataset.path={big_corpus}",
            "num_workers=2",
            "vocab_size=300",
        ]
    )
    assert code != 0 and elapsed < 30, out
    (metrics_path,) = tmp_path.glob("*/metrics.json")
    metrics = json.loads(metrics_path.read_text("utf-8"))
    assert metrics["status"] == "failed"
    message = metrics["error"]["message"]  # names the lost part's byte range
    assert "SIGKILL" in message and re.search(r"bytes \d+-\d+\)", message), message


@needs_two_cpus
def test_kill_9_of_an_encode_worker_exits_non_zero_without_output(big_corpus, tmp_path):
    from bpe import train_bpe
    from bpe.formats.gpt2_format import save_tokenizer_files
    from tests.conftest import FIXTURES

    vocab, merges = train_bpe(FIXTURES / "corpus.en", 400, [EOT], num_workers=1)
    save_tokenizer_files(vocab, merges, tmp_path)
    out = tmp_path / "ids.npy"
    code, log, elapsed = _kill_9_one_worker(
        [
            sys.executable,
            "-m",
            "bpe.cli.encode",
            "--tokenizer",
            str(tmp_path),
            "--input",
            str(big_corpus),
            "--out",
            str(out),
            "--num-workers",
            "2",
            "--no-progress",
        ]
    )
    assert code == 1 and elapsed < 30, log
    assert "SIGKILL" in log and "no output was written" in log, log
    assert not out.exists()
    assert not list(tmp_path.glob("*.npy*")), "a temporary file was left behind"


def test_a_forked_worker_exits_when_its_parent_dies_though_it_holds_the_parent_s_pipe_end():
    """A worker forked after its pipe was made holds the parent's end too, so the parent's
    death brings it no end-of-file; it must notice the parent is gone (a SIGTERM to
    `bpe-encode` while it forked left such a worker waiting forever, holding its stderr)."""
    script = textwrap.dedent(
        """
        import multiprocessing as mp, os, sys, time
        from bpe.util.pool import _worker_main
        ctx = mp.get_context("fork")
        parent_end, child_end = ctx.Pipe()
        proc = ctx.Process(target=_worker_main, args=(child_end, None, None, os.getpid()))
        proc.start()
        parent_end.recv()  # ready
        print(proc.pid, flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    worker = int(parent.stdout.readline())
    parent.kill()
    parent.wait(timeout=30)
    deadline = time.monotonic() + 20
    while psutil.pid_exists(worker) and time.monotonic() < deadline:
        try:
            if psutil.Process(worker).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    alive = psutil.pid_exists(worker) and psutil.Process(worker).status() != "zombie"
    if alive:
        os.kill(worker, signal.SIGKILL)
    assert not alive, "the orphaned worker still waits for a chunk"


def test_a_cut_past_the_first_look_is_still_found():
    """`_char_cut` searches the region's first bytes before the whole of it: a first cut past
    them (a long run of letters, of multi-byte letters cut by the look's end) is the same."""
    from bpe.text.cuts import FIRST_LOOK, _char_cut

    for run in ("a" * (FIRST_LOOK + 10), "é" * FIRST_LOOK, "a" * (FIRST_LOOK - 1)):
        region = (run + ", world").encode("utf-8")
        assert _char_cut(region) == len(run.encode("utf-8"))
    assert _char_cut(("a" * (3 * FIRST_LOOK)).encode("utf-8")) is None  # no cut at all
