"""Protected characters: characters that never merge with anything (`protect=`).

`protect` is a list of regexes, each matching one character at a time (a class such as
`\\p{N}` or `[0-9]`). After the split pattern, every protected character of a pretoken becomes
a pretoken of its own, so no merge joins it to a neighbour: with `protect=['\\p{N}']` each digit
stays its own token whatever the corpus (the GPT-NeoX tokenizer learned "1970" as one token and
"1971" as two). The bytes of a multi-byte protected character still merge with each other.

    >>> split_protected(" 1970s", protect_regex([r"\\p{N}"]))
    [' ', '1', '9', '7', '0', 's']

The same second split runs in stage 1 (on the counted pretokens, `split_counts`, so the
pretoken cache and both scanners are unchanged), in `bpe.Tokenizer.pretokens`, and in the
exports: tokenizer.json as a second `Split` step; tiktoken takes a single regex, and its
pretokens with the plain pattern give the same ids only when every protected character is
one byte (`tiktoken_refusal` says so otherwise).

What it does not do: choose the characters, or protect a longer string (`special_tokens` keep
a string whole; `seed_tokens` put one in the vocab).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence

import regex

#: Strings a protected class is tried on: any match longer than one character is refused.
_PROBES = ("aa", "AA", "11", "  ", "\n\n", "..", "''", "éé", "٣٣", "中中", "😀😀")


def protect_pattern(protect: Sequence[str]) -> str | None:
    """The protected classes as one regex (None for none).

    >>> protect_pattern([r"\\p{N}", "[$]"])
    '(?:\\\\p{N})|(?:[$])'
    >>> protect_pattern([]) is None
    True
    """
    classes = [str(p) for p in protect]
    return "|".join(f"(?:{p})" for p in classes) if classes else None


def check_protect(protect: Sequence[str]) -> list[str]:
    """The classes as a list, or ValueError naming the first bad one and the fix: each compiles
    and matches single characters only (a class, not a run of them).

    >>> check_protect([r"\\d+"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: protect has '\\\\d+', which matches '11' (2 characters)...
    """
    out = [str(p) for p in protect]
    for cls in out:
        if not cls:
            raise ValueError("protect has an empty string; give a class such as '\\p{N}'")
        try:
            rx = regex.compile(cls)
        except regex.error as err:
            raise ValueError(f"protect has {cls!r}, which is not a regex ({err})") from None
        for probe in _PROBES:
            hit = rx.search(probe)
            if hit is not None and len(hit.group()) != 1:
                raise ValueError(
                    f"protect has {cls!r}, which matches {hit.group()!r} "
                    f"({len(hit.group())} characters): a protected class matches one character "
                    "at a time, e.g. '\\p{N}' or '[0-9]'; to keep a longer string whole use "
                    "special_tokens or seed_tokens"
                )
    return out


def as_protect(protect: Sequence[str] | str | None) -> str | None:
    """`protect` checked, as one regex: a list of classes, or a regex already joined.

    >>> as_protect(["[0-9]"]), as_protect("(?:[0-9])"), as_protect(None)
    ('(?:[0-9])', '(?:[0-9])', None)
    """
    if protect is None or isinstance(protect, str):
        return None if protect is None else check_protect([protect])[0]
    return protect_pattern(check_protect(protect))


def protect_regex(protect: Sequence[str] | str | None) -> regex.Pattern | None:
    """The compiled regex of `protect` (a list of classes, or `protect_pattern`'s string)."""
    joined = protect if isinstance(protect, str) or protect is None else protect_pattern(protect)
    return None if joined is None else _compiled(joined)


@functools.cache
def _compiled(joined: str) -> regex.Pattern:
    return regex.compile(joined)


def split_protected(pretoken: str, rx: regex.Pattern | None) -> list[str]:
    """`pretoken` cut so that each character `rx` matches is a piece of its own, in order.

    >>> split_protected("abc", protect_regex(["[0-9]"]))
    ['abc']
    >>> split_protected("a12b", protect_regex(["[0-9]"]))
    ['a', '1', '2', 'b']
    """
    if rx is None:
        return [pretoken]
    pieces: list[str] = []
    start = 0
    for hit in rx.finditer(pretoken):
        if hit.start() > start:
            pieces.append(pretoken[start : hit.start()])
        pieces.append(hit.group())
        start = hit.end()
    if start == 0:
        return [pretoken]
    if start < len(pretoken):
        pieces.append(pretoken[start:])
    return pieces


def split_all(pretokens: list[str], rx: regex.Pattern | None) -> list[str]:
    """Every pretoken of a list split by `split_protected` (the list itself when `rx` is None).

    >>> split_all(["ab", " 42"], protect_regex(["[0-9]"]))
    ['ab', ' ', '4', '2']
    """
    if rx is None:
        return pretokens
    return [piece for p in pretokens for piece in split_protected(p, rx)]


def split_counts(counts: Counter[bytes], rx: regex.Pattern | None) -> Counter[bytes]:
    """Pretoken counts (UTF-8 keys) with every pretoken split by `split_protected`: each piece
    counted as often as the pretoken it came from.

    >>> sorted(split_counts(Counter({b"a1": 3, b"1": 2}), protect_regex(["1"])).items())
    [(b'1', 5), (b'a', 3)]
    """
    if rx is None:
        return counts
    out: Counter[bytes] = Counter()
    for key, n in counts.items():
        pieces = split_protected(key.decode("utf-8"), rx)
        if len(pieces) == 1:
            out[key] += n
            continue
        for piece in pieces:
            out[piece.encode("utf-8")] += n
    return out


def check_merges_protected(
    merges: Sequence[tuple[bytes, bytes]], rx: regex.Pattern, *, source: str
) -> None:
    """ValueError naming the first merge of `merges` (a parent's, or seed tokens') that joins
    a protected character to anything else: training could not undo it.

    >>> rx = protect_regex(["[0-9]"])
    >>> check_merges_protected([(b"a", b"1")], rx, source="seed_tokens")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: seed_tokens has the merge b'a' + b'1', which joins the protected character '1'...
    """
    for a, b in merges:
        text = (a + b).decode("utf-8", "replace")
        hit = rx.search(text) if len(text) > 1 else None
        if hit is not None:
            raise ValueError(
                f"{source} has the merge {a!r} + {b!r}, which joins the protected character "
                f"{hit.group()!r} to another: a protected character never merges; drop that "
                "seed or parent, or the class"
            )


@functools.cache
def _non_ascii() -> str:
    """Every code point above U+007F except the surrogates, as one string."""
    return "".join(chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c <= 0xDFFF)


def tiktoken_refusal(protect: str | None) -> str | None:
    """Why tiktoken cannot encode as a tokenizer with `protect` does, or None if it can.

    tiktoken applies one regex. When every protected character is one byte, no merge holds its
    byte (training never saw it beside another), so BPE of a pretoken never joins it to a
    neighbour and the plain pattern gives the same ids. A multi-byte protected character's
    lead byte may end a token learned from other characters, so tiktoken could join it.

    >>> tiktoken_refusal("(?:[0-9])") is None
    True
    >>> tiktoken_refusal("(?:\\\\p{N})")  # doctest: +ELLIPSIS
    "protect='(?:\\\\\\\\p{N})' matches '²', a character of more than one byte: ..."
    """
    if protect is None:
        return None
    hit = regex.compile(protect).search(_non_ascii())
    if hit is None:
        return None
    return (
        f"protect={protect!r} matches {hit.group()!r}, a character of more than one byte: "
        "tiktoken takes one split regex and could merge its bytes with a neighbour's; use "
        "tokenizer.json (Hugging Face splits it as we do) or bpe.Tokenizer, or protect ASCII "
        "characters only (e.g. '[0-9]')"
    )
