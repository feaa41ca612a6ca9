"""Pre-tokenization: split text into pretokens and count them, in parallel, streaming the file.

What it does:
    * splits text on special tokens first (longest first, so overlapping specials work), then
      applies the GPT-2 regex to every piece between them, so no pretoken ever crosses or
      contains a special token;
    * counts a file chunk by chunk through the chunk pipeline (`bpe.chunks`: cuts at special
      tokens or where no pretoken can span, worker count and start method chosen there), so
      counting each chunk separately gives exactly the counts of the whole file.

Pretokens are found with `find_pretokens`: an exact translation of the GPT-2 pattern for the
standard `re` engine (about twice as fast as `regex`) whenever the text has no character above
U+FFFF, the `regex` pattern otherwise.

What it does not do: merging (see `bpe.trainers`), cutting files or running processes (see
`bpe.chunks`), or any newline / BOM normalisation. Bytes are sacred: the file is read in binary
and decoded as strict UTF-8, so `\\r\\n` and a leading BOM reach the trainer unchanged, and invalid
UTF-8 is an error that names its byte offset.
"""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import regex

from bpe.chunks import (
    DEFAULT_MIN_PARALLEL_BYTES,
    Chunk,
    map_chunks,
    plan,
    read_chunk_text,
)

logger = logging.getLogger(__name__)

#: GPT-2's end-of-text special token, the document separator of every bundled corpus.
EOT = "<|endoftext|>"

#: The GPT-2 pre-tokenization pattern (contractions, letters, numbers, other, whitespace).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT2_REGEX = regex.compile(GPT2_PATTERN)

#: Upper bound on the bytes one worker holds at once; a 10 GB file becomes many chunks. A chunk
#: costs ~15x its size at peak (decoded text plus the list of matches), so keep it modest.
DEFAULT_MAX_CHUNK_BYTES = 4 * 1024 * 1024


def validate_special_tokens(special_tokens: Sequence[str] | None) -> list[str]:
    """Return special tokens as a list of non-empty, distinct, multi-byte strings.

    A special token that is a single byte in UTF-8 (e.g. ``"\\n"``) is rejected: that byte
    already has its own id among the 256 byte tokens, so the special would be a second id
    for the same bytes, which no vocab file (vocab.json, tokenizer.json, tiktoken) can hold.
    Training, the Tokenizer and the command line all apply this one rule.

    >>> validate_special_tokens(["<|endoftext|>"])
    ['<|endoftext|>']
    >>> validate_special_tokens(["\\n"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: special token '\\n' is a single byte, which already has its own id among ...
    """
    if special_tokens is None:
        return []
    if isinstance(special_tokens, str):
        raise ValueError(
            f"special_tokens must be a list of strings, got the string {special_tokens!r}; "
            f"wrap it in a list: [{special_tokens!r}]"
        )
    tokens = list(special_tokens)
    seen: set[str] = set()
    for tok in tokens:
        if not isinstance(tok, str):
            raise ValueError(f"special token {tok!r} is not a str; pass special tokens as strings")
        if tok == "":
            raise ValueError("special token '' is empty; remove it from special_tokens")
        if len(tok.encode("utf-8")) == 1:
            raise ValueError(
                f"special token {tok!r} is a single byte, which already has its own id among the "
                "256 byte tokens; use a longer marker such as '<|newline|>'"
            )
        if tok in seen:
            raise ValueError(f"special token {tok!r} is listed twice; list each special token once")
        seen.add(tok)
    return tokens


def special_token_regex(special_tokens: Sequence[str]) -> regex.Pattern | None:
    """Compile an alternation matching any special token, longest first.

    Longest first matters when one special token is a prefix of another (``<|a|>`` and
    ``<|a|><|a|>``): the longer one wins, as it would for a greedy reader.

    >>> special_token_regex(["<|a|>", "<|a|><|a|>"]).match("<|a|><|a|>").group()
    '<|a|><|a|>'
    """
    if not special_tokens:
        return None
    ordered = sorted(special_tokens, key=len, reverse=True)
    return regex.compile("(" + "|".join(regex.escape(t) for t in ordered) + ")")


def split_on_special_tokens(
    text: str, special_tokens: Sequence[str], *, compiled: regex.Pattern | None = None
) -> list[str]:
    """Split text into alternating [ordinary, special, ordinary, ...] pieces.

    Even indices are ordinary text (possibly empty), odd indices are special tokens.

    >>> split_on_special_tokens("a<|eot|>b", ["<|eot|>"])
    ['a', '<|eot|>', 'b']
    """
    pattern = compiled if compiled is not None else special_token_regex(special_tokens)
    if pattern is None:
        return [text]
    return pattern.split(text)


def iter_pretokens(text: str) -> Iterator[str]:
    """Yield the GPT-2 pretokens of ordinary text (no special-token handling).

    >>> list(iter_pretokens("Hello, world!"))
    ['Hello', ',', ' world', '!']
    """
    for match in GPT2_REGEX.finditer(text):
        yield match.group()


def count_pretokens(text: str, special_tokens: Sequence[str] = ()) -> Counter[bytes]:
    """Count the UTF-8 bytes of every pretoken in text; special tokens are dropped, not counted.

    >>> count_pretokens("the cat<|eot|>the", ["<|eot|>"])
    Counter({b'the': 2, b' cat': 1})
    """
    counts: Counter[str] = Counter()
    pieces = split_on_special_tokens(text, special_tokens)
    for piece in pieces[::2]:
        if piece:
            counts.update(find_pretokens(piece))
    return Counter({tok.encode("utf-8"): n for tok, n in counts.items()})


# ---------------------------------------------------------------------------------------------
# Pre-tokenization with the standard `re` engine (BMP text)
# ---------------------------------------------------------------------------------------------


def _bmp_class(prop: str) -> str:
    """`re` character-class body equal to the `regex` class `prop` on U+0000..U+FFFF.

    >>> _bmp_class(r"\\p{Nd}")[:6]
    '0-9٠-٩'
    """
    every = "".join(map(chr, range(0x10000)))
    parts = []
    for m in regex.finditer(prop + "+", every):
        first, last = m.group()[0], m.group()[-1]
        parts.append(re.escape(first) if first == last else f"{re.escape(first)}-{re.escape(last)}")
    return "".join(parts)


@cache
def bmp_pretoken_regex() -> re.Pattern:
    """`GPT2_PATTERN` translated for `re`; equal to `GPT2_REGEX` on text without astral characters.

    `\\p{L}`, `\\p{N}` and `\\s` are replaced by explicit classes taken from the `regex` module
    itself (so both engines agree on Unicode's tables), `\\S` by the negated whitespace class.
    Characters above U+FFFF are left out: `re` scans such ranges linearly, which is slow, so text
    containing them goes to `GPT2_REGEX` instead (see `find_pretokens`).

    >>> bmp_pretoken_regex().findall("I'll say   hi!")
    ['I', "'ll", ' say', '  ', ' hi', '!']
    """
    space = _bmp_class(r"\s")
    body = {r"\p{L}": _bmp_class(r"\p{L}"), r"\p{N}": _bmp_class(r"\p{N}"), r"\s": space}
    out, in_class = [], False
    for tok in regex.findall(r"\\p\{[LN]\}|\\[sS]|\\.|.", GPT2_PATTERN, flags=regex.DOTALL):
        if tok in body:
            out.append(body[tok] if in_class else f"[{body[tok]}]")
        elif tok == r"\S":
            assert not in_class, "negated class inside a class is not used by GPT2_PATTERN"
            out.append(f"[^{space}]")
        else:
            if tok == "[":
                in_class = True
            elif tok == "]":
                in_class = False
            out.append(tok)
    return re.compile("".join(out))


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def find_pretokens(text: str) -> list[str]:
    """GPT-2 pretokens of ordinary text, with the faster `re` engine whenever it is exact.

    >>> find_pretokens("Hello, world! 🙂")
    ['Hello', ',', ' world', '!', ' 🙂']
    """
    if _ASTRAL.search(text) is None:
        return bmp_pretoken_regex().findall(text)
    return GPT2_REGEX.findall(text)


# ---------------------------------------------------------------------------------------------
# Reading and counting
# ---------------------------------------------------------------------------------------------


def check_input_file(path: str | os.PathLike) -> Path:
    """Return the path if it is a readable, non-empty file; raise a clear error otherwise."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(
            f"input file {str(p)!r} does not exist; check the path (bundled samples live in data/)"
        )
    if not p.is_file():
        raise ValueError(f"input path {str(p)!r} is not a regular file; pass a text file")
    if not os.access(p, os.R_OK):
        raise PermissionError(f"input file {str(p)!r} is not readable; fix its permissions")
    if p.stat().st_size == 0:
        raise ValueError(f"input file {str(p)!r} is empty; BPE needs text to learn merges from")
    return p


def _count_chunk(context: tuple[str, tuple[str, ...]], chunk: Chunk) -> Counter[bytes]:
    path, specials = context
    return count_pretokens(read_chunk_text(path, chunk.start, chunk.end), specials)


@dataclass
class PretokenCounts:
    """Pretoken counts of a file plus what it took to get them."""

    counts: Counter[bytes]
    num_bytes: int
    num_chunks: int
    num_workers: int
    #: how worker processes were started ("in-process" when num_workers == 1)
    start_method: str = "in-process"

    @property
    def num_pretokens(self) -> int:
        return sum(self.counts.values())

    @property
    def num_unique(self) -> int:
        return len(self.counts)


def pretokenize_file(
    path: str | os.PathLike,
    special_tokens: Sequence[str] = (),
    *,
    num_workers: int | None = None,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    min_parallel_bytes: int = DEFAULT_MIN_PARALLEL_BYTES,
    progress: bool = False,
) -> PretokenCounts:
    """Count the pretokens of a file, in `num_workers` processes over safely cut chunks.

    Memory stays bounded by the chunk size (`max_chunk_bytes` per worker) plus the counts, as
    long as the text has safe cuts (a WARNING names a chunk that stays larger). Parallel and
    serial counting give identical counts (tested). Workers and their start method follow the
    one policy of `bpe.chunks.plan`.

    Args:
        path: UTF-8 text file.
        special_tokens: strings never split or merged; they are removed from the counts.
        num_workers: processes; None means the number of usable CPUs; 1 runs in-process;
            capped at the usable CPUs and the number of chunks.
        max_chunk_bytes: upper bound on a chunk's size (guide, not exact: cuts move forward).
        min_parallel_bytes: files smaller than this are counted in-process.
        progress: show a tqdm bar over chunks.

    Raises:
        FileNotFoundError / ValueError: missing, empty or non-UTF-8 file; bad special tokens.
        bpe.chunks.ChunkWorkerError: a worker process died (names the chunk and the signal).
    """
    specials = tuple(validate_special_tokens(special_tokens))
    p = check_input_file(path)
    size = p.stat().st_size
    chunks, workers = plan(
        p,
        specials,
        num_workers=num_workers,
        max_chunk_bytes=max_chunk_bytes,
        min_parallel_bytes=min_parallel_bytes,
    )
    logger.info(
        "pretokenizing %s (%d bytes) in %d chunks with %d worker(s) (%s)",
        p,
        size,
        len(chunks),
        workers.workers,
        workers.start_method,
    )
    bmp_pretoken_regex()  # compile once here, so forked workers inherit it
    total: Counter[bytes] = Counter()
    results = map_chunks(_count_chunk, (str(p), specials), chunks, workers, ordered=False)
    with closing(results):
        # Counter addition is commutative: arrival order cannot change the counts.
        for counts in _progress(results, len(chunks), progress, "pretokenize"):
            total.update(counts)
    return PretokenCounts(total, size, len(chunks), workers.workers, workers.start_method)


def _progress(it: Iterable, total: int, enabled: bool, desc: str) -> Iterable:
    if not enabled:
        return it
    from tqdm.auto import tqdm

    return tqdm(it, total=total, desc=desc, unit="chunk")
