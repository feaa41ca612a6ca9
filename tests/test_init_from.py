"""Continue training (`init_from`): a continued run equals a direct one merge for merge, for every
trainer; GPT-2's ids are kept; mismatched parents are refused before any work.
"""

from __future__ import annotations

import pytest

from bpe import Tokenizer
from bpe.formats.gpt2_format import load_tokenizer_files
from bpe.formats.init_from import load_parent
from bpe.pipeline import train_bpe, train_bpe_detailed
from bpe.pretokenize.counting import count_pretokens
from bpe.trainers import TRAINERS, learn_merges
from tests.conftest import DATA, EOT

GPT2_DIR = DATA / "gpt2"


@pytest.fixture(scope="module")
def heldout_counts():
    return count_pretokens((DATA / "tinystories_heldout.txt").read_text(encoding="utf-8"), [EOT])


@pytest.fixture(scope="module")
def heap_runs(heldout_counts):
    """The 1,000 parent and the direct 2,000 run (every trainer gives these: test_trainers)."""
    return learn_merges("heap", heldout_counts, 1000, [EOT]), learn_merges(
        "heap", heldout_counts, 2000, [EOT]
    )


@pytest.mark.parametrize("name", list(TRAINERS))
def test_continuing_1000_to_2000_equals_a_direct_2000_run(name, heldout_counts, heap_runs):
    """Same merges, ids and merge counts (ties and the counts of the replayed merges included)."""
    parent, direct = heap_runs
    assert len(direct.merges) == 2000 - 257  # no early stop: every merge is compared
    continued = learn_merges(
        name, heldout_counts, 2000, [EOT], parent=_parent(parent.vocab, parent.merges)
    )
    assert continued.merges == direct.merges
    assert continued.vocab == direct.vocab
    assert continued.merge_counts == direct.merge_counts


class _parent:
    def __init__(self, vocab, merges, special_tokens=(EOT,)):
        self.vocab, self.merges, self.special_tokens = vocab, merges, list(special_tokens)


def test_a_run_directory_continues_through_train_bpe(tmp_path):
    corpus = DATA / "tinystories_heldout.txt"
    vocab, merges = train_bpe(corpus, 1000, [EOT], num_workers=1)
    Tokenizer(vocab, merges, [EOT]).save_pretrained(tmp_path / "parent")
    result = train_bpe_detailed(corpus, 1500, [EOT], num_workers=1, init_from=tmp_path / "parent")
    assert (result.vocab, result.merges) == train_bpe(corpus, 1500, [EOT], num_workers=1)
    assert result.init_from["merges"] == 1000 - 257
    assert result.init_from["vocab_size"] == 1000


def test_gpt2_extended_keeps_every_gpt2_id():
    gpt2_vocab, gpt2_merges = load_tokenizer_files(GPT2_DIR / "vocab.json", GPT2_DIR / "merges.txt")
    parent = load_parent(GPT2_DIR)
    assert parent.special_tokens == [EOT]  # no tokenizer.json: the token that is no merge
    result = train_bpe_detailed(
        DATA / "tinystories_heldout.txt", 50257 + 100, [EOT], num_workers=1, init_from=GPT2_DIR
    )
    assert result.merges[:50000] == gpt2_merges
    assert all(result.vocab[i] == t for i, t in gpt2_vocab.items())  # 50256 stays <|endoftext|>
    assert sorted(result.vocab)[-100:] == list(range(50257, 50357))  # new ids follow GPT-2's
    tok = Tokenizer(result.vocab, result.merges, [EOT])
    text = (DATA / "tinystories_heldout.txt").read_text(encoding="utf-8")[:20_000]
    assert tok.decode(tok.encode(text)) == text
    assert tok.encode(EOT) == [50256]


def test_the_parent_special_tokens_must_be_the_runs(tmp_path):
    vocab, merges = train_bpe(DATA / "tinystories_heldout.txt", 300, [EOT, "<|pad|>"])
    Tokenizer(vocab, merges, [EOT, "<|pad|>"]).save_pretrained(tmp_path / "p")
    with pytest.raises(ValueError, match="must include the parent's"):
        train_bpe(DATA / "tinystories_heldout.txt", 400, [EOT], init_from=tmp_path / "p")
    # A superset is fine: the extra special token is appended after the parent's ids.
    vocab2, _ = train_bpe(
        DATA / "tinystories_heldout.txt", 400, [EOT, "<|pad|>", "<|x|>"], init_from=tmp_path / "p"
    )
    assert vocab2[300] == b"<|x|>" and all(vocab2[i] == t for i, t in vocab.items())


def test_a_parent_with_another_pattern_or_more_tokens_is_refused(tmp_path):
    with pytest.raises(ValueError, match="'gpt2' split pattern but this run uses 'cl100k'"):
        train_bpe(
            DATA / "tinystories_heldout.txt", 51000, [EOT], pattern="cl100k", init_from=GPT2_DIR
        )
    with pytest.raises(ValueError, match="smaller than init_from"):
        train_bpe(DATA / "tinystories_heldout.txt", 1000, [EOT], init_from=GPT2_DIR)
    with pytest.raises(FileNotFoundError, match="not a directory"):
        train_bpe(DATA / "tinystories_heldout.txt", 1000, [EOT], init_from=tmp_path / "nope")
