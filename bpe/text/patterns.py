"""The named split patterns: GPT-2's (the default), GPT-4's `cl100k` and GPT-4o's `o200k`.

The regex strings are facts copied from their published definitions (GPT-2's encoder, tiktoken's
`cl100k_base` and `o200k_base`); `tests/test_patterns.py` checks them against the installed
`tiktoken` and checks our splits against tiktoken's own engine. `resolve_pattern` turns a name
or a custom regex into the pattern used, after `check_pattern` has seen it tile text.

What it does not do: split text (`bpe.text.pretokens`) or cut it (`bpe.text.cuts`, whose
safe-cut rules are proved per pattern); both import the strings from here, so each is written
once.
"""

from __future__ import annotations

import functools

import regex

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


GPT2_REGEX = regex.compile(GPT2_PATTERN)


def resolve_pattern(pattern: str | None) -> str:
    """The split pattern a name stands for (`PATTERNS`), or the regex itself when it compiles.

    None means GPT-2's pattern. A custom regex must match something at every position of any
    text (so the pretokens tile it) and never match the empty string; `check_pattern` tests it.

    >>> resolve_pattern("gpt2") == GPT2_PATTERN
    True
    >>> resolve_pattern(r"\\w+|\\W+")
    '\\\\w+|\\\\W+'
    """
    if pattern is None:
        return GPT2_PATTERN
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(
            f"pattern={pattern!r} must be one of {list(PATTERNS)} or a non-empty regex string"
        )
    if pattern in PATTERNS:
        return PATTERNS[pattern]
    check_pattern(pattern)
    return pattern


def pattern_name(pattern: str) -> str:
    """The name of a built-in pattern, `superbpe_stage_two` for SuperBPE's, or "custom".

    >>> pattern_name(CL100K_PATTERN), pattern_name(r"\\S+|\\s+")
    ('cl100k', 'custom')
    """
    if pattern == STAGE_TWO_PATTERN:
        return STAGE_TWO_NAME
    return next((name for name, p in PATTERNS.items() if p == pattern), "custom")


#: What `pattern_name` calls SuperBPE's stage-two pattern (not a `pretokenizer=` choice: the
#: `variant=superbpe` switches to it after stage one).
STAGE_TWO_NAME = "superbpe_stage_two"


def check_pattern(pattern: str) -> None:
    """Raise ValueError unless a custom pattern compiles and its pretokens tile sample text.

    Pretokens must cover the text exactly (nothing dropped) and never be empty, or training
    would silently lose bytes.
    """
    try:
        compiled = regex.compile(pattern)
    except regex.error as err:
        raise ValueError(f"split pattern {pattern!r} is not a valid regex: {err}") from None
    sample = "Hello, world! It's 2024:\tx  y\r\n\u00e9t\u00e9 \u65e5\u672c 🙂 'ok'  \n"
    found = compiled.findall(sample)
    if any(not isinstance(p, str) or not p for p in found) or "".join(found) != sample:
        raise ValueError(
            f"split pattern {pattern!r} does not tile text: its matches must cover every "
            "character and never be empty (end it with an alternative such as |\\s+|\\S, "
            "and use (?:...) rather than capturing groups)"
        )


#: How long a split pattern read from a file may take on one adversarial probe
#: (`bounded_pattern`); a linear pattern takes well under a millisecond on one.
PROBE_SECONDS = 0.25
#: Each probe is a run of one kind of character (letters, digits, spaces, punctuation, mixed)
#: ended by another: where a backtracking pattern blows up.
_PROBE_RUNS = ("a", "1", " ", "!", "\u00e9", "\n", "a ", "a1", " !", "'a", "\t ")
_PROBE_ENDS = ("", "!", "a", " ", "\n", "1", "\x00")
_PROBE_CHARS = 4096


def bounded_pattern(pattern: str, *, source: str) -> str:
    r"""A split pattern read from a file (tokenizer.json, removals.json, metrics.json), checked
    before anything runs it: a built-in pattern passes at once; any other must tile text
    (`check_pattern`) and split every adversarial probe within `PROBE_SECONDS` (the `regex`
    module's timeout), so a catastrophically backtracking pattern is refused, not run.

    Raises:
        ValueError: the pattern is invalid or slow; the message names `source` and the fix.

    >>> bounded_pattern(GPT2_PATTERN, source="tokenizer.json") == GPT2_PATTERN
    True
    >>> bounded_pattern(r"(?:a+)+b|\S|\s", source="x/tokenizer.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the split pattern in x/tokenizer.json took over 0.25 s on ...
    """
    if pattern in PATTERNS.values() or pattern == STAGE_TWO_PATTERN:
        return pattern
    try:
        check_pattern(pattern)
    except ValueError as err:
        raise ValueError(f"{source}: {err}") from None
    compiled = regex.compile(pattern)
    for run in _PROBE_RUNS:
        for end in _PROBE_ENDS:
            probe = run * (_PROBE_CHARS // len(run)) + end
            try:
                compiled.findall(probe, timeout=PROBE_SECONDS)
            except TimeoutError:
                raise ValueError(
                    f"the split pattern in {source} took over {PROBE_SECONDS} s on "
                    f"{len(probe):,} characters ({run!r} repeated, then {end!r}): it backtracks "
                    "catastrophically, so encoding text with it would hang. If you trust it, "
                    "pass it yourself (Tokenizer.from_pretrained(..., pattern=...)); otherwise "
                    "save the tokenizer again with a built-in pattern (gpt2, cl100k, o200k)"
                ) from None
    return pattern


@functools.cache
def compiled_pattern(pattern: str) -> regex.Pattern:
    """`regex.compile(pattern)`, once per pattern and process."""
    return regex.compile(pattern)
