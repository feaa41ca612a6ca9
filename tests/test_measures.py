"""Measures: documents, compression ratio, throughput, Pile projection, the GPT-2 baseline."""

from __future__ import annotations

import pytest

from bpe import Tokenizer
from bpe.corpus.documents import load_documents
from bpe.measures import (
    _gpt2_files,
    compression_ratio,
    gpt2_tokenizer,
    measure_throughput,
    pile_projection,
    tiktoken_gpt2_encoding,
)
from tests.conftest import DATA, EOT, FIXTURES


def _bytes_tokenizer() -> Tokenizer:
    return Tokenizer({i: bytes([i]) for i in range(256)}, [])


def test_load_documents_drops_separators_and_empty_documents(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_text(f"{EOT}one\n{EOT}{EOT}two{EOT} {EOT}", encoding="utf-8")
    assert load_documents(path) == ["one\n", "two", " "]
    assert load_documents(path, max_docs=2) == ["one\n", "two"]
    assert load_documents(path, separator="\n") == [f"{EOT}one", f"{EOT}{EOT}two{EOT} {EOT}"]


def test_file_without_separator_is_one_document():
    text = (FIXTURES / "german.txt").read_text(encoding="utf-8")
    assert load_documents(FIXTURES / "german.txt") == [text]


def test_sample_documents_have_no_separator_left():
    docs = load_documents(DATA / "tinystories_heldout.txt")
    raw = (DATA / "tinystories_heldout.txt").read_text(encoding="utf-8")
    assert len(docs) == len([d for d in raw.split(EOT) if d]) > 10
    assert not any(EOT in d for d in docs)


def test_load_documents_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        load_documents(tmp_path / "missing.txt")
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match="separator=''"):
        load_documents(tmp_path / "a.txt", separator="")
    with pytest.raises(ValueError, match="max_docs=-1"):
        load_documents(tmp_path / "a.txt", max_docs=-1)


def test_compression_ratio_of_a_bytes_only_tokenizer_is_one():
    assert compression_ratio(_bytes_tokenizer(), ["héllo wörld", "🙂"]) == 1.0


def test_gpt2_compression_ratio_matches_tiktoken_counts():
    pytest.importorskip("tiktoken")
    enc = tiktoken_gpt2_encoding()
    docs = load_documents(DATA / "owt_heldout.txt")
    expected = sum(len(d.encode()) for d in docs) / sum(len(enc.encode_ordinary(d)) for d in docs)
    ratio = compression_ratio(gpt2_tokenizer(), docs)
    assert ratio == pytest.approx(expected, rel=1e-12)
    assert 3.0 < ratio < 6.0  # GPT-2 on English web text: about 4.4 bytes per token


def test_compression_ratio_without_tokens_is_an_error():
    with pytest.raises(ValueError, match="gave no tokens"):
        compression_ratio(_bytes_tokenizer(), [])


def test_measure_throughput_reports_consistent_numbers():
    tok = gpt2_tokenizer()
    docs = load_documents(DATA / "tinystories_heldout.txt", max_docs=20)
    result = measure_throughput(tok, docs, min_seconds=0.0)
    num_bytes = sum(len(d.encode("utf-8")) for d in docs)
    assert result["num_bytes"] == num_bytes
    assert result["num_tokens"] == sum(len(tok.encode(d)) for d in docs)
    assert result["passes"] >= 2
    assert result["bytes_per_second"] == pytest.approx(num_bytes / result["seconds"])
    assert result["first_pass_bytes_per_second"] > 0
    assert tok.cached_pretokens > 0  # the passes filled the cache...
    tok.clear_cache()
    assert tok.cached_pretokens == 0  # ...which can be emptied without changing any id
    assert sum(len(tok.encode(d)) for d in docs) == result["num_tokens"]


def test_measure_throughput_errors():
    with pytest.raises(ValueError, match="no text"):
        measure_throughput(_bytes_tokenizer(), [""])
    with pytest.raises(ValueError, match="max_passes=1"):
        measure_throughput(_bytes_tokenizer(), ["a"], max_passes=1)


def test_pile_projection():
    day = pile_projection(825e9 / 86400)
    assert day["seconds"] == pytest.approx(86400)
    assert day["hours"] == pytest.approx(24) and day["days"] == pytest.approx(1)
    assert pile_projection(1e6, pile_bytes=2e6)["seconds"] == pytest.approx(2)
    with pytest.raises(ValueError, match="bytes_per_second=0"):
        pile_projection(0)


def test_gpt2_tokenizer_is_the_baseline():
    tok = gpt2_tokenizer()
    assert tok.vocab_size == 50257 and tok.special_tokens == {EOT: 50256}
    assert tok.encode("Hello, world!") == [15496, 11, 995, 0]
    assert gpt2_tokenizer() is tok  # loaded once per process


def test_missing_gpt2_files_are_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"vocab.json' is missing.*data/gpt2"):
        _gpt2_files(tmp_path)
