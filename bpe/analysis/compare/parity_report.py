"""PARITY.md: what the same sentences cost in each language, per tokenizer, from parity.json.

What it does not do: encode anything (`bpe-parity` measures, `bpe.measures.languages`).
"""

from __future__ import annotations

import json
from pathlib import Path

from bpe.analysis.markdown import fmt, table
from bpe.measures.languages import ENGLISH
from bpe.runs.layout import PARITY_FILE, PARITY_RECORD
from bpe.util.io import atomic_write_text


def render_parity(record: dict) -> str:
    """The Markdown of PARITY.md: premiums per language and tokenizer, then the summaries."""
    sides = record["tokenizers"]
    names = [s["name"] for s in sides]
    by_lang: dict[str, dict[str, dict]] = {}
    for side in sides:
        for row in side["rows"]:
            by_lang.setdefault(row["language"], {})[side["name"]] = row
    rows = [
        [
            f"{next(iter(per.values()))['name']} (`{lang}`)",
            *(fmt(per[n]["premium"], ".2f") if n in per else "n/a" for n in names),
            *(fmt(per[n]["tokens"], "d") if n in per else "n/a" for n in names),
        ]
        for lang, per in by_lang.items()
    ]
    heads = ["language", *(f"{n}: premium" for n in names), *(f"{n}: tokens" for n in names)]
    english = {
        s["name"]: next((r for r in s["rows"] if r["language"] == ENGLISH), None) for s in sides
    }
    summary = [
        [
            s["name"],
            fmt(english[s["name"]]["tokens"], "d") if english[s["name"]] else "n/a",
            fmt(s["summary"]["gini"], ".3f"),
            f"{fmt(s['summary']['max_premium'], '.2f')} ({s['summary']['max_language']})",
            f"{fmt(s['summary']['min_premium'], '.2f')} ({s['summary']['min_language']})",
        ]
        for s in sides
    ]
    lines = [
        "# Token premiums across languages (FLORES-200)",
        "",
        "The same sentences (FLORES-200 `dev` and `devtest`, translations of one text) encoded "
        'by each tokenizer, following Petrov et al. (2023, "Language Model Tokenizers '
        "Introduce Unfairness Between Languages\"): each language's lines joined by a space, "
        "one string per language. A language's premium is its tokens over English's with the "
        "same tokenizer: 2.00 means the same content costs twice the tokens (and twice the "
        "context, compute and price per token).",
        "",
        "A premium is relative to the tokenizer's own English, not a measure of how well it "
        "compresses: a tokenizer that splits English finely too has small premiums and still "
        "costs more tokens everywhere. Compare each tokenizer's English token count (in the "
        "summary below) before reading its premiums as fairness.",
        "",
        table(rows, heads),
        "",
        "## Summary",
        "",
        "The Gini coefficient of the per-language token counts: 0 when every language costs "
        "the same, towards 1 when one language takes nearly all the tokens.",
        "",
        table(summary, ["tokenizer", "English tokens", "Gini", "max premium", "min premium"]),
        "",
    ]
    return "\n".join(lines)


def write_parity_report(out_dir: Path) -> Path:
    """Render PARITY.md next to the parity.json of a `bpe-parity` output directory."""
    record = json.loads((out_dir / PARITY_RECORD).read_text("utf-8"))
    path = out_dir / PARITY_FILE
    atomic_write_text(path, render_parity(record))
    return path
