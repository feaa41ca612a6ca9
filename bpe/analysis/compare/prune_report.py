"""PRUNE.md: what `bpe-prune` removed from a vocabulary and what that changed, from prune.json.

What it does not do: prune or measure (`bpe.experiment.pruning` writes prune.json).
"""

from __future__ import annotations

import json
from pathlib import Path

from bpe.analysis.markdown import clip, fmt, table
from bpe.runs.layout import PRUNE_FILE, PRUNE_RECORD
from bpe.util.io import atomic_write_text

#: How many removed tokens PRUNE.md lists (prune.json holds them all).
SHOWN = 30


def render_prune(record: dict) -> str:
    """The Markdown of PRUNE.md for one prune.json record."""
    before, after = record["before"], record["after"]
    rows = [
        [name, fmt(before[key], spec), fmt(after[key], spec), _change(before[key], after[key])]
        for name, key, spec in (
            ("vocab entries", "vocab_size", "d"),
            ("held-out tokens", "heldout_tokens", "d"),
            ("bytes per token (held-out)", "bytes_per_token", ".3f"),
            ("Rényi efficiency (held-out)", "renyi_efficiency", ".3f"),
            (f"bits per byte ({record['order']}-gram, held-out)", "bits_per_byte", ".4f"),
            ("intermediate-only tokens", "intermediate_only", "d"),
            ("intermediate-only share of the vocab", "intermediate_only_share", ".4f"),
        )
    ]
    removed = record["removed"]
    shown = [
        [
            f"`{clip(r['token'])}`",
            r["bytes"],
            " + ".join(f"`{clip(p)}`" for p in r["parts"]),
            r["usage"],
        ]
        for r in sorted(removed, key=lambda r: (r["usage"], -r["bytes"]))[:SHOWN]
    ]
    never = sum(1 for r in removed if r["usage"] == 0)
    text = record["text"]
    lines = [
        f"# Pruned vocabulary: {record['source']}",
        "",
        f"`bpe-prune` removed {len(removed)} learned tokens from the vocabulary of "
        f"{record['source']} ({record['dataset']}): the ones its text used least as "
        f"themselves ({never} of them never). Usage was counted on the first "
        f"{text.get('usage_sample_bytes')} bytes of the training input and "
        f"{text['heldout_docs']} held-out documents ({text['heldout_bytes']} bytes); the "
        "measures below are on those same held-out documents, so they are not an unseen-text "
        "evaluation. Every merge still applies; each removed token left after them splits "
        "back into the two tokens its merge joined.",
        "",
        table(rows, ["", "before", "after", "change"]),
        "",
        f"## Removed tokens (the {min(SHOWN, len(removed))} least used of {len(removed)})",
        "",
        table(shown, ["token", "bytes", "split into", "uses as itself"]),
        "",
        "This directory loads with `Tokenizer.from_pretrained` (vocab.json, merges.txt, "
        "removals.json). tokenizer.json and tiktoken's format cannot express a removal, so "
        "none is written.",
        "",
    ]
    return "\n".join(lines)


def _change(before: float, after: float) -> str:
    """`+1.2%` (or n/a where the before value is 0)."""
    return f"{100 * (after / before - 1):+.1f}%" if before else "n/a"


def write_prune_report(out_dir: Path) -> Path:
    """Render PRUNE.md next to the prune.json of a `bpe-prune` output directory."""
    record = json.loads((out_dir / PRUNE_RECORD).read_text("utf-8"))
    path = out_dir / PRUNE_FILE
    atomic_write_text(path, render_prune(record))
    return path
