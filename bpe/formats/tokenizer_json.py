"""What bpe-lab reads back from a directory's `tokenizer.json`: special tokens, split pattern.

What it does: `special_tokens_of_dir` (the added tokens marked special, by id) and
`splits_of_dir` (the regex of the pre-tokenizer's Split, turned back into our spelling, and of
a second Split: the protected characters; `pattern_of_dir` the first alone), and
`hf_pattern`, the spelling of a split pattern that the `tokenizers` library's regex engine
(Oniguruma) reads with our meaning.

What it does not do: write tokenizer.json (`bpe.formats.exports` builds it with the `tokenizers`
library) or load vocabularies (`bpe.formats.gpt2_format`). It imports nothing from bpe-lab, so any
layer may use it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bpe.runs.layout import TOKENIZER_JSON
from bpe.text.patterns import PATTERNS


def hf_pattern(pattern: str) -> str:
    """`pattern` spelled for the `tokenizers` library: `{m,n}+` becomes `{m,n}`.

    subtle: Oniguruma (Ruby syntax) reads `\\p{N}{1,3}+` as "one or more groups of 1-3 digits",
    i.e. every digit at once, not as a possessive `{1,3}`. Where such a quantifier ends an
    alternative (as in cl100k's pattern) possessive and greedy match the same text, so dropping
    the `+` keeps the meaning; tests compare the two libraries' ids on real text.

    >>> hf_pattern(r"\\p{N}{1,3}+|\\s+")
    '\\\\p{N}{1,3}|\\\\s+'
    """
    return pattern.replace("{1,3}+", "{1,3}")


def _read(run_dir: str | os.PathLike) -> dict | None:
    path = Path(run_dir) / TOKENIZER_JSON
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{str(path)!r} is not a tokenizer.json: {err}") from None
    except RecursionError:  # 100k nested [ : the parser's recursion limit, not a tokenizer
        raise ValueError(
            f"{str(path)!r} is not a tokenizer.json: its JSON nests deeper than any tokenizer "
            "file does; restore the file, or delete it to load vocab.json and merges.txt"
        ) from None
    if not isinstance(data, dict):
        raise ValueError(f"{str(path)!r} is not a tokenizer.json: it holds no JSON object")
    return data


def special_tokens_of_dir(run_dir: str | os.PathLike) -> list[str] | None:
    """The special tokens recorded in a directory's tokenizer.json, by id (None without one).

    Raises:
        ValueError: `added_tokens` is not a list of objects with an int `id` and a string
            `content` (names the file, the field and the entry).
    """
    data = _read(run_dir)
    if data is None:
        return None
    path = Path(run_dir) / TOKENIZER_JSON
    added = data.get("added_tokens") or []
    if not isinstance(added, list):
        raise ValueError(
            f"{str(path)!r}: added_tokens is a {type(added).__name__}, not a list of tokens; "
            "restore the file (runs write it), or delete it to load vocab.json and merges.txt"
        )
    for k, t in enumerate(added):
        tid = t.get("id") if isinstance(t, dict) else None
        ok = isinstance(tid, int) and not isinstance(tid, bool)
        ok = ok and isinstance(t.get("content"), str)
        if not ok:
            raise ValueError(
                f"{str(path)!r}: added_tokens[{k}] needs an int 'id' and a string 'content' "
                f"(got {str(t)[:80]}); restore the file, or delete it to load vocab.json and "
                "merges.txt"
            )
    return [t["content"] for t in sorted(added, key=lambda t: t["id"]) if t.get("special")]


def _split_regexes(run_dir: str | os.PathLike) -> list[str]:
    """The regexes of the pre-tokenizer's Split steps, in order (empty without any)."""
    data = _read(run_dir)
    if data is None:
        return []
    pre = data.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [pre]) if isinstance(pre, dict) else []
    return [
        step["pattern"]["Regex"]
        for step in steps
        if isinstance(step, dict)
        and step.get("type") == "Split"
        and isinstance((step.get("pattern") or {}).get("Regex"), str)
    ]


def splits_of_dir(run_dir: str | os.PathLike) -> tuple[str | None, str | None]:
    """The split pattern and the protected characters' regex of a directory's tokenizer.json:
    its first Split and its second (`bpe.text.protect`), each None without one.

    A built-in pattern comes back in our spelling (`hf_pattern` undone), so it is recognised by
    name and keeps its chunk-cut rules.
    """
    regexes = _split_regexes(run_dir)
    if not regexes:
        return None, None
    ours = {hf_pattern(p): p for p in PATTERNS.values()}
    return ours.get(regexes[0], regexes[0]), (regexes[1] if len(regexes) > 1 else None)


def pattern_of_dir(run_dir: str | os.PathLike) -> str | None:
    """The split pattern of a directory's tokenizer.json (None without one or without a Split;
    `splits_of_dir`'s first)."""
    return splits_of_dir(run_dir)[0]
