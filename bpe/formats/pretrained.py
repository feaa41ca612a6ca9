"""Opening a tokenizer directory, by one rule: what it holds and which tokens are special.

A tokenizer directory is a run directory, the output of `Tokenizer.save_pretrained`, or a bare
pair of GPT-2 files (vocab.json + merges.txt, like bpe/data/gpt2). A PickyBPE one also holds
removals.json (`bpe.formats.removals_json`), which its merges need. `Tokenizer.from_pretrained`,
`init_from=` (`bpe.formats.init_from`) and `bpe-encode` open it here; `bpe-compare` and
`bpe-show` (`bpe.analysis.compare.sides.load_side`) still read a run's vocab and merges by
themselves, with this module's special-token rule.

The special tokens, in this order of evidence:
    1. tokenizer.json's special added tokens, by id (runs and `save_pretrained` write it);
    2. else the `special_tokens` a run recorded in metrics.json;
    3. else the vocab entries that are neither a single byte nor made by a merge, by id: the
       tokens only a special can be (GPT-2's `<|endoftext|>`, id 50256).

Before reading, the directory is checked as a whole (`bpe.formats.manifest.check_whole`: the
files its writer saved, with their hashes). A bare pair of GPT-2 files, which nothing vouches
for, is checked by its structure instead: a token that no merge makes must be declared special
(tokenizer.json, metrics.json) or look like one (`<|endoftext|>`, `<s>`, `[CLS]`), so a
merges.txt cut short or emptied is an error, not a tokenizer whose learned tokens became
special tokens.

What it does not do: write anything (`bpe.formats.exports`), or build the `Tokenizer` (its
callers do, with any override they were given).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from bpe.formats.gpt2_format import load_merges, load_tokenizer_files, load_vocab, render
from bpe.formats.manifest import check_whole
from bpe.formats.removals_json import Removal, check_history, load_removals
from bpe.formats.tokenizer_json import special_tokens_of_dir, splits_of_dir
from bpe.runs import schema
from bpe.runs.layout import MERGES_FILE, REMOVALS_FILE, TOKENIZER_JSON, VOCAB_FILE
from bpe.runs.upgrade import read_metrics
from bpe.text.patterns import GPT2_PATTERN, bounded_pattern
from bpe.text.protect import check_protect
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
    #: the protected characters' regex (`bpe.text.protect`) recorded beside the pattern, or None
    protect: str | None = None
    #: BoundlessBPE's supermerges (`bpe.tokenizer.superwords`); empty for every other tokenizer
    supermerges: tuple[int, ...] = ()


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


def declared_special_tokens(directory: str | os.PathLike) -> list[str] | None:
    """The special tokens a directory declares (steps 1 and 2 of the rule: tokenizer.json,
    else a run's metrics.json), or None when it declares none.

    >>> import tempfile
    >>> declared_special_tokens(tempfile.mkdtemp()) is None
    True
    """
    d = Path(directory)
    recorded = special_tokens_of_dir(d)
    if recorded is not None:
        return recorded
    try:
        recorded = schema.get(read_metrics(d), schema.SPECIAL_TOKENS)
    except (OSError, ValueError):
        recorded = None
    return [str(t) for t in recorded] if isinstance(recorded, list) else None


def special_tokens_of(
    directory: str | os.PathLike,
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    *,
    vouched: bool = True,
) -> list[str]:
    """The special tokens of a tokenizer directory, by the rule in the module docstring; when
    nothing `vouched` for its files (`bpe.formats.manifest.check_whole`), its structure is
    checked first (`check_bare_pair`).

    >>> import tempfile
    >>> d = tempfile.mkdtemp()  # bare files: no tokenizer.json, no metrics.json
    >>> special_tokens_of(d, {0: b"<s>", 1: b"a", 2: b"b", 3: b"ab"}, [(b"a", b"b")])
    ['<s>']
    """
    declared = declared_special_tokens(directory)
    if not vouched:
        check_bare_pair(Path(directory), vocab, merges, declared or [])
    return declared if declared is not None else vocab_special_tokens(vocab, merges)


#: what an undeclared special token looks like: <|endoftext|>, <s>, </s>, [CLS], [PAD]
_LOOKS_SPECIAL = re.compile(r"<\|[^\s|]+\|>|</?[A-Za-z0-9_.:-]+>|\[[A-Z0-9_]+\]")


def check_bare_pair(
    d: Path, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], declared: list[str]
) -> None:
    """Refuse a vocab.json + merges.txt that nothing vouches for, when a token no merge makes
    is neither a `declared` special token nor looks like one.

    Such a token would become a special token (step 3 of the rule), matched literally inside
    text, or a token nothing can produce: that is what a merges.txt cut short or emptied
    looks like.

    >>> vocab = {0: b"a", 1: b"b", 2: b"ab", 3: b"<|endoftext|>"}
    >>> check_bare_pair(Path("gpt2"), vocab, [(b"a", b"b")], [])
    >>> check_bare_pair(Path("cut"), vocab, [], ["<|endoftext|>"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: cut/vocab.json holds 1 token that no merge of merges.txt makes...
    """
    known = set(declared)
    odd = [
        t
        for t in vocab_special_tokens(vocab, merges)
        if t not in known and not _LOOKS_SPECIAL.fullmatch(t)
    ]
    if not odd:
        return
    raise ValueError(
        f"{shown_path(d / VOCAB_FILE)} holds {len(odd)} token{'s' * (len(odd) != 1)} that no "
        f"merge of {MERGES_FILE} makes and that {'is' if len(odd) == 1 else 'are'} not a special "
        f"token (e.g. {', '.join(repr(render(t.encode('utf-8'))) for t in odd[:3])}): "
        f"{MERGES_FILE} was cut short or emptied (it has {len(merges)} merges for "
        f"{len(vocab)} tokens); copy it again, or declare the special tokens in tokenizer.json"
    )


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


def open_tokenizer_dir(
    path: str | os.PathLike, *, what: str = "tokenizer", own_pattern: bool = True
) -> TokenizerDir:
    """Read a tokenizer directory: its vocab, merges, special tokens and split pattern.

    Args:
        what: how errors name the argument ("init_from=" reads `init_from='x'`).
        own_pattern: the caller will split with the directory's pattern, so a custom one is
            checked first (`bpe.text.patterns.bounded_pattern`); False when it passes its own.

    Raises:
        FileNotFoundError: the directory, vocab.json or merges.txt is missing.
        ValueError: malformed files, files that do not belong together, or files that are not
            the ones saved together (`bpe.formats.manifest.TokenizerDirMismatch`).
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
    vouched = check_whole(d)
    exported, protect = splits_of_dir(d)
    if not (d / REMOVALS_FILE).is_file():
        vocab, merges = load_tokenizer_files(d / VOCAB_FILE, d / MERGES_FILE)
        return TokenizerDir(
            path=d,
            vocab=vocab,
            merges=merges,
            special_tokens=special_tokens_of(d, vocab, merges, vouched=vouched),
            pattern=_checked(exported, d / TOKENIZER_JSON, own_pattern),
            protect=_protect(protect, d / TOKENIZER_JSON),
        )
    # a PickyBPE or BoundlessBPE directory: its merges make tokens its vocab may no longer hold
    removals, pattern, recorded, supermerges = load_removals(d / REMOVALS_FILE)
    vocab, merges = load_vocab(d / VOCAB_FILE), load_merges(d / MERGES_FILE)
    check_history(vocab, merges, removals, source=f"tokenizer directory {str(d)!r}")
    return TokenizerDir(
        path=d,
        vocab=vocab,
        merges=merges,
        special_tokens=special_tokens_of(d, vocab, merges),
        pattern=_checked(
            exported or pattern, d / (TOKENIZER_JSON if exported else REMOVALS_FILE), own_pattern
        ),
        removals=tuple(removals),
        protect=_protect(protect or recorded, d / (TOKENIZER_JSON if protect else REMOVALS_FILE)),
        supermerges=tuple(supermerges),
    )


def _protect(protect: str | None, source: Path) -> str | None:
    """The recorded protected characters' regex, checked as a run's `protect` would be."""
    if protect is None:
        return None
    try:
        check_protect([protect])
    except ValueError as err:
        raise ValueError(
            f"{shown_path(source)} records a protect regex that cannot be used: {err}; restore "
            "the file from the run"
        ) from None
    return protect


def _checked(pattern: str | None, source: Path, check: bool) -> str:
    """The directory's split pattern (GPT-2's when it records none), bounded if it is used."""
    if pattern is None:
        return GPT2_PATTERN
    return bounded_pattern(pattern, source=shown_path(source)) if check else pattern
