"""Exports: tokenizers, transformers and tiktoken give exactly our ids; where tiktoken differs."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import tiktoken
import tiktoken.load
import tokenizers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe import Tokenizer, train_bpe
from bpe.encode.lineage import read_sidecar
from bpe.encode.npy import encode_to_npy
from bpe.formats.exports import (
    TIKTOKEN_FILE,
    TiktokenMismatch,
    encode_with_tiktoken,
    tiktoken_mismatches,
    tiktoken_ranks,
    to_hf_tokenizer,
)
from bpe.text.patterns import PATTERNS
from tests.conftest import DATA, EOT

transformers = pytest.importorskip("transformers")  # the hf extra (installed by dev)

#: Special tokens present (EOT in the samples), absent, and overlapping (one inside another);
#: the last two also train and export with GPT-4's and GPT-4o's split patterns.
SPECIALS = {
    "eot": [EOT],
    "none": [],
    "overlapping": ["<|a|>", "<|a|><|a|>", EOT],
    "cl100k": [EOT],
    "o200k": [EOT],
}
#: The split pattern each export is trained with (GPT-2's unless named here).
PATTERN_OF = {"cl100k": "cl100k", "o200k": "o200k"}


@pytest.fixture(scope="module")
def export_of(tmp_path_factory):
    """`export_of(name)`: a small tokenizer with SPECIALS[name], saved, and its loaders."""
    built: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in built:
            built[name] = _build(name, tmp_path_factory.mktemp(f"tok_{name}"))
        return built[name]

    return get


@pytest.fixture(params=sorted(SPECIALS))
def exported(request, export_of):
    return export_of(request.param)


def _build(name: str, out) -> dict:
    specials = SPECIALS[name]
    pattern = PATTERN_OF.get(name, "gpt2")
    vocab, merges = train_bpe(DATA / "tinystories_sample.txt", 700, specials, pattern=pattern)
    tok = Tokenizer(vocab, merges, specials, pattern=pattern)
    tok.save_pretrained(out)
    assert Tokenizer.from_pretrained(out).pattern == tok.pattern == PATTERNS[pattern]
    enc = tok.to_tiktoken()
    return {
        "name": name,
        "dir": out,
        "ours": tok,
        "reloaded": Tokenizer.from_pretrained(out),
        "tokenizers": tokenizers.Tokenizer.from_file(str(out / "tokenizer.json")),
        "fast": transformers.PreTrainedTokenizerFast(tokenizer_file=str(out / "tokenizer.json")),
        "auto": transformers.AutoTokenizer.from_pretrained(out),
        "tiktoken": enc,
    }


def _all_ids(ex: dict, text: str) -> dict[str, list[int]]:
    ids = {
        "reloaded": ex["reloaded"].encode(text),
        "tokenizers": ex["tokenizers"].encode(text).ids,
        "fast": ex["fast"].encode(text),
        "auto": ex["auto"](text)["input_ids"],
        "tiktoken (cut at specials)": encode_with_tiktoken(ex["tiktoken"], ex["ours"], text),
    }
    if ex["name"] != "overlapping":
        # tiktoken's own special matching is only reliable when no special contains another.
        ids["tiktoken"] = ex["tiktoken"].encode(text, allowed_special="all")
    return ids


def _check_same(ex: dict, text: str) -> None:
    expected = ex["ours"].encode(text)
    for tool, ids in _all_ids(ex, text).items():
        assert ids == expected, f"{tool} differs on {text[:80]!r}"


@pytest.mark.parametrize("sample", ["tinystories_heldout.txt", "owt_heldout.txt", "owt_sample.txt"])
def test_every_loader_gives_our_ids_on_the_bundled_samples(exported, sample):
    text = (DATA / sample).read_text(encoding="utf-8")[:200_000]
    _check_same(exported, text)
    assert exported["auto"].decode(exported["ours"].encode(text)) == text


def test_specials_keep_their_ids_and_no_learned_token_shares_them(exported):
    tok, auto = exported["ours"], exported["auto"]
    assert sorted(tok.special_tokens.values()) == list(range(len(tok.special_tokens)))
    assert sorted(auto.all_special_ids) == sorted(tok.special_tokens.values())
    vocab = exported["tokenizers"].get_vocab(with_added_tokens=True)
    assert len(vocab) == tok.vocab_size == len(set(vocab.values()))
    for text, idx in tok.special_tokens.items():
        assert exported["tokenizers"].id_to_token(idx) == text
        assert exported["tiktoken"].decode_single_token_bytes(idx) == text.encode()
    if EOT in tok.special_tokens:
        assert auto.eos_token == auto.bos_token == EOT
        assert auto.eos_token_id == tok.special_tokens[EOT]


def test_overlapping_specials_take_the_longest_match(export_of):
    exported = export_of("overlapping")
    specials = exported["ours"].special_tokens
    text = "x<|a|><|a|><|a|>y<|a|>"
    assert exported["ours"].encode(text).count(specials["<|a|><|a|>"]) == 1
    _check_same(exported, text)


PIECES = ["<|a|>", "<|a|><|a|>", EOT, "<|", "|>", " ", "  ", "\n", "'s", "'ll", "1", "é", "🙂"]


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    parts=st.lists(
        st.one_of(
            st.sampled_from(PIECES),
            # subtle: unassigned code points (Cn) are left out: the regex engines of `regex`
            # and of HF tokenizers follow different Unicode versions there (U+3D000 became a
            # letter in one and not the other), which says nothing about our export.
            st.text(st.characters(exclude_categories=("Cs", "Cn")), max_size=12),
        ),
        max_size=12,
    )
)
def test_random_unicode_round_trips_through_every_loader(exported, parts):
    text = "".join(parts)
    _check_same(exported, text)
    ids = exported["ours"].encode(text)
    assert exported["tokenizers"].decode(ids, skip_special_tokens=False) == text
    assert exported["tiktoken"].decode(ids) == text


def test_tiktoken_file_loads_with_tiktoken(exported, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken caches even local files by path
    ranks = tiktoken.load.load_tiktoken_bpe(str(exported["dir"] / TIKTOKEN_FILE))
    assert ranks == tiktoken_ranks(exported["ours"])
    assert not set(ranks.values()) & set(exported["ours"].special_tokens.values())


def test_run_directory_files(exported):
    names = {p.name for p in exported["dir"].iterdir()}
    assert names == {
        "vocab.json",
        "merges.txt",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "tokenizer.tiktoken",
        "tokenizer_manifest.json",
    }


# ---------------------------------------------------------------------------------------------
# Where tiktoken's algorithm and merge-list BPE differ
# ---------------------------------------------------------------------------------------------


def counterexample() -> Tokenizer:
    """The smallest vocab where they differ: merges a+b, b+c, a+bc.

    BPE on "abc": (a, b) has the lowest rank -> [ab, c]; there is no merge (ab, c), so it stops.
    tiktoken: "abc" is itself a token, so it is returned whole (and ranking pairs by their
    concatenation would merge ab+c into abc as well).
    """
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"bc", 258: b"abc"}
    return Tokenizer(vocab, [(b"a", b"b"), (b"b", b"c"), (b"a", b"bc")])


def test_tiktoken_and_merge_list_bpe_differ_on_the_counterexample():
    tok = counterexample()
    enc = tok.to_tiktoken()
    assert tok.encode("abc") == [256, ord("c")]  # BPE: ab, c
    assert enc.encode_ordinary("abc") == [258]  # tiktoken: abc
    assert to_hf_tokenizer(tok).encode("abc").ids == [256, ord("c")]  # HF follows the merges
    # They agree where no such token is reachable.
    assert tok.encode("ab bc xbc") == enc.encode_ordinary("ab bc xbc")
    # " abc" is not a token, yet tiktoken still differs: after ab it ranks the pair (ab, c) by
    # its concatenation "abc", a token, and merges it; BPE has no merge (ab, c).
    assert tok.encode(" abc") == [32, 256, 99] and enc.encode_ordinary(" abc") == [32, 258]
    report = tiktoken_mismatches(tok, ["abc abc ab", " abc"])
    assert report["pretokens"] == 4 and report["unique_pretokens"] == 3
    assert report["mismatches"] == 3 and report["unique_mismatches"] == 2
    assert report["first"] == {"pretoken": "abc", "bpe": [256, 99], "tiktoken": [258]}


def test_check_on_names_the_first_differing_pretoken():
    tok = counterexample()
    tok.to_tiktoken(check_on=["ab bc", "cab"])  # no differing pretoken: fine
    with pytest.raises(
        TiktokenMismatch, match=r"pretoken ' abc' as \[32, 258\].*gives \[32, 256, 99\]"
    ):
        tok.to_tiktoken(check_on=["ab bc", "xy abc"])
    assert issubclass(TiktokenMismatch, ValueError)


def test_special_spelled_like_a_rendered_token_is_refused():
    vocab = {i: bytes([i]) for i in range(256)} | {256: b" x"}
    tok = Tokenizer(vocab, [(b" ", b"x")], ["\u0120x"])  # 'Ġx' is how GPT-2 renders b" x"
    with pytest.raises(ValueError, match="rename the special token"):
        to_hf_tokenizer(tok)


# ---------------------------------------------------------------------------------------------
# bpe-encode --backend tiktoken
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["eot", "overlapping"])
def test_tiktoken_backend_writes_the_same_array(export_of, name, tmp_path):
    exported = export_of(name)
    src = DATA / "owt_heldout.txt"
    out = {}
    for backend in ("python", "tiktoken"):
        res = encode_to_npy(
            src,
            exported["ours"],
            tmp_path / f"{backend}.npy",
            num_workers=2,
            chunk_bytes=64 * 1024,
            backend=backend,
        )
        assert res["backend"] == backend and res["num_chunks"] > 2
        out[backend] = np.load(tmp_path / f"{backend}.npy")
        assert read_sidecar(tmp_path / f"{backend}.npy")["backend"] == backend
    assert np.array_equal(out["python"], out["tiktoken"])
    assert out["python"].tolist() == exported["ours"].encode(src.read_text(encoding="utf-8"))


def test_tiktoken_backend_falls_back_with_a_warning(tmp_path, caplog):
    tok = counterexample()
    src = tmp_path / "abc.txt"
    src.write_text("abc ab bc\n" * 100, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="bpe.formats.exports"):
        res = encode_to_npy(src, tok, tmp_path / "abc.npy", num_workers=1, backend="tiktoken")
    assert res["backend"] == "python"
    assert "python backend" in caplog.text
    assert np.load(tmp_path / "abc.npy").tolist() == tok.encode(src.read_text(encoding="utf-8"))
    assert read_sidecar(tmp_path / "abc.npy")["backend"] == "python"


def test_unknown_backend_is_refused(tmp_path):
    with pytest.raises(ValueError, match="backend='rust'"):
        encode_to_npy(
            DATA / "owt_heldout.txt", counterexample(), tmp_path / "x.npy", backend="rust"
        )
