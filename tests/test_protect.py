"""Protected characters: classes whose characters never merge with anything. Every trainer
makes the same merges with them, none joining a protected character; the tokenizer, Hugging
Face and (for one-byte characters) tiktoken split and encode alike; a run records, reports and
reloads them; a class that cannot work stops the run before it starts."""

from __future__ import annotations

import json
import pickle

import pytest
import regex
import tokenizers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe import Tokenizer, train_bpe, train_bpe_detailed
from bpe.pipeline.plan import TrainSpec, plan_run
from bpe.runs import schema
from bpe.runs.layout import ANALYSIS_FILE, METRICS_FILE, TIKTOKEN_FILE, TOKENIZER_JSON
from bpe.text.protect import protect_regex, split_counts, split_protected
from bpe.util.machine import numba_installed
from tests.conftest import DATA, EOT, FAST_ANALYSIS, train_refused, train_run

TRAINERS = ["naive", "indexed", "heap"] + (["compiled"] if numba_installed() else [])
PIECES = ["the", " 19", "70", " cat", "s", "1", " 2024", "a1b2", " ٣٤", "x", ".", "$5"]


def _joins(merges, cls: str) -> list:
    """The merges whose token holds a character of `cls` beside anything else."""
    rx = regex.compile(cls)
    out = []
    for a, b in merges:
        text = (a + b).decode("utf-8", "replace")
        if len(text) > 1 and rx.search(text):
            out.append((a, b))
    return out


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pieces=st.lists(st.sampled_from(PIECES), min_size=3, max_size=40),
    cls=st.sampled_from(["[0-9]", r"\p{N}", "[a]", r"[\p{N}$]"]),
    extra=st.integers(min_value=1, max_value=40),
)
def test_every_trainer_makes_the_same_merges_and_none_joins_a_protected_character(
    tmp_path, pieces, cls, extra
):
    path = tmp_path / "corpus.txt"
    path.write_text("".join(pieces) + EOT + "".join(reversed(pieces)), encoding="utf-8")
    merges = {
        t: train_bpe(path, 257 + extra, [EOT], trainer=t, num_workers=1, protect=[cls])[1]
        for t in TRAINERS
    }
    assert all(m == merges["naive"] for m in merges.values()), merges
    assert _joins(merges["naive"], cls) == []


def test_the_split_is_the_definition_on_stage_one_counts():
    """Protecting is training on the counts with each protected character cut off: one
    pretoken's count goes to each of its pieces."""
    rx = protect_regex(["[0-9]"])
    assert split_protected(" 2024s", rx) == [" ", "2", "0", "2", "4", "s"]
    counts = split_counts({b" 2024": 3, b"22": 1}, rx)
    assert dict(counts) == {b" ": 3, b"2": 8, b"0": 3, b"4": 3}


def test_protecting_digits_changes_only_what_touches_them():
    corpus = DATA / "owt_sample.txt"
    plain = train_bpe_detailed(corpus, 800, [EOT], num_workers=1)
    kept = train_bpe_detailed(corpus, 800, [EOT], num_workers=1, protect=[r"\p{N}"])
    assert _joins(plain.merges, r"\p{N}")  # the sample does merge digits unprotected
    assert _joins(kept.merges, r"\p{N}") == []
    tok = kept.tokenizer()
    assert tok.encode("In 1970") == tok.encode("In") + tok.encode(" ") + [
        tok.encode(d)[0] for d in "1970"
    ]
    # Arabic-Indic digits are \p{N} too: each encodes as it does alone
    assert tok.encode("x١٩٧٠") == [i for c in "x١٩٧٠" for i in tok.encode(c)]


def test_hugging_face_gives_our_ids_and_tiktoken_too_for_one_byte_classes(tmp_path):
    text = (DATA / "owt_heldout.txt").read_text("utf-8")[:60000] + " ٣٤٥ x²=4 ½"
    for cls, tiktoken_too in ((r"\p{N}", False), ("[0-9]", True)):
        result = train_bpe_detailed(DATA / "owt_sample.txt", 900, [EOT], protect=[cls])
        ours = result.tokenizer()
        out = tmp_path / cls.strip("\\[]{}")
        ours.save_pretrained(out)
        hf = tokenizers.Tokenizer.from_file(str(out / TOKENIZER_JSON))
        expected = ours.encode(text)
        assert hf.encode(text).ids == expected, cls
        assert (out / TIKTOKEN_FILE).exists() == tiktoken_too
        if tiktoken_too:
            assert ours.to_tiktoken().encode(text, allowed_special="all") == expected
        else:
            with pytest.raises(ValueError, match="matches '²', a character of more than one"):
                ours.to_tiktoken()
        again = Tokenizer.from_pretrained(out)
        assert again.protect == ours.protect and again.encode(text) == expected
        assert pickle.loads(pickle.dumps(ours)).encode(text) == expected


@pytest.fixture(scope="module")
def protected_run(tmp_path_factory):
    """A run as a user starts it (default vocab and workers, the fast analysis), protected."""
    return train_run(tmp_path_factory.mktemp("protected"), "protect=['[0-9]']", *FAST_ANALYSIS)


def test_a_run_records_reports_and_reloads_its_protected_characters(protected_run):
    metrics = json.loads((protected_run / METRICS_FILE).read_text("utf-8"))
    assert schema.get(metrics, schema.PROTECT) == ["[0-9]"]
    assert "protect=['[0-9]']" in schema.get(metrics, schema.COMMAND)
    report = (protected_run / ANALYSIS_FILE).read_text("utf-8")
    assert "Protected characters, each its own pretoken (`protect`): `[0-9]`." in report
    tok = Tokenizer.from_pretrained(protected_run)
    assert tok.protect == "(?:[0-9])"
    assert len(tok.encode(" 2024")) == 5
    merges = (protected_run / "merges.txt").read_text("utf-8").splitlines()[1:]
    assert not [m for m in merges if regex.search("[0-9]", m) and len(m.replace(" ", "")) > 1]


def test_bpe_compare_encodes_a_protected_run_as_the_run_does(protected_run):
    """`bpe-compare` opens a run through the one directory opener, protected characters
    included (it once rebuilt the tokenizer without them)."""
    from bpe.analysis.compare.sides import load_side

    side = load_side(protected_run, heldout=False)
    text = "In 2024, 1,337 people paid $42.50 each."
    assert side.tokenizer.encode(text) == Tokenizer.from_pretrained(protected_run).encode(text)
    assert side.protect == side.tokenizer.protect == "(?:[0-9])"


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"protect": [r"\d+"]}, r"matches '11' (2 characters)"),
        ({"protect": ["[0-9"]}, "which is not a regex"),
        ({"protect": [""]}, "an empty string"),
        (
            {"protect": ["[e]"], "seed_tokens": [" the"]},
            "seed_tokens has the merge b' th' + b'e', which joins the protected character 'e'",
        ),
    ],
)
def test_a_class_that_cannot_work_is_refused_before_any_work(options, said):
    spec = TrainSpec(DATA / "tinystories_sample.txt", 500, [EOT], **options)
    with pytest.raises(ValueError, match=regex.escape(said)):
        plan_run(spec)


def test_bpe_train_refuses_a_bad_class_in_one_line(tmp_path):
    said = train_refused(tmp_path, "debug=fast", r"protect=['\d+']")
    assert "protect has" in said and "matches '11'" in said
    assert not any(tmp_path.glob("2*"))  # no run directory was made


def test_the_encoder_splits_too_where_a_learned_token_would_cross_into_a_protected_character(
    tmp_path,
):
    """'x' + the lead byte of 'ل' is a token learned from 'xل'; the protected 'ن' has the
    same lead byte, so BPE of the pretoken 'xن' without the split would join 'x' to half of
    it."""
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"x\xd9"}
    ours = Tokenizer(vocab, [(b"x", b"\xd9")], protect=["ن"])
    assert Tokenizer(vocab, [(b"x", b"\xd9")]).encode("xن") == [256, 0x86]
    assert ours.encode("xن") == [ord("x"), 0xD9, 0x86] and ours.encode("xل") == [256, 0x84]
    ours.save_pretrained(tmp_path)
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / TOKENIZER_JSON))
    assert hf.encode("xن xل").ids == ours.encode("xن xل")
    assert not (tmp_path / TIKTOKEN_FILE).exists()
