"""Held-out documents: the last documents of an input, never trained on, measured exactly.

Real files only (text, gzip'd text, JSON lines compressed by zstandard, parquet written by
pyarrow with several row groups, several shards), made from the bundled OWT sample's
documents. For each, training up to the stop gives the merges of a text file holding only the
first documents, and the held-out documents are exactly the rest.
"""

from __future__ import annotations

import dataclasses
import gzip
import tempfile
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.analysis.run.report import write_run_report
from bpe.corpus.documents import _plain_text_bytes, find_holdout, iter_documents
from bpe.corpus.parts import plan_parts
from bpe.corpus.sources import resolve_source
from bpe.experiment import runner
from bpe.formats.gpt2_format import merges_sha256
from bpe.pipeline import train_bpe, train_bpe_detailed
from bpe.pretokenize import pretokenize
from bpe.pretokenize.cache import cache_key
from bpe.text.specials import EOT
from bpe.util.io import CONF_DIR, DATA_DIR
from bpe.util.workers import default_num_workers
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
    expected = pretokenize(resolve_source(reference), [EOT], num_workers=1).counts
    for chunk in (4 << 10, 1 << 20):  # many parts (cut at the stop) and one
        got = pretokenize(training, [EOT], num_workers=2, max_chunk_bytes=chunk)
        assert got.counts == expected


def test_the_budget_is_a_fraction_of_the_input_with_a_cap(inputs):
    docs = sample_docs(DOCS)
    corpus, small = held(inputs["text"], fraction=0.05)
    _, large = held(inputs["text"], fraction=0.2)
    _, capped = held(inputs["text"], fraction=0.2, max_bytes=10_000)
    assert small.stop.docs < large.stop.docs
    text_bytes = sum(len(d.encode()) for d in docs)
    assert (
        small.stop.bytes
        <= 0.05 * text_bytes
        < small.stop.bytes + len(docs[-1 - small.stop.docs].encode())
    )
    assert capped.stop.bytes <= 10_000
    assert held(inputs["text"], fraction=0.0)[1] is None
    with pytest.raises(ValueError, match="heldout_fraction"):
        held(inputs["text"], fraction=1.0)


def test_the_same_documents_hold_out_the_same_tail_in_any_container(inputs):
    """The budget is a share of the text (the documents' UTF-8 bytes), not of the size on
    disk: compressed, JSON lines, parquet and shards of the same documents hold out the same
    documents (on disk they differ by up to 4x, which once held out 5 to 17 documents)."""
    docs = sample_docs(DOCS)
    text_bytes = sum(len(d.encode()) for d in docs)
    for fraction in (0.05, 0.12):
        counts = {name: held(inputs[name], fraction=fraction)[1].stop.docs for name in NAMES}
        assert len(set(counts.values())) == 1, counts
        n = counts["text"]
        tail = sum(len(d.encode()) for d in docs[DOCS - n :])
        assert tail <= fraction * text_bytes < tail + len(docs[DOCS - n - 1].encode())


@settings(max_examples=200, deadline=None)
@given(
    docs=st.lists(st.text(alphabet="ab<|>é\n ", max_size=30), min_size=1, max_size=20),
    block=st.sampled_from([1, 2, 5, 13, 14, 1 << 20]),
)
def test_a_plain_text_file_is_measured_without_decoding_as_its_documents(docs, block):
    """The text size of a plain file: its bytes less its separators', in any block size,
    equals the bytes of its documents (so invalid UTF-8 stays stage 1's error to name)."""
    text = EOT.join(docs)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d.txt"
        path.write_bytes(text.encode("utf-8"))
        if not text:
            return
        f = resolve_source(path).files[0]
        got = _plain_text_bytes(f, EOT.encode("utf-8"), 10**9, block=block)
    assert got == sum(len(d.encode("utf-8")) for d in text.split(EOT))


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


# -- runs: bpe-train / run_experiment hold the last documents out ------------------------------


def make_cfg(tmp_path: Path, source, *overrides: str):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose(
            "config",
            overrides=[
                f"experiments_dir={tmp_path / 'exp'}",
                "debug=fast",
                "vocab_size=300",
                f"dataset.path={source}",
                "analysis.max_docs=1000",
                "analysis.bpb_train_bytes=50000",
                "analysis.train_sample_bytes=50000",
                *overrides,
            ],
        )


def reference(tmp_path: Path, first: list[str], **options) -> tuple:
    path = write_text(tmp_path / "first.txt", first)
    return train_bpe(path, options.pop("vocab_size", 300), [EOT], num_workers=1, **options)


def check_run(metrics: dict, docs: list[str], n: int, *, records: bool = False) -> None:
    """The run read the first documents only, and measured exactly the last n, which it says
    it held out."""
    own = metrics["compression"]["own"]
    assert own["source"] == "input_tail" and own["seen_in_training"] is False
    assert own["heldout_docs"] == own["docs"] == n
    assert own["heldout_bytes"] == own["bytes"] == sum(len(d.encode()) for d in docs[-n:])
    trained = sum(len(d.encode()) for d in docs[:-n])
    separators = 0 if records else len(EOT.encode()) * (len(docs) - n)  # one after each
    assert metrics["counts"]["bytes"] == trained + separators
    assert metrics["bits_per_byte"]["own"]["seen_in_training"] is False


def test_every_trainer_trains_on_the_first_documents_only(inputs, trainer_name, tmp_path):
    docs = sample_docs(DOCS)
    cfg = make_cfg(tmp_path, inputs["text"], f"trainer={trainer_name}")
    report = write_run_report if trainer_name == "heap" else None  # one report is enough
    metrics = runner.run_experiment(cfg, report=report)
    n = metrics["compression"]["own"]["heldout_docs"]
    vocab, merges = reference(tmp_path, docs[:-n])
    assert 1 <= n < DOCS // 4
    assert metrics["merges_sha256"] == merges_sha256(merges)
    assert len(vocab) == metrics["counts"]["vocab"]
    check_run(metrics, docs, n)
    if trainer_name != "heap":
        return
    text = (Path(metrics["run"]["dir"]) / "ANALYSIS.md").read_text("utf-8")
    mb = metrics["compression"]["own"]["heldout_bytes"] / 1e6
    assert f"held out: the last {n} documents ({mb:.2f} MB) of the input, not trained on" in text
    assert "seen in training" not in text


@pytest.mark.parametrize("name", ["shards", "jsonl.zst", "txt.gz"])
def test_runs_on_shards_and_compressed_files_hold_out_the_same_documents(inputs, name, tmp_path):
    docs = sample_docs(DOCS)
    cfg = make_cfg(tmp_path, inputs[name], "dataset.heldout_fraction=0.12")
    metrics = runner.run_experiment(cfg, report=None)
    n = metrics["compression"]["own"]["heldout_docs"]
    _, holdout = held(inputs[name], fraction=0.12, max_bytes=256 << 10)
    assert n == holdout.stop.docs
    assert metrics["merges_sha256"] == merges_sha256(reference(tmp_path, docs[:-n])[1])
    check_run(metrics, docs, n, records=name != "txt.gz")
    assert metrics["compression"]["own"]["offset_unit"] == holdout.stop.unit


@pytest.mark.parametrize("copies", [1, 6], ids=["sample-in-process", "13MB-in-workers"])
def test_what_a_user_gets_the_bundled_sample_without_held_out_file(tmp_path, copies):
    """Default workers, no held-out file: the bundled OWT sample (2.5 MB) is counted in this
    process, six copies of it (15 MB, past `REGEX_MIN_PARALLEL_BYTES`) in every usable CPU's
    worker; either way training stops before the held-out tail."""
    source = DATA_DIR / "owt_sample.txt"
    if copies > 1:
        source = tmp_path / "owt_copies.txt"
        source.write_bytes((DATA_DIR / "owt_sample.txt").read_bytes() * copies)
    cfg = make_cfg(
        tmp_path,
        str(source) if copies > 1 else "data/owt_sample.txt",
        *(["dataset=owt_sample"] if copies == 1 else []),
        "num_workers=null",
        "dataset.heldout_path=null",
        "analysis.max_docs=10",
    )
    metrics = runner.run_experiment(cfg, report=None)
    docs = [d for d in source.read_text("utf-8").split(EOT) if d]
    n = metrics["compression"]["own"]["heldout_docs"]
    if copies == 1:
        assert metrics["run"]["input_name"] == "owt_sample"  # the named dataset, its own file
        assert metrics["counts"]["workers"] == 1  # below the size where workers pay
    else:
        assert metrics["counts"]["workers"] == default_num_workers()  # every usable CPU
    assert (
        n == find_holdout(resolve_source(source), EOT, fraction=0.05, max_bytes=256 << 10).stop.docs
    )
    first = write_text(tmp_path / "first.txt", docs[:-n])
    assert metrics["merges_sha256"] == merges_sha256(train_bpe(first, 300, [EOT])[1])
    own = metrics["compression"]["own"]
    assert own["seen_in_training"] is False and own["docs"] == min(n, 10)  # analysis.max_docs
    assert own["bytes"] == sum(len(d.encode()) for d in docs[-min(n, 10) :])


# ---------------------------------------------------------------------------------------------
# A held-out file that training read is not unseen text
# ---------------------------------------------------------------------------------------------


def _docs_file(tmp_path: Path, n: int = 60) -> Path:
    path = tmp_path / "train.txt"
    text = (DATA_DIR / "tinystories_sample.txt").read_text("utf-8")
    path.write_text(EOT.join(text.split(EOT)[:n]), "utf-8")
    return path


@pytest.mark.parametrize("form", ["same file", "gzip copy", "unseen"])
def test_a_held_out_file_that_training_read_is_marked_seen(tmp_path, form):
    from bpe.corpus.datasets import Dataset
    from bpe.evaluation.measured import measured_docs

    train = _docs_file(tmp_path)
    heldout = {
        "same file": train,
        "gzip copy": tmp_path / "h.txt.gz",
        "unseen": tmp_path / "u.txt",
    }[form]
    if form == "gzip copy":
        heldout.write_bytes(gzip.compress(train.read_bytes()))
    elif form == "unseen":
        heldout.write_text("A story no one trained on." + EOT + "Nor on this one.", "utf-8")
    ds = Dataset(name="custom-train", path=train, heldout_path=heldout)
    (own,) = [m for m in measured_docs(ds, max_docs=20) if m.side == "own"]
    assert own.origin["source"] == "heldout"
    assert own.origin["seen_in_training"] is (form != "unseen")
    assert own.origin["docs_in_training"] == (0 if form == "unseen" else 20)
    assert own.origin["training_scanned"] == "all"


def test_a_run_whose_held_out_file_is_its_input_says_so_in_its_report(tmp_path):
    from tests.conftest import fast_run

    train = _docs_file(tmp_path, n=300)
    copy = tmp_path / "heldout.txt.gz"
    copy.write_bytes(gzip.compress(train.read_bytes()))
    metrics = fast_run(train, tmp_path / "exp", f"dataset.heldout_path={copy}")
    own = metrics["compression"]["own"]
    assert own["seen_in_training"] is True and own["docs_in_training"] == own["docs"]
    report = next((tmp_path / "exp").glob("2*/ANALYSIS.md")).read_text("utf-8")
    assert "also occur in the training input" in report


def test_a_pandas_category_text_column_is_held_out_and_read_as_text(tmp_path):
    """pandas writes a `category` column as a dictionary-encoded one; the hold-out search reads
    it in whole columns (chunked arrays), the reader in batches: both decode it."""
    import pandas as pd

    docs = sample_docs()[:200]
    path = tmp_path / "cat.parquet"
    pd.DataFrame({"text": pd.Series(docs, dtype="category")}).to_parquet(path, row_group_size=20)
    corpus = resolve_source(str(path))
    held = find_holdout(corpus, EOT, fraction=0.05, max_bytes=256 << 10)
    assert held.docs and set(held.docs) <= set(docs)
    assert list(iter_documents(corpus, EOT)) == [d for d in docs if d]
