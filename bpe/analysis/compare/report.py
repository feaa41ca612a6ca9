"""COMPARE.md: the comparison rendered (pure `section_*` functions over a `Comparison`) and
written with its top-k overlap figure, never over a file it did not write.

What it does not do: load sides or measure them (`bpe.analysis.compare.sides`,
`bpe.analysis.compare.measures`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from functools import partial
from itertools import combinations
from pathlib import Path

from bpe.analysis import figures
from bpe.analysis.compare.measures import (
    TOPK_POINTS,
    Comparison,
    compare,
    jaccard,
    merge_divergence,
    topk_overlap,
)
from bpe.analysis.compare.sides import Side, load_side, side_labels
from bpe.analysis.language_sections import compare_languages
from bpe.analysis.markdown import clip, fmt, table
from bpe.analysis.vocab_sections import SEGMENTATION_METHODS
from bpe.formats.gpt2_format import render
from bpe.measures import RENYI_ALPHA
from bpe.runs import schema
from bpe.runs.layout import (
    COMPARE_FILE,
)
from bpe.util.io import atomic_write_text, check_writable, files_in

logger = logging.getLogger(__name__)


FIGURE = "figures/compare_topk_overlap.png"


#: how COMPARE.md begins: a file starting otherwise was not written by bpe-compare
TITLE = "# Vocabulary comparison: "


#: Examples listed per side of each pair in "Tokens only in one side".
EXAMPLES = 8


#: Token lengths at or above this are one row of the length table.
LONG = 16


def render_compare(c: Comparison, *, figure: str | None, level: int = 1) -> str:
    """The Markdown text of COMPARE.md (no file is read): its sections, in order.

    Args:
        figure: the top-k overlap figure's path relative to the Markdown file (None: none).
        level: heading level of the title; sections are one deeper (2 embeds it in a report).
    """
    lines = [
        *section_sides(c),
        *section_shared(c),
        *section_only_in(c),
        *section_lengths(c),
        *_matrices(c),
        *section_bits_per_byte(c),
        *section_segmentation(c),
        *compare_languages([s.label for s in c.sides], [s.languages for s in c.sides]),
        *section_topk(c, figure),
    ]
    extra = "#" * (level - 1)
    return "\n".join(extra + ln if ln.startswith("#") else ln for ln in lines)


def _tok(token: bytes) -> str:
    return f"`{clip(render(token), 30)}`"


def section_sides(c: Comparison) -> list[str]:
    """The title and one row per side: where it comes from and what it holds."""
    sides = c.sides
    rows = [
        [
            s.label,
            s.source,
            s.kind,
            s.dataset or "n/a",
            len(s.tokens),
            len(s.learned),
            len(s.heldout) if s.heldout else "none",
        ]
        for s in sides
    ]
    heads = [
        "side",
        "directory",
        "kind",
        "trained on",
        "tokens (no specials)",
        "learned (merges)",
        "held-out docs",
    ]
    return [
        f"{TITLE}{' vs '.join(s.label for s in sides)}",
        "",
        table(rows, heads),
        "",
        "Tokens are compared by their bytes; special tokens are left out everywhere.",
        "",
    ]


def section_shared(c: Comparison) -> list[str]:
    """Shared tokens and the common merge prefix of every pair of sides."""
    rows = []
    for a, b in combinations(c.sides, 2):
        ta, tb = a.tokens, b.tokens
        la, lb = set(a.learned), set(b.learned)
        div = merge_divergence(a.merges, b.merges)
        rows.append(
            [
                a.label,
                b.label,
                len(ta & tb),
                fmt(jaccard(ta, tb), ".3f"),
                len(la & lb),
                fmt(jaccard(la, lb), ".3f"),
                div,
                "identical" if div == len(a.merges) == len(b.merges) else f"#{div + 1}",
            ]
        )
    a, b = c.sides[0], c.sides[1]
    la, lb = set(a.learned), set(b.learned)
    return [
        "## Shared tokens",
        "",
        table(
            rows,
            [
                "side A",
                "side B",
                "shared tokens",
                "Jaccard",
                "shared learned",
                "Jaccard (learned)",
                "common merge prefix",
                "first different merge",
            ],
        ),
        "",
        f"{a.label} and {b.label} share {len(la & lb)} learned tokens (Jaccard "
        f"{fmt(jaccard(la, lb), '.3f')} over learned tokens, "
        f"{fmt(jaccard(a.tokens, b.tokens), '.3f')} with the 256 bytes); their merge lists "
        f"agree on the first {merge_divergence(a.merges, b.merges)} merges.",
        "",
    ]


def section_only_in(c: Comparison) -> list[str]:
    """For each pair, the learned tokens one side has and the other lacks."""
    lines = [
        "## Tokens only in one side",
        "",
        "For each pair, the learned tokens one side has and the other lacks, most frequent "
        "first: frequency is the number of occurrences when that side's tokenizer encodes "
        "every held-out set of the comparison (ties, and sides without held-out text, by merge "
        "rank).",
        "",
    ]
    for a, b in combinations(c.sides, 2):
        for mine, other in ((a, b), (b, a)):
            lines += _only_in(mine, other, c.occurrences[mine.label])
    return lines


def section_lengths(c: Comparison) -> list[str]:
    """Vocab entries by length in bytes, side by side."""
    sides = c.sides
    counts = {s.label: Counter(min(len(t), LONG) for t in s.tokens) for s in sides}
    longest = max(max(cnt) for cnt in counts.values())
    rows = [
        [f"{n}+" if n == LONG else n, *(counts[s.label].get(n, 0) for s in sides)]
        for n in range(1, longest + 1)
    ]
    rows.append(["mean", *(fmt(sum(map(len, s.tokens)) / len(s.tokens), ".2f") for s in sides)])
    return [
        "## Token lengths",
        "",
        "Non-special vocab entries by length in bytes.",
        "",
        table(rows, ["bytes", *(s.label for s in sides)]),
        "",
    ]


def section_topk(c: Comparison, figure: str | None) -> list[str]:
    """How much of the first k learned tokens both sides of a pair hold."""
    lines = ["## Overlap of the top-k vocab", ""]
    if figure:
        lines += [f"![top-k overlap]({figure})", ""]
    lines += [
        "The share of the first k learned tokens (by merge rank) that both sides hold among "
        "their first k.",
        "",
    ]
    rows = []
    for a, b in combinations(c.sides, 2):
        curve = topk_overlap(a.learned, b.learned)
        cells = [fmt(curve[k - 1], ".3f") if k <= len(curve) else "n/a" for k in TOPK_POINTS]
        rows.append(
            [
                a.label,
                b.label,
                *cells,
                f"{fmt(curve[-1] if curve else None, '.3f')} (k={len(curve)})",
            ]
        )
    heads = ["side A", "side B", *(f"k={k}" for k in TOPK_POINTS), "all (k = smaller vocab)"]
    return [*lines, table(rows, heads), ""]


def _only_in(side: Side, other: Side, occ: Counter[bytes]) -> list[str]:
    rank = {t: k for k, t in enumerate(side.learned)}
    theirs = other.tokens
    only = sorted(
        (t for t in side.learned if t not in theirs), key=lambda t: (-occ.get(t, 0), rank[t])
    )
    lines = [
        f"**Only in {side.label}** (not in {other.label}): {len(only)} of its "
        f"{len(side.learned)} learned tokens.",
        "",
    ]
    if only:
        rows = [
            [
                _tok(t),
                clip(repr(t.decode("utf-8", errors="replace")), 30),
                len(t),
                occ.get(t, 0),
                rank[t] + 1,
            ]
            for t in only[:EXAMPLES]
        ]
        lines += [table(rows, ["token", "text", "bytes", "occurrences", "merge #"]), ""]
    return lines


def _matrices(c: Comparison) -> list[str]:
    lines = ["## Compression on held-out documents", ""]
    if not c.heldout:
        return [*lines, "No side has held-out documents (GPT-2 style files have none).", ""]
    heads = [f"{name} ({len(docs)} docs)" for name, docs in c.heldout.items()]
    for title, values, spec in (
        ("bytes per token (higher compresses better)", c.compression, ".3f"),
        (
            f"Rényi efficiency, α = {RENYI_ALPHA} (of the vocab without specials)",
            c.efficiency,
            ".3f",
        ),
    ):
        rows = [[s.label, *(fmt(values[(s.label, n)], spec) for n in c.heldout)] for s in c.sides]
        lines += [f"{title.capitalize()}:", "", table(rows, ["tokenizer", *heads]), ""]
    for name in c.heldout:
        best = max(c.sides, key=lambda s: c.compression[(s.label, name)])
        lines.append(
            f"On {name}, {best.label} compresses best "
            f"({fmt(c.compression[(best.label, name)], '.2f')} bytes per token)."
        )
    return [*lines, ""]


def section_bits_per_byte(c: Comparison) -> list[str]:
    """Each run side's recorded bits per byte (its n-gram model, its held-out documents)."""
    lines = ["## Bits per byte (recorded by each run)", ""]
    rows: list[list] = []
    same_docs: dict[tuple, list[tuple[float, str]]] = {}  # (dataset, docs, order) -> scores
    for s in c.sides:
        bpb = s.bits_per_byte or {}
        order = (bpb.get("model") or {}).get("order")
        measured = [bpb[k] for k in ("own", "other") if bpb.get(k)]
        if not measured:
            rows.append([s.label, "not recorded", "n/a", "n/a", "n/a"])
        for m in measured:
            spread = m.get("splits") or {}
            rows.append(
                [
                    s.label,
                    f"{m['dataset']} ({m['docs']} docs)",
                    fmt(m["bits_per_byte"], ".3f") + (f" ({order}-gram)" if order else ""),
                    f"{fmt(spread.get('min'), '.3f')} to {fmt(spread.get('max'), '.3f')}",
                    fmt(m["unigram_bits_per_byte"], ".3f"),
                ]
            )
            key = (m["dataset"], m["docs"], order)
            same_docs.setdefault(key, []).append((m["bits_per_byte"], s.label))
    heads = ["tokenizer", "held-out documents", "bits/byte", "over splits", "bits/byte (unigram)"]
    lines += [
        table(rows, heads),
        "",
        "Each run measured these when it was trained: an interpolated Kneser-Ney n-gram model "
        "of its own ids, fitted on its training text, scoring its held-out documents. Rows on "
        "the same documents compare across vocabularies (lower is better).",
    ]
    for (dataset, _, _), scores in same_docs.items():
        if len(scores) > 1:
            value, label = min(scores)
            lines.append(f"On {dataset}, {label} needs the fewest ({fmt(value, '.3f')} bits/byte).")
    return [*lines, ""]


def section_segmentation(c: Comparison) -> list[str]:
    """Each run side's vocab cut three ways on its own held-out text, as the run recorded it
    (`bpe.evaluation.segmentations`): bytes per token, Rényi efficiency, bits per byte."""
    lines = ["## Segmentation methods (recorded by each run, own held-out text)", ""]
    rows: list[list] = []
    for s in c.sides:
        recorded = {"segmentation": s.segmentation}
        if not schema.get(recorded, schema.SEGMENTATION_METHODS):
            rows.append([s.label, "not recorded", "n/a", "n/a", "n/a"])
            continue
        for method in SEGMENTATION_METHODS:
            at = partial(schema.get, recorded, method=method, side="own")
            if not at(schema.SEG_OF):
                continue
            rows.append(
                [
                    s.label,
                    f"`{method}`",
                    fmt(at(schema.SEG_BYTES_PER_TOKEN), ".3f"),
                    fmt(at(schema.SEG_RENYI), ".3f"),
                    fmt(at(schema.SEG_BITS_PER_BYTE), ".3f"),
                ]
            )
    heads = ["tokenizer", "segmentation", "bytes/token", "Rényi", "bits/byte"]
    return [
        *lines,
        table(rows, heads),
        "",
        "The same vocab, cut by its merges, by the longest token first, or into the fewest "
        "tokens (`Tokenizer.encode(segmentation=...)`); bits per byte from an n-gram model of "
        "each method's own ids. Each side on its own held-out documents.",
        "",
    ]


def write_compare(
    paths: Sequence[str | Path],
    out_dir: str | Path = ".",
    *,
    labels: Sequence[str] | None = None,
    force: bool = False,
) -> Path:
    """Compare the directories, write COMPARE.md and its figure into out_dir; returns its path.

    Args:
        labels: one name per directory (default: `side_labels`, from what differs).
        force: replace a COMPARE.md (or figure) in out_dir that bpe-compare did not write; a
            previous comparison is replaced without it. No output ever replaces a file of the
            directories compared, even with it (`check_writable`).

    Raises:
        FileNotFoundError / ValueError: see `load_side`, `side_labels` and `compare`.
        FileExistsError / NotADirectoryError / IsADirectoryError: an output refused by
            `check_writable`, before anything is read or written.
    """
    if labels is not None and len(labels) != len(paths):
        raise ValueError(f"{len(labels)} labels for {len(paths)} directories; pass one each")
    out = Path(out_dir)
    report, figure = out / COMPARE_FILE, out / FIGURE
    ours = _is_our_compare(report)
    inputs = files_in(paths)
    for written in (report, figure):
        check_writable(
            written,
            what=f"--out {str(out)!r} ({written.relative_to(out)})",
            inputs=inputs,
            ours=ours,
            force=force,
            fix="pass another --out",
            not_ours="is not a comparison written by bpe-compare",
        )
    sides = [load_side(p) for p in paths]
    for side, label in zip(sides, side_labels(sides, given=labels)):
        side.label = label
    result = compare(sides)
    out.mkdir(parents=True, exist_ok=True)
    drawn = draw_topk_overlap(sides, figure)
    atomic_write_text(report, render_compare(result, figure=FIGURE if drawn else None) + "\n")
    return report


def _is_our_compare(path: Path) -> bool:
    """A COMPARE.md that bpe-compare wrote (its title line), which a new comparison replaces."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().startswith(TITLE)
    except (OSError, UnicodeDecodeError):
        return False


def draw_topk_overlap(sides: Sequence[Side], path: Path) -> bool:
    """Draw the top-k overlap of every pair of sides into path; False when no side learned any."""
    curves = {
        f"{a.label} / {b.label}": topk_overlap(a.learned, b.learned)
        for a, b in combinations(sides, 2)
    }
    if not any(curves.values()):
        return False
    figures.line(
        curves,
        path,
        xlabel="k (first k learned tokens by merge rank)",
        ylabel="shared share of the top k",
        title="Overlap of the top-k vocab",
    )
    return True
