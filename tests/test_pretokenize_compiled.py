"""The compiled pre-tokenizer (`bpe.pretokenize.engines`, `scan_kernels`) splits as `regex` does.

Its pretokens are `regex.findall(GPT2_PATTERN, text)` exactly (random Unicode: astral
characters, combining marks, apostrophes and contractions, every kind of whitespace, digits of
other scripts), its counts are `count_pretokens`' on every bundled corpus, and its time grows
linearly. Skipped without Numba (the `compiled` extra; `dev` installs it).
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.corpus.documents import find_holdout
from bpe.corpus.sources import resolve_source
from bpe.pipeline import train_bpe_detailed
from bpe.pretokenize import pretokenize
from bpe.pretokenize.counting import count_pretokens, group_ranges
from bpe.pretokenize.engines import (
    char_classes,
    check_engine,
    count_texts_compiled,
    load_scanner,
    resolve_engine,
)
from bpe.runs.stages import COMPILE
from bpe.text.patterns import CL100K_PATTERN, GPT2_PATTERN
from bpe.text.specials import EOT, special_token_regex
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
    from bpe.text import gpt2_scanner

    load_scanner()
    cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    table = char_classes()
    out, i = [], 0
    while i < len(text):
        j = int(gpt2_scanner.pretoken_end(cps, table, i, len(text)))
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
    [
        *(ROOT / "data").glob("*.txt"),
        *(ROOT / "tests" / "fixtures").glob("*.txt"),
        ROOT / "tests" / "fixtures" / "corpus.en",
    ]
)


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_counts_equal_count_pretokens_on_every_bundled_corpus(path):
    text = path.read_text(encoding="utf-8")
    expected = count_pretokens(text, [EOT])
    assert count_pretokens(text, [EOT], engine="compiled") == expected


def test_the_table_keeps_every_kind_of_key_apart_as_it_grows():
    """Packed keys (up to three code points; up to nine ASCII ones), hashed ones (longer or not
    ASCII; their length in the pool, past 255 and 65,535 too), NUL, and the table doubling many
    times with all of them in it: the counts and their order are `regex`'s."""
    rng = random.Random(0)
    alphabet = "abcdefghij\x00\u00e9\u4e2d\U0001f600"
    words = [
        "".join(rng.choice(alphabet[:10] if k % 2 else alphabet) for _ in range(1 + k % 12))
        for k in range(30_000)
    ]
    words += ["\x00", "\x00\x00a", "a", " " * 300, "x" * 70_000, "\u00e9" * 300]
    text = " ".join(rng.choice(words) for _ in range(120_000)) + " " + " ".join(words)
    expected = count_pretokens(text, engine="regex")
    counts = count_texts_compiled([text])
    assert len(counts) > 20_000  # past many doublings of a table that starts at 8,192 slots
    assert list(counts.items()) == list(expected.items())  # first occurrence, as regex


def test_the_class_table_is_regex_own():
    table = char_classes()
    rng = random.Random(0)
    for cp in [*rng.sample(range(0x110000), 3000), 0x20, 0x85, 0x3000, 0x1D7D9, 0x10FFFF]:
        ch = chr(cp)
        expected = (
            3
            if regex.match(r"\s", ch)
            else 1
            if regex.match(r"\p{L}", ch)
            else 2
            if regex.match(r"\p{N}", ch)
            else 0
        )
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
    words = [
        "".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 9))) for _ in range(40_000)
    ]
    base = " ".join(words) + " " + "x" * 100_000 + "  \n" + "7" * 50_000 + " "

    def work(n: int) -> None:
        count_texts_compiled([base * (n // len(base))])

    load_scanner()
    assert_linear(work, 4 * len(base), what="the compiled scanner")


# -- in the pipeline: files, corpora, workers, training -------------------------------------------


def test_default_workers_on_the_bundled_owt_sample():
    """What a user gets: `pretokenize` with default workers, the regex engine's counts."""
    path = ROOT / "data" / "owt_sample.txt"
    expected = pretokenize(path, [EOT]).counts
    compiled = pretokenize(path, [EOT], engine="compiled")
    assert compiled.engine == "compiled" and compiled.counts == expected
    # below COMPILED_MIN_PARALLEL_BYTES the scanner runs in this process (measured faster)
    assert compiled.num_workers == 1 and compiled.start_method == "in-process"


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_groups_of_chunks_counted_in_workers_equal_the_regex_counts(method, monkeypatch):
    """Worker processes (forked with the scanner loaded, or started fresh) each count a group
    of chunks into one table."""
    path = ROOT / "tests" / "fixtures" / "corpus.en"
    # pinned: the policy picks forkserver in a process with threads (whatever an earlier test
    # in this process started) and fork otherwise
    monkeypatch.setattr("bpe.corpus.parts.start_method_for", lambda n: method)
    monkeypatch.setattr(
        "bpe.pretokenize.counting.GROUP_BYTES", 16 * 1024
    )  # several groups per worker
    kw = {"num_workers": 2, "max_chunk_bytes": 4 * 1024, "min_parallel_bytes": 0}
    compiled = pretokenize(path, [EOT], engine="compiled", **kw)
    assert compiled.counts == pretokenize(path, [EOT], **kw).counts
    assert compiled.num_workers == 2 and compiled.start_method == method


def test_part_groups_cover_the_parts_in_order():
    sizes = [7] * 23
    for workers in (1, 2, 5, 23, 40):
        groups = group_ranges(sizes, workers)
        assert groups[0].start == 0 and groups[-1].stop == len(sizes)
        assert all(a.stop == b.start for a, b in zip(groups, groups[1:]))
        assert len(groups) == min(workers, len(sizes))


def test_a_corpus_of_records_counts_as_with_regex(tmp_path):
    docs = [f"doc {i}: it's {i * 7} o'clock\u3000\u2028 caf\u00e9 \U0001f600!" for i in range(300)]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    corpus = resolve_source(path)
    compiled = pretokenize(corpus, [EOT], engine="compiled")
    regexed = pretokenize(corpus, [EOT])
    assert compiled.counts == regexed.counts and compiled.records == 300
    assert (compiled.engine, regexed.engine) == ("compiled", "regex")


def test_training_with_the_compiled_engine_gives_the_same_merges():
    path = ROOT / "data" / "tinystories_sample.txt"
    reference = train_bpe_detailed(path, 600, [EOT], trainer="heap", engine="regex")
    assert reference.pretokenized.engine == "regex" and COMPILE not in reference.timings
    for trainer, engine in (("heap", "compiled"), ("compiled", "auto"), ("compiled", "regex")):
        result = train_bpe_detailed(path, 600, [EOT], trainer=trainer, engine=engine)
        assert result.merges == reference.merges, (trainer, engine)
        uses = "regex" if engine == "regex" else "compiled"
        assert result.pretokenized.engine == uses, (trainer, engine)
        # the scanner's load is timed as compile in the process's first use only (this test
        # process loaded it before), the trainer's kernels in every compiled run
        assert (COMPILE in result.timings) == (trainer == "compiled")


def test_a_pattern_the_scanner_does_not_know_is_refused_before_any_work():
    with pytest.raises(ValueError, match="GPT-2's pattern only"):
        train_bpe_detailed(ROOT / "nowhere.txt", 300, pattern="cl100k", engine="compiled")


def test_a_text_file_with_its_tail_held_out_counts_as_with_regex():
    """What `bpe-train` trains on by default (the last documents held out): the corpus path."""
    corpus = resolve_source(ROOT / "data" / "owt_sample.txt")
    holdout = find_holdout(corpus, EOT, fraction=0.05, max_bytes=256 * 1024)
    head = dataclasses.replace(corpus, stop=holdout.stop)
    compiled = pretokenize(head, [EOT], engine="compiled")
    assert compiled.counts == pretokenize(head, [EOT]).counts
    assert compiled.num_workers == 1 and compiled.engine == "compiled"


def test_groups_of_parts_counted_in_workers_equal_the_regex_counts(tmp_path, monkeypatch):
    """A corpus of records above the in-process size: each worker counts a group of parts."""
    monkeypatch.setattr("bpe.pretokenize.counting.GROUP_BYTES", 16 * 1024)
    docs = [f"record {i}: don't stop\u3000 at {i * 13}\u2028 \U0001f600 ok." for i in range(2000)]
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_text(
            "".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8"
        )
    corpus = resolve_source(tmp_path)
    kw = {"num_workers": 2, "max_chunk_bytes": 8 * 1024, "min_parallel_bytes": 0}
    compiled = pretokenize(corpus, [EOT], engine="compiled", **kw)
    regexed = pretokenize(corpus, [EOT], **kw)
    assert compiled.counts == regexed.counts and compiled.records == regexed.records == 4000
    assert compiled.num_workers == 2


def test_a_lone_surrogate_fails_as_with_regex():
    """JSON can carry a lone surrogate ("\\ud800"), which UTF-8 cannot encode: both engines
    raise the same error rather than count a pretoken no file could hold."""
    text = "ok \ud800 fine"
    with pytest.raises(UnicodeEncodeError):
        count_pretokens(text)
    with pytest.raises(UnicodeEncodeError):
        count_pretokens(text, engine="compiled")


def test_the_parent_sums_groups_as_counters_do():
    """`CountsSum` (the parent's compiled table of byte strings) equals adding Counters, in
    order of first arrival, through many doublings, with keys that pack (b"a" and b"\\0\\0a"
    share one), hashed ones and long ones."""
    from bpe.pretokenize.engines import CountsSum

    rng = random.Random(1)
    words = [
        bytes(rng.choice(b"ab\0\xc3\xa9 ") for _ in range(rng.randint(1, 14)))
        for _ in range(40_000)
    ]
    words += [b"a", b"\0\0a", b"x" * 5000]
    total, expected = CountsSum(), Counter()
    for _ in range(5):
        group = Counter({w: rng.randint(1, 9) for w in rng.sample(words, 9000)})
        data = np.frombuffer(b"".join(group), np.uint8).copy()
        ends = np.cumsum([len(w) for w in group])
        total.add(data, ends, np.array(list(group.values())))
        expected.update(group)
    got = total.counts()
    assert len(got) > 20_000 and list(got.items()) == list(expected.items())
