"""What the same text costs in each language: token counts and premiums on FLORES-200.

Petrov et al. (2023, "Language Model Tokenizers Introduce Unfairness Between Languages",
NeurIPS) measure a tokenizer by the tokens it needs for the same sentences in each language of
FLORES-200 (a parallel corpus: every language holds a translation of the same sentences). Their
protocol (`compute/compute_tokenizations.py` in their repository) reads each language's `dev`
and `devtest` files, splits each on "\\n" (a final newline leaves an empty last line), joins
all the lines of both with one space and encodes the one string; the *premium* of a language is
its token count over English's. The 12 languages bundled in `bpe/data/flores200`
(`bpe.corpus.flores.LANGUAGES`) follow that protocol exactly, so GPT-2's counts here are theirs
(`PETROV_GPT2_TOKENS`, checked by `tests/test_languages.py`).

What it does not do: train on several languages, or write reports (`bpe-parity` and
`bpe.analysis.compare.parity_report` do).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from bpe.corpus.flores import (  # noqa: F401  (re-exported: the text these measures read)
    DEVTEST_RULE_LINES,
    ENGLISH,
    FLORES_DIR,
    LANGUAGES,
    SPLITS,
    flores_lines,
    heldout_text,
    parity_dev_text,
    petrov_text,
)
from bpe.util.stats import gini

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


def language_costs(
    encode: Callable[[str], Sequence[int]],
    languages: Iterable[str] = tuple(LANGUAGES),
    *,
    lines: int | None = None,
    text_of: Callable[..., str] = petrov_text,
) -> list[dict]:
    """Per language: tokens, UTF-8 bytes, bytes per token and premium (tokens over English's)
    of the protocol's text under `encode` (English is always measured, first; `lines`: the
    first that many lines of each split only; `text_of`: `heldout_text` for the held-out
    half of devtest instead)."""
    langs = [ENGLISH, *(lang for lang in languages if lang != ENGLISH)]
    rows = []
    for lang in langs:
        text = text_of(lang, lines=lines)
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
    """The Gini coefficient of the per-language token counts, the max and min premium with
    their languages, and bytes per token over all languages together."""
    top = max(rows, key=lambda r: r["premium"])
    low = min(rows, key=lambda r: r["premium"])
    return {
        "gini": round(gini([r["tokens"] for r in rows]), 4),
        "bytes_per_token": round(
            sum(r["bytes"] for r in rows) / max(1, sum(r["tokens"] for r in rows)), 4
        ),
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
    (`ours`), and GPT-2's on the same text (`gpt2`, None without `gpt2_encode`); each also on
    the held-out half of devtest alone (`heldout`: the text parity-aware BPE's rule and
    `dataset=flores_dev` never see)."""

    def costs(encode_with: Callable[[str], Sequence[int]]) -> dict:
        rows = language_costs(encode_with, lines=lines)
        held = language_costs(encode_with, lines=lines, text_of=heldout_text)
        return {
            "rows": rows,
            "summary": summary(rows),
            "heldout": {"rows": held, "summary": summary(held)},
        }

    return {
        "protocol": "Petrov et al. (2023): FLORES-200 dev + devtest lines joined by a space",
        "heldout_protocol": (
            f"FLORES-200 devtest lines {DEVTEST_RULE_LINES + 1}-1012 joined by a space"
        ),
        "lines": lines,
        "ours": costs(encode),
        "gpt2": None if gpt2_encode is None else costs(gpt2_encode),
    }
