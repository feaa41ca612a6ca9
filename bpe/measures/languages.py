"""What the same text costs in each language: token counts and premiums on FLORES-200.

Petrov et al. (2023, "Language Model Tokenizers Introduce Unfairness Between Languages",
NeurIPS) measure a tokenizer by the tokens it needs for the same sentences in each language of
FLORES-200 (a parallel corpus: every language holds a translation of the same sentences). Their
protocol (`compute/compute_tokenizations.py` in their repository) reads each language's `dev`
and `devtest` files, splits each on "\\n" (a final newline leaves an empty last line), joins
all the lines of both with one space and encodes the one string; the *premium* of a language is
its token count over English's. The 12 languages bundled in `bpe/data/flores200`
(`LANGUAGES`) follow that protocol exactly, so GPT-2's counts here are theirs
(`PETROV_GPT2_TOKENS`, checked by `tests/test_languages.py`).

    >>> round(gini([1, 1, 1, 1]), 3), round(gini([0, 0, 0, 4]), 3)
    (0.0, 0.75)

What it does not do: train on several languages, or write reports (`bpe-parity` and
`bpe.analysis.parity_report` do).
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from pathlib import Path

from bpe.util.io import DATA_DIR

FLORES_DIR = DATA_DIR / "flores200"
#: The bundled languages (FLORES-200 codes), with the names Petrov et al. use, English first.
LANGUAGES = {
    "eng_Latn": "English",
    "deu_Latn": "German",
    "fra_Latn": "French",
    "spa_Latn": "Spanish",
    "rus_Cyrl": "Russian",
    "arb_Arab": "Standard Arabic",
    "hin_Deva": "Hindi",
    "zho_Hans": "Chinese (Simplified)",
    "jpn_Jpan": "Japanese",
    "swh_Latn": "Swahili",
    "mya_Mymr": "Burmese",
    "shn_Mymr": "Shan",
}
ENGLISH = "eng_Latn"
SPLITS = ("dev", "devtest")
#: GPT-2's token counts per language as Petrov et al. publish them
#: (`assets/tokenization_lengths.csv` of AleksandarPetrov/tokenization-fairness, commit 365c3f8).
PETROV_GPT2_TOKENS = {
    "eng_Latn": 52567,
    "deu_Latn": 112600,
    "fra_Latn": 104971,
    "spa_Latn": 104549,
    "rus_Cyrl": 301727,
    "arb_Arab": 231316,
    "hin_Deva": 392092,
    "zho_Hans": 168850,
    "jpn_Jpan": 157858,
    "swh_Latn": 112044,
    "mya_Mymr": 887930,
    "shn_Mymr": 986091,
}


def flores_lines(lang: str, split: str, *, root: Path = FLORES_DIR) -> list[str]:
    """A language's lines of one split, as the protocol reads them (`read().split("\\n")`).

    Raises:
        ValueError: an unknown language or split (names the choices).
    """
    if lang not in LANGUAGES or split not in SPLITS:
        raise ValueError(
            f"no FLORES-200 text for {lang!r} {split!r}; languages: {list(LANGUAGES)}, "
            f"splits: {list(SPLITS)}"
        )
    return _read(root / split / f"{lang}.{split}.gz").split("\n")


@cache
def _read(path: Path) -> str:
    # text mode: newlines translated as Python's open() does, which the protocol used
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read()


def petrov_text(lang: str, *, lines: int | None = None, root: Path = FLORES_DIR) -> str:
    """The one string the protocol encodes: dev's lines then devtest's, joined by a space
    (with `lines`, the first that many of each split: a cheaper sample of the same text)."""
    return " ".join(
        line for split in SPLITS for line in flores_lines(lang, split, root=root)[:lines]
    )


def gini(values: Sequence[float]) -> float:
    """The Gini coefficient of non-negative values: 0 when all are equal, towards 1 when one
    holds everything (the mean absolute difference over twice the mean)."""
    n = len(values)
    if n == 0 or sum(values) == 0:
        return 0.0
    ordered = sorted(values)
    weighted = sum((2 * (i + 1) - n - 1) * v for i, v in enumerate(ordered))
    return weighted / (n * sum(ordered))


def language_costs(
    encode: Callable[[str], Sequence[int]],
    languages: Iterable[str] = tuple(LANGUAGES),
    *,
    lines: int | None = None,
) -> list[dict]:
    """Per language: tokens, UTF-8 bytes, bytes per token and premium (tokens over English's)
    of the protocol's text under `encode` (English is always measured, first; `lines`: the
    first that many lines of each split only)."""
    langs = [ENGLISH, *(lang for lang in languages if lang != ENGLISH)]
    rows = []
    for lang in langs:
        text = petrov_text(lang, lines=lines)
        tokens = len(encode(text))
        size = len(text.encode("utf-8"))
        rows.append(
            {
                "language": lang,
                "name": LANGUAGES[lang],
                "tokens": tokens,
                "bytes": size,
                "bytes_per_token": round(size / tokens, 4),
            }
        )
    english = rows[0]["tokens"]
    for row in rows:
        row["premium"] = round(row["tokens"] / english, 4)
    return rows


def summary(rows: Sequence[dict]) -> dict:
    """The Gini coefficient of the per-language token counts, and the max and min premium
    with their languages."""
    top = max(rows, key=lambda r: r["premium"])
    low = min(rows, key=lambda r: r["premium"])
    return {
        "gini": round(gini([r["tokens"] for r in rows]), 4),
        "max_premium": top["premium"],
        "max_language": top["language"],
        "min_premium": low["premium"],
        "min_language": low["language"],
        "languages": len(rows),
    }


def languages_metrics(
    encode: Callable[[str], Sequence[int]],
    *,
    lines: int | None = None,
    gpt2_encode: Callable[[str], Sequence[int]] | None = None,
) -> dict:
    """metrics.json's `languages`: this tokenizer's rows and summary on every bundled language
    (`ours`), and GPT-2's on the same text (`gpt2`, None without `gpt2_encode`)."""
    ours = language_costs(encode, lines=lines)
    gpt2 = None if gpt2_encode is None else language_costs(gpt2_encode, lines=lines)
    return {
        "protocol": "Petrov et al. (2023): FLORES-200 dev + devtest lines joined by a space",
        "lines": lines,
        "ours": {"rows": ours, "summary": summary(ours)},
        "gpt2": None if gpt2 is None else {"rows": gpt2, "summary": summary(gpt2)},
    }
