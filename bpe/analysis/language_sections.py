"""The languages sections of ANALYSIS.md and COMPARE.md: what the same sentences cost in each
language (FLORES-200, Petrov et al.'s protocol), this tokenizer next to GPT-2.

What it does not do: encode anything (`bpe.measures.languages` measures, at analysis time).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from bpe.analysis.markdown import fmt, table
from bpe.runs import schema


def _rows(metrics: dict, who: str) -> list[dict]:
    """One side's per-language rows, read through the schema's keys."""
    get = partial(schema.get, metrics, who=who)
    return [
        {
            "language": get(schema.LANG_ROW_LANGUAGE, i=i),
            "name": get(schema.LANG_ROW_NAME, i=i),
            "tokens": get(schema.LANG_ROW_TOKENS, i=i),
            "premium": get(schema.LANG_ROW_PREMIUM, i=i),
        }
        for i in range(len(get(schema.LANG_ROWS, default=[])))
    ]


def section_languages(metrics: dict) -> list[str]:
    """ANALYSIS.md's short languages section: premiums per language, ours next to GPT-2's."""
    get = partial(schema.get, metrics)
    lines = ["## Languages (FLORES-200)", ""]
    ours = _rows(metrics, "ours")
    if not ours:
        return [*lines, "Not measured for this run (it predates the languages measure).", ""]
    gpt2 = {r["language"]: r for r in _rows(metrics, "gpt2")}
    rows = [
        [
            f"{r['name']} (`{r['language']}`)",
            fmt(r["premium"], ".2f"),
            fmt(gpt2[r["language"]]["premium"], ".2f") if r["language"] in gpt2 else "n/a",
            fmt(r["tokens"], "d"),
        ]
        for r in ours
    ]
    lines_used = get(schema.LANGUAGE_LINES)
    scope = (
        "every line of `dev` and `devtest`"
        if lines_used is None
        else f"the first {lines_used} lines of `dev` and of `devtest`"
    )
    gpt2_gini = get(schema.LANG_GINI, who="gpt2")
    gini = fmt(get(schema.LANGUAGES_GINI), ".3f")
    lines += [
        "The same sentences in each language (FLORES-200, "
        f"{scope}, joined by a space as Petrov et al., 2023, do); a premium is a language's "
        "tokens over English's with the same tokenizer. A tokenizer trained on one language "
        "is expected to charge the others more: this says how much.",
        "",
        table(rows, ["language", "premium (ours)", "premium (GPT-2)", "tokens (ours)"]),
        "",
        f"Gini coefficient of the per-language token counts: {gini}"
        + (f" (GPT-2: {fmt(gpt2_gini, '.3f')})" if gpt2_gini is not None else "")
        + f"; the highest premium is {fmt(get(schema.LANGUAGES_MAX_PREMIUM), '.2f')} "
        f"({get(schema.LANG_MAX_LANGUAGE, who='ours')}).",
        "",
        *_heldout_lines(metrics),
    ]
    return lines


def _heldout_lines(metrics: dict) -> list[str]:
    """The summary on devtest's second half alone: text that neither `dataset=flores_dev`
    nor parity-aware BPE's rule reads (runs since parity-aware BPE)."""
    get = partial(schema.get, metrics)
    if get(schema.LANG_HELDOUT_GINI, who="ours") is None:
        return []
    gpt2 = get(schema.LANG_HELDOUT_GINI, who="gpt2")
    return [
        "On the held-out half of `devtest` alone (the text no FLORES-200 training and no "
        "parity-aware rule reads): Gini "
        f"{fmt(get(schema.LANG_HELDOUT_GINI, who='ours'), '.3f')}"
        + (f" (GPT-2: {fmt(gpt2, '.3f')})" if gpt2 is not None else "")
        + f", premiums from {fmt(get(schema.LANG_HELDOUT_MIN_PREMIUM, who='ours'), '.2f')} to "
        f"{fmt(get(schema.LANG_HELDOUT_MAX_PREMIUM, who='ours'), '.2f')} "
        f"({get(schema.LANG_HELDOUT_MAX_LANGUAGE, who='ours')}), "
        f"{fmt(get(schema.LANG_HELDOUT_BYTES_PER_TOKEN, who='ours'), '.2f')} bytes per token "
        "over all languages.",
        "",
    ]


def compare_languages(labels: Sequence[str], recorded: Sequence[dict | None]) -> list[str]:
    """COMPARE.md's table: each side's recorded premium per language, and its Gini."""
    lines = ["## Languages (FLORES-200: recorded by each run, measured here for other sides)", ""]
    sides = [({"languages": r}, label) for label, r in zip(labels, recorded, strict=True)]
    per = [(label, {x["language"]: x for x in _rows(m, "ours")}) for m, label in sides]
    order = next((list(rows) for _, rows in per if rows), [])
    if not order:
        return [*lines, "No side recorded the languages measure.", ""]
    body = [
        [
            lang,
            *(fmt(rows[lang]["premium"], ".2f") if lang in rows else "n/a" for _, rows in per),
        ]
        for lang in order
    ]
    body.append(["Gini", *(fmt(schema.get(m, schema.LANGUAGES_GINI), ".3f") for m, _ in sides)])
    return [
        *lines,
        table(body, ["language", *(f"{label}: premium" for label, _ in per)]),
        "",
        "Premiums are tokens over English's with the same tokenizer, on each run's recorded "
        "lines (`analysis.language_lines`; null: all of them); a side of GPT-2 style files "
        "(which records nothing) is measured here as `bpe-parity` measures it, on the runs' "
        "lines when they agree.",
        "",
    ]
