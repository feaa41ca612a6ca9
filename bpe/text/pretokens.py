"""The pretokens of ordinary text: the split pattern applied, as fast as `re` allows.

Pretokens are found with `find_pretokens`: an exact translation of the pattern for the standard
`re` engine (about twice as fast as `regex`) whenever the text has no character above U+FFFF,
the `regex` pattern otherwise. The translation replaces each `\\p{..}`, `\\s` and `\\S` by an
explicit class taken from `regex` itself; Python 3.11's `re` has the possessive quantifiers and
scoped `(?i:...)` flags cl100k and o200k use, so all three built-in patterns have the fast path.
A custom pattern that uses anything `re` lacks (e.g. `\\X`, `\\p{Script=..}` inside a class
with other syntax the translation does not know) falls back to `regex` alone.

What it does not do: special tokens (split on them first: `bpe.text.specials`), counting a
corpus (`bpe.pretokenize`), or any newline / BOM normalisation: bytes are sacred.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

import regex

from bpe.text.patterns import GPT2_PATTERN, compiled_pattern


def iter_pretokens(text: str, *, pattern: str = GPT2_PATTERN) -> Iterator[str]:
    """Yield the pretokens of ordinary text (no special-token handling).

    >>> list(iter_pretokens("Hello, world!"))
    ['Hello', ',', ' world', '!']
    >>> from bpe.text.patterns import CL100K_PATTERN
    >>> list(iter_pretokens("don't (x) 12345", pattern=CL100K_PATTERN))
    ['don', "'t", ' (', 'x', ')', ' ', '123', '45']
    """
    for match in compiled_pattern(pattern).finditer(text):
        yield match.group()


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


# Escapes whose meaning in `re` may differ from `regex` (or that `re` lacks); \S inside a class
# is among them (a negated class cannot be inlined into another class).
_UNTRANSLATED_ESCAPES = frozenset("PSXRNGKhHvVwWdDbBAZzQEL")


@functools.cache
def _bmp_body(prop: str) -> str:
    return _bmp_class(prop)


@functools.cache
def bmp_pretoken_regex(pattern: str = GPT2_PATTERN) -> re.Pattern | None:
    """`pattern` translated for `re`, equal to the `regex` one on text without astral characters.

    `\\p{..}` and `\\s` are replaced by explicit classes taken from the `regex` module itself
    (so both engines agree on Unicode's tables), `\\S` by the negated whitespace class; the
    rest (possessive quantifiers, `(?i:...)`, lookaheads, `$`) means the same in both engines.
    Characters above U+FFFF are left out: `re` scans such ranges linearly, which is slow, so text
    containing them goes to the `regex` pattern instead (see `find_pretokens`). Returns None
    when the pattern uses syntax the translation does not know (`regex` alone is used then).

    >>> bmp_pretoken_regex().findall("I'll say   hi!")
    ['I', "'ll", ' say', '  ', ' hi', '!']
    >>> bmp_pretoken_regex(r"\\X") is None
    True
    """
    space = _bmp_body(r"\s")
    out, in_class = [], False
    for tok in regex.findall(r"\\[pP]\{[^}]*\}|\\.|.", pattern, flags=regex.DOTALL):
        if tok.startswith("\\p{") or tok == "\\s":
            body = _bmp_body(tok)
            out.append(body if in_class else f"[{body}]")
        elif tok == "\\S" and not in_class:
            out.append(f"[^{space}]")
        elif tok.startswith("\\") and tok[1] in _UNTRANSLATED_ESCAPES:
            return None  # no exact BMP translation written for it: `regex` alone
        else:
            if tok == "[" and not in_class:
                in_class = True
            elif tok == "]":
                in_class = False
            out.append(tok)
    try:
        return re.compile("".join(out))
    except re.error:
        return None


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def find_pretokens(text: str, pattern: str = GPT2_PATTERN) -> list[str]:
    """Pretokens of ordinary text, with the faster `re` engine whenever it is exact.

    >>> find_pretokens("Hello, world! 🙂")
    ['Hello', ',', ' world', '!', ' 🙂']
    >>> from bpe.text.patterns import O200K_PATTERN
    >>> find_pretokens("camelCase's", O200K_PATTERN)
    ['camel', "Case's"]
    """
    if _ASTRAL.search(text) is None:
        fast = bmp_pretoken_regex(pattern)
        if fast is not None:
            return fast.findall(text)
    return compiled_pattern(pattern).findall(text)
