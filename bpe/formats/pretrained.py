"""Opening a tokenizer directory, by one rule: what it holds and which tokens are special.

A tokenizer directory is a run directory, the output of `Tokenizer.save_pretrained`, or a bare
pair of GPT-2 files (vocab.json + merges.txt, like bpe/data/gpt2). A PickyBPE one also holds
removals.json (`bpe.formats.removals_json`), which its merges need. `Tokenizer.from_pretrained`,
`init_from=` (`bpe.formats.init_from`) and `bpe-encode` open it here; `bpe-compare` and
`bpe-show` (`bpe.analysis.compare_sides.load_side`) still read a run's vocab and merges by
themselves, with this module's special-token rule.

The special tokens, in this order of evidence:
    1. tokenizer.json's special added tokens, by id (runs and `save_pretrained` write it);
    2. else the `special_tokens` a run recorded in metrics.json;
    3. else the vocab entries that are neither a single byte nor made by a merge, by id: the
       tokens only a special can be (GPT-2's `<|endoftext|>`, id 50256).

What it does not do: write anything (`bpe.formats.exports`), or build the `Tokenizer` (its
callers do, with any override they were given).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from bpe.formats.gpt2_format import load_merges, load_tokenizer_files, load_vocab
from bpe.formats.removals_json import Removal, check_history, load_removals
from bpe.formats.tokenizer_json import pattern_of_dir, special_tokens_of_dir
from bpe.runs.layout import MERGES_FILE, METRICS_FILE, REMOVALS_FILE, VOCAB_FILE
from bpe.text.patterns import GPT2_PATTERN
from bpe.util.io import shown_path

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenizerDir:
    """What a tokenizer directory holds."""

    path: Path
    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    special_tokens: list[str]
    #: the split pattern its tokenizer.json records (a PickyBPE directory: its removals.json;
    #: GPT-2's without either)
    pattern: str
    #: PickyBPE's removals (`bpe.tokenizer.removals`); empty for every other tokenizer
    removals: tuple[Removal, ...] = ()


def vocab_special_tokens(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]) -> list[str]:
    """Step 3 of the rule, for files without a directory's records: the vocab entries that are
    neither a single byte nor made by a merge, by id.

    >>> vocab_special_tokens({0: b"<s>", 1: b"a", 2: b"b", 3: b"ab"}, [(b"a", b"b")])
    ['<s>']
    """
    made = {a + b for a, b in merges}
    return [
        t.decode("utf-8", errors="replace")
        for _, t in sorted(vocab.items())
        if len(t) > 1 and t not in made
    ]


def special_tokens_of(
    directory: str | os.PathLike, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]
) -> list[str]:
    """The special tokens of a tokenizer directory, by the rule in the module docstring.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()  # bare files: no tokenizer.json, no metrics.json
    >>> special_tokens_of(d, {0: b"<s>", 1: b"a", 2: b"b", 3: b"ab"}, [(b"a", b"b")])
    ['<s>']
    """
    d = Path(directory)
    recorded = special_tokens_of_dir(d)
    if recorded is not None:
        return recorded
    try:
        run = json.loads((d / METRICS_FILE).read_text("utf-8")).get("run") or {}
    except (OSError, ValueError, AttributeError):
        run = {}
    if isinstance(run.get("special_tokens"), list):
        return [str(t) for t in run["special_tokens"]]
    return vocab_special_tokens(vocab, merges)


def say_where(path: str | os.PathLike) -> Path:
    """The directory a path names, logged when a link chose it (`experiments/latest`), so a
    command never reads another run than the one it names without saying which.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> say_where(d) == d.resolve()
    True
    """
    d = Path(path)
    real = d.resolve()
    if real != d.absolute():
        logger.info("%s is %s", d, shown_path(real))
    return real


def open_tokenizer_dir(path: str | os.PathLike, *, what: str = "tokenizer") -> TokenizerDir:
    """Read a tokenizer directory: its vocab, merges, special tokens and split pattern.

    Args:
        what: how errors name the argument ("init_from=" reads `init_from='x'`).

    Raises:
        FileNotFoundError: the directory, vocab.json or merges.txt is missing.
        ValueError: malformed files, or files that do not belong together.
    """
    d = Path(path)
    if not d.is_dir():
        named = f"{what}{str(d)!r}" if what.endswith("=") else f"{what} {str(d)!r}"
        raise FileNotFoundError(
            f"{named} is not a directory; pass a run directory, a save_pretrained "
            "output, or a directory holding GPT-2 style vocab.json and merges.txt (e.g. "
            "data/gpt2)"
        )
    say_where(d)
    if not (d / REMOVALS_FILE).is_file():
        vocab, merges = load_tokenizer_files(d / VOCAB_FILE, d / MERGES_FILE)
        return TokenizerDir(
            path=d,
            vocab=vocab,
            merges=merges,
            special_tokens=special_tokens_of(d, vocab, merges),
            pattern=pattern_of_dir(d) or GPT2_PATTERN,
        )
    # a PickyBPE directory: its merges make tokens its vocab no longer holds
    removals, pattern = load_removals(d / REMOVALS_FILE)
    vocab, merges = load_vocab(d / VOCAB_FILE), load_merges(d / MERGES_FILE)
    check_history(vocab, merges, removals, source=f"tokenizer directory {str(d)!r}")
    return TokenizerDir(
        path=d,
        vocab=vocab,
        merges=merges,
        special_tokens=special_tokens_of(d, vocab, merges),
        pattern=pattern_of_dir(d) or pattern or GPT2_PATTERN,
        removals=tuple(removals),
    )
