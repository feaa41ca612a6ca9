"""GPT-2 files: the byte table, lossless save/load, clear errors, and loading in HF tokenizers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe import train_bpe
from bpe.formats.gpt2_format import (
    bytes_to_unicode,
    load_merges,
    load_tokenizer_files,
    load_vocab,
    render,
    save_merges,
    save_tokenizer_files,
    save_vocab,
    unrender,
)
from tests.conftest import DATA, EOT, FIXTURES


def test_byte_table_is_a_bijection_onto_printable_characters():
    table = bytes_to_unicode()
    assert len(set(table.values())) == 256
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("A")] == "A"
    assert all(ch.isprintable() and not ch.isspace() for ch in table.values())


def test_gpt2_files_load_and_agree():
    vocab, merges = load_tokenizer_files(DATA / "gpt2" / "vocab.json", DATA / "gpt2" / "merges.txt")
    assert len(vocab) == 50257 and len(merges) == 50000
    assert merges[0] == (b" ", b"t")
    assert vocab[50256] == EOT.encode()


@settings(max_examples=100, deadline=None)
@given(tokens=st.lists(st.binary(min_size=1, max_size=12), unique=True, max_size=40))
def test_vocab_save_load_is_identity(tmp_path_factory, tokens):
    path = tmp_path_factory.mktemp("v") / "vocab.json"
    vocab = dict(enumerate(tokens))
    save_vocab(vocab, path)
    assert load_vocab(path) == vocab


@settings(max_examples=100, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.binary(min_size=1, max_size=8), st.binary(min_size=1, max_size=8)))
)
def test_merges_save_load_is_identity(tmp_path_factory, pairs):
    path = tmp_path_factory.mktemp("m") / "merges.txt"
    save_merges(pairs, path)
    assert load_merges(path) == pairs


def test_render_roundtrip_of_every_byte():
    every = bytes(range(256))
    assert unrender(render(every)) == every


def test_saved_files_roundtrip(tmp_path):
    vocab, merges = train_bpe(FIXTURES / "corpus.en", 400, [EOT])
    save_tokenizer_files(vocab, merges, tmp_path)
    assert load_tokenizer_files(tmp_path / "vocab.json", tmp_path / "merges.txt") == (
        vocab,
        merges,
    )
    assert (tmp_path / "merges.txt").read_text("utf-8").startswith("#version")
    assert not list(tmp_path.glob(".*.tmp"))  # no temp files left behind


def test_malformed_merges_name_the_line(tmp_path):
    path = tmp_path / "merges.txt"
    path.write_text("#version: 0.2\nĠ t\nh e r\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 3: expected 'left right'"):
        load_merges(path)


def test_merges_with_foreign_character_name_the_line(tmp_path):
    path = tmp_path / "merges.txt"
    path.write_text("a b\nc \u3042\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2:.*U\+3042"):
        load_merges(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "JSON object"),
        ("{not json", "not valid JSON"),
        ('{"a": -1}', "ids must be ints"),
        ('{"a": 0, "b": 0}', "used twice"),
        ('{"\u3042": 0}', "not a GPT-2 byte character"),
    ],
)
def test_malformed_vocab_is_named(tmp_path, content, message):
    path = tmp_path / "vocab.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        load_vocab(path)


def test_vocab_and_merges_that_disagree(tmp_path):
    (tmp_path / "vocab.json").write_text(json.dumps({"a": 0, "b": 1}), encoding="utf-8")
    (tmp_path / "merges.txt").write_text("a b\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"merge #1 \(a b\).*'ab' is not in the vocab"):
        load_tokenizer_files(tmp_path / "vocab.json", tmp_path / "merges.txt")


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="vocab file"):
        load_vocab(tmp_path / "vocab.json")
    with pytest.raises(FileNotFoundError, match="merges file"):
        load_merges(tmp_path / "merges.txt")


def test_files_load_in_hugging_face_tokenizers(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    vocab, merges = train_bpe(DATA / "tinystories_sample.txt", 1200, [EOT])
    save_tokenizer_files(vocab, merges, tmp_path)
    model = tokenizers.models.BPE.from_file(
        str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt")
    )
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    assert tok.get_vocab_size() == len(vocab)
    text = "Once upon a time, there was a little girl named Lily.\nShe liked cats 🙂!"
    enc = tok.encode(text)
    assert tok.decode(enc.ids) == text
    # Every HF token id maps to the same bytes in our vocab.
    assert b"".join(vocab[i] for i in enc.ids) == text.encode("utf-8")
    # Common words are single tokens, as our merges say they should be.
    assert enc.tokens[:3] == ["Once", "Ġupon", "Ġa"]
    byte_level = tokenizers.ByteLevelBPETokenizer(
        str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt")
    )
    assert byte_level.encode(text).ids == enc.ids


def test_a_huge_bad_merges_line_gives_a_short_error(tmp_path):
    path = tmp_path / "merges.txt"
    path.write_text("#version: 0.2\nĠ t\n" + "x" * (20 << 20) + "\n", "utf-8")
    with pytest.raises(ValueError, match=r"line 3: expected 'left right'") as err:
        load_merges(path)
    assert len(str(err.value)) < 400


def test_a_deeply_nested_vocab_is_a_clear_error_not_a_traceback(tmp_path):
    path = tmp_path / "vocab.json"
    path.write_text("[" * 200_000 + "]" * 200_000, "utf-8")
    with pytest.raises(ValueError, match=r"nests deeper than any vocab"):
        load_vocab(path)
