"""Segmentation methods (`bpe.tokenizer.segmentation`) tested against their definitions.

`fewest` equals a brute-force minimum (and its tie-break) on short strings and never yields
more tokens than the merges; `longest_prefix` equals a plain reference loop; every method
round-trips any text, special tokens included; each is linear in a pretoken's length.
"""

from __future__ import annotations

import itertools
import re
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.measures import GPT2_DIR
from bpe.tokenizer import Tokenizer
from bpe.tokenizer.segmentation import SEGMENTATIONS, Segmenter
from tests.complexity import assert_linear
from tests.conftest import DATA, EOT, train_run

BYTES = {i: bytes([i]) for i in range(256)}
SMALL = BYTES | {256: b"ab", 257: b"abc", 258: b"bc", 259: b"cab", 260: b"aa", 261: b"aaa"}


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return Tokenizer.from_pretrained(GPT2_DIR)


def _segmentations(data: bytes, vocab: set[bytes]) -> list[tuple[bytes, ...]]:
    """Every way to cut `data` into tokens of `vocab` (brute force: short inputs only)."""
    if not data:
        return [()]
    return [
        (data[:k], *rest)
        for k in range(1, len(data) + 1)
        if data[:k] in vocab
        for rest in _segmentations(data[k:], vocab)
    ]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abc", max_size=10))
def test_fewest_is_the_brute_force_minimum_with_its_tie_break(text):
    data = text.encode()
    vocab = set(SMALL.values())
    every = _segmentations(data, vocab)
    fewest = min(len(s) for s in every)
    # the tie-break: the longest first token, then the longest second, ...
    expected = max((s for s in every if len(s) == fewest), key=lambda s: [len(t) for t in s])
    got = Segmenter(SMALL).fewest(data)
    assert [SMALL[i] for i in got] == list(expected)


def _longest_prefix_reference(data: bytes, vocab: dict[bytes, int]) -> list[int]:
    longest = max(map(len, vocab))
    ids, i = [], 0
    while i < len(data):
        for k in range(min(longest, len(data) - i), 0, -1):
            if data[i : i + k] in vocab:
                ids.append(vocab[data[i : i + k]])
                i += k
                break
    return ids


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
def test_longest_prefix_equals_a_plain_loop(gpt2, text):
    id_of = {t: i for i, t in gpt2.vocab.items() if i not in gpt2.special_tokens.values()}
    seg = gpt2._segmentations  # noqa: SLF001 - the tokenizer's own, as encode uses it
    for pretoken in gpt2.pretokens(text):
        data = pretoken.encode("utf-8", "surrogatepass")
        expected = _longest_prefix_reference(data, id_of)
        assert seg.pretoken_ids("longest_prefix")([pretoken]) == expected


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60))
def test_fewest_never_yields_more_tokens_than_the_merges(gpt2, text):
    text = text.encode("utf-8", "replace").decode("utf-8")
    merges = gpt2.encode(text)
    assert len(gpt2.encode(text, segmentation="fewest")) <= len(merges)


@cache
def _sample_text(name: str) -> str:
    return (DATA / name).read_text("utf-8")[:200_000]


@pytest.mark.parametrize("name", ["tinystories_heldout.txt", "owt_heldout.txt"])
def test_fewest_never_yields_more_tokens_on_the_samples(gpt2, name):
    text = _sample_text(name)
    counts = {m: len(gpt2.encode(text, segmentation=m)) for m in SEGMENTATIONS}
    assert counts["fewest"] <= counts["merges"]
    assert all(gpt2.decode(gpt2.encode(text, segmentation=m)) == text for m in SEGMENTATIONS)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=20) | st.just(EOT), max_size=6))
def test_every_method_round_trips_any_text_and_keeps_special_tokens(gpt2, parts):
    text = "".join(parts).encode("utf-8", "replace").decode("utf-8")
    for method in SEGMENTATIONS:
        ids = gpt2.encode(text, segmentation=method)
        assert gpt2.decode(ids) == text, method
        assert ids.count(gpt2.special_tokens[EOT]) == text.count(EOT), method


def test_merges_is_todays_encode_byte_for_byte(gpt2):
    text = _sample_text("owt_heldout.txt")[:50_000]
    assert gpt2.encode(text, segmentation="merges") == gpt2.encode(text)


#: Sizes whose small run takes about 80 ms: tens of milliseconds are a loaded machine's noise.
@pytest.mark.parametrize(("method", "size"), [("longest_prefix", 80_000), ("fewest", 20_000)])
def test_a_long_pretoken_costs_linear_time(gpt2, method, size):
    cut = Segmenter({i: t for i, t in gpt2.vocab.items() if i != 50256}).method(method)
    unit = b"abcdefghij"

    def work(size: int) -> None:
        cut(unit * (size // len(unit)))

    assert_linear(work, size, what=f"{method} on one pretoken of n bytes")


def test_bad_options_name_the_problem(gpt2):
    with pytest.raises(ValueError, match="unknown segmentation 'shortest'"):
        gpt2.encode("hi", segmentation="shortest")
    with pytest.raises(ValueError, match="use segmentation='merges' with dropout"):
        gpt2.encode("hi", segmentation="fewest", dropout=0.1)


def test_a_picky_vocab_segments_and_round_trips():
    from bpe.pipeline import train_bpe_detailed

    result = train_bpe_detailed(
        DATA / "tinystories_heldout.txt", 600, [EOT], trainer="indexed", variant="picky"
    )
    tok = result.tokenizer()
    text = _sample_text("tinystories_heldout.txt")[:20_000]
    for method in SEGMENTATIONS:
        ids = tok.encode(text, segmentation=method)
        assert tok.decode(ids) == text, method
        assert all(i in tok.vocab for i in ids)
    assert len(tok.encode(text, segmentation="fewest")) <= len(tok.encode(text))


def test_every_short_string_has_a_segmentation():
    """A byte-level vocab cuts anything: every byte string of length 3 over a few bytes."""
    seg = Segmenter(SMALL)
    for data in map(bytes, itertools.product(b"abc\xff", repeat=3)):
        for method in ("longest_prefix", "fewest"):
            assert b"".join(SMALL[i] for i in seg.method(method)(data)) == data


def test_bpe_encode_writes_each_segmentation_with_the_default_workers(tmp_path, gpt2):
    """`bpe-encode --segmentation` on a sample big enough to start workers (default
    num_workers), against `Tokenizer.encode` of the whole text."""
    import json
    import subprocess
    import sys

    import numpy as np

    from tests.conftest import ROOT

    source = tmp_path / "in.txt"
    source.write_text(_sample_text("owt_heldout.txt") * 3, "utf-8")
    for method in ("longest_prefix", "fewest"):
        out = tmp_path / f"{method}.npy"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "bpe.cli.encode",
                "--tokenizer",
                str(GPT2_DIR),
                "--input",
                str(source),
                "--out",
                str(out),
                "--segmentation",
                method,
                "--chunk-mb",
                "0.1",
                "--no-progress",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert re.search(r"with [2-9]\d* workers", proc.stderr), proc.stderr[-2000:]
        ids = np.load(out).tolist()
        assert ids == gpt2.encode(source.read_text("utf-8"), segmentation=method)
        sidecar = json.loads(out.with_name(out.name + ".json").read_text("utf-8"))
        assert sidecar["segmentation"] == method
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.encode",
            "--tokenizer",
            str(GPT2_DIR),
            "--input",
            str(source),
            "--out",
            str(tmp_path / "x.npy"),
            "--segmentation",
            "fewest",
            "--backend",
            "tiktoken",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode != 0 and "needs backend='python'" in bad.stderr


def test_a_run_measures_each_segmentation_and_its_merges_row_is_its_own(tmp_path):
    """A real `bpe-train` run (every CPU): metrics.json's `segmentation` holds the three
    methods per held-out side; the `merges` row equals the run's own compression, Rényi
    efficiency and bits per byte; `fewest` never needs more tokens; ANALYSIS.md shows them."""
    import json

    from bpe.runs import layout, schema
    from tests.conftest import missing_keys

    run = train_run(tmp_path, "debug=fast", "num_workers=null", "vocab_size=1500")
    metrics = json.loads((run / layout.METRICS_FILE).read_text("utf-8"))
    for method in SEGMENTATIONS:
        for side in ("own", "other"):
            assert not missing_keys(metrics, "segmentation", method=method, side=side)
    at = schema.get
    assert at(metrics, schema.SEG_BYTES_PER_TOKEN, method="merges", side="own") == at(
        metrics, schema.COMPRESSION_RATIO
    )
    assert at(metrics, schema.SEG_BITS_PER_BYTE, method="merges", side="own") == at(
        metrics, schema.BITS_PER_BYTE
    )
    assert at(metrics, schema.SEG_RENYI, method="merges", side="own") == at(
        metrics, schema.EFFICIENCY_RENYI, side="own"
    )
    for side in ("own", "other"):
        tokens = {m: at(metrics, schema.SEG_TOKENS, method=m, side=side) for m in SEGMENTATIONS}
        assert tokens["fewest"] <= tokens["merges"], tokens
    text = (run / layout.ANALYSIS_FILE).read_text("utf-8")
    assert "## Segmentation: three ways to use this vocab" in text
    assert "`fewest`: the fewest vocab tokens" in text


@pytest.mark.slow
def test_the_segmentation_report_comes_from_a_real_sweep(tmp_path):
    """`bpe-report --page segmentation --quick`: a real sweep (plain and length-limited),
    a pruned copy of the plain run, the report with every row and every claim; the loader's
    long form groups the runs by segmentation."""
    from bpe.analysis.loader import segmentation_rows
    from tests.conftest import report_page

    out = tmp_path / "reports"
    exp = tmp_path / "exp"
    report_page("segmentation", "--quick", "--out", str(out), "--experiments-dir", str(exp))
    text = (out / "segmentation.md").read_text("utf-8")
    for label in ("plain BPE, `merges`", "plain BPE, `fewest`", "`max_token_length=8`"):
        assert label in text
    assert "pruned to 450 (`bpe-prune`)" in text
    for claim in ("Uzan et al. (2024)", "Schmidt et al. (2024, PathPiece)", "Scaffold-BPE"):
        assert claim in text
    assert "n/a | n/a" not in text.split("## What the papers")[1].split("LiteToken")[0]
    rows = segmentation_rows(exp)
    assert set(rows["segmentation"]) == set(SEGMENTATIONS)
    assert set(rows["max_token_length"].dropna()) == {8}


def test_a_vocab_of_one_repeated_string_is_refused_with_the_reason():
    """Tokens of 10^5 bytes would make the prefix table and the walks quadratic."""
    vocab = BYTES | {256: b"a" * 2000}
    with pytest.raises(ValueError, match="a token of 2000 bytes.*use segmentation='merges'"):
        Segmenter(vocab)
    tok = Tokenizer(vocab | {257: b"aa"}, [(b"a", b"a")], [])
    with pytest.raises(ValueError, match="a token of 2000 bytes"):
        tok.encode("aaaa", segmentation="fewest")
    assert tok.encode("aaaa") == [257, 257]


# ---------------------------------------------------------------------------------------------
# The compiled kernel (`bpe.tokenizer.compiled_segments`): the reference's ids, in linear time
# ---------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    extra=st.lists(st.binary(min_size=2, max_size=5), max_size=30),
    pretokens=st.lists(st.text(alphabet="abcé\\u4e2d \\n", max_size=40), max_size=20),
)
def test_the_kernel_cuts_as_the_reference(extra, pretokens):
    """Random vocabs (duplicate bytes under two ids included) and pretokens: the kernel's
    ids equal `Segmenter`'s for both methods."""
    pytest.importorskip("numba")
    from bpe.tokenizer.compiled_segments import build_trie, segment_pretokens

    vocab = BYTES | {256 + k: t for k, t in enumerate(extra)}
    seg = Segmenter(vocab)
    trie = build_trie(vocab)
    for method in ("longest_prefix", "fewest"):
        want = [seg.method(method)(p.encode("utf-8")) for p in pretokens]
        assert segment_pretokens(trie, pretokens, method) == want, method


@pytest.mark.parametrize("name", ["tinystories_sample.txt", "owt_sample.txt"])
def test_the_compiled_path_gives_the_python_paths_ids(name):
    """`merge_backend="compiled"` cuts each sample (and random Unicode) as "python" does."""
    pytest.importorskip("numba")
    text = (DATA / name).read_text("utf-8")[:300_000]
    text += "".join(map(chr, range(32, 20000, 37))) + " naïve 🙂 <|endoftext|> \x00"
    python = Tokenizer.from_pretrained(GPT2_DIR, merge_backend="python")
    compiled = Tokenizer.from_pretrained(GPT2_DIR, merge_backend="compiled")
    for method in ("longest_prefix", "fewest"):
        ids = compiled.encode(text, segmentation=method)
        assert ids == python.encode(text, segmentation=method), method
        assert compiled.decode(ids) == text


@pytest.mark.parametrize(("method", "size"), [("longest_prefix", 4_000_000), ("fewest", 2_000_000)])
def test_a_long_pretoken_costs_linear_time_in_the_kernel(gpt2, method, size):
    pytest.importorskip("numba")
    from bpe.tokenizer.compiled_segments import build_trie, segment_pretokens

    trie = build_trie({i: t for i, t in gpt2.vocab.items() if i != 50256})
    unit = "abcdefghij"
    segment_pretokens(trie, [unit], method)  # load the machine code before timing

    def work(size: int) -> None:
        segment_pretokens(trie, [unit * (size // len(unit))], method)

    assert_linear(work, size, what=f"compiled {method} on one pretoken of n bytes")


@pytest.mark.parametrize("backend", ["python", "compiled"])
def test_a_token_too_long_for_the_methods_is_named_on_every_path(backend):
    """The whole-text kernel never builds the readable Segmenter: its vocab check runs anyway."""
    if backend == "compiled":
        pytest.importorskip("numba")
    from bpe.tokenizer.segmentation import MAX_TOKEN_BYTES

    vocab = {i: bytes([i]) for i in range(256)} | {256: b"a" * (MAX_TOKEN_BYTES + 1)}
    tok = Tokenizer(vocab, [], merge_backend=backend)
    with pytest.raises(ValueError, match=r"token of \d+ bytes.*segmentation='merges'"):
        tok.encode("some text", segmentation="fewest")
