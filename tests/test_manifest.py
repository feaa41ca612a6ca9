"""A tokenizer directory is one whole: its writer leaves a manifest, every loader checks it.

The cases are the ones users met: saving over a directory that held another tokenizer (a
PickyBPE one's removals.json, a pruned one's missing exports, a foreign tokenizer.json), a
merges.txt cut short by an interrupted copy (with a manifest, and in an older run without one),
an emptied merges.txt beside a vocab.json, and a fuzz test over every way of cutting, dropping or
swapping the files of a saved directory: each load gives the saved tokenizer's ids or a clear
error, never another tokenizer.
"""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer

from bpe import Tokenizer, train_bpe_detailed
from bpe.analysis.compare.sides import load_side
from bpe.encode.npy import open_tokenizer
from bpe.formats.init_from import load_parent
from bpe.formats.manifest import TokenizerDirMismatch, check_whole
from bpe.runs.layout import (
    LOADED_FILES,
    MANIFEST_FILE,
    MERGES_FILE,
    METRICS_FILE,
    REMOVALS_FILE,
    TOKENIZER_JSON,
    VOCAB_FILE,
)
from bpe.variants import Variant
from tests.conftest import DATA, EOT, FIXTURES

TEXT = "Hello there, world!" + EOT + " the cat sat on the mat, 123 héllo"


@pytest.fixture(scope="module")
def plain() -> Tokenizer:
    return train_bpe_detailed(FIXTURES / "corpus.en", 400, [EOT], trainer="heap").tokenizer()


@pytest.fixture(scope="module")
def picky() -> Tokenizer:
    result = train_bpe_detailed(
        DATA / "tinystories_sample.txt",
        500,
        [EOT],
        trainer="indexed",
        variant=Variant("picky", threshold=0.9),
    )
    assert result.removals
    return result.tokenizer()


def _loaders(path):
    """Every way the lab opens a tokenizer directory."""
    return {
        "from_pretrained": lambda: Tokenizer.from_pretrained(path),
        "bpe-encode": lambda: open_tokenizer([path]),
        "init_from": lambda: load_parent(path),
        "bpe-compare": lambda: load_side(path, heldout=False),
    }


def test_saving_over_a_picky_tokenizer_removes_its_removals(tmp_path, plain, picky):
    picky.save_pretrained(tmp_path)
    assert (tmp_path / REMOVALS_FILE).is_file()
    plain.save_pretrained(tmp_path)
    assert not (tmp_path / REMOVALS_FILE).exists()
    assert Tokenizer.from_pretrained(tmp_path).encode(TEXT) == plain.encode(TEXT)
    assert check_whole(tmp_path)


def test_saving_a_picky_tokenizer_over_a_plain_one_removes_the_exports(tmp_path, plain, picky):
    plain.save_pretrained(tmp_path)
    picky.save_pretrained(tmp_path)
    # HF and tiktoken cannot encode as PickyBPE does: their files must not stay to load another
    assert not (tmp_path / TOKENIZER_JSON).exists()
    assert not (tmp_path / "tokenizer.tiktoken").exists()
    assert Tokenizer.from_pretrained(tmp_path).encode(TEXT) == picky.encode(TEXT)


def test_a_foreign_tokenizer_json_is_replaced_by_ours(tmp_path, plain):
    foreign = Tokenizer(plain.vocab, plain.merges[:50], [EOT], pattern="cl100k")
    foreign.save_pretrained(tmp_path)
    plain.save_pretrained(tmp_path)
    hf = HFTokenizer.from_file(str(tmp_path / TOKENIZER_JSON))
    plain_text = TEXT.replace(EOT, " ")
    assert hf.encode(plain_text).ids == plain.encode(plain_text)
    assert Tokenizer.from_pretrained(tmp_path).encode(TEXT) == plain.encode(TEXT)


def test_a_file_not_in_the_manifest_is_refused_by_every_loader(tmp_path, plain, picky):
    plain.save_pretrained(tmp_path)
    picky.save_pretrained(tmp_path / "p")
    shutil.copy(tmp_path / "p" / REMOVALS_FILE, tmp_path / REMOVALS_FILE)  # planted by hand
    for load in _loaders(tmp_path).values():
        with pytest.raises(TokenizerDirMismatch, match=r"removals\.json.*not saved with"):
            load()


@pytest.mark.parametrize("loader", ["from_pretrained", "bpe-encode", "init_from", "bpe-compare"])
def test_a_merges_file_cut_short_is_refused_naming_it(tmp_path, plain, loader):
    plain.save_pretrained(tmp_path)
    lines = (tmp_path / MERGES_FILE).read_text("utf-8").splitlines(keepends=True)
    (tmp_path / MERGES_FILE).write_text("".join(lines[: len(lines) // 2]), "utf-8")
    with pytest.raises(ValueError, match=r"merges\.txt was changed after its tokenizer was saved"):
        _loaders(tmp_path)[loader]()


def test_an_older_run_without_a_manifest_is_checked_by_its_merges_hash(tmp_path, plain):
    from bpe.formats.gpt2_format import merges_sha256

    plain.save_pretrained(tmp_path)
    (tmp_path / MANIFEST_FILE).unlink()
    metrics = {"status": "complete", "merges_sha256": merges_sha256(plain.merges)}
    (tmp_path / METRICS_FILE).write_text(json.dumps(metrics), "utf-8")
    assert Tokenizer.from_pretrained(tmp_path).encode(TEXT) == plain.encode(TEXT)
    lines = (tmp_path / MERGES_FILE).read_text("utf-8").splitlines(keepends=True)
    (tmp_path / MERGES_FILE).write_text("".join(lines[:-40]), "utf-8")
    with pytest.raises(ValueError, match=r"not the merges its run learned"):
        Tokenizer.from_pretrained(tmp_path)


@pytest.mark.parametrize("kept", [0, 0.5])
def test_a_bare_vocab_with_an_emptied_or_cut_merges_file_is_refused(tmp_path, plain, kept):
    plain.save_pretrained(tmp_path)
    for name in (MANIFEST_FILE, *[n for n in LOADED_FILES if n not in (VOCAB_FILE, MERGES_FILE)]):
        (tmp_path / name).unlink(missing_ok=True)
    lines = (tmp_path / MERGES_FILE).read_text("utf-8").splitlines(keepends=True)
    (tmp_path / MERGES_FILE).write_text("".join(lines[: int(kept * len(lines)) or 1]), "utf-8")
    for load in _loaders(tmp_path).values():
        with pytest.raises(
            ValueError, match=r"no merge of merges\.txt makes.*cut short or emptied"
        ):
            load()


def test_gpt2s_own_files_still_load_without_a_manifest():
    # <|endoftext|> is made by no merge and declared nowhere: it looks like a special token
    tok = Tokenizer.from_pretrained(DATA / "gpt2")
    assert tok.encode("Hello world" + EOT) == [15496, 995, 50256]


def test_an_interrupted_save_leaves_no_manifest_vouching_for_old_files(
    tmp_path, plain, monkeypatch
):
    plain.save_pretrained(tmp_path)
    from bpe.formats import exports

    def broken(*_args, **_kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(exports, "save_exports", broken)
    with pytest.raises(OSError, match="disk full"):
        plain.save_pretrained(tmp_path)
    assert not (tmp_path / MANIFEST_FILE).exists()


# ---------------------------------------------------------------------------------------------
# Fuzz: any damage to a saved directory loads the saved tokenizer or fails clearly
# ---------------------------------------------------------------------------------------------

_DAMAGE = st.lists(
    st.tuples(
        st.sampled_from([*LOADED_FILES, MANIFEST_FILE]),
        st.sampled_from(["drop", "cut", "swap", "empty"]),
        st.floats(0.0, 1.0),
    ),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(damage=_DAMAGE)
def test_a_damaged_directory_loads_the_saved_tokenizer_or_fails_clearly(
    tmp_path_factory, plain, picky, damage
):
    root = tmp_path_factory.mktemp("fuzz")
    saved, other = root / "saved", root / "other"
    plain.save_pretrained(saved)
    picky.save_pretrained(other)
    for name, how, where in damage:
        path = saved / name
        if how == "drop":
            path.unlink(missing_ok=True)
        elif how == "swap" and (other / name).is_file():
            shutil.copy(other / name, path)
        elif how == "cut" and path.is_file():
            data = path.read_bytes()
            path.write_bytes(data[: int(where * len(data))])
        elif how == "empty":
            path.write_bytes(b"")
    expected = plain.encode(TEXT)
    for name, load in _loaders(saved).items():
        try:
            loaded = load()
        except (ValueError, FileNotFoundError) as err:
            assert str(err), name  # a clear error, with a message
            continue
        tok = loaded if isinstance(loaded, Tokenizer) else getattr(loaded, "tokenizer", None)
        if tok is None:  # init_from's parent: its vocab and merges
            tok = Tokenizer(
                loaded.vocab,
                loaded.merges,
                loaded.special_tokens,
                pattern=loaded.pattern,
                removals=list(loaded.removals),
            )
        assert tok.encode(TEXT) == expected, (name, damage)
