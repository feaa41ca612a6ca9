"""bpe-encode: parallel == serial == encode, uint16 limits, atomic writes, CLI, bounded memory."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe import Tokenizer, train_bpe
from bpe.cli.encode import main
from bpe.encode.npy import encode_to_npy, resolve_tokenizer_files
from bpe.encode.npy_file import write_npy_atomically
from bpe.formats.gpt2_format import save_tokenizer_files
from tests.conftest import DATA, EOT, FIXTURES


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    vocab, merges = train_bpe(FIXTURES / "corpus.en", 400, [EOT])
    save_tokenizer_files(vocab, merges, out)
    return out


def _encoded(path) -> np.ndarray:
    return np.load(path, mmap_mode="r")


def test_parallel_equals_serial_equals_encode_on_the_owt_sample(gpt2, tmp_path):
    src = DATA / "owt_sample.txt"
    expected = gpt2.encode(src.read_text(encoding="utf-8"))
    serial = encode_to_npy(src, gpt2, tmp_path / "serial.npy", num_workers=1)
    parallel = encode_to_npy(
        src, gpt2, tmp_path / "parallel.npy", num_workers=2, chunk_bytes=256 * 1024
    )
    assert parallel["num_chunks"] > 2 and parallel["num_workers"] == 2
    assert serial["num_tokens"] == parallel["num_tokens"] == len(expected)
    a, b = _encoded(tmp_path / "serial.npy"), _encoded(tmp_path / "parallel.npy")
    assert a.dtype == b.dtype == np.uint16
    assert np.array_equal(a, b)
    assert a.tolist() == expected


FRAGMENTS = [EOT, "<|", "|>", " ", "  ", "\n", "\n\n", "\t", "a", "Bc", "'s", "1", "!", "é", "🙂"]


@st.composite
def corpus_text(draw):
    return "".join(draw(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=60)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=corpus_text(),
    chunk=st.integers(1, 48),
    with_specials=st.booleans(),
    workers=st.sampled_from([1, 2]),
)
def test_chunked_encoding_equals_whole_text(
    gpt2, tmp_path_factory, text, chunk, with_specials, workers
):
    """Chunks cut anywhere the boundary finder allows, in 1 or 2 processes, give encode's ids."""
    tok = gpt2 if with_specials else Tokenizer(gpt2.vocab, gpt2.merges)
    tmp = tmp_path_factory.mktemp("h")
    src = tmp / "in.txt"
    src.write_bytes(text.encode("utf-8"))
    out = tmp / "out.npy"
    result = encode_to_npy(
        src, tok, out, num_workers=workers, chunk_bytes=chunk, min_parallel_bytes=0
    )
    expected = tok.encode(text)
    assert _encoded(out).tolist() == expected
    assert result["num_tokens"] == len(expected)


def test_cli_with_a_run_directory_and_with_two_files(run_dir, tmp_path, caplog):
    src = DATA / "tinystories_heldout.txt"
    tok = Tokenizer.from_files(run_dir / "vocab.json", run_dir / "merges.txt", [EOT])
    expected = tok.encode(src.read_text(encoding="utf-8"))
    with caplog.at_level(logging.INFO):
        common = ["--input", str(src), "--no-progress"]
        assert main(["--tokenizer", str(run_dir), "--out", str(tmp_path / "a.npy"), *common]) == 0
    files = [str(run_dir / "vocab.json"), str(run_dir / "merges.txt")]
    assert (
        main(
            ["--tokenizer", *files, "--out", str(tmp_path / "b.npy"), "--num-workers", "1", *common]
        )
        == 0
    )
    assert _encoded(tmp_path / "a.npy").tolist() == expected
    assert _encoded(tmp_path / "b.npy").tolist() == expected
    assert "tokens from" in caplog.text


def test_progress_bar_runs(gpt2, tmp_path):
    src = FIXTURES / "german.txt"
    encode_to_npy(src, gpt2, tmp_path / "g.npy", num_workers=1, progress=True)
    assert _encoded(tmp_path / "g.npy").tolist() == gpt2.encode(src.read_text(encoding="utf-8"))


def test_vocab_too_large_for_uint16_is_refused_and_uint32_works(tmp_path):
    vocab = {i: bytes([i]) for i in range(256)} | {70_000: b"ab"}
    tok = Tokenizer(vocab, [(b"a", b"b")])
    src = tmp_path / "in.txt"
    src.write_text("abc ab", encoding="utf-8")
    with pytest.raises(ValueError, match=r"ids up to 70000 .* do not fit uint16.*uint32"):
        encode_to_npy(src, tok, tmp_path / "out.npy")
    assert not (tmp_path / "out.npy").exists()
    encode_to_npy(src, tok, tmp_path / "out.npy", dtype="uint32", num_workers=1)
    ids = _encoded(tmp_path / "out.npy")
    assert ids.dtype == np.uint32 and ids.tolist() == [70_000, 99, 32, 70_000]
    assert tok.decode(ids) == "abc ab"


def test_failed_encode_leaves_no_file_behind(gpt2, tmp_path):
    src = tmp_path / "bad.txt"
    src.write_bytes(b"fine text " * 100 + b"\xff\xfe broken")
    target = tmp_path / "out.npy"
    target.write_bytes(b"previous result")
    with pytest.raises(ValueError, match=r"not valid UTF-8.*byte offset 1000"):
        encode_to_npy(src, gpt2, target, num_workers=1, force=True)
    assert target.read_bytes() == b"previous result"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt", "out.npy"]  # no temp file


def test_npy_writer_concatenates_blocks_and_is_atomic(tmp_path):
    path = tmp_path / "ids.npy"
    n = write_npy_atomically(path, np.dtype("uint16"), [np.arange(3), np.arange(65_534, 65_536)])
    assert n == 5 and np.load(path).tolist() == [0, 1, 2, 65_534, 65_535]
    with pytest.raises(ValueError, match=r"token id 65536 does not fit uint16.*uint32"):
        write_npy_atomically(path, np.dtype("uint16"), [np.arange(65_535, 65_537)])

    def interrupted():
        yield np.arange(10)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_npy_atomically(path, np.dtype("uint32"), interrupted())
    assert np.load(path).dtype == np.uint16  # the previous file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["ids.npy"]


def test_missing_input_is_named(gpt2, tmp_path, caplog):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        encode_to_npy(tmp_path / "nope.txt", gpt2, tmp_path / "out.npy")
    with caplog.at_level(logging.ERROR):
        code = main(
            [
                "--tokenizer",
                str(DATA / "gpt2"),
                "--input",
                str(tmp_path / "nope.txt"),
                "--out",
                str(tmp_path / "out.npy"),
                "--no-progress",
            ]
        )
    assert code == 2 and "nope.txt" in caplog.text
    assert not (tmp_path / "out.npy").exists()


def test_bad_tokenizer_argument_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a directory"):
        resolve_tokenizer_files(tmp_path / "missing_run")
    with pytest.raises(FileNotFoundError, match="vocab.json"):
        resolve_tokenizer_files(tmp_path)
    with pytest.raises(ValueError, match="one run directory or two files"):
        resolve_tokenizer_files(["a", "b", "c"])


def test_empty_input_gives_an_empty_array(gpt2, tmp_path):
    src = tmp_path / "empty.txt"
    src.write_bytes(b"")
    result = encode_to_npy(src, gpt2, tmp_path / "e.npy")
    assert result["num_tokens"] == 0 and _encoded(tmp_path / "e.npy").shape == (0,)


def test_memory_does_not_grow_with_file_size(gpt2, tmp_path):
    """In-process encoding of a 3x larger file peaks at about the same traced memory.

    Both files exceed the 1 MB window in which a chunk cut looks for a special token, so both
    runs hold that window; what must not grow is everything else.
    """
    import tracemalloc

    text = (DATA / "owt_heldout.txt").read_text(encoding="utf-8")
    gpt2.encode(text)  # warm the pretoken cache: measure the pipeline, not the cache
    peaks = []
    for copies in (4, 12):
        src = tmp_path / f"in{copies}.txt"
        src.write_text(text * copies, encoding="utf-8")
        tracemalloc.start()
        try:
            encode_to_npy(src, gpt2, tmp_path / "o.npy", num_workers=1, chunk_bytes=32 * 1024)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    big = 12 * len(text.encode("utf-8"))
    assert peaks[1] < 1.2 * peaks[0] + 100_000, peaks
    assert peaks[1] < big, peaks  # well below the file (let alone its ids) held at once


# -- nothing lost: every file bpe-encode writes, pointed at every input and at an existing file --
def _run_files(run: Path) -> list[Path]:
    return sorted(p for p in run.iterdir() if p.is_file())


@pytest.fixture
def exported_run(tmp_path):
    """A run-like tokenizer directory with every file a run writes (vocab, merges, exports)."""
    from bpe.formats.exports import save_exports

    vocab, merges = train_bpe(FIXTURES / "corpus.en", 300, [EOT])
    tok = Tokenizer(vocab, merges, [EOT])
    run = tmp_path / "run"
    save_tokenizer_files(vocab, merges, run)
    save_exports(tok, run)
    return run


def _outs_at(target: Path) -> list[str]:
    """--out values whose array or sidecar lands on target: `X.npy` (the array) and `X`
    (whose sidecar is `X.json`) for a target `X.json`."""
    outs = [str(target)]
    if target.name.endswith(".json"):
        outs.append(str(target.with_name(target.name[: -len(".json")])))
    return outs


def test_no_output_ever_replaces_an_input_even_with_force(exported_run, tmp_path):
    corpus = tmp_path / "train.json"
    corpus.write_text('{"text": "hello world"}\n', "utf-8")
    inputs = [corpus, *_run_files(exported_run)]
    before = {p: p.read_bytes() for p in inputs}
    checked = 0
    for target in inputs:
        for out in _outs_at(target):
            for force in ([], ["--force"]):
                code = main(
                    [
                        "--tokenizer",
                        str(exported_run),
                        "--input",
                        str(corpus),
                        "--out",
                        out,
                        "--no-progress",
                        *force,
                    ]
                )
                assert code == 2, (out, force)
                checked += 1
    assert {p: p.read_bytes() for p in inputs} == before  # not one byte of any input changed
    assert checked >= 2 * (len(inputs) + 4)  # the array and the sidecar at each input
    Tokenizer.from_pretrained(exported_run)  # still loads, specials included


def test_an_existing_file_is_replaced_only_with_force(exported_run, tmp_path, caplog):
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world", "utf-8")
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": 1}', "utf-8")
    args = ["--tokenizer", str(exported_run), "--input", str(corpus), "--no-progress"]
    with caplog.at_level(logging.ERROR):
        assert main([*args, "--out", str(tmp_path / "notes")]) == 2
    assert "the sidecar of --out" in caplog.text and "not written by bpe-encode" in caplog.text
    assert notes.read_text("utf-8") == '{"mine": 1}'
    assert main([*args, "--out", str(tmp_path / "notes"), "--force"]) == 0  # asked for
    assert main([*args, "--out", str(tmp_path / "ids.npy")]) == 0
    assert main([*args, "--out", str(tmp_path / "ids.npy")]) == 0  # our own output: replaced


def _encode_until_its_temp_file(tmp_path: Path, out: Path):
    """Start `bpe-encode` on 40 MB of OWT text and return it once its output's temp file exists."""
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT, console_env

    corpus = tmp_path / "big.txt"
    if not corpus.exists():
        corpus.write_text((DATA / "owt_sample.txt").read_text("utf-8") * 16, "utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bpe.cli.encode", "--input", str(corpus)]
        + ["--tokenizer", str(DATA / "gpt2")]
        + ["--out", str(out), "--no-progress", "--force"],
        cwd=ROOT,
        env=console_env(),
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(out.parent.glob(f".{out.name}.*.tmp")):
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        assert time.monotonic() < deadline, "no temp file appeared"
        time.sleep(0.02)
    return proc


@pytest.mark.slow
def test_a_stopped_or_killed_encode_leaves_no_temp_file_behind(tmp_path):
    import signal

    out = tmp_path / "out" / "ids.npy"
    proc = _encode_until_its_temp_file(tmp_path, out)
    proc.send_signal(signal.SIGTERM)
    code, err = proc.wait(timeout=120), proc.stderr.read()
    assert code == 130, err[-3000:]
    assert "interrupted (received signal SIGTERM); no output was written" in err
    assert list(out.parent.iterdir()) == []
    # SIGKILL cannot be caught: the next write of the same output removes what it left
    proc = _encode_until_its_temp_file(tmp_path, out)
    proc.kill()
    proc.wait(timeout=60)
    assert list(out.parent.glob(".ids.npy.*.tmp"))
    small = tmp_path / "small.txt"
    small.write_text("Hello world", "utf-8")
    args = ["--input", str(small), "--tokenizer", str(DATA / "gpt2"), "--out", str(out)]
    assert main([*args, "--force"]) == 0
    assert sorted(p.name for p in out.parent.iterdir()) == ["ids.npy", "ids.npy.json"]
