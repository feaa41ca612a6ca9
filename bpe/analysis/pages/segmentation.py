"""reports/segmentation.md: one vocabulary used and shaped several ways, from one real sweep.

What it does: `gather_rows` reads a sweep's complete runs (normally
`bpe-train -m experiment=segmentation`: plain BPE and `max_token_length=8` on both bundled
samples at two vocab sizes) and the pruned copies of its plain runs (`<sweep>/pruned/*/`, the
prune.json `bpe-prune` writes) into `SegRow`s: for each dataset and vocab size, plain BPE cut
three ways (`merges`, `longest_prefix`, `fewest`), the length-limited run, and the pruned
vocab, each with held-out bytes per token, Rényi efficiency, bits per byte and the
intermediate-only share of the vocab. `render_segmentation` writes the Markdown (a pure
function of the rows), with each paper's claim beside what our rows show;
`write_segmentation` writes the file. `bpe-report --page segmentation` runs the sweep and
the pruning and calls it.

What it does not do: train, prune or measure (the runs and prune.json hold every number), or
compare rows of different datasets or vocab sizes with each other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from bpe.analysis.loader import find_run_dirs, read_run
from bpe.analysis.markdown import fmt, generated_by, table
from bpe.runs import schema
from bpe.runs.layout import PRUNE_RECORD, PRUNED_DIR
from bpe.util.io import atomic_write_text

#: Where the report goes inside the reports directory.
REPORT_FILE = "segmentation.md"
#: The segmentation methods, in the order rows show them.
METHODS = ("merges", "longest_prefix", "fewest")


@dataclass(frozen=True)
class SegRow:
    """One way of using one trained vocabulary, measured on the own held-out text."""

    dataset: str
    vocab_size: int
    kind: str  # "plain" | "limit" | "pruned"
    label: str
    method: str  # the segmentation ("merges" for the limit and the pruned rows)
    bytes_per_token: float | None
    renyi: float | None
    bits_per_byte: float | None
    intermediate_only_share: float | None  # of the vocab: made by a merge, never left


def gather_rows(sweep_dir: Path) -> list[SegRow]:
    """Every row of the report, from the sweep's complete runs and its pruned copies."""
    rows: list[SegRow] = []
    for run_dir in find_run_dirs(sweep_dir):
        metrics = read_run(run_dir)["metrics"]
        if schema.get(metrics, schema.STATUS) == "complete":
            rows += _run_rows(metrics)
    for path in sorted((Path(sweep_dir) / PRUNED_DIR).glob(f"*/{PRUNE_RECORD}")):
        rows.append(_pruned_row(json.loads(path.read_text("utf-8"))))
    return rows


def _run_rows(metrics: dict) -> list[SegRow]:
    get = partial(schema.get, metrics)
    dataset, vocab, limit = (
        get(schema.DATASET),
        get(schema.VOCAB_SIZE),
        get(schema.MAX_TOKEN_LENGTH),
    )
    share = get(schema.UNDERTRAINED_INTERMEDIATE_ONLY_SHARE)
    methods = METHODS if limit is None else ("merges",)
    return [
        SegRow(
            dataset=dataset,
            vocab_size=vocab,
            kind="plain" if limit is None else "limit",
            label=f"plain BPE, `{m}`" if limit is None else f"`max_token_length={limit}`",
            method=m,
            bytes_per_token=get(schema.SEG_BYTES_PER_TOKEN, method=m, side="own"),
            renyi=get(schema.SEG_RENYI, method=m, side="own"),
            bits_per_byte=get(schema.SEG_BITS_PER_BYTE, method=m, side="own"),
            # a property of the merges' encode: not measured for the other methods
            intermediate_only_share=share if m == "merges" else None,
        )
        for m in methods
        if get(schema.SEG_OF, method=m, side="own")
    ]


def _pruned_row(record: dict) -> SegRow:
    after = record["after"]
    return SegRow(
        dataset=record["dataset"],
        vocab_size=record["vocab_size"]["before"],
        kind="pruned",
        label=f"pruned to {after['vocab_size']} (`bpe-prune`)",
        method="merges",
        bytes_per_token=after["bytes_per_token"],
        renyi=after.get("renyi_efficiency"),
        bits_per_byte=after["bits_per_byte"],
        intermediate_only_share=after["intermediate_only_share"],
    )


def _find(rows: Sequence[SegRow], kind: str, method: str = "merges") -> SegRow | None:
    return next((r for r in rows if r.kind == kind and r.method == method), None)


def _change(rows: Sequence[SegRow], kind: str, method: str, field: str) -> float | None:
    """The % change of `field` from plain BPE's merges to the row (kind, method), or None."""
    base, other = _find(rows, "plain"), _find(rows, kind, method)
    a = None if base is None else getattr(base, field)
    b = None if other is None else getattr(other, field)
    return None if not a or b is None else 100 * (b / a - 1)


def _span(values: Sequence[float | None]) -> str:
    """`-1.2% to +0.4%` over the groups that have the value ("n/a" if none)."""
    got = sorted(v for v in values if v is not None)
    if not got:
        return "n/a"
    return f"{got[0]:+.1f}%" if len(got) == 1 else f"{got[0]:+.1f}% to {got[-1]:+.1f}%"


def render_segmentation(
    rows: Sequence[SegRow], *, command: str, source: str, code: str | None = None
) -> str:
    """The Markdown of reports/segmentation.md."""
    groups: dict[tuple[str, int], list[SegRow]] = {}
    for r in rows:
        groups.setdefault((r.dataset, r.vocab_size), []).append(r)
    order = {"plain": 0, "limit": 1, "pruned": 2}
    lines = [
        "# Segmentation, length limits and pruning: one vocabulary, used and shaped",
        "",
        f"{generated_by(command, code)} from the sweep `{source}` (`bpe-train -m "
        "experiment=segmentation`, the heap trainer) and a pruned copy of each plain run "
        "(`bpe-prune --vocab-size` 75% of it). Every number is measured on the dataset's own "
        "held-out documents: bytes per token (higher compresses more), the Rényi efficiency "
        "(α=2.5) of the token distribution, bits per byte under a 3-gram Kneser-Ney model of "
        "each row's own ids fitted on its training sample (lower is better), and the share of "
        "the vocab that is intermediate-only (made by a merge, never left by encoding the "
        "training sample).",
        "",
    ]
    for (dataset, vocab), group in sorted(groups.items()):
        group = sorted(group, key=lambda r: (order[r.kind], METHODS.index(r.method)))
        body = [
            [
                r.label,
                fmt(r.bytes_per_token, ".3f"),
                fmt(r.renyi, ".3f"),
                fmt(r.bits_per_byte, ".4f"),
                fmt(r.intermediate_only_share, ".4f"),
            ]
            for r in group
        ]
        heads = ["vocab used as", "bytes/token", "Rényi", "bits/byte", "intermediate-only"]
        lines += [f"## {dataset}, vocab {vocab}", "", table(body, heads), ""]
    lines += _claims(list(groups.values()))
    return "\n".join(lines).rstrip() + "\n"


def _claims(groups: list[list[SegRow]]) -> list[str]:
    """Each paper's claim, and what our rows show (changes against plain BPE's merges)."""

    def span(kind: str, method: str, field: str) -> str:
        return _span([_change(g, kind, method, field) for g in groups])

    rows = [
        [
            "Uzan et al. (2024): greedy longest-prefix inference is competitive with the "
            "merge rules",
            f"`longest_prefix`: bytes/token {span('plain', 'longest_prefix', 'bytes_per_token')}"
            f", bits/byte {span('plain', 'longest_prefix', 'bits_per_byte')}",
        ],
        [
            "Schmidt et al. (2024, PathPiece): the fewest tokens is not by itself a better "
            "segmentation",
            f"`fewest`: bytes/token {span('plain', 'fewest', 'bytes_per_token')}, bits/byte "
            f"{span('plain', 'fewest', 'bits_per_byte')}",
        ],
        [
            "HF `BpeTrainer` / SentencePiece: a length limit keeps tokens general at a small "
            "cost in compression",
            f"`max_token_length=8`: bytes/token {span('limit', 'merges', 'bytes_per_token')}, "
            f"bits/byte {span('limit', 'merges', 'bits_per_byte')}, intermediate-only "
            f"{span('limit', 'merges', 'intermediate_only_share')}",
        ],
        [
            "LiteToken / Scaffold-BPE: tokens that survive rarely as themselves can go at little"
            " cost",
            f"pruned by 25%: bytes/token {span('pruned', 'merges', 'bytes_per_token')}, "
            f"bits/byte {span('pruned', 'merges', 'bits_per_byte')}, intermediate-only "
            f"{span('pruned', 'merges', 'intermediate_only_share')}",
        ],
    ]
    return [
        "## What the papers claim, and what these rows show",
        "",
        "Changes are against plain BPE's merges on the same dataset and vocab size, as a range "
        "over the four groups above. A positive bytes/token change compresses more; a positive "
        "bits/byte change is worse.",
        "",
        table(rows, ["claim", "ours"]),
        "",
    ]


def write_segmentation(
    sweep_dir: Path, out_dir: Path, *, command: str, code: str | None = None
) -> Path:
    """Write `<out_dir>/segmentation.md` from the sweep and its pruned copies."""
    rows = gather_rows(Path(sweep_dir))
    if not rows:
        raise ValueError(
            f"{sweep_dir} holds no complete run: run `bpe-train -m experiment=segmentation`"
        )
    out = Path(out_dir) / REPORT_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    source = Path(sweep_dir).name
    atomic_write_text(out, render_segmentation(rows, command=command, source=source, code=code))
    return out
