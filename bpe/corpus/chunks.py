"""Chunks of a text file: cut it at safe places, and pick the workers once.

What it does:
    * plans chunks (`plan_chunks`, `find_chunk_boundaries`): each cut falls at the start of a
      special token or, failing that, at a character boundary that no pretoken of the split
      pattern can span (`bpe.text.cuts`: rules proved for GPT-2's, cl100k's and o200k's
      patterns; a custom pattern is cut at special tokens only), so processing the chunks
      separately gives exactly the result of the whole file. Only a window around each cut is
      read; a chunk that stays above the size bound because its text has no safe cut is logged
      as a WARNING;
    * `read_chunk_text`: the text of one chunk, as strict UTF-8 (the error names the offset).

The corpus layer plans a file's parts with it (`bpe.corpus.parts.plan_parts`), and
`plan_work` there picks the workers once.

What it does not do: know what a chunk means (stage 1 and dataset encoding pass their own
function), or run the processes (`bpe.util.pool`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from bpe.text.cuts import safe_cut
from bpe.text.patterns import GPT2_PATTERN
from bpe.util.pool import Chunk

logger = logging.getLogger(__name__)

#: Bytes read after each guessed cut while looking for a safe one.
DEFAULT_WINDOW_BYTES = 1 << 20


# ---------------------------------------------------------------------------------------------
# Planning the chunks
# ---------------------------------------------------------------------------------------------


def find_chunk_boundaries(
    path: str | os.PathLike,
    num_chunks: int,
    special_tokens: Sequence[str] = (),
    *,
    window_bytes: int = DEFAULT_WINDOW_BYTES,
    pattern: str = GPT2_PATTERN,
) -> list[int]:
    """Byte offsets [0, ..., file_size] cutting the file into about `num_chunks` safe chunks.

    Each guessed cut moves forward to the start of the next special token within `window_bytes`;
    when there is none, to the first safe character cut for `pattern` (see `cut_regex`) that is
    not inside a special token. Cuts that collapse onto each other are merged, so fewer chunks
    may come back. Only a window per cut is read: the file is never loaded whole. Below, the
    guess (byte 6) falls inside the special token, so the cut moves to its end:

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".txt") as f:
    ...     _ = f.write(b"a b<|eot|>c d")
    ...     f.flush()
    ...     find_chunk_boundaries(f.name, 2, ["<|eot|>"])
    [0, 10, 13]
    """
    specials = [t.encode("utf-8") for t in special_tokens]
    size = os.path.getsize(path)
    if num_chunks <= 1 or size == 0:
        return [0, size]
    step = size / num_chunks
    longest = max((len(s) for s in specials), default=0)
    bounds = [0]
    with open(path, "rb") as f:
        for i in range(1, num_chunks):
            guess = max(int(i * step), bounds[-1] + 1)
            if guess >= size:
                break
            # Read a little before the guess too, so a special token straddling it is seen.
            lead = min(guess, max(longest - 1, 0))
            f.seek(guess - lead)
            buf = f.read(lead + window_bytes + longest)
            cut = safe_cut(buf, lead, window_bytes, specials, pattern)
            if cut is not None and 0 < guess - lead + cut < size:
                bounds.append(guess - lead + cut)
    bounds.append(size)
    return sorted(set(bounds))


def plan_chunks(
    path: str | os.PathLike,
    special_tokens: Sequence[str] = (),
    *,
    max_chunk_bytes: int,
    min_chunks: int = 1,
    window_bytes: int = DEFAULT_WINDOW_BYTES,
    pattern: str = GPT2_PATTERN,
) -> list[Chunk]:
    """Chunks of at most about `max_chunk_bytes` (and at least `min_chunks` of them), cut safely.

    A chunk larger than `max_chunk_bytes + window_bytes` means its text had no safe cut (one
    huge pretoken, such as a line of a single letter); it is logged as a WARNING because the
    memory bound then grows with it.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".txt") as f:
    ...     _ = f.write(b"abc123def456")
    ...     f.flush()
    ...     [c.describe() for c in plan_chunks(f.name, max_chunk_bytes=4, window_bytes=4)]
    ['chunk 0 (bytes 0-6)', 'chunk 1 (bytes 6-9)', 'chunk 2 (bytes 9-12)']
    """
    if max_chunk_bytes < 1:
        raise ValueError(f"max_chunk_bytes={max_chunk_bytes!r} must be >= 1")
    size = os.path.getsize(path)
    num_chunks = max(min_chunks, -(-size // max_chunk_bytes), 1)
    bounds = find_chunk_boundaries(
        path, num_chunks, special_tokens, window_bytes=window_bytes, pattern=pattern
    )
    chunks = [Chunk(i, a, b) for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))]
    limit = max_chunk_bytes + window_bytes
    big = [c for c in chunks if c.size > limit]
    if big:
        worst = max(big, key=lambda c: c.size)
        logger.warning(
            "%d chunk(s) of %s exceed %d bytes (largest: %s, %d bytes) because their text has "
            "no safe cut (no special token, no change between letters, digits, punctuation and "
            "whitespace); memory grows with that chunk's size",
            len(big),
            path,
            limit,
            worst.describe(),
            worst.size,
        )
    return chunks


def read_chunk_text(path: str | os.PathLike, start: int, end: int) -> str:
    """Read bytes [start, end) of path and decode them as strict UTF-8.

    Raises:
        ValueError: naming the absolute byte offset of the first invalid UTF-8 sequence.
    """
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        offset = start + err.start
        bad = data[err.start : err.start + 4]
        raise ValueError(
            f"input file {str(path)!r} is not valid UTF-8: bad byte(s) {bad!r} at byte offset "
            f"{offset}; re-encode the file as UTF-8 (e.g. iconv -t UTF-8) before training"
        ) from None
