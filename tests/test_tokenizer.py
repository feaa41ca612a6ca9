"""Tokenizer: GPT-2 parity with tiktoken, round trips, streaming, special tokens, clear errors."""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe import Tokenizer, train_bpe
from bpe.corpus.documents import load_documents
from bpe.formats.gpt2_format import save_tokenizer_files
from bpe.measures import gpt2_tokenizer, tiktoken_gpt2_encoding
from bpe.text.patterns import GPT2_REGEX
from bpe.text.pretokens import bmp_pretoken_regex
from bpe.tokenizer.merging import merge_bytes, merge_long
from bpe.trainers import learn_merges
from tests.complexity import assert_linear
from tests.conftest import DATA, EOT, FIXTURES

GPT2_VOCAB, GPT2_MERGES = DATA / "gpt2" / "vocab.json", DATA / "gpt2" / "merges.txt"


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return gpt2_tokenizer()


@pytest.fixture(scope="module")
def tiktoken_enc():
    pytest.importorskip("tiktoken")
    return tiktoken_gpt2_encoding()


@pytest.fixture(scope="module")
def trained() -> Tokenizer:
    vocab, merges = train_bpe(FIXTURES / "corpus.en", 500, [EOT])
    return Tokenizer(vocab, merges, [EOT])


def _reference(enc, text: str) -> list[int]:
    return enc.encode(text, allowed_special={EOT})


# ---------------------------------------------------------------------------------------------
# GPT-2 parity
# ---------------------------------------------------------------------------------------------

PARITY_TEXTS = {
    "empty": "",
    "ascii_char": "s",
    "emoji": "🙂",
    "address": (FIXTURES / "address.txt").read_text(encoding="utf-8"),
    "german": (FIXTURES / "german.txt").read_text(encoding="utf-8"),
    "tinystories_fixture": (FIXTURES / "tinystories_sample.txt").read_text(encoding="utf-8"),
    "eot_repeated": f"{EOT}{EOT}{EOT}",
    "eot_adjacent_to_text": f"a{EOT}b{EOT}{EOT} c\n{EOT}\n\n{EOT}",
    "eot_fragments": "<|endoftext|<|endoftext|>|>< |endoftext|>",
    "whitespace_runs": "a  b   c\t\t d\n\n\n e \r\n f    \n  g \u00a0\u3000 h      ",
    "contractions": "I'll it's we've they're I'd I'm don't 'S 'LL ''s'",
    "numbers_and_symbols": "1234567 3.14159 $100,000!!! ???... --> <<<>>> ©®™ 10²",
    "mixed_scripts": "naïve café Ελληνικά русский 中文字符 العربية हिन्दी 🙂🏳️‍🌈 𝔘𝔫𝔦",
}


@pytest.mark.parametrize("name", sorted(PARITY_TEXTS))
def test_gpt2_parity_with_tiktoken(gpt2, tiktoken_enc, name):
    text = PARITY_TEXTS[name]
    assert gpt2.encode(text) == _reference(tiktoken_enc, text)


@pytest.mark.parametrize("sample", ["tinystories_sample.txt", "owt_sample.txt"])
def test_gpt2_parity_on_sample_documents(gpt2, tiktoken_enc, sample):
    docs = load_documents(DATA / sample)
    picked = docs[:: max(1, len(docs) // 60)]  # ~60 documents spread over the file
    for doc in picked:
        assert gpt2.encode(doc) == _reference(tiktoken_enc, doc)
    joined = EOT.join(picked)
    assert gpt2.encode(joined) == _reference(tiktoken_enc, joined)


def test_gpt2_parity_on_whole_heldout_files(gpt2, tiktoken_enc):
    for name in ("tinystories_heldout.txt", "owt_heldout.txt"):
        text = (DATA / name).read_text(encoding="utf-8")
        assert gpt2.encode(text) == _reference(tiktoken_enc, text), name


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text())
def test_gpt2_parity_on_arbitrary_unicode(gpt2, tiktoken_enc, text):
    assert gpt2.encode_ordinary(text) == tiktoken_enc.encode_ordinary(text)


def test_known_ids(gpt2):
    assert gpt2.encode("Hello, world!") == [15496, 11, 995, 0]
    assert gpt2.encode(EOT) == [50256]
    assert gpt2.encode_ordinary(EOT) == [27, 91, 437, 1659, 5239, 91, 29]


# ---------------------------------------------------------------------------------------------
# The fast pre-tokenizer equals GPT2_REGEX
# ---------------------------------------------------------------------------------------------


def test_bmp_pattern_equals_gpt2_regex_on_every_bmp_character():
    fast = bmp_pretoken_regex()
    chars = [chr(c) for c in range(0x10000)]
    # Each character alone, after a space, and in a run: exercises every class and alternative.
    for sep in ("", " ", "'", "a", "1", "\n"):
        text = sep.join(chars)
        assert fast.findall(text) == GPT2_REGEX.findall(text), repr(sep)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.characters(max_codepoint=0xFFFF)))
def test_bmp_pattern_equals_gpt2_regex_on_arbitrary_text(text):
    assert bmp_pretoken_regex().findall(text) == GPT2_REGEX.findall(text)


def test_astral_text_goes_to_the_regex_module(gpt2):
    text = "a 𝔘𝔫 b"
    assert gpt2.pretokens(text) == GPT2_REGEX.findall(text) == ["a", " 𝔘𝔫", " b"]


# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_gpt2_roundtrip_arbitrary_unicode(gpt2, text):
    assert gpt2.decode(gpt2.encode(text)) == text


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_trained_roundtrip_arbitrary_unicode(trained, text):
    ids = trained.encode(text)
    assert trained.decode(ids) == text
    assert trained.decode_bytes(ids) == text.encode("utf-8")


def test_trained_roundtrip_on_samples(trained):
    for name in ("tinystories_heldout.txt", "owt_heldout.txt"):
        text = (DATA / name).read_text(encoding="utf-8")
        ids = trained.encode(text)
        assert trained.decode(ids) == text
        assert ids.count(trained.special_tokens[EOT]) == text.count(EOT)


def test_decode_invalid_utf8_becomes_replacement_character(gpt2):
    ids = gpt2.encode("🙂")  # four bytes, several tokens
    assert len(ids) > 1
    assert gpt2.decode(ids[:1]) == "\ufffd"
    assert gpt2.decode_bytes(ids[:1]) == "🙂".encode()[: len(gpt2.vocab[ids[0]])]


def test_decode_accepts_numpy_arrays(gpt2):
    np = pytest.importorskip("numpy")
    ids = gpt2.encode("numpy ids")
    assert gpt2.decode(np.array(ids, dtype=np.uint16)) == "numpy ids"


# ---------------------------------------------------------------------------------------------
# Merges semantics and special tokens
# ---------------------------------------------------------------------------------------------


def _byte_vocab() -> dict[int, bytes]:
    return {i: bytes([i]) for i in range(256)}


def test_merges_apply_by_rank_leftmost_first():
    vocab = _byte_vocab() | {256: b"bc", 257: b"ab", 258: b"aa"}
    tok = Tokenizer(vocab, [(b"b", b"c"), (b"a", b"b"), (b"a", b"a")])
    assert tok.encode("abc") == [ord("a"), 256]  # rank 0 (b c) beats rank 1 (a b)
    assert tok.encode("aaa") == [258, ord("a")]  # leftmost occurrence first
    assert tok.encode("aaaa") == [258, 258]


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64) | st.text(alphabet="ab c1'", max_size=64).map(str.encode))
def test_heap_merge_for_long_pretokens_equals_the_list_scan(gpt2, trained, data):
    for tok in (gpt2, trained):
        args = (tok._byte_ids.__getitem__, tok._ranks.get, tok._merged)
        short = merge_bytes(data, *args)  # <= 64 bytes: the list scan
        assert merge_long(list(map(args[0], data)), *args[1:]) == short


def test_very_long_pretokens_match_tiktoken(gpt2, tiktoken_enc):
    import base64
    import random

    blob = base64.b64encode(random.Random(0).randbytes(30_000)).decode()
    for text in ("a" * 30_000, blob, " " + "7" * 5_000, "!" * 9_999 + "\n" * 7_777):
        assert gpt2.encode(text) == tiktoken_enc.encode_ordinary(text)


def test_overlapping_special_tokens_longest_first(gpt2, tiktoken_enc):
    double = EOT + EOT
    tok = Tokenizer(gpt2.vocab, gpt2.merges, [EOT, double])
    assert tok.special_tokens == {EOT: 50256, double: 50257}
    text = f"a{EOT}{EOT}{EOT}b{EOT}"
    ids = tok.encode(text)
    assert ids == [*tiktoken_enc.encode("a"), 50257, 50256, *tiktoken_enc.encode("b"), 50256]
    assert tok.decode(ids) == text


def test_special_token_containing_another():
    tok = Tokenizer(_byte_vocab(), [], ["<a>", "x<a>y"])
    assert tok.encode("x<a>y<a>x<a>") == [257, 256, ord("x"), 256]


def test_special_tokens_not_in_vocab_are_appended_and_existing_ones_reused(gpt2):
    assert gpt2.special_tokens == {EOT: 50256} and gpt2.vocab_size == 50257
    tok = Tokenizer(gpt2.vocab, gpt2.merges, ["<|pad|>", EOT])
    assert tok.special_tokens == {"<|pad|>": 50257, EOT: 50256}
    assert tok.vocab_size == 50258
    assert tok.encode(f"<|pad|>{EOT}") == [50257, 50256]


def test_without_special_tokens_the_marker_is_ordinary_text(gpt2):
    plain = Tokenizer(gpt2.vocab, gpt2.merges)
    assert plain.encode(EOT) == gpt2.encode_ordinary(EOT)
    assert 50256 not in plain.encode(EOT)


def test_pickle_rebuilds_the_same_tokenizer(trained):
    tok = Tokenizer(trained.vocab, trained.merges, [EOT, "<|x|>"])
    clone = pickle.loads(pickle.dumps(tok))
    text = "Once<|x|> upon a time<|endoftext|>"
    assert clone.encode(text) == tok.encode(text)
    assert clone.special_tokens == tok.special_tokens


def test_bounded_cache_gives_the_same_ids(gpt2):
    tiny = Tokenizer(gpt2.vocab, gpt2.merges, [EOT], cache_size=3)
    text = (FIXTURES / "address.txt").read_text(encoding="utf-8")
    assert tiny.encode(text) == gpt2.encode(text)
    assert len(tiny._cache) <= 3


# ---------------------------------------------------------------------------------------------
# encode_iterable
# ---------------------------------------------------------------------------------------------

FRAGMENTS = [
    EOT,
    "<|",
    "endoftext",
    "|>",
    "<|endoftext",
    "'",
    "s",
    "ll",
    "ve",
    "re",
    " ",
    "  ",
    "\n",
    "\r\n",
    "\t",
    "a",
    "Bc",
    "1",
    "23",
    "!",
    "?!",
    "🙂",
    "é",
    "\u00a0",
    "𝔘",
    "x" * 5,
]


@st.composite
def text_and_cuts(draw):
    text = "".join(draw(st.lists(st.sampled_from(FRAGMENTS), max_size=40)))
    text += draw(st.text(max_size=10))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    return text, pieces


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=text_and_cuts(), block=st.integers(1, 24))
def test_encode_iterable_equals_encode_of_concatenation(gpt2, data, block):
    text, pieces = data
    assert list(gpt2.encode_iterable(pieces, block_chars=block)) == gpt2.encode(text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=text_and_cuts(), block=st.integers(1, 24))
def test_encode_iterable_with_overlapping_specials(trained, data, block):
    tok = Tokenizer(trained.vocab, trained.merges, [EOT, EOT + EOT, "<|"])
    text, pieces = data
    assert list(tok.encode_iterable(pieces, block_chars=block)) == tok.encode(text)


def test_encode_iterable_straddling_examples(gpt2):
    cases = [
        ["a <|endo", "ftext|> b"],  # special token across items
        ["don'", "t"],  # contraction across items
        ["'", "l", "l"],  # contraction that only completes two items later
        ["hello   ", "   world"],  # whitespace run across items
        ["12", "34", "56"],
        ["\U0001d518", "\U0001d52b"],  # astral letters
    ]
    for pieces in cases:
        text = "".join(pieces)
        assert list(gpt2.encode_iterable(pieces, block_chars=1)) == gpt2.encode(text), pieces


def test_encode_iterable_is_lazy(gpt2):
    def endless():
        while True:
            yield "the cat sat on the mat. "

    stream = gpt2.encode_iterable(endless(), block_chars=64)
    first = [next(stream) for _ in range(10)]
    assert first == gpt2.encode("the cat sat on the mat. " * 3)[:10]


def test_encode_iterable_over_a_file_equals_encode(gpt2):
    path = DATA / "owt_heldout.txt"
    with open(path, encoding="utf-8", newline="") as f:
        streamed = list(gpt2.encode_iterable(f))
    assert streamed == gpt2.encode(path.read_text(encoding="utf-8"))


def test_encode_iterable_memory_is_bounded(gpt2):
    """Peak traced memory while streaming stays below the file size and does not grow with it.

    The cache is warmed first so that only the streaming itself is measured. Holding the text
    (2.5 MB) or its ids as a list (~570K ints, > 4.5 MB of pointers alone) would break the first
    bound; anything proportional to the input would break the second (the file streamed twice).
    """
    import itertools
    import tracemalloc

    path = DATA / "owt_sample.txt"
    size = path.stat().st_size

    def stream(times: int) -> tuple[int, int]:
        files = [open(path, encoding="utf-8", newline="") for _ in range(times)]
        try:
            tracemalloc.start()
            count = sum(1 for _ in gpt2.encode_iterable(itertools.chain(*files)))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            for f in files:
                f.close()
        return count, peak

    gpt2.encode(path.read_text(encoding="utf-8"))  # warm the pretoken cache
    gpt2.pretokens("compile")  # and the split pattern, which the kernel's encode does not use
    count1, peak1 = stream(1)
    count2, peak2 = stream(2)
    assert count1 > 500_000 and count2 == 2 * count1
    # ~1.2 MB: one 64K-character block with its pretokens and ids, whatever the input size.
    assert peak1 < 0.8 * size, f"peak {peak1} bytes while streaming a {size}-byte file"
    assert peak2 < 1.25 * peak1 + 100_000, f"peak grew from {peak1} to {peak2} bytes"


# ---------------------------------------------------------------------------------------------
# Loading files, and trained tokenizers in Hugging Face tokenizers
# ---------------------------------------------------------------------------------------------


def test_from_files_matches_the_constructor(gpt2):
    tok = Tokenizer.from_files(GPT2_VOCAB, GPT2_MERGES, [EOT])
    assert tok.vocab == gpt2.vocab and tok.merges == gpt2.merges
    assert tok.encode(PARITY_TEXTS["german"]) == gpt2.encode(PARITY_TEXTS["german"])


def test_saved_trained_files_load_in_hugging_face_with_the_same_ids(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    vocab, merges = train_bpe(DATA / "tinystories_sample.txt", 2000, [EOT])
    save_tokenizer_files(vocab, merges, tmp_path)
    ours = Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt", [EOT])
    assert ours.vocab == vocab
    hf = tokenizers.Tokenizer(
        tokenizers.models.BPE.from_file(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    )
    hf.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = tokenizers.decoders.ByteLevel()
    hf.add_special_tokens([EOT])
    for name in ("tinystories_heldout.txt", "owt_heldout.txt"):
        docs = load_documents(DATA / name)[:150]
        for doc in docs:
            assert ours.encode(doc) == hf.encode(doc).ids
        joined = EOT.join(docs)
        assert ours.encode(joined) == hf.encode(joined).ids
        assert ours.decode(ours.encode(joined)) == joined


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


def test_decode_unknown_id_names_it(gpt2):
    with pytest.raises(ValueError, match=r"token id 50257 is not in the vocab"):
        gpt2.decode([15496, 50257])
    with pytest.raises(ValueError, match=r"token id -1 is not in the vocab"):
        gpt2.decode_bytes([-1])


def test_encode_iterable_rejects_non_str_items(gpt2):
    with pytest.raises(ValueError, match=r"item 1 is bytes b'x'.*text mode"):
        list(gpt2.encode_iterable(["a", b"x"]))


def test_encode_rejects_bytes(gpt2):
    with pytest.raises(ValueError, match="encode expects a str"):
        gpt2.encode(b"abc")


def test_lone_surrogate_is_a_clear_error(gpt2):
    with pytest.raises(ValueError, match="lone surrogate"):
        gpt2.encode("a\ud800b")


def test_missing_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="vocab.json"):
        Tokenizer.from_files(tmp_path / "vocab.json", GPT2_MERGES)
    with pytest.raises(FileNotFoundError, match="merges.txt"):
        Tokenizer.from_files(GPT2_VOCAB, tmp_path / "merges.txt")


def test_malformed_merges_name_file_and_line(tmp_path):
    bad = tmp_path / "merges.txt"
    bad.write_text("#version: 0.2\nĠ t\nh e r\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"merges.txt' line 3: expected 'left right'"):
        Tokenizer.from_files(GPT2_VOCAB, bad)


def test_mismatched_vocab_and_merges_are_named(tmp_path):
    vocab_path = tmp_path / "vocab.json"
    table = json.loads(GPT2_VOCAB.read_text(encoding="utf-8"))
    del table["Ġthe"]
    vocab_path.write_text(json.dumps(table), encoding="utf-8")
    with pytest.raises(ValueError, match=r"merges.txt'.*'Ġthe' is not in the vocab"):
        Tokenizer.from_files(vocab_path, GPT2_MERGES)


def test_vocab_without_every_byte_is_rejected():
    vocab = {i: bytes([i]) for i in range(255)}
    with pytest.raises(ValueError, match=r"lacks 1 single byte\(s\), e.g. b'\\xff'"):
        Tokenizer(vocab, [])


def test_duplicate_vocab_bytes_are_rejected():
    with pytest.raises(ValueError, match="vocab ids 97 and 256 both hold b'a'"):
        Tokenizer(_byte_vocab() | {256: b"a"}, [])


def test_bad_special_tokens_are_rejected():
    with pytest.raises(ValueError, match="wrap it in a list"):
        Tokenizer(_byte_vocab(), [], EOT)  # type: ignore[arg-type]


def test_from_pretrained_reads_specials_from_tokenizer_json(tmp_path):
    vocab, merges = train_bpe(FIXTURES / "corpus.en", 300, ["<|a|>", EOT])
    tok = Tokenizer(vocab, merges, ["<|a|>", EOT])
    tok.save_pretrained(tmp_path / "hf")
    again = Tokenizer.from_pretrained(tmp_path / "hf")
    assert again.special_tokens == tok.special_tokens == {"<|a|>": 0, EOT: 1}
    assert again.encode("hi<|a|>there" + EOT) == tok.encode("hi<|a|>there" + EOT)
    # A plain GPT-2 pair of files has no tokenizer.json: its specials are the vocab entries no
    # merge makes (as GPT-2's own <|endoftext|>), by the one rule of bpe.formats.pretrained.
    save_tokenizer_files(vocab, merges, tmp_path / "gpt2")
    assert Tokenizer.from_pretrained(tmp_path / "gpt2").special_tokens == {"<|a|>": 0, EOT: 1}
    assert Tokenizer.from_pretrained(tmp_path / "gpt2", special_tokens=[]).special_tokens == {}
    given_specials = Tokenizer.from_pretrained(tmp_path / "gpt2", special_tokens=[EOT])
    assert given_specials.special_tokens == {EOT: 1}
    with pytest.raises(FileNotFoundError, match="pass a run directory"):
        Tokenizer.from_pretrained(tmp_path / "missing")


# -- complexity: one long pretoken --------------------------------------------------------------


@pytest.fixture(scope="module")
def repetitive() -> Tokenizer:
    """A tokenizer trained on runs of `a` and `ab`: many merges apply to such pretokens."""
    counts = {b"a" * 4096: 1, b"ab" * 2048: 1}
    out = learn_merges("heap", counts, 300, [EOT])
    return Tokenizer(out.vocab, out.merges, [EOT])


@pytest.mark.parametrize(
    "unit", ["a", "ab", "aab"], ids=["one letter", "two letters", "three-periodic"]
)
@pytest.mark.parametrize("which", ["gpt2", "repetitive"])
def test_encode_of_a_long_pretoken_costs_linear_time(gpt2, repetitive, which, unit):
    tok = {"gpt2": gpt2, "repetitive": repetitive}[which]

    def work(size: int) -> None:
        tok.clear_cache()  # cold: every call runs BPE on the pretoken
        tok.encode(unit * (size // len(unit)))

    assert_linear(work, 60_000, what=f"{which}.encode of {unit!r} x n")


def test_streaming_a_long_pretoken_costs_linear_time(repetitive):
    """encode_iterable carries a pretoken with no safe cut over: it must not rescan it per line."""

    def work(size: int) -> None:
        repetitive.clear_cache()
        lines = ["ab" * 50] * (size // 100)  # one pretoken across every item
        assert sum(1 for _ in repetitive.encode_iterable(lines, block_chars=1000)) > 0

    assert_linear(work, 20_000, what="encode_iterable of one pretoken in 100-char items")


# ---------------------------------------------------------------------------------------------
# One reference for BPE of one pretoken: every implementation gives its ids
# ---------------------------------------------------------------------------------------------

_PIECES = st.one_of(
    st.text(alphabet="the cat sat\n\t.,!?0123 éü日本🙂'", max_size=24),
    # long runs: past LONG_PRETOKEN (64 bytes) and the kernels' SHORT_PRETOKEN, where the
    # linear-time paths take over
    st.builds(
        lambda c, n: c * n, st.sampled_from(["a", "e", " ", "ab", "é", "!"]), st.integers(40, 160)
    ),
)


@pytest.fixture(scope="module")
def reference_tokenizers() -> dict:
    pytest.importorskip("numba")
    vocab, merges = train_bpe(FIXTURES / "corpus.en", 600, [EOT])
    vocab, merges = _with_long_runs(vocab, merges)
    return {
        "merges": merges,
        "id_of": {t: i for i, t in vocab.items()},
        "python": Tokenizer(vocab, merges, [EOT], merge_backend="python"),
        "compiled": Tokenizer(vocab, merges, [EOT], merge_backend="compiled"),
        "tables": _batch_tables(vocab, merges),
    }


def _batch_tables(vocab: dict[int, bytes], merges: list):
    """The batch kernel's tables (`bpe.tokenizer.compiled.build_tables`) for these merges."""
    from bpe.tokenizer import compiled

    id_of = {t: i for i, t in vocab.items()}
    ranks = {(id_of[a], id_of[b]): r for r, (a, b) in enumerate(merges)}
    merged = [id_of[a + b] for a, b in merges]
    return compiled.build_tables(ranks, merged, [id_of[bytes([b])] for b in range(256)])


def _with_long_runs(vocab: dict[int, bytes], merges: list) -> tuple[dict[int, bytes], list]:
    """The trained merges plus a ladder of merges of runs of "a", so long pretokens merge."""
    vocab, merges = dict(vocab), list(merges)
    have = set(vocab.values())
    run = b"a"
    while len(run) < 64:
        for pair in ((run, run), (run, b"a")):
            joined = pair[0] + pair[1]
            if joined not in have and pair[0] in have and pair[1] in have:
                vocab[len(vocab)] = joined
                merges.append(pair)
                have.add(joined)
        run += run
    return vocab, merges


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pieces=st.lists(_PIECES, max_size=6))
def test_every_bpe_of_a_pretoken_gives_the_reference_ids(reference_tokenizers, pieces):
    """Python's list scan and linked-list path, the compiled whole-text and batch kernels, and
    both dropout paths at a probability that never drops: all give `reference_bpe`'s ids."""
    from bpe.tokenizer import compiled
    from bpe.tokenizer.merging import reference_bpe

    text = "".join(pieces)
    t = reference_tokenizers
    python, fast, id_of = t["python"], t["compiled"], t["id_of"]
    pretokens = python.pretokens(text)
    per_pretoken = [
        tuple(id_of[tok] for tok in reference_bpe(p.encode("utf-8"), t["merges"]))
        for p in pretokens
    ]
    expected = [i for ids in per_pretoken for i in ids]
    never = 1e-30  # the dropout paths run, and no coin is below it
    got = {
        "python": python.encode_ordinary(text),
        "python _bpe": [i for p in pretokens for i in python._bpe(p)],
        "compiled whole text": fast.encode_ordinary(text),
        "compiled batch": [
            i for ids in compiled.merge_pretokens(t["tables"], pretokens) for i in ids
        ],
        "python dropout": python.encode(text, dropout=never, seed=1),
        "compiled dropout": fast.encode(text, dropout=never, seed=1),
    }
    for name, ids in got.items():
        assert list(ids) == expected, name


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pieces=st.lists(_PIECES, max_size=6),
    dropout=st.sampled_from([0.1, 0.3, 0.7]),
    seed=st.integers(0, 2**64 - 1),
)
def test_every_dropout_path_gives_the_reference_ids_under_the_same_coins(
    reference_tokenizers, pieces, dropout, seed
):
    """At any p, Python's list scan and heap and the compiled kernel give `reference_bpe`'s
    ids when it draws each pretoken's coins from (seed, the pretoken's byte offset) as they do
    (`bpe.tokenizer.dropout.DropoutStream`)."""
    import math

    from bpe.tokenizer.dropout import coin_flipper, mix64
    from bpe.tokenizer.merging import reference_bpe

    text = "".join(pieces)
    t = reference_tokenizers
    expected, offset = [], 0
    threshold, seed_key = math.floor(dropout * 2.0**64), mix64(seed)
    for p in t["python"].pretokens(text):
        data = p.encode("utf-8")
        coins = coin_flipper(mix64(seed_key ^ offset), threshold)
        expected += [t["id_of"][tok] for tok in reference_bpe(data, t["merges"], dropped=coins)]
        offset += len(data)
    for name in ("python", "compiled"):
        assert t[name].encode(text, dropout=dropout, seed=seed) == expected, name
