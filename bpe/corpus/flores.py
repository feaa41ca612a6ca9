"""FLORES-200 as bundled: 12 languages, the same sentences in each, and the parts of it we use.

FLORES-200 (NLLB Team et al., 2022) is parallel: line i of every language's `dev` (997 lines)
and `devtest` (1,012 lines) is the same sentence. `bpe/data/flores200` holds both splits of the
12 languages in `LANGUAGES`, gzip'd as published (`SOURCE.md` there: licence, attribution).

    dev                        `dataset=flores_dev`'s training text (one file per language)
    devtest lines 1-506        parity-aware BPE's development text (`parity_dev_text`)
    devtest lines 507-1012     held-out text no training and no rule reads (`heldout_text`)
    dev + devtest              Petrov et al.'s protocol text (`petrov_text`)

What it does not do: measure anything (`bpe.measures.languages`).
"""

from __future__ import annotations

import gzip
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


#: FLORES-200 devtest's 1,012 lines in two halves: parity-aware BPE's development text (the
#: first `DEVTEST_RULE_LINES`, which its rule looks at while training) and the held-out text
#: (the rest) on which every run's `languages.{who}.heldout` measures premiums. Training on
#: `dataset=flores_dev` reads dev, so the held-out half is text no part of training has seen.
DEVTEST_RULE_LINES = 506


def parity_dev_text(lang: str, *, root: Path = FLORES_DIR) -> str:
    """Parity-aware BPE's default development text of a language: devtest's first half."""
    return "\n".join(flores_lines(lang, "devtest", root=root)[:DEVTEST_RULE_LINES])


def heldout_text(lang: str, *, lines: int | None = None, root: Path = FLORES_DIR) -> str:
    """The held-out parallel text of a language: devtest's second half (its first `lines`
    lines only, with `lines`), joined by a space as the protocol joins lines."""
    rest = [line for line in flores_lines(lang, "devtest", root=root)[DEVTEST_RULE_LINES:] if line]
    return " ".join(rest[:lines])


def petrov_text(lang: str, *, lines: int | None = None, root: Path = FLORES_DIR) -> str:
    """The one string the protocol encodes: dev's lines then devtest's, joined by a space
    (with `lines`, the first that many of each split: a cheaper sample of the same text)."""
    return " ".join(
        line for split in SPLITS for line in flores_lines(lang, split, root=root)[:lines]
    )
