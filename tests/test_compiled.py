"""The compiled trainer: the Python trainers' exact merges, linear on long pretokens, heap when
the integers would overflow.

The suite compares it with the reference trainers on the bundled samples, the CS336 fixtures
(`tests/test_training.py`, every trainer) and hypothesis corpora; `tests/test_trainers.py` and
`tests/test_init_from.py` run their every-trainer tests on it too. The kernels compile once
per process (about ten seconds of CPU, or a fraction of a second from Numba's cache).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.pipeline import train_bpe_detailed
from bpe.pretokenize import pretokenize
from bpe.pretokenize.counting import count_pretokens
from bpe.trainers import TRAINERS, compiled, learn_merges
from bpe.trainers.common import prepare
from tests.complexity import assert_linear
from tests.conftest import DATA, EOT, FIXTURES, ROOT, console_env

SPECIALS = [EOT, "<|pad|>"]


def _counts(path):
    return pretokenize(path, [EOT], num_workers=1).counts


@pytest.mark.parametrize(
    ("name", "vocab_size"),
    [("tinystories_train_sample.txt", 10_000), ("owt_sample.txt", 32_000)],
)
def test_the_bundled_samples_give_heaps_merges_at_full_vocab(name, vocab_size):
    counts = _counts(DATA / name)
    reference = learn_merges("heap", counts, vocab_size, [EOT])
    assert len(reference.merges) == vocab_size - 257  # no early stop: every merge compared
    assert learn_merges("compiled", counts, vocab_size, [EOT]) == reference


def test_the_pool_is_compacted_before_it_grows_and_the_merges_stay_heaps(caplog):
    """The positions' pool runs out during the merges of a real sample: its dead slices and
    stale positions are dropped first (and it grows only if that is not enough), with every
    merge and count still heap's."""
    counts = _counts(DATA / "owt_sample.txt")
    reference = learn_merges("heap", counts, 12_000, [EOT])
    with caplog.at_level(logging.DEBUG, logger="bpe.trainers.compiled"):
        assert learn_merges("compiled", counts, 12_000, [EOT]) == reference
    compactions = [r.getMessage() for r in caplog.records if "pool compacted" in r.message]
    assert compactions, "the pool never ran out: nothing was compacted"
    for message in compactions:
        before, after = map(int, re.findall(r"\d+", message))
        assert after < before


def test_the_merge_stage_holds_one_int32_per_position(monkeypatch):
    """The layout the 2 GB goal rests on: one array per position, the tokens (int32, a
    separator after each word); the links and the word of each position are not stored (at
    11.9 GB they were 0.7 GB). Laid out in slices of 3 words, it is what one slice gives."""
    counts = _counts(DATA / "owt_sample.txt")
    state = prepare(counts, 2_000, [EOT])
    words = list(state.words)
    positions = sum(map(len, words)) + len(words)
    k = compiled.load_kernels()
    whole = compiled._word_ids(words, k.SEP)
    monkeypatch.setattr(compiled, "WORDS_PER_SLICE", 3)
    assert compiled._word_ids(words, k.SEP).tolist() == whole.tolist()
    assert whole[-1] == k.SEP and (whole == k.SEP).sum() == len(words)
    tables = compiled._tables(k, state, 2_000 - 257)
    tok = tables.words.tok
    assert tok.dtype == np.int32 and len(tok) == positions
    arrays = {
        f"{group}.{name}": array
        for group in (f.name for f in fields(tables) if f.name != "sc")
        for name, array in getattr(tables, group)._asdict().items()
    }
    per_position = {name for name, array in arrays.items() if len(array) == positions}
    assert per_position == {"words.tok"}
    assert len(tables.words.wstart) == len(words) + 1
    assert len(tables.words.block_word) <= positions // 32


def test_the_cs336_fixtures_give_the_reference_trainers_merges():
    """corpus.en against the CS336 reference itself: `tests/test_training.py`, every trainer."""
    counts = _counts(FIXTURES / "corpus.en")
    assert learn_merges("compiled", counts, 400, [EOT]) == learn_merges("naive", counts, 400, [EOT])
    counts = _counts(FIXTURES / "tinystories_sample.txt")
    assert learn_merges("compiled", counts, 5000, [EOT]) == learn_merges(
        "heap", counts, 5000, [EOT]
    )


_WORD = st.text(alphabet="abé🙂 ", min_size=1, max_size=10).map(lambda s: s.encode("utf-8"))


@settings(max_examples=200, deadline=None)
@given(
    counts=st.dictionaries(_WORD, st.integers(min_value=1, max_value=4), min_size=1, max_size=30),
    extra=st.integers(min_value=0, max_value=80),
    specials=st.integers(min_value=0, max_value=2),
)
def test_random_corpora_with_ties_give_naives_merges(counts, extra, specials):
    """Three letters and counts up to 4: most selections are ties broken by bytes."""
    tokens = SPECIALS[:specials]
    vocab_size = len(tokens) + 256 + extra
    assert learn_merges("compiled", counts, vocab_size, tokens) == learn_merges(
        "naive", counts, vocab_size, tokens
    )


@settings(max_examples=100, deadline=None)
@given(
    counts=st.dictionaries(
        st.text(alphabet="ab", min_size=9, max_size=30).map(str.encode),
        st.integers(min_value=1, max_value=3),
        min_size=1,
        max_size=12,
    )
)
def test_ties_between_tokens_sharing_their_first_8_bytes_are_settled_by_the_rest(counts):
    """Two letters and long words: tied candidates whose tokens agree on 8+ bytes, where the
    kernels' 8-byte prefix keys are equal and the bytes after them decide."""
    assert learn_merges("compiled", counts, 400, []) == learn_merges("heap", counts, 400, [])


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=400), cut=st.sampled_from(SPECIALS))
def test_random_text_with_special_tokens_gives_heaps_merges(text, cut):
    text = text.replace("x", cut)  # special tokens wherever hypothesis put an "x"
    counts = count_pretokens(text, SPECIALS)
    assert learn_merges("compiled", counts, 400, SPECIALS) == learn_merges(
        "heap", counts, 400, SPECIALS
    )


def test_long_repetitive_words_match_naive_count_for_count():
    counts = {b"a" * 3001: 3, b"ab" * 900: 2, b"aab" * 333: 1, b"abba" * 250: 2, b"b" * 65: 1}
    assert learn_merges("compiled", counts, 500, []) == learn_merges("naive", counts, 500, [])


def test_progress_ticks_once_per_merge_in_small_batches(monkeypatch):
    monkeypatch.setattr(compiled, "BATCH", 3)  # many kernel calls, each resuming the last
    counts = _counts(FIXTURES / "corpus.en")
    ticks = []
    state = prepare(counts, 900, [EOT])
    compiled.merge_loop(state, lambda: ticks.append(1))
    assert len(ticks) == len(state.merged) == 900 - 257
    heap = prepare(counts, 900, [EOT])
    TRAINERS["heap"](heap, lambda: None)
    assert state.merged == heap.merged and state.merge_counts == heap.merge_counts


def test_counts_beyond_int64_fall_back_to_heap_and_say_so(caplog):
    caplog.set_level("WARNING", logger="bpe.trainers.compiled")
    counts = {b"ab": 2**70, b"cd": 2**70 - 1}
    assert learn_merges("compiled", counts, 258, []) == learn_merges("heap", counts, 258, [])
    assert "training with heap instead" in caplog.text


#: One pretoken of one letter and of two alternating letters; compiled needs far longer ones
#: than the Python trainers before its time is tens of milliseconds (see tests/complexity.py).
@pytest.mark.parametrize("unit", ["a", "ab"], ids=["one letter", "two letters"])
def test_a_long_pretoken_costs_linear_time(unit):
    learn_merges("compiled", {b"ab": 1}, 258, [])  # compiled (or loaded) outside the timing

    def work(size: int) -> None:
        learn_merges("compiled", {(unit * (size // len(unit))).encode(): 1}, 300, [EOT])

    assert_linear(work, 400_000, what=f"compiled on one pretoken of {unit!r} x n")


# -- the compile step: timed apart, first run vs cached ----------------------------------------
def test_training_times_the_compile_step_apart_from_the_merges(caplog):
    caplog.set_level("INFO", logger="bpe.pipeline")
    result = train_bpe_detailed(FIXTURES / "corpus.en", 400, [EOT], trainer="compiled")
    assert list(result.timings) == ["pretokenize", "compile", "merge"]  # in the order they ran
    assert result.compile_cached is True  # this process compiled or loaded them already
    assert "compiled: machine code loaded from Numba's cache" in caplog.text
    heap = train_bpe_detailed(FIXTURES / "corpus.en", 400, [EOT], trainer="heap")
    assert "compile" not in heap.timings and heap.compile_cached is None
    assert (heap.vocab, heap.merges) == (result.vocab, result.merges)


def test_a_fresh_cache_compiles_then_loads(tmp_path):
    """Two processes sharing an empty cache directory: the first compiles, the second loads."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    code = "from bpe.trainers.compiled import compile_kernels; print(compile_kernels().cached)"
    seen = [
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.split()[-1]
        for _ in range(2)
    ]
    assert seen == ["False", "True"]


# -- without Numba: a clear message, no run directory -------------------------------------------
#: A `sitecustomize` that makes `import numba` fail, as on a machine without the extra.
BLOCK_NUMBA = """
import sys

class _NoNumba:
    def find_spec(self, name, path=None, target=None):
        if name == "numba" or name.startswith("numba."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoNumba())
"""


@pytest.fixture
def without_numba(tmp_path) -> dict[str, str]:
    """An environment whose Python cannot import Numba (the base install, no extra)."""
    blocker = tmp_path / "no_numba"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCK_NUMBA, "utf-8")
    env = console_env()
    env["PYTHONPATH"] = os.pathsep.join(
        [str(blocker), str(ROOT), *filter(None, [env.get("PYTHONPATH")])]
    )
    env.pop("NUMBA_CACHE_DIR", None)
    return env


def test_without_numba_the_python_trainers_train_and_compiled_says_how_to_install(without_numba):
    code = (
        "import sys\n"
        "from bpe import train_bpe\n"
        f"path = {str(FIXTURES / 'corpus.en')!r}\n"
        "vocab, merges = train_bpe(path, 300, ['<|endoftext|>'], trainer='heap', num_workers=1)\n"
        "assert len(merges) == 43 and 'numba' not in sys.modules\n"
        "try:\n"
        "    train_bpe(path, 300, ['<|endoftext|>'], trainer='compiled', num_workers=1)\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    out = _python_without_numba(code, without_numba)
    assert "pip install 'bpe-lab[compiled]'" in out
    assert "trainer 'compiled' needs Numba" in out


def _python_without_numba(code: str, env: dict[str, str]) -> str:
    """Run code in a fresh interpreter where `import numba` fails; return its stdout."""
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_without_numba_the_compiled_engine_says_how_to_install_and_auto_uses_regex(without_numba):
    code = (
        "import sys\n"
        "from bpe import train_bpe_detailed\n"
        f"path = {str(FIXTURES / 'corpus.en')!r}\n"
        "r = train_bpe_detailed(path, 300, ['<|endoftext|>'], trainer='heap', engine='auto')\n"
        "assert r.pretokenized.engine == 'regex' and 'numba' not in sys.modules\n"
        "try:\n"
        "    train_bpe_detailed(path, 300, ['<|endoftext|>'], trainer='heap', engine='compiled')\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    out = _python_without_numba(code, without_numba)
    assert "pretokenize.engine='compiled' needs Numba" in out
    assert "pip install 'bpe-lab[compiled]'" in out


def test_without_numba_bpe_train_exits_2_before_making_a_run_directory(without_numba, tmp_path):
    runs = tmp_path / "runs"
    proc = subprocess.run(
        [
            "bpe-train",
            "trainer=compiled",
            "debug=fast",
            f"dataset.path={FIXTURES / 'corpus.en'}",
            f"experiments_dir={runs}",
        ],
        env=without_numba,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.splitlines()
    assert line.startswith("bpe-train: error: trainer=compiled: ")
    assert "pip install 'bpe-lab[compiled]'" in line
    assert not runs.exists() or not any(runs.iterdir())


# -- a run as a user makes it ----------------------------------------------------------------
@pytest.mark.slow
def test_bpe_train_with_trainer_compiled_and_defaults(tmp_path):
    """The default dataset and vocab size, every CPU: the run records compile apart."""
    proc = subprocess.run(
        ["bpe-train", "trainer=compiled", f"experiments_dir={tmp_path / 'runs'}"],
        env=console_env(),
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = (tmp_path / "runs" / "latest").resolve()
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    assert metrics["status"] == "complete" and metrics["run"]["trainer"] == "compiled"
    assert list(metrics["timings"])[:3] == ["pretokenize", "compile", "merge"]
    assert isinstance(metrics["compile"]["cached"], bool)
    report = Path(run / "ANALYSIS.md").read_text("utf-8")
    assert "| compile " in report and "**compile** (" in report


def test_a_huge_vocab_on_a_tiny_corpus_costs_what_the_corpus_can_merge():
    """vocab_size=10^8 on a 51-byte corpus (37 merges possible) once allocated 1.05 GB."""
    merged = {}
    pytest.importorskip("numba")
    code = (
        "import resource\n"
        "from bpe.trainers import learn_merges\n"
        "from bpe.trainers.compiled import compile_kernels\n"
        "compile_kernels()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "out = learn_merges('compiled', {b'the quick brown fox': 3, b'jumps over the lazy dog': 2,"
        " b'again': 1}, {size})\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(len(out.merges), (after - before) // 1024)\n"
    )
    grown = {}
    for size in (10**3, 10**8):
        proc = subprocess.run(
            [sys.executable, "-c", code.replace("{size}", str(size))],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        merged[size], grown[size] = map(int, proc.stdout.split())
    assert merged[10**8] == merged[10**3] < 10**3 - 257  # the corpus ran out of pairs
    assert grown[10**8] < grown[10**3] + 50, grown  # MB: the asked vocab costs nothing more


def test_a_corpus_too_big_for_the_kernels_is_trained_by_heap_with_a_warning(monkeypatch, caplog):
    """Beyond its 32-bit arrays the compiled loop hands the state to the fallback the registry
    gives it (heap's loop: the same merges); called without one, it refuses, naming heap."""
    counts = count_pretokens((FIXTURES / "corpus.en").read_text("utf-8")[:20_000])
    heap = learn_merges("heap", counts, 400)
    monkeypatch.setattr(compiled, "_too_big_for_int", lambda state, limit: "2**31 positions")
    with caplog.at_level("WARNING", logger="bpe.trainers.compiled"):
        out = learn_merges("compiled", counts, 400)
    assert out.merges == heap.merges
    assert "2**31 positions; training with heap instead (same merges)" in caplog.text
    state = prepare(counts, 400, [])
    with pytest.raises(ValueError, match="use trainer=heap"):
        compiled.merge_loop(state, lambda: None)
