"""The named split patterns: GPT-2's (the default), GPT-4's `cl100k` and GPT-4o's `o200k`.

The regex strings are facts copied from their published definitions (GPT-2's encoder, tiktoken's
`cl100k_base` and `o200k_base`); `tests/test_patterns.py` checks them against the installed
`tiktoken` and checks our splits against tiktoken's own engine.

What it does not do: split text (`bpe.pretokenize`) or cut files (`bpe.pretokenize.chunks`, whose
safe-cut
rules are proved per pattern); both import the strings from here, so each is written once.
"""

from __future__ import annotations

#: The GPT-2 pre-tokenization pattern (contractions, letters, numbers, other, whitespace).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

#: GPT-4's pattern (tiktoken's `cl100k_base`): case-insensitive contractions, one non-letter
#: (a space, a bracket) may lead a word, digits in groups of 1-3, newlines kept apart.
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

#: GPT-4o's pattern (tiktoken's `o200k_base`): case-aware words (`camelCase` -> `camel`, `Case`)
#: that keep combining marks and a trailing contraction, digits in groups of 1-3.
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

#: SuperBPE's stage-two pattern (`variant=superbpe`; Liu et al., 2025): words are no longer cut
#: at the spaces between them, so merges can form superwords ("by the way"), but a pretoken
#: still ends at punctuation, digits (groups of three from the right, as the paper's digit
#: rule), newlines and runs of whitespace, and holds at most four words (a word: an optional
#: space, letters, and letters joined by apostrophes, "don't"). The paper bounds a superword
#: at four words inside its trainer; here the bound is in the pattern, so the tokenizer, the
#: exports and the trainer all see the same pretokens. What that costs: pretokens are cut
#: greedily from the left, so a superword never bridges two four-word pieces.
STAGE_TWO_PATTERN = (
    r"""(?: ?\p{L}+(?:'\p{L}+)*){1,4}| ?\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))"""
    r"""| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)

#: The named split patterns (`pretokenizer=<name>` in the config); any other regex is "custom".
PATTERNS: dict[str, str] = {"gpt2": GPT2_PATTERN, "cl100k": CL100K_PATTERN, "o200k": O200K_PATTERN}

__all__ = [
    "CL100K_PATTERN", "GPT2_PATTERN", "O200K_PATTERN", "PATTERNS", "STAGE_TWO_PATTERN",
]  # fmt: skip
