"""The compiled pre-tokenizer (`bpe.pretokenize.engines`, `scan_kernels`) splits as `regex` does.

Its pretokens are `regex.findall(GPT2_PATTERN, text)` exactly (random Unicode: astral
characters, combining marks, apostrophes and contractions, every kind of whitespace, digits of
other scripts), its counts are `count_pretokens`' on every bundled corpus, and its time grows
linearly. Skipped without Numba (the `compiled` extra; `dev` installs it).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.pretokenize import (
    CL100K_PATTERN,
    EOT,
    GPT2_PATTERN,
    count_pretokens,
    special_token_regex,
)
from bpe.pretokenize.engines import (
    char_classes,
    check_engine,
    count_texts_compiled,
    load_scanner,
    resolve_engine,
)
from tests.complexity import assert_linear
from tests.conftest import ROOT

pytest.importorskip("numba")
np = pytest.importorskip("numpy")

#: Characters where GPT-2's alternatives meet: apostrophes and contraction letters, spaces of
#: every kind (U+000B, U+000C, U+0085, U+2028, U+3000, ...), letters with combining marks,
#: digits of other scripts, astral letters, digits and symbols, punctuation.
EDGES = (
    "'sdmtlvreSLx"
    " \t\n\r\x0b\x0c\x1c\x85\xa0\u1680\u2000\u2028\u2029\u202f\u205f\u3000"
    "a\u0301\u0300\u20dd\u0915\u093f"
    "09\u0661\u0969\u00b2\u2167\u3007\U0001d7d9"
    "\U0001d400\U00020000\U0001f600\U0001f3fd\u200d"
    '.,!?-_()[]"<|>`~\u2019\ufffd'
)
TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(EDGES),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=60,
)


def compiled_pretokens(text: str) -> list[str]:
    """The scanner's pretokens of text in order, through its own state machine."""
    from bpe.pretokenize import scan_kernels

    load_scanner()
    cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    table = char_classes()
    out, i = [], 0
    while i < len(text):
        j = int(scan_kernels._pretoken_end(cps, table, i, len(text)))
        assert j > i
        out.append(text[i:j])
        i = j
    return out


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_the_scanner_finds_exactly_the_pretokens_of_regex(text):
    assert compiled_pretokens(text) == regex.findall(GPT2_PATTERN, text)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(TEXT, st.just(EOT), st.just("<|a|>")), max_size=6))
def test_its_counts_equal_count_pretokens_with_special_tokens(parts):
    text = "".join(parts)
    specials = [EOT, "<|a|>"]
    expected = count_pretokens(text, specials)
    assert count_pretokens(text, specials, engine="compiled") == expected
    # several texts scanned in one call: no pretoken crosses a text's end
    joined = count_texts_compiled(parts, special_token_regex(specials))
    assert joined == sum((count_pretokens(p, specials) for p in parts), Counter())


BUNDLED = sorted(
    [*(ROOT / "data").glob("*.txt"), *(ROOT / "tests" / "fixtures").glob("*.txt"),
     ROOT / "tests" / "fixtures" / "corpus.en"]
)  # fmt: skip


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_counts_equal_count_pretokens_on_every_bundled_corpus(path):
    text = path.read_text(encoding="utf-8")
    expected = count_pretokens(text, [EOT])
    assert count_pretokens(text, [EOT], engine="compiled") == expected


def test_the_class_table_is_regex_own():
    table = char_classes()
    rng = random.Random(0)
    for cp in [*rng.sample(range(0x110000), 3000), 0x20, 0x85, 0x3000, 0x1D7D9, 0x10FFFF]:
        ch = chr(cp)
        expected = (
            3 if regex.match(r"\s", ch) else 1 if regex.match(r"\p{L}", ch)
            else 2 if regex.match(r"\p{N}", ch) else 0
        )  # fmt: skip
        assert table[cp] == expected, hex(cp)


def test_the_engine_choice():
    assert resolve_engine("auto", pattern=GPT2_PATTERN, trainer="compiled") == "compiled"
    assert resolve_engine("auto", pattern=CL100K_PATTERN, trainer="compiled") == "regex"
    assert resolve_engine("compiled", pattern=GPT2_PATTERN, trainer="heap") == "compiled"
    with pytest.raises(ValueError, match="GPT-2's pattern only"):
        check_engine("compiled", CL100K_PATTERN)
    with pytest.raises(ValueError, match="'fast' is unknown"):
        check_engine("fast", GPT2_PATTERN)


def test_the_scanner_is_linear_in_the_text():
    """Many distinct pretokens (the hash table grows) and long ones (a 10^5-letter word)."""
    rng = random.Random(1)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 9)))
             for _ in range(40_000)]  # fmt: skip
    base = " ".join(words) + " " + "x" * 100_000 + "  \n" + "7" * 50_000 + " "

    def work(n: int) -> None:
        count_texts_compiled([base * (n // len(base))])

    load_scanner()
    assert_linear(work, 4 * len(base), what="the compiled scanner")
