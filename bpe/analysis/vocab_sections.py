"""ANALYSIS.md sections on how a run's vocab is used: efficiency, under-trained tokens, glossary.

What it does: pure `section_*` functions over a run's metrics (the `efficiency` and
`undertrained` entries the analysis stage records), returning Markdown lines; `GLOSSARY` defines
every measure they use, with its formula; `section_sweep_usage` is the SWEEP.md table. Runs made
before these entries existed get a one-line note instead of a table.

What it does not do: read files or measure anything (`bpe.evaluation.usage` measured it).
"""

from __future__ import annotations

from functools import partial

import pandas as pd

from bpe.analysis.loader import complete
from bpe.analysis.markdown import clip, fmt, table
from bpe.runs import schema

#: The measures ANALYSIS.md uses beyond time and memory, and how each is computed.
GLOSSARY = (
    (
        "compression ratio",
        "UTF-8 bytes of the documents / tokens they encode to (higher is better)",
    ),
    (
        "fertility",
        "tokens / whitespace-separated words (`str.split()`) of the documents (lower is better)",
    ),
    (
        "Shannon efficiency",
        "H(p) / log\\|V\\|, H(p) = -Σ p_i log p_i over the unigram distribution p of token ids "
        "in the encoded documents; \\|V\\| = vocab without special tokens",
    ),
    (
        "Rényi efficiency",
        "H_α(p) / log\\|V\\|, H_α(p) = log(Σ p_i^α) / (1 - α), α = 2.5 (Zouhar et al., "
        "ACL 2023); weighs frequent tokens more than Shannon's; 1 = every entry equally used",
    ),
    ("vocab used", "share of \\|V\\| that occurs at least once in the encoded documents"),
    (
        "intermediate only",
        "a learned token that never ends up in the encoding of the training sample: every "
        "occurrence was merged further (unreachable in Land & Bartolo's sense, 2024)",
    ),
    ("never produced", "intermediate only, and absent from the encoded held-out documents too"),
    ("self-unreachable", "a learned token whose own text does not encode to that token alone"),
    ("merge count", "how often the pair occurred in the training pretokens when it was merged"),
    (
        "bits per byte",
        "-Σ log2 P(token \\| n-1 tokens before) / UTF-8 bytes of the held-out documents; P: a "
        "Kneser-Ney n-gram model of the run's ids on its training text (lower is better)",
    ),
    ("unigram bits per byte", "the same with P the tokens' frequencies alone (n = 1)"),
    (
        "training memory",
        "the process tree's peak allocated memory (anonymous and shared pages, PSS: library "
        "code and page cache left out; sampled every 50 ms, less often once sampling a large "
        "tree would take over 10% of a core) in stages 1-3, above its "
        "memory when the run began; inputs under 12 MiB are counted in-process. Before it "
        "begins, freed memory is handed back and glibc's malloc thresholds are pinned, so a "
        "sweep's late job measures what a fresh process does",
    ),
    (
        "kernel_compile",
        "seconds Numba spent compiling kernels on their first use on this machine, taken out "
        "of the stage that used them; later runs load the machine code",
    ),
)


def section_efficiency(metrics: dict) -> list[str]:
    """Fertility, Shannon and Rényi efficiency and vocab share used, per held-out set."""
    get = partial(schema.get, metrics)
    lines = ["## Efficiency of the token distribution", ""]
    rows = []
    sides = [s for s in ("own", "other") if get(schema.EFFICIENCY_OF, side=s)]
    for side in sides:
        value = partial(schema.get, metrics, side=side)

        rows.append(
            [
                f"{value(schema.EFFICIENCY_DATASET)} ({'same' if side == 'own' else 'other'} "
                "domain)",
                value(schema.EFFICIENCY_DOCS),
                value(schema.EFFICIENCY_TOKENS),
                fmt(value(schema.EFFICIENCY_FERTILITY), ".2f"),
                fmt(value(schema.EFFICIENCY_SHANNON), ".3f"),
                fmt(value(schema.EFFICIENCY_RENYI), ".3f"),
                f"{value(schema.EFFICIENCY_VOCAB_USED)} "
                f"({fmt(100 * value(schema.EFFICIENCY_VOCAB_USED_SHARE), '.1f')}%)",
            ]
        )
    if not rows:
        return [*lines, "Not measured for this run (it predates the efficiency measures).", ""]
    alpha = get(schema.EFFICIENCY_RENYI_ALPHA, side=sides[0])
    headers = [
        "held-out documents",
        "docs",
        "tokens",
        "tokens/word",
        "Shannon eff.",
        f"Rényi eff. (α={alpha})",
        "vocab used",
    ]
    lines += [table(rows, headers), ""]
    own, other = partial(get, side="own"), partial(get, side="other")
    if get(schema.EFFICIENCY_OF, side="own"):
        lines.append(
            f"On its own domain each word takes {fmt(own(schema.EFFICIENCY_FERTILITY), '.2f')} "
            f"tokens and the text uses {fmt(100 * own(schema.EFFICIENCY_VOCAB_USED_SHARE), '.0f')}"
            f"% of the vocab; the Rényi efficiency of {fmt(own(schema.EFFICIENCY_RENYI), '.3f')} "
            f"(Shannon {fmt(own(schema.EFFICIENCY_SHANNON), '.3f')}) says how evenly the tokens "
            "are used."
        )
        if get(schema.EFFICIENCY_OF, side="other"):
            lines.append(
                f"On {other(schema.EFFICIENCY_DATASET)} a word takes "
                f"{fmt(other(schema.EFFICIENCY_FERTILITY), '.2f')} tokens "
                f"(Rényi efficiency {fmt(other(schema.EFFICIENCY_RENYI), '.3f')})."
            )
    return [*lines, ""]


def section_undertrained(metrics: dict) -> list[str]:
    """Intermediate-only, never-produced and self-unreachable learned tokens, with examples."""
    get = partial(schema.get, metrics)
    lines = ["## Under-trained tokens", ""]
    u = get(schema.UNDERTRAINED)
    if not u:
        return [*lines, "Not measured for this run (it predates the under-trained count).", ""]
    scope = (
        "the whole training file"
        if get(schema.UNDERTRAINED_SAMPLE_WHOLE_FILE)
        else f"the first {get(schema.UNDERTRAINED_SAMPLE_BYTES)} of its "
        f"{get(schema.UNDERTRAINED_SAMPLE_FILE_BYTES)} bytes"
    )
    size = get(schema.UNDERTRAINED_VOCAB_SIZE)
    rows = [
        [
            "intermediate only (count 0 on the training sample)",
            get(schema.UNDERTRAINED_INTERMEDIATE_ONLY),
            fmt(100 * get(schema.UNDERTRAINED_INTERMEDIATE_ONLY_SHARE), ".2f"),
        ],
        [
            "... of which held-out text still produces",
            get(schema.UNDERTRAINED_INTERMEDIATE_ONLY_IN_HELDOUT),
            fmt(
                100 * get(schema.UNDERTRAINED_INTERMEDIATE_ONLY_IN_HELDOUT) / size,
                ".2f",
            ),
        ],
        [
            "never produced (training sample nor held-out)",
            get(schema.UNDERTRAINED_NEVER_PRODUCED),
            fmt(100 * get(schema.UNDERTRAINED_NEVER_PRODUCED_SHARE), ".2f"),
        ],
        [
            "self-unreachable (own text encodes otherwise)",
            get(schema.UNDERTRAINED_SELF_UNREACHABLE),
            fmt(100 * get(schema.UNDERTRAINED_SELF_UNREACHABLE_SHARE), ".2f"),
        ],
    ]
    lines += [
        f"The tokenizer encoded {scope} ({get(schema.UNDERTRAINED_SAMPLE_FILE)}, "
        f"{get(schema.UNDERTRAINED_SAMPLE_BYTES)} bytes) and "
        f"{get(schema.UNDERTRAINED_HELDOUT_DOCS)} held-out documents; of its "
        f"{get(schema.UNDERTRAINED_LEARNED)} learned tokens:",
        "",
        table(rows, ["learned tokens", "count", "% of vocab"], colalign=("left", "right", "right")),
        "",
        f"{get(schema.UNDERTRAINED_UNUSED_BYTES)} of the 256 byte tokens occur in neither text.",
        "",
    ]
    return lines + _undertrained_examples(metrics)


def _undertrained_examples(metrics: dict) -> list[str]:
    """The most striking intermediate-only tokens, as a table and a sentence on the first."""
    get = partial(schema.get, metrics)
    examples = get(schema.UNDERTRAINED_EXAMPLES) or []
    if not examples:
        return []
    rows = [
        [
            e["rank"],
            f"`{e['gpt2']}`",
            clip(repr(e["text"])),
            e["bytes"],
            fmt(e["merge_count"], "d"),
            e["heldout_count"],
            f"`{e['merged_into']}`" if e["merged_into"] else "n/a",
        ]
        for e in examples
    ]
    headers = [
        "merge #",
        "token",
        "text",
        "bytes",
        "merge count",
        "held-out count",
        "first merged into",
    ]
    return [
        "The most striking intermediate-only tokens (highest merge count first): a model "
        "trained on text encoded with this tokenizer would never see them.",
        "",
        table(rows, headers),
        "",
        f"`{get(schema.UNDERTRAINED_EXAMPLE_TOKEN.at(i=0))}` was made from "
        f"{fmt(get(schema.UNDERTRAINED_EXAMPLE_MERGE_COUNT.at(i=0)), 'd')} "
        "pair occurrences and then always absorbed into longer tokens (first into "
        f"`{get(schema.UNDERTRAINED_EXAMPLE_MERGED_INTO.at(i=0))}`).",
        "",
    ]


def section_glossary() -> list[str]:
    """The definitions of the measures the report uses."""
    rows = [[f"**{name}**", text] for name, text in GLOSSARY]
    return ["## Glossary", "", table(rows, ["measure", "definition"]), ""]


def section_sweep_usage(runs: pd.DataFrame, frame: pd.DataFrame) -> list[str]:
    """SWEEP.md: efficiency and under-trained tokens, once per distinct vocab of the sweep.

    `runs` is the sweep's `tidy` frame, `frame` the raw one. Jobs with identical merges have
    identical numbers, so each (dataset, vocab size, merges) is one row. No lines when no job
    recorded these measures (runs made before them).
    """
    eff = f"{schema.EFFICIENCY.column}."
    und = f"{schema.UNDERTRAINED.column}."
    if f"{eff}renyi_efficiency" not in frame and f"{und}intermediate_only" not in frame:
        return []
    raw = frame.set_index("run_dir")
    done = complete(runs).drop_duplicates(["dataset", "vocab_size", "merges_sha256"])

    def cell(run_dir: str, column: str, spec: str, scale: float = 1.0) -> str:
        value = raw.at[run_dir, column] if column in raw else None
        return fmt(None if value is None or pd.isna(value) else scale * value, spec)

    rows = [
        [
            r["dataset"],
            fmt(r["vocab_size"], "d"),
            cell(r["run_dir"], f"{eff}renyi_efficiency", ".3f"),
            cell(r["run_dir"], f"{eff}shannon_efficiency", ".3f"),
            cell(r["run_dir"], f"{eff}fertility", ".2f"),
            cell(r["run_dir"], f"{eff}vocab_used_share", ".1f", 100),
            cell(r["run_dir"], f"{und}intermediate_only", ".0f"),
            cell(r["run_dir"], f"{und}intermediate_only_share", ".2f", 100),
            cell(r["run_dir"], f"{und}never_produced", ".0f"),
        ]
        for _, r in done.iterrows()
    ]
    if not rows:
        return []
    headers = [
        "dataset",
        "vocab",
        "Rényi eff.",
        "Shannon eff.",
        "tokens/word",
        "% vocab used",
        "intermediate only",
        "% of vocab",
        "never produced",
    ]
    return [
        "## Vocab use (own held-out documents; once per distinct vocab)",
        "",
        table(rows, headers),
        "",
        "Definitions are in the glossary of each job's ANALYSIS.md (Rényi α = 2.5).",
        "",
    ]


#: The segmentation methods in the order reports show them, with a short description.
SEGMENTATION_METHODS = {
    "merges": "BPE's merges, by rank (how this tokenizer encodes)",
    "longest_prefix": "the longest vocab token first, left to right (Uzan et al., 2024)",
    "fewest": "the fewest vocab tokens per pretoken (Schmidt et al., 2024, PathPiece)",
}


def section_segmentation(metrics: dict) -> list[str]:
    """The same vocab used three ways on the held-out text: bytes per token, Rényi efficiency
    and bits per byte of each segmentation method (`bpe.evaluation.segmentations`)."""
    get = partial(schema.get, metrics)
    lines = ["## Segmentation: three ways to use this vocab", ""]
    if not get(schema.SEGMENTATION_METHODS):
        why = get(schema.SEGMENTATION_SKIPPED) or (
            "`analysis.segmentations` was empty, or the run predates the measure"
        )
        return [*lines, f"Not measured for this run: {why}.", ""]
    sides = [s for s in ("own", "other") if get(schema.SEG_OF, method="merges", side=s)]
    rows = []
    for method, what in SEGMENTATION_METHODS.items():
        if not get(schema.SEG_OF, method=method, side=sides[0] if sides else "own"):
            continue
        row = [f"`{method}`: {what}"]
        for side in sides:
            at = partial(get, method=method, side=side)
            row += [
                fmt(at(schema.SEG_BYTES_PER_TOKEN), ".3f"),
                fmt(at(schema.SEG_RENYI), ".3f"),
                fmt(at(schema.SEG_BITS_PER_BYTE), ".3f"),
            ]
        rows.append(row)
    headers = ["segmentation"]
    for side in sides:
        name = get(schema.SEG_DATASET, method="merges", side=side)
        headers += [f"{name}: bytes/token", f"{name}: Rényi", f"{name}: bits/byte"]
    merges = get(schema.SEG_BYTES_PER_TOKEN, method="merges", side="own")
    fewest = get(schema.SEG_BYTES_PER_TOKEN, method="fewest", side="own")
    lines += [
        "The trained vocab is kept; only how each pretoken is cut into its tokens changes "
        "(`Tokenizer.encode(text, segmentation=...)`). Bytes per token: higher compresses more. "
        "Rényi efficiency (α=2.5): how evenly the tokens are used. Bits per byte: an "
        f"interpolated Kneser-Ney {get(schema.SEGMENTATION_ORDER)}-gram model of each method's "
        "own ids, fitted on the training sample cut the same way; lower is better.",
        "",
        table(rows, headers),
        "",
    ]
    if merges and fewest:
        lines += [
            f"Cutting into the fewest tokens packs {fmt(100 * (fewest / merges - 1), '+.1f')}% "
            "bytes per token against the merges on the own held-out text: fewer tokens is not "
            "by itself a better segmentation (compare the bits per byte).",
            "",
        ]
    return lines
