"""The pretoken cache: exact round trips, hits only for identical inputs, corrupt files rebuilt,
atomic writes under concurrent writers, and a real `bpe-train` sweep that pre-tokenizes once."""

from __future__ import annotations

import json
import logging
import multiprocessing
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.pipeline import train_bpe, train_bpe_detailed
from bpe.pretokenize import cache as pretoken_cache
from bpe.pretokenize import pretokenize
from bpe.pretokenize.cache import (
    CorruptCacheFile,
    cache_key,
    cache_path,
    load_counts,
    save_counts,
)
from bpe.pretokenize.counting import count_pretokens
from bpe.text.patterns import GPT2_PATTERN
from bpe.text.specials import EOT
from bpe.util.io import sha256_file
from tests.conftest import DATA, FAST_ANALYSIS, FIXTURES, ROOT, console_env

CORPUS = FIXTURES / "corpus.en"


def cache_files(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.glob("*.pretokens")) if cache_dir.is_dir() else []


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.binary(min_size=1, max_size=24), st.integers(1, 2**64 - 1), max_size=60))
def test_round_trip_gives_back_every_key_and_count(counts):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.pretokens"
        size = save_counts(path, Counter(counts), {"key": "k"})
        assert path.stat().st_size == size
        loaded, header = load_counts(path)
    assert loaded == Counter(counts) and isinstance(loaded, Counter)
    assert all(type(k) is bytes for k in loaded)
    assert header["num_unique"] == len(counts) and header["key"] == "k"


def test_round_trip_of_a_real_corpus(tmp_path):
    counts = count_pretokens(CORPUS.read_text("utf-8"), [EOT])
    save_counts(tmp_path / "x.pretokens", counts, {})
    assert load_counts(tmp_path / "x.pretokens")[0] == counts


@pytest.mark.parametrize("bad", [0, -1, 2**64])
def test_counts_outside_uint64_are_refused(tmp_path, bad):
    with pytest.raises(ValueError, match="counts must be in"):
        save_counts(tmp_path / "x.pretokens", Counter({b"a": bad}), {})
    assert not list(tmp_path.iterdir())  # nothing half written


def test_second_training_is_a_hit_with_identical_merges(tmp_path):
    cache = tmp_path / "cache"
    first = train_bpe_detailed(CORPUS, 400, [EOT], num_workers=1, cache_dir=cache)
    second = train_bpe_detailed(CORPUS, 400, [EOT], num_workers=1, cache_dir=cache)
    uncached = train_bpe_detailed(CORPUS, 400, [EOT], num_workers=1)
    assert first.pretoken_cache["status"] == "miss"
    assert second.pretoken_cache["status"] == "hit"
    assert uncached.pretoken_cache["status"] == "off" and uncached.input_sha256 is None
    assert first.pretoken_cache["key"] == second.pretoken_cache["key"]
    assert first.merges == second.merges == uncached.merges
    assert first.vocab == second.vocab
    a, b = first.pretokenized, second.pretokenized
    assert (a.num_pretokens, a.num_unique, a.num_bytes) == (
        b.num_pretokens,
        b.num_unique,
        b.num_bytes,
    )
    assert b.num_workers == 0 and b.start_method == "cache"
    assert second.input_sha256 == first.input_sha256 == sha256_file(CORPUS)
    (only,) = cache_files(cache)
    assert str(only) == first.pretoken_cache["path"] == second.pretoken_cache["path"]
    assert second.pretoken_cache["load_seconds"] > 0


def test_another_trainer_or_vocab_size_reuses_the_counts(tmp_path):
    cache = tmp_path / "cache"
    train_bpe_detailed(CORPUS, 300, [EOT], trainer="naive", num_workers=1, cache_dir=cache)
    again = train_bpe_detailed(CORPUS, 500, [EOT], trainer="heap", num_workers=1, cache_dir=cache)
    assert again.pretoken_cache["status"] == "hit"
    assert again.merges == train_bpe(CORPUS, 500, [EOT], num_workers=1)[1]


def test_key_changes_with_bytes_pattern_and_specials(tmp_path):
    cache = tmp_path / "cache"
    data = CORPUS.read_bytes()
    a = tmp_path / "a.txt"
    a.write_bytes(data)
    base = train_bpe_detailed(a, 300, [EOT], num_workers=1, cache_dir=cache).pretoken_cache
    changes = {
        "pattern": dict(pattern="cl100k"),
        "specials": dict(special_tokens=[EOT, "<|pad|>"]),
        "no specials": dict(special_tokens=[]),
    }
    keys = {base["key"]}
    for name, kwargs in changes.items():
        args = {"special_tokens": [EOT], **kwargs}
        result = train_bpe_detailed(a, 300, num_workers=1, cache_dir=cache, **args)
        assert result.pretoken_cache["status"] == "miss", name
        keys.add(result.pretoken_cache["key"])
    # one byte changed, same path, same size: a miss
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0x01
    a.write_bytes(bytes(flipped))
    result = train_bpe_detailed(a, 300, [EOT], num_workers=1, cache_dir=cache)
    assert result.pretoken_cache["status"] == "miss"
    keys.add(result.pretoken_cache["key"])
    assert len(keys) == 5 and len(cache_files(cache)) == 5
    # the specials' order does not matter; the code version does
    assert cache_key("0" * 64, GPT2_PATTERN, ["<|a|>", "<|b|>"]) == cache_key(
        "0" * 64, GPT2_PATTERN, ["<|b|>", "<|a|>"]
    )


def test_code_version_is_part_of_the_key(monkeypatch):
    before = cache_key("0" * 64, GPT2_PATTERN, [EOT])
    monkeypatch.setattr(pretoken_cache, "CODE_VERSION", pretoken_cache.CODE_VERSION + 1)
    assert cache_key("0" * 64, GPT2_PATTERN, [EOT]) != before


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_a_bit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) - 100] ^= 0x10  # inside the blob of pretoken bytes
    path.write_bytes(bytes(data))


def _flip_a_count(path: Path) -> None:
    # the first count sits right after the header: a count changed, every byte still plausible
    data = bytearray(path.read_bytes())
    head_len = int.from_bytes(data[8:12], "little")
    start = 12 + head_len + (-(12 + head_len)) % 8
    data[start] ^= 0x01
    path.write_bytes(bytes(data))


def _garbage(path: Path) -> None:
    path.write_bytes(b"not a cache file at all")


@pytest.mark.parametrize("damage", [_truncate, _flip_a_bit, _flip_a_count, _garbage])
def test_a_damaged_cache_file_is_detected_warned_and_rebuilt(tmp_path, caplog, damage):
    cache = tmp_path / "cache"
    first = train_bpe_detailed(CORPUS, 400, [EOT], num_workers=1, cache_dir=cache)
    (path,) = cache_files(cache)
    damage(path)
    with pytest.raises(CorruptCacheFile):
        load_counts(path)
    with caplog.at_level(logging.WARNING, logger="bpe.pretokenize.cache"):
        again = train_bpe_detailed(CORPUS, 400, [EOT], num_workers=1, cache_dir=cache)
    assert again.pretoken_cache["status"] == "rebuilt"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(path) in warnings[0].getMessage()
    assert again.merges == first.merges
    assert load_counts(path)[0] == pretokenize(CORPUS, [EOT], num_workers=1).counts
    third = train_bpe_detailed(CORPUS, 400, [EOT], num_workers=1, cache_dir=cache)
    assert third.pretoken_cache["status"] == "hit" and third.merges == first.merges


def test_no_cache_dir_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(CORPUS.read_bytes())
    train_bpe(corpus, 400, [EOT], num_workers=1)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["c.txt"]


def test_an_unwritable_cache_is_logged_and_the_run_goes_on(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with caplog.at_level(logging.WARNING, logger="bpe.pretokenize.cache"):
        result = train_bpe_detailed(CORPUS, 300, [EOT], num_workers=1, cache_dir=blocker / "c")
    assert result.pretoken_cache["status"] == "miss" and result.pretoken_cache["path"] is None
    assert "could not write the pretoken cache file" in caplog.text
    assert result.merges == train_bpe(CORPUS, 300, [EOT], num_workers=1)[1]


def test_an_input_that_changes_while_counting_is_not_cached(tmp_path, caplog):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(CORPUS.read_bytes())

    def count_while_appending():
        counted = pretokenize(corpus, [EOT], num_workers=1)
        with open(corpus, "ab") as f:  # another process appending to the corpus meanwhile
            f.write(b" more text")
        return counted

    with caplog.at_level(logging.WARNING, logger="bpe.pretokenize.cache"):
        _, info, _ = pretoken_cache.pretokenize_cached(
            corpus,
            [EOT],
            pattern=GPT2_PATTERN,
            cache_dir=tmp_path / "cache",
            count=count_while_appending,
        )
    assert info.status == "miss" and info.path is None
    assert "changed while it was being pre-tokenized" in caplog.text
    assert not cache_files(tmp_path / "cache")


def test_a_half_written_temp_file_is_never_read(tmp_path):
    cache = tmp_path / "cache"
    key = cache_key(sha256_file(CORPUS), GPT2_PATTERN, [EOT])
    target = cache_path(cache, key)
    save_counts(target, Counter({b"x": 1}), {"key": key})
    half = target.read_bytes()[:-40]
    target.unlink()
    # what a writer killed mid-write leaves: its temp file beside the target (bpe.util.io naming)
    (cache / f".{target.name}.abc123.tmp").write_bytes(half)
    result = train_bpe_detailed(CORPUS, 300, [EOT], num_workers=1, cache_dir=cache)
    assert result.pretoken_cache["status"] == "miss"
    assert load_counts(target)[0] == pretokenize(CORPUS, [EOT], num_workers=1).counts


def _writer(path: str, seed: int, rounds: int) -> None:
    counts = Counter({f"w{i}".encode() * (1 + (i + seed) % 7): i + 1 for i in range(20000)})
    for _ in range(rounds):
        save_counts(path, counts, {"key": "same"})


def test_concurrent_writers_never_expose_a_partial_file(tmp_path):
    """Two processes write the same key over and over while this one reads it."""
    target = tmp_path / "k.pretokens"
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_writer, args=(str(target), s, 15)) for s in (0, 0)]
    for w in writers:
        w.start()
    loads = 0
    try:
        while any(w.is_alive() for w in writers):
            try:
                counts, header = load_counts(target)  # a CorruptCacheFile here fails the test
            except FileNotFoundError:
                continue
            assert len(counts) == 20000 and header["key"] == "same"
            loads += 1
    finally:
        for w in writers:
            w.join(timeout=60)
    assert [w.exitcode for w in writers] == [0, 0]
    assert load_counts(target)[0][b"w0"] == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert loads > 0


def _sweep(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "-m",
            f"experiments_dir={tmp_path}",
            f"dataset.path={DATA / 'tinystories_sample.txt'}",
            "progress=false",
            *FAST_ANALYSIS,
            *overrides,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env=console_env(),
    )


def test_a_vocab_sweep_pretokenizes_once(tmp_path):
    """Default num_workers on the bundled TinyStories sample: job 0 counts, job 1 loads.

    ladder=false: a sweep over vocab_size alone is otherwise one training cut at each rung
    (tests/test_ladder.py); here each job trains, and the second finds the first's counts.
    """
    proc = _sweep(tmp_path, "vocab_size=300,400", "ladder=false")
    assert proc.returncode == 0, proc.stderr
    (sweep_dir,) = tmp_path.glob("sweeps/*")
    job_dirs = sorted(p.parent for p in sweep_dir.glob("*/metrics.json"))
    jobs = [json.loads((d / "metrics.json").read_text("utf-8")) for d in job_dirs]
    assert [j["status"] for j in jobs] == ["complete", "complete"]
    assert [j["pretoken_cache"]["status"] for j in jobs] == ["miss", "hit"]
    keys = {j["pretoken_cache"]["key"] for j in jobs}
    assert len(keys) == 1
    (cached,) = cache_files(tmp_path / ".cache" / "pretokens")
    assert cached.name == f"{keys.pop()}.pretokens"
    assert jobs[0]["counts"]["pretokens"] == jobs[1]["counts"]["pretokens"]
    # the lineage reuses training's hash instead of reading the corpus again
    sha = sha256_file(DATA / "tinystories_sample.txt")
    for job in jobs:
        assert job["lineage"]["input"] == {
            **job["lineage"]["input"],
            "sha256": sha,
            "hashed_by": "training",
        }
    hit_report = (job_dirs[1] / "ANALYSIS.md").read_text("utf-8")
    miss_report = (job_dirs[0] / "ANALYSIS.md").read_text("utf-8")
    assert "**cache hit**: loaded in" in hit_report and "MB/s (pretoken cache" not in hit_report
    assert "MB/s (pretoken cache: miss" in miss_report
    sweep_md = (sweep_dir / "SWEEP.md").read_text("utf-8")
    assert "¹ Pretoken cache hit" in sweep_md
    assert "pretokens" not in {p.name for p in tmp_path.iterdir()}  # only under .cache/


def test_cache_false_counts_every_time_and_writes_no_cache(tmp_path):
    proc = _sweep(tmp_path, "vocab_size=300", "cache=false", "num_workers=1")
    assert proc.returncode == 0, proc.stderr
    (path,) = tmp_path.glob("sweeps/*/*/metrics.json")
    metrics = json.loads(path.read_text("utf-8"))
    assert metrics["pretoken_cache"]["status"] == "off"
    assert metrics["lineage"]["input"]["hashed_by"] == "lineage"
    assert not (tmp_path / ".cache").exists()


def test_help_lists_the_cache_keys():
    proc = subprocess.run(
        [sys.executable, "-m", "bpe.cli.train", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0
    lines = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith("  ")}
    assert "cache" in lines and "cache_dir" in lines


@pytest.mark.parametrize("big", [2**31 + 5, 2**32 + 1, 2**40])
def test_stage_1_counts_past_32_bits_never_wrap(tmp_path, big):
    """Pretoken counts of a corpus of tens of GB pass 2**31 (" the" alone): the compiled
    scanner's table (int64 slots), the cache file (uint64) and the sum over chunks keep them
    exact. The table is given a count near `big` and then counts on."""
    pytest.importorskip("numba")
    from bpe.pretokenize.engines import PretokenTable, load_scanner
    from bpe.pretokenize.scan_kernels import TALLY

    load_scanner()
    table = PretokenTable()
    table.add(["the the the cat"])  # " the" twice
    the = next(s for s in range(len(table.slots)) if table.slots[s, TALLY] >> 8 == 2)
    # as if the text so far held `big - 2` of them (a tally is count << 8 | length)
    table.slots[the, TALLY] = (big - 2) << 8 | table.slots[the, TALLY] & 0xFF
    table.add(["the cat the"])
    counts = table.counts()
    assert counts[b"the"] == 1 + 1 and counts[b" the"] == big - 2 + 1
    assert counts[b" cat"] == 2
    path = tmp_path / "big.pretokens"
    save_counts(path, counts, {"key": "k"})
    loaded, _ = load_counts(path)
    assert loaded == counts
    merged = Counter(loaded)
    merged.update(loaded)  # two chunks' counts summed, as the parent sums them
    assert merged[b" the"] == 2 * (big - 1)
