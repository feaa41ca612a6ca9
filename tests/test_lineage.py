"""Lineage: corpus sha256 in runs, the bpe-encode sidecar (atomic) and `load`'s checks."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading

import numpy as np
import pytest

from bpe import Tokenizer, train_bpe
from bpe.analysis.loader import load_runs, tidy
from bpe.cli.encode import main
from bpe.corpus.datasets import load_named
from bpe.encode.lineage import dataset_lineage, read_sidecar, sidecar_path
from bpe.encode.npy import encode_to_npy, load
from bpe.pipeline import merges_sha256
from bpe.util.io import sha256_file
from tests.conftest import DATA, EOT, FIXTURES
from tests.test_experiment import make_cfg, run_dirs, run_with_report


@pytest.fixture(scope="module")
def tok_dirs(tmp_path_factory):
    """Two different small tokenizers saved as run-like directories."""
    out = {}
    for name, vocab_size in (("a", 400), ("b", 420)):
        d = tmp_path_factory.mktemp(f"tok_{name}")
        vocab, merges = train_bpe(FIXTURES / "corpus.en", vocab_size, [EOT])
        Tokenizer(vocab, merges, [EOT]).save_pretrained(d)
        out[name] = d
    return out


def test_sha256_file_matches_hashlib(tmp_path):
    data = bytes(range(256)) * 5000  # several blocks
    (tmp_path / "x").write_bytes(data)
    assert sha256_file(tmp_path / "x", block_bytes=4096) == hashlib.sha256(data).hexdigest()
    with pytest.raises(FileNotFoundError):
        sha256_file(tmp_path / "missing")


def test_dataset_lineage_names_the_corpus_and_heldout_bytes():
    ds = load_named("tinystories_sample")
    lin = dataset_lineage(ds)
    assert lin["input"]["sha256"] == sha256_file(ds.path)
    assert lin["input"]["bytes"] == ds.path.stat().st_size
    assert lin["heldout"][ds.name]["sha256"] == sha256_file(ds.heldout_path)
    assert set(lin["heldout"]) == {ds.name, ds.cross_domain}


def test_bpe_encode_writes_a_sidecar_and_load_checks_it(tok_dirs, tmp_path):
    out = tmp_path / "ids.npy"
    src = DATA / "tinystories_heldout.txt"
    assert (
        main(
            [
                "--tokenizer",
                str(tok_dirs["a"]),
                "--input",
                str(src),
                "--out",
                str(out),
                "--num-workers",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    side = json.loads(sidecar_path(out).read_text("utf-8"))
    tok = Tokenizer.from_pretrained(tok_dirs["a"])
    assert side["tokenizer"]["dir"] == str(tok_dirs["a"].resolve())
    assert side["tokenizer"]["merges_sha256"] == merges_sha256(tok.merges)
    assert side["tokenizer"]["special_tokens"] == {EOT: 0}
    assert side["input"] == {
        "path": str(src.resolve()),
        "bytes": src.stat().st_size,
        "sha256": sha256_file(src),
    }
    assert side["dtype"] == "uint16" and side["backend"] == "python"
    assert side["command"].startswith("bpe-encode --tokenizer ")
    assert side["code"]["bpe_lab"] and "git_sha" in side["code"]

    ids = load(out)
    assert isinstance(ids, np.memmap) and side["num_tokens"] == len(ids) > 0
    assert ids.tolist() == tok.encode(src.read_text(encoding="utf-8"))
    assert np.array_equal(load(out, tokenizer_dir=tok_dirs["a"]), ids)


def test_load_refuses_a_mismatched_tokenizer(tok_dirs, tmp_path):
    tok = Tokenizer.from_pretrained(tok_dirs["a"])
    moved = tmp_path / "tok"
    shutil.copytree(tok_dirs["a"], moved)
    out = tmp_path / "ids.npy"
    encode_to_npy(DATA / "tinystories_heldout.txt", tok, out, num_workers=1, tokenizer_dir=moved)
    load(out)
    with pytest.raises(ValueError, match="merges sha256 .* these ids do not belong"):
        load(out, tokenizer_dir=tok_dirs["b"])
    # The recorded directory is retrained in place: its merges no longer match.
    shutil.copy(tok_dirs["b"] / "merges.txt", moved / "merges.txt")
    with pytest.raises(ValueError, match="now has"):
        load(out)
    shutil.rmtree(moved)
    with pytest.raises(FileNotFoundError, match="has no merges.txt"):
        load(out)
    assert len(load(out, check=False)) == read_sidecar(out)["num_tokens"]


def test_load_refuses_an_untraceable_or_replaced_array(tok_dirs, tmp_path):
    out = tmp_path / "ids.npy"
    np.save(out, np.arange(5, dtype=np.uint16))
    with pytest.raises(FileNotFoundError, match="cannot be traced"):
        load(out)
    tok = Tokenizer.from_pretrained(tok_dirs["a"])
    # an array without a sidecar is not ours: replacing it takes force
    encode_to_npy(
        DATA / "tinystories_heldout.txt",
        tok,
        out,
        num_workers=1,
        tokenizer_dir=tok_dirs["a"],
        force=True,
    )
    np.save(out, np.arange(5, dtype=np.uint16))
    with pytest.raises(ValueError, match="replaced after encoding"):
        load(out)


def test_a_failed_encode_leaves_the_previous_array_and_sidecar_intact(tok_dirs, tmp_path):
    tok = Tokenizer.from_pretrained(tok_dirs["a"])
    out = tmp_path / "ids.npy"
    encode_to_npy(DATA / "tinystories_heldout.txt", tok, out, num_workers=1)
    before = out.read_bytes(), sidecar_path(out).read_bytes()
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine text " * 1000 + b"\xff\xfe broken")
    with pytest.raises(ValueError):
        encode_to_npy(bad, tok, out, num_workers=1)
    assert (out.read_bytes(), sidecar_path(out).read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt", "ids.npy", "ids.npy.json"]


def test_sidecar_is_written_through_a_temp_file_and_a_rename(tok_dirs, tmp_path):
    """A reader polling the sidecar while it is rewritten sees the old or the new JSON."""
    tok = Tokenizer.from_pretrained(tok_dirs["a"])
    out = tmp_path / "ids.npy"
    src = DATA / "tinystories_heldout.txt"
    encode_to_npy(src, tok, out, num_workers=1)
    seen, stop = [], threading.Event()

    def poll():
        while not stop.is_set():
            seen.append(json.loads(sidecar_path(out).read_text("utf-8"))["num_tokens"])

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        for _ in range(5):
            encode_to_npy(src, tok, out, num_workers=1)
    finally:
        stop.set()
        reader.join()
    assert seen and set(seen) == {read_sidecar(out)["num_tokens"]}


def test_a_run_is_a_tokenizer_directory_with_lineage(tmp_path):
    transformers = pytest.importorskip("transformers")
    metrics = run_with_report(make_cfg(tmp_path))
    (run,) = run_dirs(tmp_path)
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "tokenizer.tiktoken",
    ):
        assert (run / name).is_file(), name
    tok = Tokenizer.from_pretrained(run)
    auto = transformers.AutoTokenizer.from_pretrained(run)
    enc = tok.to_tiktoken()
    text = (DATA / "tinystories_heldout.txt").read_text(encoding="utf-8")
    assert auto(text)["input_ids"] == tok.encode(text) == enc.encode(text, allowed_special="all")

    assert metrics["lineage"]["input"]["sha256"] == sha256_file(FIXTURES / "corpus.en")
    # corpus.en is a custom input: no held-out file of its own, only the cross-domain one
    assert set(metrics["lineage"]["heldout"]) == {"owt_sample"}
    assert metrics["tiktoken"]["mismatches"] == 0 and metrics["tiktoken"]["pretokens"] > 0
    report = (run / "ANALYSIS.md").read_text("utf-8")
    assert metrics["lineage"]["input"]["sha256"] in report
    assert "The tiktoken export (`tokenizer.tiktoken`) encodes 0 of" in report
    frame = tidy(load_runs(tmp_path))
    assert frame.loc[0, "input_sha256"] == metrics["lineage"]["input"]["sha256"]
    assert frame.loc[0, "tiktoken_mismatches"] == 0
