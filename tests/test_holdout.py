"""Held-out documents: the last documents of an input, never trained on, measured exactly.

Real files only (text, gzip'd text, JSON lines compressed by zstandard, parquet written by
pyarrow with several row groups, several shards), made from the bundled OWT sample's
documents. For each, training up to the stop gives the merges of a text file holding only the
first documents, and the held-out documents are exactly the rest.
"""

from __future__ import annotations

import dataclasses
import gzip

import pytest

from bpe.pretokenize import EOT
from bpe.pretokenize.cache import cache_key
from bpe.pretokenize.corpus import pretokenize_corpus
from bpe.pretokenize.readers import find_holdout, iter_documents, plan_parts, resolve_source
from bpe.training import train_bpe, train_bpe_detailed
from tests.test_readers import parquet_shards, sample_docs, write_jsonl, write_parquet, write_text

pytest.importorskip("pyarrow")
pytest.importorskip("zstandard")

DOCS = 120


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, object]:
    """The same 120 documents as text, txt.gz, jsonl.zst, parquet and a folder of shards."""
    docs = sample_docs(DOCS)
    d = tmp_path_factory.mktemp("holdout")
    out: dict[str, object] = {"text": write_text(d / "docs.txt", docs)}
    with gzip.open(d / "docs.txt.gz", "wb") as f:
        f.write(EOT.join(docs).encode("utf-8"))
    out["txt.gz"] = d / "docs.txt.gz"
    out["jsonl.zst"] = write_jsonl(d / "docs.jsonl.zst", docs)
    out["parquet"] = write_parquet(d / "docs.parquet", docs, rows_per_group=7)
    out["shards"] = parquet_shards(d / "shards", docs, shards=4)
    # a last shard smaller than the held-out budget: the held-out documents span two files
    out["small last file"] = [
        write_text(d / "a.txt", docs[:100]),
        write_jsonl(d / "b.jsonl", docs[100:118]),
        write_text(d / "c.txt", docs[118:]),
    ]
    return out


NAMES = ["text", "txt.gz", "jsonl.zst", "parquet", "shards", "small last file"]


def held(source, *, fraction=0.1, max_bytes=1 << 20):
    corpus = resolve_source(source)
    return corpus, find_holdout(corpus, EOT, fraction=fraction, max_bytes=max_bytes)


@pytest.mark.parametrize("name", NAMES)
def test_training_stops_before_the_held_out_documents(inputs, name, tmp_path):
    docs = sample_docs(DOCS)
    corpus, holdout = held(inputs[name], fraction=0.12)
    assert holdout is not None
    n = holdout.stop.docs
    assert 1 <= n < DOCS
    assert list(holdout.docs) == docs[DOCS - n :]
    assert holdout.stop.bytes == sum(len(d.encode()) for d in docs[DOCS - n :])
    training = dataclasses.replace(corpus, stop=holdout.stop)
    assert list(iter_documents(training, EOT)) == docs[: DOCS - n]
    reference = write_text(tmp_path / "first.txt", docs[: DOCS - n])
    expected = pretokenize_corpus(resolve_source(reference), [EOT], num_workers=1).counts
    for chunk in (4 << 10, 1 << 20):  # many parts (cut at the stop) and one
        got = pretokenize_corpus(training, [EOT], num_workers=2, max_chunk_bytes=chunk)
        assert got.counts == expected


def test_the_budget_is_a_fraction_of_the_input_with_a_cap(inputs):
    docs = sample_docs(DOCS)
    corpus, small = held(inputs["text"], fraction=0.05)
    _, large = held(inputs["text"], fraction=0.2)
    _, capped = held(inputs["text"], fraction=0.2, max_bytes=10_000)
    assert small.stop.docs < large.stop.docs
    assert (
        small.stop.bytes
        <= 0.05 * corpus.num_bytes
        < small.stop.bytes + len(docs[-1 - small.stop.docs])
    )
    assert capped.stop.bytes <= 10_000
    assert held(inputs["text"], fraction=0.0)[1] is None
    with pytest.raises(ValueError, match="heldout_fraction"):
        held(inputs["text"], fraction=1.0)


def test_nothing_is_held_out_of_a_single_document(tmp_path):
    one = write_text(tmp_path / "one.txt", ["only one document"])
    assert held(one, fraction=0.5)[1] is None
    two = write_text(tmp_path / "two.txt", ["first", "second"])
    corpus, holdout = held(two, fraction=0.99)
    assert holdout.docs == ("second",)
    assert holdout.stop.offset == len(f"first{EOT}".encode())


def test_a_last_document_larger_than_the_budget_holds_nothing_out(tmp_path):
    path = write_text(tmp_path / "big.txt", ["short"] * 10 + ["x" * 5000])
    assert held(path, fraction=0.5, max_bytes=1000)[1] is None


@pytest.mark.parametrize("name", ["parquet", "shards"])
def test_parquet_parts_stop_inside_a_row_group(inputs, name):
    corpus, holdout = held(inputs[name], fraction=0.12)
    training = dataclasses.replace(corpus, stop=holdout.stop)
    parts = plan_parts(training, [EOT], max_chunk_bytes=1)
    assert holdout.stop.unit == "rows"
    assert all(p.file <= holdout.stop.file for p in parts)
    assert holdout.stop.offset % 7 != 0 or name == "shards"  # not on a row group boundary


def test_the_pretoken_cache_key_covers_the_stop(inputs, tmp_path):
    keys = set()
    for fraction in (0.05, 0.12):
        corpus, holdout = held(inputs["text"], fraction=fraction)
        keys.add(cache_key("00" * 32, "p", [EOT], stop=holdout.stop.as_dict()))
    keys.add(cache_key("00" * 32, "p", [EOT]))
    assert len(keys) == 3
    corpus, holdout = held(inputs["jsonl.zst"], fraction=0.12)
    cache = tmp_path / "cache"
    whole = train_bpe_detailed(corpus, 300, [EOT], num_workers=1, cache_dir=cache)
    part = dataclasses.replace(corpus, stop=holdout.stop)
    first = train_bpe_detailed(part, 300, [EOT], num_workers=1, cache_dir=cache)
    again = train_bpe_detailed(part, 300, [EOT], num_workers=1, cache_dir=cache)
    assert (whole.pretoken_cache["status"], first.pretoken_cache["status"]) == ("miss", "miss")
    assert again.pretoken_cache["status"] == "hit"
    assert again.merges == first.merges != whole.merges


def test_the_library_trains_on_the_whole_input(inputs):
    """Holding out is an experiment's concern: train_bpe reads every document."""
    corpus, _ = held(inputs["text"])
    assert corpus.stop is None
    assert train_bpe(inputs["text"], 300, [EOT], num_workers=1) == train_bpe(
        resolve_source(inputs["text"]), 300, [EOT], num_workers=1
    )
