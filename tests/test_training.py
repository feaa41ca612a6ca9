"""train_bpe end to end: the CS336 reference, the Sennrich example, special tokens, bad input."""

from __future__ import annotations

import json
import time

import pytest

from bpe import train_bpe, train_bpe_detailed
from bpe.formats.gpt2_format import load_merges, unrender
from bpe.runs.stages import STAGE_TIMINGS
from tests.conftest import DATA, EOT, FIXTURES


def test_matches_cs336_reference(trainer_name):
    start = time.perf_counter()
    vocab, merges = train_bpe(FIXTURES / "corpus.en", 500, [EOT], trainer=trainer_name)
    elapsed = time.perf_counter() - start
    assert merges == load_merges(FIXTURES / "train-bpe-reference-merges.txt")
    reference = json.loads((FIXTURES / "train-bpe-reference-vocab.json").read_text("utf-8"))
    assert set(vocab.keys()) == set(reference.values())
    assert set(vocab.values()) == {unrender(k) for k in reference}
    if trainer_name == "heap":
        assert elapsed < 1.5  # the CS336 bound; the only timing assertion in the suite


def test_special_tokens_are_never_merged_into_other_tokens():
    vocab, _ = train_bpe(DATA / "tinystories_sample.txt", 1000, [EOT, "<|absent|>"])
    assert vocab[0] == EOT.encode() and vocab[1] == b"<|absent|>"
    with_marker = [tok for tok in vocab.values() if b"<|" in tok]
    assert sorted(with_marker) == sorted([EOT.encode(), b"<|absent|>"])


def test_detailed_result_has_stage_timings_and_counts(caplog):
    caplog.set_level("INFO", logger="bpe")  # stage 1 logs from bpe.pretokenize
    result = train_bpe_detailed(FIXTURES / "corpus.en", 400, [EOT], num_workers=1)
    assert list(result.timings) == list(STAGE_TIMINGS) == ["pretokenize", "merge"]
    assert "stage 1 (count pretokens):" in caplog.text
    assert "stages 2-3 (count pairs, select and merge) with heap: 143 merges" in caplog.text
    assert all(t >= 0 for t in result.timings.values())
    assert result.num_merges == 400 - 257 == len(result.merges)
    assert result.pretokenized.num_unique < result.pretokenized.num_pretokens
    assert result.pretokenized.num_bytes == (FIXTURES / "corpus.en").stat().st_size


def test_training_is_deterministic_across_worker_counts():
    one = train_bpe_detailed(DATA / "owt_sample.txt", 600, [EOT], num_workers=1)
    two = train_bpe_detailed(DATA / "owt_sample.txt", 600, [EOT], num_workers=2)
    assert one.merges_sha256 == two.merges_sha256
    assert one.vocab == two.vocab


def test_unknown_trainer_fails_before_reading(tmp_path):
    with pytest.raises(ValueError, match="unknown trainer 'quick'"):
        train_bpe(tmp_path / "missing.txt", 500, [EOT], trainer="quick")


def test_vocab_size_too_small_names_the_minimum():
    with pytest.raises(ValueError, match=r"vocab_size=200 is too small.*>= 257"):
        train_bpe(FIXTURES / "corpus.en", 200, [EOT])


def test_duplicate_special_tokens_are_rejected():
    with pytest.raises(ValueError, match="listed twice"):
        train_bpe(FIXTURES / "corpus.en", 300, [EOT, EOT])


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        train_bpe(tmp_path / "nothing.txt", 300, [EOT])


def test_file_with_only_special_tokens_is_refused_as_an_empty_corpus(tmp_path):
    path = tmp_path / "only.txt"
    path.write_text(EOT * 3, encoding="utf-8")
    with pytest.raises(ValueError, match="holds no text outside its special tokens"):
        train_bpe(path, 300, [EOT])


def _past_the_crossover(tmp_path):
    """Copies of the bundled sample, just past the size from which stage 1 starts workers."""
    from bpe.pretokenize.counting import REGEX_MIN_PARALLEL_BYTES

    sample = (DATA / "tinystories_sample.txt").read_bytes()
    corpus = tmp_path / "copies.txt"
    corpus.write_bytes(sample * (REGEX_MIN_PARALLEL_BYTES // len(sample) + 1))
    return corpus


def test_every_stage_records_its_cpu_time_workers_included(tmp_path):
    """With the default workers on text big enough to start them (copies of the bundled
    sample past `REGEX_MIN_PARALLEL_BYTES`), stage 1's CPU time includes the workers': more
    than the parent process spent on the whole call, as it mostly waits for them."""
    import resource

    corpus = _past_the_crossover(tmp_path)
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = train_bpe_detailed(corpus, 300, [EOT], num_workers=None)
    after = resource.getrusage(resource.RUSAGE_SELF)
    parent_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert set(result.cpu_timings) == set(result.timings) >= {"pretokenize", "merge"}
    assert result.pretokenized.num_workers == 2
    assert result.cpu_timings["pretokenize"] > parent_cpu


def test_a_real_run_forks_its_workers_and_counts_their_cpu(tmp_path):
    """`bpe-train` keeps one thread (its memory watcher is a process that writes to a file),
    so stage 1's workers fork and inherit the loaded scanner, where a fork server's imported
    Numba again each; their CPU time counts in stage 1's, at least most of what counting the
    same text in one process costs."""
    import json
    import resource

    from bpe.pretokenize import pretokenize
    from bpe.runs import layout, schema
    from tests.conftest import train_run

    corpus = _past_the_crossover(tmp_path)
    before = resource.getrusage(resource.RUSAGE_SELF)
    pretokenize(corpus, [EOT], num_workers=1)
    after = resource.getrusage(resource.RUSAGE_SELF)
    in_process = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    run = train_run(tmp_path / "exp", f"dataset.path={corpus}", "vocab_size=300", "cache=false")
    metrics = json.loads((run / layout.METRICS_FILE).read_text("utf-8"))
    assert schema.get(metrics, schema.WORKERS) == 2
    assert schema.get(metrics, schema.START_METHOD) == "fork"
    assert schema.get(metrics, schema.CPU_SECONDS_OF, stage="pretokenize") > 0.7 * in_process
