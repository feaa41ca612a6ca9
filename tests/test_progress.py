"""Progress at scale: INFO lines at a steady cadence in every stage, bars in MB and merges/s.

Real runs with a short `log_interval`: each stage logs its progress line (or a heartbeat where it
has nothing to count) at least once per interval, the lines say MB, MB/s, merges/s and ETA, and no
logging thread outlives the run. Cadence bounds are loose (a shared 2-core machine): a line is
missed only when the interval passes several times over without one.
"""

from __future__ import annotations

import logging
import re
import threading
import time

import pytest

from bpe.pipeline import train_bpe_detailed
from bpe.util.progress import MIN_MERGES_FOR_ETA, THREAD_NAME, Progress
from bpe.util.workers import start_method_for
from tests.conftest import DATA

EOT = "<|endoftext|>"
INTERVAL = 0.1


def _progress_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


def test_a_stage_without_ticks_still_logs_a_heartbeat_every_interval(caplog):
    logger = logging.getLogger("bpe.test_progress")
    with caplog.at_level(logging.INFO, logger="bpe.test_progress"):
        with Progress(
            "stage 3 (select and merge)",
            total=100,
            unit="merge",
            logger=logger,
            waiting="stage 2 (count pairs)",
            interval=INTERVAL,
        ) as meter:
            time.sleep(10 * INTERVAL)  # stage 2: no tick at all
            for _ in range(40):
                meter.update()
                time.sleep(INTERVAL / 5)
    lines = [r.getMessage() for r in caplog.records]
    beats = [m for m in lines if m.startswith("stage 2 (count pairs): still running, ")]
    merges = [m for m in lines if m.startswith("stage 3 (select and merge): merges ")]
    assert len(beats) >= 3 and len(merges) >= 1, lines
    line = r"stage 3 \(select and merge\): merges (\d+)/100, [\d.]+ merges/s, ETA (.*)"
    for m in merges:
        done, eta = re.fullmatch(line, m).groups()
        # an ETA only from enough merges (one merge says nothing about the rest)
        if int(done) < MIN_MERGES_FOR_ETA:
            assert eta == f"after {MIN_MERGES_FOR_ETA} merges", m
        else:
            assert re.fullmatch(r"[\d.]+ (s|min)", eta), m
    assert not _progress_threads()


def test_progress_rejects_a_non_positive_interval():
    with pytest.raises(ValueError, match="interval=0 must be > 0"):
        Progress("x", total=1, unit="B", logger=logging.getLogger("x"), interval=0)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """About 5 MB of real text: a second or more per stage, workers forked for stage 1."""
    path = tmp_path_factory.mktemp("progress") / "owt2.txt"
    path.write_bytes((DATA / "owt_sample.txt").read_bytes() * 2)
    return path


def test_a_real_run_logs_every_stage_at_the_interval_and_leaves_no_thread(
    caplog, corpus, monkeypatch
):
    # workers for this 5 MB corpus (the default starts them from 12 MiB): their start and the
    # clock's thread are what this checks
    monkeypatch.setattr("bpe.pretokenize.counting.REGEX_MIN_PARALLEL_BYTES", 0)
    method = start_method_for(2)  # fork when this process has one thread
    with caplog.at_level(logging.INFO, logger="bpe"):
        result = train_bpe_detailed(
            corpus, 3000, [EOT], trainer="heap", num_workers=2, log_interval=INTERVAL
        )
    assert not _progress_threads()
    assert (
        result.pretokenized.start_method == method
    )  # the clock's thread started after the workers
    records = [r for r in caplog.records if (r.module, r.funcName) == ("progress", "_run")]
    stage1 = [r.getMessage() for r in records if r.getMessage().startswith("stage 1 ")]
    stage3 = [r.getMessage() for r in records if r.getMessage().startswith("stage 3 ")]
    assert stage1 and stage3, [r.getMessage() for r in caplog.records]
    mb = re.compile(
        r"stage 1 \(count pretokens\): (\d+(\.\d)? MB of 5\.0 MB \(\d+%\), \d+\.\d MB/s, "
        r"ETA [\d.]+ (s|min)|still running, [\d.]+ s)"
    )
    assert all(mb.fullmatch(m) for m in stage1), stage1
    assert all(re.search(r"merges \d+/2743, [\d.]+ merges/s, ETA", m) for m in stage3), stage3
    # the cadence: about one line per interval (the median gap; a loaded machine can delay a
    # wake-up), and no long silence from the first line to the last, stage switch included
    times = [r.created for r in records]
    gaps = sorted(b - a for a, b in zip(times, times[1:]))
    assert 0.5 * INTERVAL <= gaps[len(gaps) // 2] <= 3 * INTERVAL, gaps
    assert gaps[-1] < 3.0, gaps
    total = sum(result.timings.values())
    assert len(records) >= 0.2 * total / INTERVAL, (len(records), total)


def test_bars_show_megabytes_per_second_and_merges_per_second(capsys, corpus):
    train_bpe_detailed(corpus, 400, [EOT], trainer="heap", num_workers=1, progress=True)
    err = capsys.readouterr().err
    assert re.search(r"stage 1 \(count pretokens\): 100%.*5\.\d+M/5\.\d+M .*B/s\]", err), err[-500:]
    assert re.search(r"stages 2-3 \(heap\): 100%.* 143/143 .*merge/s\]", err), err[-500:]
    assert not _progress_threads()
