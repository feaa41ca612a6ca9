"""Corpus readers: every format gives the documents, counts and merges of one text file.

Real files only: parquet written by pyarrow (several shards, several row groups), JSON lines
compressed by zstandard, text by gzip/lzma/bz2, a `datasets` save_to_disk directory, all made
from the bundled OWT sample's documents; real worker processes and a real Dask LocalCluster.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from bpe.corpus.documents import iter_documents
from bpe.corpus.files import Corpus, InputFile
from bpe.corpus.manifest import corpus_manifest
from bpe.corpus.parts import plan_parts
from bpe.corpus.sources import resolve_source
from bpe.formats.gpt2_format import merges_sha256
from bpe.pipeline import train_bpe, train_bpe_detailed
from bpe.pretokenize import pretokenize
from bpe.text.specials import EOT
from bpe.util.io import DATA_DIR
from tests.conftest import FAST_ANALYSIS

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
zstd = pytest.importorskip("zstandard")

SAMPLE = DATA_DIR / "owt_sample.txt"


def sample_docs(n: int | None = 120) -> list[str]:
    docs = [d for d in SAMPLE.read_text("utf-8").split(EOT) if d]
    return docs if n is None else docs[:n]


def write_text(path: Path, docs: list[str]) -> Path:
    path.write_bytes(EOT.join(docs).encode("utf-8"))
    return path


def write_jsonl(path: Path, docs: list[str], *, field: str = "text", opener=open) -> Path:
    lines = "".join(json.dumps({"id": i, field: d}) + "\n" for i, d in enumerate(docs))
    if path.suffix == ".zst":
        path.write_bytes(zstd.ZstdCompressor().compress(lines.encode("utf-8")))
    else:
        with opener(path, "wb") as f:
            f.write(lines.encode("utf-8"))
    return path


def write_parquet(path: Path, docs: list[str], *, rows_per_group: int = 10, column="text"):
    table = pa.table({"id": list(range(len(docs))), column: docs})
    pq.write_table(table, path, row_group_size=rows_per_group)
    return path


def parquet_shards(folder: Path, docs: list[str], shards: int = 3) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    per = -(-len(docs) // shards)
    for k in range(shards):
        write_parquet(folder / f"shard-{k:03d}.parquet", docs[k * per : (k + 1) * per])
    return folder


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, object]:
    """The same documents in every format; 'text' is the reference text file."""
    docs = sample_docs()
    d = tmp_path_factory.mktemp("corpora")
    out: dict[str, object] = {"text": write_text(d / "docs.txt", docs)}
    with gzip.open(d / "docs.txt.gz", "wb") as f:
        f.write(EOT.join(docs).encode("utf-8"))
    out["txt.gz"] = d / "docs.txt.gz"
    with lzma.open(d / "docs.txt.xz", "wb") as f:
        f.write(EOT.join(docs).encode("utf-8"))
    out["txt.xz"] = d / "docs.txt.xz"
    with bz2.open(d / "docs.txt.bz2", "wb") as f:
        f.write(EOT.join(docs).encode("utf-8"))
    out["txt.bz2"] = d / "docs.txt.bz2"
    out["jsonl"] = write_jsonl(d / "docs.jsonl", docs)
    out["jsonl.zst"] = write_jsonl(d / "docs.jsonl.zst", docs)
    out["jsonl.gz"] = write_jsonl(d / "docs.jsonl.gz", docs, opener=gzip.open)
    out["parquet"] = write_parquet(d / "docs.parquet", docs)
    shards = parquet_shards(d / "shards", docs)
    out["directory"] = shards
    out["glob"] = str(shards / "*.parquet")
    # a list mixing formats: the first 50 documents as text, the rest as JSON lines
    out["list"] = [write_text(d / "head.txt", docs[:50]), write_jsonl(d / "tail.jsonl", docs[50:])]
    return out


FORMATS = [
    "txt.gz",
    "txt.xz",
    "txt.bz2",
    "jsonl",
    "jsonl.zst",
    "jsonl.gz",
    "parquet",
    "directory",
    "glob",
    "list",
]


@pytest.mark.parametrize("name", FORMATS)
def test_every_format_counts_as_the_text_file(corpora, name):
    reference = pretokenize(corpora["text"], [EOT], num_workers=1).counts
    corpus = resolve_source(corpora[name])
    got = pretokenize(corpus, [EOT], num_workers=1, max_chunk_bytes=16 * 1024)
    assert got.counts == reference
    assert got.num_files == len(corpus.files)


@pytest.mark.parametrize("name", ["jsonl.zst", "txt.gz", "directory", "parquet"])
def test_documents_are_those_of_the_text_file(corpora, name):
    assert list(iter_documents(resolve_source(corpora[name]), EOT)) == sample_docs()


def test_identical_merges_for_every_trainer(corpora, trainer_name):
    # naive recounts every pair per merge (0.07 s a merge here): 33 merges, the others 63
    vocab = 290 if trainer_name == "naive" else 320
    reference = train_bpe(corpora["text"], vocab, [EOT], trainer=trainer_name, num_workers=1)
    for name in ("txt.gz", "jsonl.zst", "directory", "glob"):
        assert train_bpe(corpora[name], vocab, [EOT], trainer=trainer_name, num_workers=1) == (
            reference
        ), name


def test_parallel_parts_count_as_serial(corpora):
    corpus = resolve_source([corpora["directory"], corpora["jsonl.zst"], corpora["jsonl"]])
    serial = pretokenize(corpus, [EOT], num_workers=1)
    parallel = pretokenize(
        corpus, [EOT], num_workers=2, max_chunk_bytes=8 * 1024, min_parallel_bytes=1
    )
    assert parallel.counts == serial.counts
    assert parallel.num_workers == 2 and parallel.num_chunks > 3
    assert parallel.records == serial.records == 3 * len(sample_docs())


def test_default_workers_on_the_bundled_sample_as_parquet(tmp_path):
    """What a user gets: every document of the OWT sample as parquet shards, default workers."""
    docs = sample_docs(None)
    folder = parquet_shards(tmp_path / "owt", docs, shards=4)
    result = train_bpe_detailed(folder, 600, [EOT])
    reference = train_bpe_detailed(SAMPLE, 600, [EOT])
    assert result.merges == reference.merges and result.vocab == reference.vocab
    assert result.pretokenized.records == len(docs)


def test_parts_follow_files_row_groups_and_lines(corpora):
    corpus = resolve_source([corpora["directory"], corpora["jsonl"], corpora["jsonl.zst"]])
    parts = plan_parts(corpus, [EOT], max_chunk_bytes=1)
    kinds = Counter(p.kind for p in parts)
    assert kinds["row_groups"] == 12  # 3 shards of 40 documents, 10 rows per group
    assert kinds["bytes"] == len(sample_docs())  # plain JSON lines: one range per line
    assert kinds["file"] == 1  # a compressed stream is read whole
    assert [p.index for p in parts] == list(range(len(parts)))
    assert "row groups 0-1" in parts[0].describe()


def test_format_by_suffix_then_content(tmp_path, corpora):
    plain = tmp_path / "notes"
    plain.write_text("hello", encoding="utf-8")
    lines = tmp_path / "records"
    lines.write_text('{"text": "hi"}\n', encoding="utf-8")
    packed = tmp_path / "blob"
    packed.write_bytes(Path(corpora["parquet"]).read_bytes())
    gz = tmp_path / "stream.gz"
    gz.write_bytes(gzip.compress(b"hello"))
    kinds = [f.kind for f in resolve_source([plain, lines, packed, gz]).files]
    assert kinds == ["text", "jsonl", "parquet", "text.gz"]


def test_a_save_to_disk_directory_reads_as_its_documents(tmp_path):
    datasets = pytest.importorskip("datasets")
    docs = sample_docs(30)
    datasets.Dataset.from_dict({"text": docs}).save_to_disk(tmp_path / "saved")
    corpus = resolve_source(tmp_path / "saved")
    assert [f.format for f in corpus.files] == ["arrow"]
    assert list(iter_documents(corpus, EOT)) == docs
    text = write_text(tmp_path / "docs.txt", docs)
    assert pretokenize(corpus, [EOT]).counts == pretokenize(text, [EOT]).counts
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": docs})}).save_to_disk(
        tmp_path / "dict"
    )
    assert list(iter_documents(resolve_source(tmp_path / "dict"), EOT)) == docs


def test_text_field_is_configurable(tmp_path):
    docs = sample_docs(5)
    path = write_parquet(tmp_path / "c.parquet", docs, column="content")
    with pytest.raises(ValueError, match=r"no column 'text' \(its columns: \['id', 'content'\]\)"):
        pretokenize(resolve_source(path), [EOT])
    corpus = resolve_source(path, text_field="content")
    assert list(iter_documents(corpus, EOT)) == docs


def test_manifest_covers_bytes_order_and_field(corpora, tmp_path):
    shards = resolve_source(corpora["directory"])
    one = corpus_manifest(shards)
    assert [f["format"] for f in one["files"]] == ["parquet"] * 3
    reordered = Corpus(tuple(reversed(shards.files)), text_field="text")
    assert corpus_manifest(reordered)["sha256"] != one["sha256"]
    other_field = Corpus(shards.files, text_field="body")
    assert corpus_manifest(other_field)["sha256"] != one["sha256"]
    text = resolve_source(corpora["text"])
    assert corpus_manifest(text)["sha256"] == corpus_manifest(text)["files"][0]["sha256"]


def test_the_pretoken_cache_keys_every_shard(corpora, tmp_path):
    folder = parquet_shards(tmp_path / "s", sample_docs(60), shards=2)
    cache = tmp_path / "cache"
    first = train_bpe_detailed(folder, 300, [EOT], cache_dir=cache, num_workers=1)
    again = train_bpe_detailed(folder, 300, [EOT], cache_dir=cache, num_workers=1)
    assert (first.pretoken_cache["status"], again.pretoken_cache["status"]) == ("miss", "hit")
    assert again.merges == first.merges and again.pretokenized.records == 60
    write_parquet(folder / "shard-001.parquet", sample_docs(61)[30:])  # one more document
    changed = train_bpe_detailed(folder, 300, [EOT], cache_dir=cache, num_workers=1)
    assert changed.pretoken_cache["status"] == "miss"
    assert len(changed.input_manifest["files"]) == 2


# -- bad input ---------------------------------------------------------------------------------


def test_a_json_line_without_the_field_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "ok"}\n{"body": "no"}\n', encoding="utf-8")
    with pytest.raises(
        ValueError,
        match=r"bad.jsonl.*line at byte 15 has no field 'text' "
        r"\(found: \['body'\]\); set dataset.text_field",
    ):
        pretokenize(resolve_source(path), [EOT])


def test_a_non_string_value_is_refused(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": 3}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="field 'text' holds int"):
        pretokenize(resolve_source(path), [EOT])


def test_a_truncated_gzip_names_the_file(tmp_path):
    data = gzip.compress(EOT.join(sample_docs(40)).encode("utf-8"))
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"cut.txt.gz' \(text.gz\) is truncated or corrupt"):
        pretokenize(resolve_source(path), [EOT], num_workers=1)


def test_a_truncated_zstd_names_the_file(tmp_path):
    lines = "".join(json.dumps({"text": d}) + "\n" for d in sample_docs(40))
    data = zstd.ZstdCompressor().compress(lines.encode("utf-8"))
    path = tmp_path / "cut.jsonl.zst"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"cut.jsonl.zst' \(jsonl.zst\) is truncated or corrupt"):
        pretokenize(resolve_source(path), [EOT], num_workers=1)


def test_invalid_utf8_in_a_compressed_stream_names_the_offset(tmp_path):
    path = tmp_path / "bad.txt.gz"
    path.write_bytes(gzip.compress(b"hello \xff world"))
    with pytest.raises(
        ValueError,
        match=r"bad.txt.gz' is not valid UTF-8.*decompressed byte "
        r"offset 6",
    ):
        pretokenize(resolve_source(path), [EOT])


def test_unknown_content_names_the_file_and_the_fix(tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(b"\x00\xff\xfe" * 100)
    with pytest.raises(ValueError, match=r"cannot tell the format of .*blob.bin.*dataset.format="):
        resolve_source(path)


def test_an_empty_glob_and_an_empty_directory_fail_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"matches no file"):
        resolve_source(str(tmp_path / "*.parquet"))
    (tmp_path / "README.md").write_text("not a corpus")
    with pytest.raises(ValueError, match=r"holds no corpus file"):
        resolve_source(tmp_path)


def test_a_corpus_of_empty_documents_is_refused(tmp_path):
    path = write_parquet(tmp_path / "e.parquet", ["", ""])
    with pytest.raises(ValueError, match="holds no text"):
        pretokenize(resolve_source(path), [EOT])


def test_max_files_takes_a_prefix(corpora):
    corpus = resolve_source(corpora["directory"], max_files=2)
    assert [Path(f.path).name for f in corpus.files] == ["shard-000.parquet", "shard-001.parquet"]


def test_describe_says_files_size_and_format():
    corpus = Corpus((InputFile("/a.parquet", "parquet", None, 1_500_000_000),) * 2)
    assert corpus.describe() == "2 files, 3.00 GB, parquet"


# -- Dask ----------------------------------------------------------------------------------------


def test_dask_counts_parquet_row_groups_as_tasks(corpora, tmp_path):
    """Row groups as tasks; and a corpus read up to held-out documents (inside the last
    shard), on the same LocalCluster."""
    distributed = pytest.importorskip("distributed")
    import dataclasses

    from bpe.corpus.documents import find_holdout

    corpus = resolve_source(corpora["directory"])
    holdout = find_holdout(corpus, EOT, fraction=0.1, max_bytes=1 << 20)
    n = holdout.stop.docs
    first = write_text(tmp_path / "first.txt", sample_docs()[:-n])
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        on = {"backend": "dask", "scheduler": cluster.scheduler_address}
        got = pretokenize(corpus, [EOT], max_chunk_bytes=1, **on)
        held = pretokenize(
            dataclasses.replace(corpus, stop=holdout.stop), [EOT], max_chunk_bytes=1, **on
        )
    assert got.backend == "dask" and got.num_chunks == 12
    assert got.counts == pretokenize(corpora["text"], [EOT], num_workers=1).counts
    assert got.records == len(sample_docs())
    assert holdout.stop.file == 2  # inside the last shard
    assert held.counts == pretokenize(first, [EOT], num_workers=1).counts
    assert held.records == len(sample_docs()) - n


# -- bpe-train ---------------------------------------------------------------------------------

FAST = [
    "progress=false",
    "num_workers=1",
    "vocab_size=300",
    *FAST_ANALYSIS,
    "analysis.max_docs=5",  # fewer than the held-out documents of the shard tests
]


def _bpe_train(tmp_path: Path, *overrides: str) -> Path:
    import subprocess
    import sys

    from tests.conftest import ROOT

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            f"experiments_dir={tmp_path / 'exp'}",
            *FAST,
            *overrides,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = (tmp_path / "exp").iterdir()
    (run,) = [p for p in runs if not p.is_symlink() and (p / "metrics.json").is_file()]
    return run


def test_bpe_train_on_a_folder_of_parquet_shards(tmp_path):
    docs = sample_docs(90)
    folder = parquet_shards(tmp_path / "shards", docs, shards=3)
    run = _bpe_train(tmp_path, f"dataset.path={folder}", "dataset=owt_sample")
    assert run.name.endswith("_custom-shards_heap_v300")
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    source = metrics["lineage"]["input"]
    assert [Path(f["path"]).name for f in source["files"]] == [
        "shard-000.parquet",
        "shard-001.parquet",
        "shard-002.parquet",
    ]
    own = metrics["compression"]["own"]
    assert own["source"] == "input_tail" and own["file"].endswith("shard-002.parquet")
    n = own["heldout_docs"]  # the last documents, held out of training
    assert 1 <= n < 30 and not own["seen_in_training"]
    assert source["format"] == "parquet" and source["records"] == 90 - n
    assert source["digest"] == "manifest" and source["text_field"] == "text"
    first = write_text(tmp_path / "docs.txt", docs[:-n])
    assert metrics["merges_sha256"] == merges_sha256(train_bpe(first, 300, [EOT], num_workers=1)[1])
    report = (run / "ANALYSIS.md").read_text("utf-8")
    assert "(3 files, " in report and "parquet; " in report and f"in {90 - n} records)" in report
    assert f"held out: the last {n} documents (" in report
    assert "5 of them were measured here (from shard-002.parquet)" in report


def test_bpe_train_glob_with_a_jsonl_zst_heldout(tmp_path):
    folder = parquet_shards(tmp_path / "shards", sample_docs(60), shards=2)
    held = write_jsonl(tmp_path / "held.jsonl.zst", sample_docs(70)[60:])
    run = _bpe_train(
        tmp_path,
        f"dataset.path={folder}/*.parquet",
        f"dataset.heldout_path={held}",
        "dataset=owt_sample",
    )
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    assert metrics["compression"]["own"]["source"] == "heldout"
    assert metrics["compression"]["own"]["docs"] == 5
    assert metrics["lineage"]["input"]["records"] == 60


# -- bpe-encode --------------------------------------------------------------------------------


def test_bpe_encode_of_shards_gives_the_ids_of_the_text_file(corpora, tmp_path):
    import numpy as np

    from bpe.cli.encode import main as bpe_encode
    from bpe.encode.npy import encode_to_npy
    from bpe.tokenizer import Tokenizer

    vocab, merges = train_bpe(corpora["text"], 320, [EOT], num_workers=1)
    tok = Tokenizer(vocab, merges, [EOT])
    expected = np.array(tok.encode(Path(corpora["text"]).read_text("utf-8")))
    for name in ("txt.gz", "jsonl.zst", "jsonl", "directory", "glob", "parquet"):
        out = tmp_path / f"{name}.npy"
        result = encode_to_npy(
            corpora[name], tok, out, num_workers=2, chunk_bytes=8 * 1024, min_parallel_bytes=1
        )
        assert np.array_equal(np.load(out), expected), name
        sidecar = json.loads(Path(result["sidecar"]).read_text("utf-8"))
        assert sidecar["input"]["files"][0]["sha256"], name
    run = tmp_path / "run"
    tok.save_pretrained(run)
    out = tmp_path / "cli.npy"
    code = bpe_encode(
        [
            "--tokenizer",
            str(run),
            "--input",
            str(corpora["directory"]),
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0 and np.array_equal(np.load(out), expected)
    sidecar = json.loads((tmp_path / "cli.npy.json").read_text("utf-8"))
    assert len(sidecar["input"]["files"]) == 3 and sidecar["input"]["separator"] == EOT


def test_bpe_encode_refuses_a_separator_the_tokenizer_lacks(corpora, tmp_path):
    from bpe.encode.npy import encode_to_npy
    from bpe.tokenizer import Tokenizer

    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], [])
    with pytest.raises(ValueError, match="pass the one that separates documents with --separator"):
        encode_to_npy(corpora["parquet"], tok, tmp_path / "x.npy")
    assert not (tmp_path / "x.npy").exists()


# -- Hub sources ---------------------------------------------------------------------------------


def test_an_unreachable_hub_fails_fast_naming_the_fixes(tmp_path):
    """Offline (a closed port as the Hub), the FineWeb-Edu config fails within seconds."""
    import socket
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "HF_ENDPOINT": f"http://127.0.0.1:{port}",
        "HF_HUB_CACHE": str(tmp_path / "hub"),
    }
    code = (
        "import yaml; from bpe.corpus.datasets import load_named\n"
        "load_named('fineweb_edu_10bt').check()\n"
    )
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert time.perf_counter() - t0 < 30
    assert proc.returncode != 0
    assert "ConnectionError: cannot fetch 'sample/10BT/*.parquet' of the Hub dataset " in (
        proc.stderr
    )
    assert "HF_ENDPOINT" in proc.stderr and "dataset.path" in proc.stderr


def test_hub_sources_parse_and_name_runs():
    from bpe.corpus.datasets import input_name
    from bpe.corpus.hub import parse_hub_source

    assert parse_hub_source("hf:a/b") == ("a/b", "**")
    with pytest.raises(ValueError, match="must read hf:owner/name"):
        parse_hub_source("hf:nothing")
    assert input_name("owt_sample", "hf:HuggingFaceFW/fineweb-edu/sample/10BT/*.parquet") == (
        "custom-fineweb-edu"
    )


def test_bpe_train_reads_text_field_and_takes_a_prefix_of_files(tmp_path):
    folder = tmp_path / "lines"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", sample_docs(20), field="body")
    write_jsonl(folder / "b.jsonl", sample_docs(40)[20:], field="body")
    run = _bpe_train(
        tmp_path,
        f"dataset.path={folder}",
        "dataset.text_field=body",
        "dataset.max_files=1",
        "dataset=owt_sample",
    )
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    source = metrics["lineage"]["input"]
    held = metrics["compression"]["own"]["heldout_docs"]  # the last records of a.jsonl
    assert held >= 1 and source["records"] == 20 - held and source["text_field"] == "body"
    assert [Path(f["path"]).name for f in source["files"]] == ["a.jsonl"]


def test_max_bytes_keeps_whole_files_up_to_a_size(corpora):
    shards = resolve_source(corpora["directory"]).files
    corpus = resolve_source(corpora["directory"], max_bytes=shards[0].size + 1)
    assert len(corpus.files) == 2
    assert len(resolve_source(corpora["directory"], max_bytes=1).files) == 1


# -- errors that name the file and the place; containers read as what they hold -------------
def _documents(source, **kw) -> list[str]:
    return list(iter_documents(resolve_source(str(source), **kw), EOT))


def test_a_dictionary_encoded_string_column_is_text(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    path = tmp_path / "cat.parquet"
    pd.DataFrame({"text": pd.Categorical(["one doc", "two doc", "one doc"])}).to_parquet(path)
    assert _documents(path) == ["one doc", "two doc", "one doc"]


def test_a_json_array_is_named_as_such(tmp_path):
    path = tmp_path / "records.json"
    path.write_text(json.dumps([{"text": "a"}, {"text": "b"}]), "utf-8")
    with pytest.raises(ValueError, match="holds one JSON array, not JSON lines") as err:
        resolve_source(str(path))
    # the hint writes jq's output to a new file: redirecting into the input empties it first
    assert "> records.records.jsonl`" in str(err.value) and "> records.json`" not in str(err.value)
    lines = tmp_path / "arr.jsonl"  # JSON lines whose lines are arrays
    lines.write_text('[{"text": "a"}]\n[{"text": "b"}]\n', "utf-8")
    with pytest.raises(ValueError, match="holds one JSON array") as err:
        resolve_source(str(lines))
    assert "> arr.records.jsonl`" in str(err.value) and "> arr.jsonl`" not in str(err.value)


def test_bad_utf8_in_a_binary_column_names_its_row(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "bin.parquet"
    pq.write_table(pa.table({"text": pa.array([b"ok", b"ok too", b"bad \xff"], pa.binary())}), path)
    with pytest.raises(ValueError, match=r"row 2: column 'text' is not valid UTF-8"):
        _documents(path)


def test_a_corrupt_parquet_page_names_the_file_and_row_group(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "c.parquet"
    table = pa.table({"text": [f"hello world {i} " * 50 for i in range(20000)]})
    pq.write_table(table, path, row_group_size=5000, compression="snappy")
    data = bytearray(path.read_bytes())
    for k in range(len(data) // 2, len(data) // 2 + 2000):  # damage the middle row groups
        data[k] = (data[k] * 7 + 13) % 256
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"c\.parquet': row group \d+ \(rows from \d+\) cannot"):
        _documents(path)


def test_arrow_format_on_a_text_file_names_the_file(tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "t.txt"
    path.write_text("hello world\n" * 100, "utf-8")
    with pytest.raises(ValueError, match=r"t\.txt' is not a readable Arrow IPC file"):
        _documents(path, format="arrow")


def test_a_truncated_gzip_says_how_far_it_decompressed(tmp_path):
    """The error once said 'after 0 decompressed bytes' for damage far into the stream."""
    text = (DATA_DIR / "tinystories_train_sample.txt").read_bytes()[:2_000_000]
    data = gzip.compress(text)
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"truncated or corrupt after (\d+) decompressed") as err:
        pretokenize(resolve_source(path), [EOT], num_workers=1)
    offset = int(re.search(r"after (\d+) decompressed", str(err.value)).group(1))
    assert 500_000 < offset < len(text), offset  # about half the text, not 0


def test_a_damaged_parquet_row_group_is_named_by_its_number(tmp_path):
    docs = [f"document {i} " + "word " * 200 for i in range(100)]
    path = tmp_path / "damaged.parquet"
    pq.write_table(pa.table({"text": docs}), path, row_group_size=10, compression="none")
    meta = pq.ParquetFile(path).metadata
    chunk = meta.row_group(6).column(0)
    data = bytearray(path.read_bytes())
    at = chunk.data_page_offset + 40  # inside group 6's first page (its header is intact)
    data[at : at + 4000] = b"\xff" * 4000
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"row group 6 \(rows from 60\) cannot be read"):
        list(iter_documents(resolve_source(str(path)), EOT))


def test_no_module_outside_the_format_registry_branches_on_a_format_s_name():
    """What a format is (records or separated text, byte ranges, compressed by itself, its
    magic bytes) is a field of its `Format`; code elsewhere asks the field, so a new format is
    one module and one registry line."""
    from bpe.corpus.formats import FORMATS

    names = "|".join(FORMATS)
    branch = re.compile(
        rf"""\b(?:format|fmt|kind)\s*(?:==|!=|\bin\b)\s*\(?[^)\n]*["'](?:{names})["']"""
    )
    root = Path(__file__).resolve().parent.parent / "bpe"
    found = [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        if "formats" not in path.relative_to(root).parts[:2]
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if branch.search(line) and ">>>" not in line
    ]
    assert not found, "branches on a format's name outside bpe/corpus/formats/:\n" + "\n".join(
        found
    )
