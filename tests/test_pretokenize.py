"""Pre-tokenization: GPT-2 splitting, special tokens, safe chunk boundaries, parallel counting."""

from __future__ import annotations

from collections import Counter

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe.corpus.chunks import find_chunk_boundaries
from bpe.pretokenize import pretokenize
from bpe.pretokenize.counting import count_pretokens
from bpe.text.patterns import GPT2_PATTERN
from bpe.text.pretokens import iter_pretokens
from bpe.text.specials import split_on_special_tokens, validate_special_tokens
from tests.conftest import DATA, EOT, FIXTURES


def test_gpt2_pattern_is_the_published_one():
    assert GPT2_PATTERN == (
        r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    )


def test_iter_pretokens_splits_like_gpt2():
    assert list(iter_pretokens("I'll say   hi 2024!!\n")) == [
        "I",
        "'ll",
        " say",
        "  ",
        " hi",
        " 2024",
        "!!",
        "\n",
    ]


def test_special_tokens_split_longest_first():
    specials = ["<|a|>", "<|a|><|a|>"]
    assert split_on_special_tokens("x<|a|><|a|>y<|a|>", specials) == [
        "x",
        "<|a|><|a|>",
        "y",
        "<|a|>",
        "",
    ]


def test_count_pretokens_never_crosses_or_keeps_special_tokens():
    counts = count_pretokens("the cat<|endoftext|> the cat", [EOT])
    assert counts == Counter({b"the": 1, b" cat": 2, b" the": 1})
    assert not any(b"<|" in tok for tok in counts)


def test_without_special_tokens_the_marker_is_ordinary_text():
    counts = count_pretokens("a<|endoftext|>b")
    assert b"<|" in counts


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (["<|x|>", "<|x|>"], "listed twice"),
        ([""], "empty"),
        ("<|x|>", "list of strings"),
        ([3], "not a str"),
    ],
)
def test_bad_special_tokens_are_rejected(bad, message):
    with pytest.raises(ValueError, match=message):
        validate_special_tokens(bad)


def test_bytes_are_sacred_crlf_and_bom(tmp_path):
    text = "\ufeffFirst line\r\nsecond\tline\r\n<|endoftext|>\r\nthird"
    path = tmp_path / "crlf.txt"
    path.write_bytes(text.encode("utf-8"))
    counts = pretokenize(path, [EOT], num_workers=1).counts
    raw = text.encode("utf-8")
    assert sum(len(tok) * n for tok, n in counts.items()) == len(raw) - len(EOT.encode())
    assert b"\r\n" in counts
    assert any(tok.startswith("\ufeff".encode()) for tok in counts)


def test_chunk_boundaries_fall_on_special_tokens(tmp_path):
    docs = [f"story number {i} is here." for i in range(50)]
    path = tmp_path / "docs.txt"
    path.write_bytes(EOT.join(docs).encode())
    data = path.read_bytes()
    bounds = find_chunk_boundaries(path, 8, [EOT])
    assert bounds[0] == 0 and bounds[-1] == len(data) and len(bounds) > 2
    assert all(data[b:].startswith(EOT.encode()) for b in bounds[1:-1])


def test_chunk_boundaries_fall_back_to_whitespace(tmp_path):
    path = tmp_path / "plain.txt"
    path.write_bytes(("word " * 1000).encode())
    data = path.read_bytes()
    bounds = find_chunk_boundaries(path, 4, [EOT])
    assert len(bounds) == 5
    for b in bounds[1:-1]:
        assert data[b : b + 1] == b" " and data[b - 1 : b] == b"d"


def test_no_boundary_inside_a_special_token_containing_spaces(tmp_path):
    special = "<|end of doc|>"
    path = tmp_path / "spaced.txt"
    path.write_bytes(("ab" * 40 + special).encode() * 20)
    data = path.read_bytes()
    for b in find_chunk_boundaries(path, 10, [special], window_bytes=64)[1:-1]:
        start = data.rfind(special.encode(), 0, b + 1)
        assert start == -1 or start + len(special) <= b or start == b


def test_parallel_counts_equal_serial_on_the_owt_sample():
    parallel = pretokenize(DATA / "owt_sample.txt", [EOT], num_workers=2, min_parallel_bytes=0)
    serial = pretokenize(DATA / "owt_sample.txt", [EOT], num_workers=1)
    assert parallel.num_workers == 2 and parallel.num_chunks >= 2
    assert parallel.counts == serial.counts


_TMP_OK = [HealthCheck.function_scoped_fixture]  # tmp_path is reused safely: rewritten each time

# Special tokens that overlap (one inside another) or hold a space stress the boundary logic.
_SPECIALS = [EOT, "<|x|>", "y<|x|>", "<|x y|>"]
_ALPHABET = st.sampled_from(
    list("ab cy\n\t\r 'sdé日🙂.,!12жЯ٣。") + ["\u00a0", "  ", "мир", "本語"] + _SPECIALS
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pieces=st.lists(_ALPHABET, max_size=80),
    num_chunks=st.integers(min_value=2, max_value=30),
    window=st.integers(min_value=1, max_value=40),
)
def test_chunked_counts_equal_whole_text_counts(tmp_path, pieces, num_chunks, window):
    """Counting chunk by chunk (cut at specials or safe whitespace) equals counting the text."""
    text = "".join(pieces)
    path = tmp_path / "h.txt"
    data = text.encode("utf-8")
    path.write_bytes(data)
    specials = _SPECIALS
    bounds = find_chunk_boundaries(path, num_chunks, specials, window_bytes=window)
    chunked: Counter[bytes] = Counter()
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        chunked.update(count_pretokens(data[a:b].decode("utf-8"), specials))
    assert chunked == count_pretokens(text, specials)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pieces=st.lists(_ALPHABET, min_size=1, max_size=80), chunk=st.integers(1, 40))
def test_a_file_in_small_parts_counts_as_the_whole_text(tmp_path, pieces, chunk):
    text = "".join(pieces)
    path = tmp_path / "h.txt"
    path.write_bytes(text.encode("utf-8"))
    specials = _SPECIALS
    chunked = pretokenize(path, specials, num_workers=1, max_chunk_bytes=chunk)
    assert chunked.counts == count_pretokens(text, specials)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=60))
def test_pretokens_tile_the_text(text):
    assert "".join(iter_pretokens(text)) == text
    assert "".join(m.group() for m in regex.finditer(GPT2_PATTERN, text)) == text


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        pretokenize(tmp_path / "nope.txt")


def test_empty_file_is_rejected(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(ValueError, match="is empty"):
        pretokenize(tmp_path / "empty.txt")


def test_invalid_utf8_names_the_byte_offset(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("café au lait".encode("latin-1"))
    with pytest.raises(ValueError, match="byte offset 3"):
        pretokenize(path, num_workers=1)


def test_a_directory_without_corpus_files_is_rejected(tmp_path):
    (tmp_path / "notes.doc").write_bytes(b"x")
    with pytest.raises(ValueError, match="holds no corpus file"):
        pretokenize(tmp_path)


def test_fixture_corpus_counts_are_plausible():
    counts = pretokenize(FIXTURES / "corpus.en", [EOT], num_workers=1)
    assert counts.num_bytes == (FIXTURES / "corpus.en").stat().st_size
    assert counts.num_unique < counts.num_pretokens


def test_a_cut_never_splits_a_special_token_that_contains_another():
    from bpe.text.cuts import safe_cut

    specials = [s.encode() for s in ["<|x|>", "y<|x|>"]]
    # "y<|x|>" starts one byte before the search region; "<|x|>" inside it must not be a cut.
    assert safe_cut(b"y<|x|>abc<|x|>", 1, 20, specials) == 9


def test_memory_does_not_grow_with_file_size(tmp_path):
    """Streaming: peak traced memory for a 4x larger file stays about the same."""
    import tracemalloc

    sample = (DATA / "owt_sample.txt").read_bytes()
    peaks = []
    for copies in (1, 4):
        path = tmp_path / f"owt_x{copies}.txt"
        path.write_bytes(sample * copies)
        tracemalloc.start()
        result = pretokenize(path, [EOT], num_workers=1, max_chunk_bytes=256 * 1024)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert result.num_chunks >= 9 * copies
    small, large = peaks
    assert large < 1.3 * small, f"peak grew from {small:,} to {large:,} bytes"
    assert large < 4 * len(sample)  # below the size of the file itself


def test_workers_are_not_forked_from_a_threaded_process():
    import threading

    from bpe.util.workers import start_method_for

    assert start_method_for(2) in {"fork", "forkserver", "spawn"}
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert start_method_for(2) != "fork"
        # and counting still works (and matches) with the threaded start method
        parallel = pretokenize(DATA / "owt_sample.txt", [EOT], num_workers=2, min_parallel_bytes=0)
        assert parallel.num_workers == 2
        assert parallel.counts == pretokenize(DATA / "owt_sample.txt", [EOT], num_workers=1).counts
    finally:
        stop.set()
        thread.join()


def test_defaults_count_a_sample_in_process_and_a_large_corpus_in_workers(tmp_path):
    """The policy a user gets (num_workers=None): the bundled sample in this process, where
    workers would cost more than they save; a corpus past the measured crossover in workers."""
    from bpe.pretokenize.counting import REGEX_MIN_PARALLEL_BYTES
    from bpe.util.workers import default_num_workers

    sample = pretokenize(DATA / "owt_sample.txt", [EOT])
    assert sample.num_workers == 1 and sample.start_method == "in-process"
    big = tmp_path / "big.txt"
    text = (DATA / "owt_sample.txt").read_bytes()
    big.write_bytes(text * (REGEX_MIN_PARALLEL_BYTES // len(text) + 1))
    large = pretokenize(big, [EOT])
    assert large.num_workers == min(2, default_num_workers())


_SCRIPT = """
import sys, threading
from pathlib import Path
with open(sys.argv[1], "a") as f:  # one line each time this script runs
    f.write(__name__ + "\\n")
if __name__ == "__main__":
    from bpe.pretokenize import pretokenize
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()  # a thread: workers from a server
    counts = pretokenize(sys.argv[2], ["<|endoftext|>"], num_workers=2, min_parallel_bytes=0)
    stop.set()
    assert counts.num_workers == 2 and counts.start_method in {"forkserver", "spawn"}
"""


def test_workers_do_not_run_the_launching_script_again(tmp_path):
    """A fork-server worker needs only the counting function's module: re-running the script
    that launched its parent (under bpe-train: the harness, pandas, matplotlib) cost 2.2 s and
    ~120 MB per worker, reported as training."""
    import subprocess
    import sys

    script, marks = tmp_path / "launch.py", tmp_path / "marks.txt"
    script.write_text(_SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(marks), str(DATA / "owt_sample.txt")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert marks.read_text().split() == ["__main__"]
