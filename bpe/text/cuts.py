"""Where a text may be cut so that no pretoken spans the cut: the rules, proved per pattern.

`safe_cuts` gives the character offsets of a text where a cut leaves every pretoken whole;
`safe_cut` finds the first such place in a window of UTF-8 bytes, preferring the start of a
special token (a document boundary) and never cutting inside one. Counting the pieces of a
text cut at these places separately gives exactly the counts of the whole text: that is what
lets stage 1 and encoding work on chunks in parallel.

What it does not do: read files or plan chunks (`bpe.corpus.chunks`, `bpe.pretokenize.
readers`); it only looks at the bytes it is given.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import regex

from bpe.text.patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN

# subtle: a cut between characters a and b is safe when no GPT-2 pretoken can contain both. The
# pattern is  '(?:[sdmt]|ll|ve|re) | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
# and it has no lookbehind, so matching from b onward depends only on the text from b on; the
# left chunk matches as the whole text does as long as the match holding a ends at the cut and
# no lookahead peeks past it. Classes: L letters, N numbers, S whitespace, P everything else.
#   * a must not be whitespace: `\s+(?!\S)` would see the end of the chunk instead of b;
#   * a in L, b not in L: a belongs to ` ?\p{L}+` (greedy, stops before b) or to a contraction
#     (fixed text ending in a letter; it could reach b only if b were a letter);
#   * a in N, b not in N: only ` ?\p{N}+` holds a digit, and it stops before b;
#   * a in P, b in L, N or S: ` ?[^\s\p{L}\p{N}]+` stops before b; no other alternative holds a
#     P character, except the apostrophe that opens a contraction: `'s` must stay whole, so an
#     apostrophe before a letter is never a cut (before a digit or a space it is);
#   * an optional leading space belongs to the match that follows it, so a cut before a space
#     (a not whitespace) keeps ` word` whole.
# Cutting off the text after the cut changes no match before it: every atom consumes characters,
# so an alternative that failed on the whole text also fails on a prefix, and the one exception,
# `(?!\S)`, only looks past the cut after whitespace, which a is not. Matching works on
# characters, so a cut's byte offset is always a character boundary; a cut inside a special
# token is rejected separately (`safe_cut`). `test_chunks.py` checks, on random text with
# letters, digits, punctuation, apostrophes, spaces, CJK, Cyrillic and emoji (hypothesis), that
# the pretokens of the two sides at every such cut are exactly those of the whole text.
_CUT = regex.compile(
    r"(?<=\p{L})(?=[^\p{L}])"
    r"|(?<=\p{N})(?=[^\p{N}])"
    r"|(?<=[^\s\p{L}\p{N}'])(?=[\s\p{L}\p{N}])"
    r"|(?<=')(?=[\s\p{N}])"
)


# subtle: the same argument for cl100k's pattern
#   '(?i:[sdmt]|ll|ve|re) | [^\r\n\p{L}\p{N}]?+\p{L}++ | \p{N}{1,3}+ | ?[^\s\p{L}\p{N}]++[\r\n]*+
#   | \s++$ | \s*[\r\n] | \s+(?!\S) | \s
# keeps only some of GPT-2's cuts. No lookbehind again, and a is never whitespace (`(?!\S)`,
# `$` and `\s*[\r\n]` look at what follows whitespace).
#   * a in L, b not in L: a belongs to `\p{L}++` (possessive, stops before b) or ends a
#     contraction; both stop before a non-letter. Safe (an apostrophe after a letter too: the
#     contraction starts at b);
#   * a in N, b not in N: digits only ever match `\p{N}{1,3}+`, whose groups of three count
#     from the start of the run, which lies wholly before the cut. Safe;
#   * a in P, b in L: NOT safe. One non-letter may lead a word (`(x` is one pretoken, and so is
#     `'x`), but a run of punctuation is taken whole by the possessive `[^\s..]++`, so whether
#     the last mark joins the word depends on what came before a;
#   * a in P, b in N: the run of P stops before a digit and nothing else holds a P. Safe;
#   * a in P, b whitespace: `[\r\n]*+` takes newlines after punctuation, so only a b that is
#     whitespace other than \r or \n is safe.
# Truncation changes no earlier match: besides `(?!\S)`, only `$` can succeed at the end of the
# prefix where it failed on the whole text, and it follows whitespace, which a is not.
_CUT_CL100K = regex.compile(
    r"(?<=\p{L})(?=[^\p{L}])"
    r"|(?<=\p{N})(?=[^\p{N}])"
    r"|(?<=[^\s\p{L}\p{N}])(?=\p{N}|[^\S\r\n])"
)


# subtle: and for o200k's, whose words are runs of letters and combining marks (M) in case
# order, with an optional trailing contraction (`(?i:'s|'t|'re|'ve|'m|'ll|'d)?`):
#   * a in L, b neither L, M nor an apostrophe: the word holding a can only go on with L, M or
#     a contraction, so it stops before b. Safe. (A mark a is not cut after: marks also run
#     on in a run of punctuation, `?[^\s\p{L}\p{N}]+` holds them);
#   * a in N, b not in N: `\p{N}{1,3}` alone holds digits, grouped from the run's start. Safe;
#   * a in P (marks included), b in N: a word (ending in a mark or a contraction letter is L)
#     or a run of P, neither goes on with a digit. Safe;
#   * a in P, b whitespace other than \r, \n: `[\r\n/]*` takes only newlines and slashes after
#     punctuation. Safe; P before L is not (one non-letter leads a word, as in cl100k).
# No possessive quantifiers here, no `$`; truncation is covered as for GPT-2.
_CUT_O200K = regex.compile(
    r"(?<=\p{L})(?=[^\p{L}\p{M}'])"
    r"|(?<=\p{N})(?=[^\p{N}])"
    r"|(?<=[^\s\p{L}\p{N}])(?=\p{N}|[^\S\r\n])"
)


def cut_regex(pattern: str | None) -> regex.Pattern | None:
    """The safe-cut rules proved for a split pattern, or None for a pattern without a proof.

    A pattern without proven rules (any custom one) is cut at special tokens only, which is
    always safe: no pretoken crosses a special token.

    >>> cut_regex(None) is cut_regex(GPT2_PATTERN)
    True
    >>> cut_regex(r"\\S+|\\s+") is None
    True
    """
    return _CUTS.get(pattern if pattern is not None else GPT2_PATTERN)


#: A split pattern's stand-in that has no safe cuts: text is cut at special tokens only (what
#: a BoundlessBPE tokenizer needs, whose supermerges join pretokens across other cuts).
SPECIALS_ONLY = ""

_CUTS: dict[str, regex.Pattern] = {
    GPT2_PATTERN: _CUT,
    CL100K_PATTERN: _CUT_CL100K,
    O200K_PATTERN: _CUT_O200K,
}


def safe_cuts(text: str, *, pattern: str = GPT2_PATTERN) -> Iterator[int]:
    """Character offsets in text where a cut leaves every pretoken of `pattern` whole.

    The rules are those proved for the pattern (`cut_regex`); a pattern without any yields none.

    >>> list(safe_cuts("ab12 x's"))
    [2, 4, 6]
    >>> list(safe_cuts("ab12 x's", pattern=CL100K_PATTERN))
    [2, 4, 6]
    """
    cut = cut_regex(pattern)
    if cut is None:
        return
    for m in cut.finditer(text):
        yield m.start()


#: Bytes `_char_cut` decodes first, before the whole region (most regions cut early).
FIRST_LOOK = 4096


def _char_cut(region: bytes, start: int = 0, *, pattern: str = GPT2_PATTERN) -> int | None:
    """Byte index (> start) in region of the first safe cut between two characters, or None.

    subtle: whether a cut is safe depends only on the characters either side of it (every
    rule above is one character of lookbehind and one of lookahead, and a match needs both),
    so the first cut in a prefix of the text is its first cut: the region's first
    `FIRST_LOOK` bytes are decoded and searched first. Decoding whole 1 MiB windows took
    1.7 s of a 1 GiB run's planning, where one cut was a few bytes in.

    >>> _char_cut("héllo, world".encode("utf-8"), 1)  # after "héllo": byte 6
    6
    """
    # Skip UTF-8 continuation bytes so decoding starts on a character.
    while start < len(region) and 0x80 <= region[start] < 0xC0:
        start += 1
    for end in (start + FIRST_LOOK, len(region)):
        data = region[start:end]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:  # a character cut by the look's end (or bad input)
            text = data[: err.start].decode("utf-8")
        for k in safe_cuts(text, pattern=pattern):
            return start + len(text[:k].encode("utf-8"))
        if end >= len(region):
            break
    return None


def _inside_special(data: bytes, pos: int, specials: Sequence[bytes]) -> bool:
    """True when some occurrence of a special token in data covers pos (starts before it)."""
    for tok in specials:
        start = max(0, pos - len(tok) + 1)
        idx = data.find(tok, start, pos + len(tok))
        while idx != -1 and idx < pos:
            if idx + len(tok) > pos:
                return True
            idx = data.find(tok, idx + 1, pos + len(tok))
    return False


def _find_all(buf: bytes, needle: bytes, start: int, end: int) -> Iterator[int]:
    idx = buf.find(needle, start)
    while idx != -1 and idx < end:
        yield idx
        idx = buf.find(needle, idx + 1)


def safe_cut(
    buf: bytes, lead: int, window: int, specials: Sequence[bytes], pattern: str = GPT2_PATTERN
) -> int | None:
    """Index in buf (>= lead, < lead + window) of the first safe cut, or None.

    Preference: the start of a special token (a document boundary); otherwise the first
    character cut (see `_CUT`). Either is rejected when it falls inside an occurrence of a
    special token.
    """
    starts = sorted({i for s in specials for i in _find_all(buf, s, lead, lead + window)})
    for i in starts:
        if not _inside_special(buf, i, specials):
            return i
    if cut_regex(pattern) is None:
        return None
    region = buf[lead : lead + window]
    offset = 0
    while True:
        cut = _char_cut(region, offset, pattern=pattern)
        if cut is None:
            return None
        if not _inside_special(buf, lead + cut, specials):
            return lead + cut
        offset = cut
