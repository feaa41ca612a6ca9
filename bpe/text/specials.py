"""Special tokens: the one rule for valid ones, the longest-first regex, and splitting on them.

Training, the `Tokenizer`, the exports and the command line all apply `validate_special_tokens`,
so a special token refused in one place is refused in all.

What it does not do: decide which special tokens a run uses (the config and the tokenizer
directory do: `bpe.formats.pretrained`) or give them ids (`bpe.tokenizer`).
"""

from __future__ import annotations

from collections.abc import Sequence

import regex

#: GPT-2's end-of-text special token, the document separator of every bundled corpus.
EOT = "<|endoftext|>"


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
