"""Split patterns: the published strings, splits equal to tiktoken's own engine on the bundled
samples and random Unicode, the `re` fast path, and safe chunk cuts proved for each pattern.
"""

from __future__ import annotations

import ast
import inspect

import pytest
import tiktoken
import tiktoken_ext.openai_public as openai_public
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe import Tokenizer
from bpe.corpus.chunks import plan_chunks
from bpe.pretokenize import pretokenize
from bpe.pretokenize.counting import count_pretokens
from bpe.text.cuts import cut_regex, safe_cuts
from bpe.text.patterns import (
    CL100K_PATTERN,
    GPT2_PATTERN,
    O200K_PATTERN,
    PATTERNS,
    compiled_pattern,
    pattern_name,
    resolve_pattern,
)
from bpe.text.pretokens import bmp_pretoken_regex, find_pretokens
from bpe.trainers import learn_merges
from tests.conftest import DATA, EOT

SAMPLES = sorted(DATA.glob("*.txt"))


def _published(function) -> str:
    """The `pat_str` a tiktoken_ext constructor defines, read from its source (no download)."""
    tree = ast.parse(inspect.getsource(function))
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "pat_str":
                    if isinstance(value, ast.Constant):
                        return value.value
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "pat_str":
            call = node.value  # "|".join([...])
            return call.func.value.value.join(ast.literal_eval(call.args[0]))
    raise AssertionError(f"no pat_str in {function.__name__}")


def test_patterns_are_tiktokens_published_strings():
    assert CL100K_PATTERN == _published(openai_public.cl100k_base)
    assert O200K_PATTERN == _published(openai_public.o200k_base)
    assert PATTERNS == {"gpt2": GPT2_PATTERN, "cl100k": CL100K_PATTERN, "o200k": O200K_PATTERN}


def _tiktoken_pieces(pattern: str, text: str, ours: list[str]) -> list[bytes]:
    """How tiktoken's own (Rust) engine splits text with `pattern`, as the pieces' bytes.

    tiktoken exposes no split, so an Encoding is built whose ranks hold the 256 bytes, every
    pretoken we found and every concatenation of two neighbouring ones: a piece tiktoken finds
    is one token exactly when it is in the ranks. If tiktoken's pieces were ours joined, the
    join is a token; if one of ours were cut, its token could not form (tokens never cross
    tiktoken's pieces): either way the decoded tokens differ from our pretokens.
    """
    raw = [p.encode("utf-8") for p in ours]
    vocab = {bytes([b]) for b in range(256)} | set(raw) | {a + b for a, b in zip(raw, raw[1:])}
    ranks = {tok: i for i, tok in enumerate(sorted(vocab, key=lambda t: (len(t), t)))}
    enc = tiktoken.Encoding(
        "split-probe", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}
    )
    return enc.decode_tokens_bytes(enc.encode_ordinary(text))


@pytest.mark.parametrize("name", list(PATTERNS))
@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_splits_equal_tiktokens_on_the_bundled_samples(name, sample):
    pattern = PATTERNS[name]
    # The first 600 KB of each file (all of a held-out file): the probe's cost grows with the
    # number of distinct pretokens, and this keeps the test to seconds.
    text = sample.read_text(encoding="utf-8")[:600_000]
    ours = find_pretokens(text, pattern)
    assert ours == compiled_pattern(pattern).findall(text)  # the fast path agrees
    assert _tiktoken_pieces(pattern, text, ours) == [p.encode("utf-8") for p in ours]


@settings(max_examples=300, deadline=None)
@given(
    # Assigned characters only: engines built on different Unicode versions may class a code
    # point assigned after Python 3.11's Unicode 14 differently (seen: U+3D000).
    text=st.text(st.characters(exclude_categories=("Cs", "Cn")), max_size=80),
    name=st.sampled_from(list(PATTERNS)),
)
def test_splits_equal_tiktokens_on_random_unicode(text, name):
    pattern = PATTERNS[name]
    ours = find_pretokens(text, pattern)
    assert "".join(ours) == text
    assert ours == compiled_pattern(pattern).findall(text)
    assert _tiktoken_pieces(pattern, text, ours) == [p.encode("utf-8") for p in ours]


# Letters of both cases, digits in long runs, punctuation that may lead a word, apostrophes and
# contractions in both cases, every kind of whitespace, CJK, Cyrillic, emoji, combining marks.
_TRICKY = list("aZé'sSdmtlvre09٣²½.,!?-+/=(「」。、") + [
    " ",
    "  ",
    "\n",
    "\t",
    "\r",
    "\r\n",
    "\u00a0",
    "\u3000",
    "日本",
    "語",
    "Привет",
    "мир",
    "🙂",
    "👍🏽",
    "e\u0301",
    "\u0301",
    "'ll",
    "'VE",
    "'Re",
    "x'",
    "1'",
    "''",
    "12345",
    "camelCase",
    "HTMLParser",
    "DON'T",
    "//",
    "\n\n",
    " \n",
]


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(st.sampled_from(_TRICKY), max_size=40).map("".join),
    name=st.sampled_from(list(PATTERNS)),
)
def test_tricky_text_splits_equal_tiktokens(text, name):
    pattern = PATTERNS[name]
    ours = find_pretokens(text, pattern)
    assert _tiktoken_pieces(pattern, text, ours) == [p.encode("utf-8") for p in ours]


@settings(max_examples=500, deadline=None)
@given(
    text=st.lists(st.sampled_from(_TRICKY), max_size=40).map("".join),
    name=st.sampled_from(list(PATTERNS)),
)
def test_every_safe_cut_of_every_pattern_leaves_the_pretokens_unchanged(text, name):
    """The per-pattern proofs in bpe.corpus.chunks checked: a cut at any safe cut changes no
    pretoken."""
    pattern = PATTERNS[name]
    whole = compiled_pattern(pattern).findall(text)
    for k in safe_cuts(text, pattern=pattern):
        assert 0 < k < len(text)
        left, right = text[:k], text[k:]
        assert find_pretokens(left, pattern) + find_pretokens(right, pattern) == whole, (text, k)


@pytest.mark.parametrize(
    ("name", "text", "cuts"),
    [
        ("gpt2", "(x) ab12", [1, 2, 3, 6]),  # GPT-2 cuts between punctuation and a letter
        ("cl100k", "(x) ab12", [2, 3, 6]),  # cl100k never does: "(x" is one pretoken
        ("cl100k", "a.\nb", [1]),  # nor before a newline after punctuation (".\n" is one)
        ("o200k", "don't go", [5]),  # o200k keeps the contraction with its word
        ("o200k", "e\u0301!", []),  # nor after a combining mark (marks run on in punctuation)
    ],
)
def test_cut_rules_differ_per_pattern(name, text, cuts):
    assert list(safe_cuts(text, pattern=PATTERNS[name])) == cuts


def test_every_built_in_pattern_has_a_fast_path_and_cut_rules():
    for pattern in PATTERNS.values():
        assert bmp_pretoken_regex(pattern) is not None
        assert cut_regex(pattern) is not None


@pytest.mark.parametrize("name", ["cl100k", "o200k"])
def test_parallel_chunked_counts_equal_whole_text_counts(name, tmp_path):
    pattern = PATTERNS[name]
    text = (DATA / "owt_heldout.txt").read_text(encoding="utf-8")
    path = tmp_path / "t.txt"
    path.write_bytes(text.replace(EOT, "").encode("utf-8"))  # no special token: character cuts
    chunks = plan_chunks(path, max_chunk_bytes=8 * 1024, window_bytes=4096, pattern=pattern)
    assert len(chunks) > 20
    counted = pretokenize(path, num_workers=2, max_chunk_bytes=8 * 1024, pattern=pattern)
    assert counted.counts == count_pretokens(text.replace(EOT, ""), pattern=pattern)


def test_a_custom_pattern_is_cut_at_special_tokens_only(tmp_path):
    pattern = resolve_pattern(r"\p{L}+|\p{N}|\s+|[^\s\p{L}\p{N}]+")
    assert pattern_name(pattern) == "custom" and cut_regex(pattern) is None
    text = (DATA / "tinystories_heldout.txt").read_text(encoding="utf-8")
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    chunks = plan_chunks(path, [EOT], max_chunk_bytes=8 * 1024, pattern=pattern)
    data = path.read_bytes()
    assert len(chunks) > 5
    assert all(data[c.start :].startswith(EOT.encode()) for c in chunks[1:])
    counted = pretokenize(path, [EOT], num_workers=2, max_chunk_bytes=8 * 1024, pattern=pattern)
    assert counted.counts == count_pretokens(text, [EOT], pattern=pattern)
    assert counted.counts != count_pretokens(text, [EOT])


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("(", "not a valid regex"),
        (r"\p{L}+", "does not tile"),
        ("a*", "does not tile"),
        ("", "must be one of"),
    ],
)
def test_a_bad_custom_pattern_is_rejected(bad, message):
    with pytest.raises(ValueError, match=message):
        resolve_pattern(bad)


def test_the_patterns_differ_as_documented():
    assert find_pretokens(" 1234567", CL100K_PATTERN) == [" ", "123", "456", "7"]
    assert find_pretokens(" 1234567", GPT2_PATTERN) == [" 1234567"]
    assert find_pretokens("I'M here", CL100K_PATTERN) == ["I", "'M", " here"]
    assert find_pretokens("I'M here", GPT2_PATTERN) == ["I", "'", "M", " here"]


@pytest.fixture(scope="module")
def tokenizer_of():
    """A 600-token tokenizer per pattern, trained on the TinyStories held-out file."""
    text = (DATA / "tinystories_heldout.txt").read_text(encoding="utf-8")
    made = {}
    for name, pattern in PATTERNS.items():
        out = learn_merges("heap", count_pretokens(text, [EOT], pattern=pattern), 600, [EOT])
        made[name] = Tokenizer(out.vocab, out.merges, [EOT], pattern=pattern)
    return made


@settings(max_examples=100, deadline=None)
@given(
    parts=st.lists(st.sampled_from(_TRICKY + [EOT, "Once upon a time", " they're"]), max_size=60),
    cuts=st.lists(st.integers(0, 400), max_size=8),
    name=st.sampled_from(list(PATTERNS)),
)
def test_streaming_equals_encode_for_every_pattern(tokenizer_of, parts, cuts, name):
    """encode_iterable's stable prefix holds for each pattern (o200k's trailing contractions)."""
    tok = tokenizer_of[name]
    text = "".join(parts)
    bounds = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    assert list(tok.encode_iterable(pieces, block_chars=4)) == tok.encode(text)


# ---------------------------------------------------------------------------------------------
# A pattern read from a file is bounded before it runs
# ---------------------------------------------------------------------------------------------

#: backtracks catastrophically on a long word that ends without "!" (the issue's case: 1.4 s
#: on 24 characters, doubling per character)
_CATASTROPHIC = r"(?:\w|\w\w)+!|\S|\s"


def test_a_catastrophic_pattern_in_tokenizer_json_is_refused_before_it_runs(tmp_path):
    import json
    import time

    from bpe.runs.layout import MANIFEST_FILE, TOKENIZER_JSON

    Tokenizer.from_pretrained(DATA / "gpt2").save_pretrained(tmp_path)
    path = tmp_path / TOKENIZER_JSON
    doc = json.loads(path.read_text("utf-8"))
    doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = _CATASTROPHIC
    path.write_text(json.dumps(doc), "utf-8")
    (tmp_path / MANIFEST_FILE).unlink()  # as a hand-edited download would come
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"tokenizer\.json took over .* backtracks"):
        Tokenizer.from_pretrained(tmp_path)
    assert time.perf_counter() - start < 30  # refused by the probe's timeout, not after a hang
    # the explicit opt-in: a caller who passes a pattern is not refused for the file's
    tok = Tokenizer.from_pretrained(tmp_path, pattern="gpt2")
    assert tok.encode("Hello world") == [15496, 995]


def test_a_custom_linear_pattern_from_a_file_is_accepted():
    from bpe.text.patterns import bounded_pattern

    assert bounded_pattern(r"\w+|\W+", source="t.json") == r"\w+|\W+"
    with pytest.raises(ValueError, match=r"t\.json: split pattern .* does not tile"):
        bounded_pattern(r"\w+", source="t.json")
