"""COMPARE.md: how two or more vocabularies differ, from run directories or GPT-2 style files.

What it does:
    * `load_side`: one side of a comparison, from a run directory (its vocab.json, or the vocab
      rebuilt from merges.txt and the special tokens, which is how a trainer lays it out; its
      held-out documents from the run's dataset config) or from a directory holding a GPT-2
      style `vocab.json` + `merges.txt` (such as data/gpt2; it has no held-out documents);
    * `side_labels`: names for the sides from what differs between the runs (input, split
      pattern, trainer, vocab size, parent), their directory names when nothing does;
    * pure measures over sides: `jaccard`, `merge_divergence` (length of the longest common
      merge prefix, i.e. the index of the first merge that differs), `topk_overlap` (shared
      share of the first k learned tokens by merge rank, for every k);
    * `compare`: every side's tokenizer on every run side's held-out documents (bytes per token,
      Rényi efficiency, token occurrences), then `render_compare` writes the Markdown;
    * `write_compare`: COMPARE.md + `figures/compare_topk_overlap.png` into an output directory;
    * `pairwise_overlap`: a square frame of Jaccard (or shared count, or merge divergence) over
      the runs of a `load_runs` frame, for a heat map across a sweep;
    * `main`: the `bpe-compare` command.

What it does not do: train or change any run; it reads run directories and writes only the
output directory's COMPARE.md and figure.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import pandas as pd
import yaml

from bpe.analysis import figures
from bpe.analysis.markdown import clip, fmt, table
from bpe.corpus.datasets import from_config, input_name, load_named
from bpe.corpus.documents import load_documents
from bpe.formats.gpt2_format import load_merges, load_vocab, render
from bpe.formats.pretrained import special_tokens_of
from bpe.formats.removals_json import Removal, load_removals
from bpe.formats.tokenizer_json import pattern_of_dir
from bpe.measures import RENYI_ALPHA, renyi_efficiency
from bpe.measures.vocab_stats import ordinary_vocab_size, token_counts
from bpe.runs import schema
from bpe.runs.layout import (
    COMPARE_FILE,
    HYDRA_CONFIG,
    HYDRA_DIR,
    MERGES_FILE,
    METRICS_FILE,
    REMOVALS_FILE,
    VOCAB_FILE,
)
from bpe.runs.settings import analysis_setting
from bpe.text.patterns import GPT2_PATTERN, pattern_name
from bpe.tokenizer import Tokenizer
from bpe.util.io import atomic_write_text, check_writable, files_in

logger = logging.getLogger(__name__)

FIGURE = "figures/compare_topk_overlap.png"
#: how COMPARE.md begins: a file starting otherwise was not written by bpe-compare
TITLE = "# Vocabulary comparison: "
#: Examples listed per side of each pair in "Tokens only in one side".
EXAMPLES = 8
#: Token lengths at or above this are one row of the length table.
LONG = 16
#: The k at which the top-k overlap table reads the curve (and the full learned vocab).
TOPK_POINTS = (100, 1000, 5000, 10000)
#: What tells runs apart, in the order a label lists them (see `side_labels`).
LABEL_FACTS = ("input", "pattern", "trainer", "variant", "vocab", "init_from")


@dataclass
class Side:
    """One vocabulary being compared."""

    label: str
    source: str  # the directory's name (no machine path in reports)
    kind: str  # "run" or "GPT-2 style files"
    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    special_tokens: list[str]
    dataset: str | None = None
    #: the run's held-out documents (None for GPT-2 style files)
    heldout: list[str] | None = None
    #: the split pattern its tokenizer.json records (GPT-2's without one)
    pattern: str = GPT2_PATTERN
    #: a run's `LABEL_FACTS`, each as a label shows it (empty for GPT-2 style files)
    facts: dict[str, str] = field(default_factory=dict)
    #: the name of the directory holding it (tells apart runs whose directory names repeat)
    parent: str = ""
    #: a PickyBPE run's removals (`bpe.tokenizer.removals`; empty for every other side)
    removals: tuple[Removal, ...] = ()
    #: the run's recorded `bits_per_byte` (None for GPT-2 style files and older runs)
    bits_per_byte: dict | None = None
    tokenizer: Tokenizer = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.tokenizer = Tokenizer(
            self.vocab,
            self.merges,
            self.special_tokens,
            pattern=self.pattern,
            removals=self.removals,
        )

    @property
    def tokens(self) -> set[bytes]:
        """Every non-special vocab entry (the 256 bytes included), by bytes."""
        specials = {s.encode("utf-8") for s in self.special_tokens}
        return {t for t in self.tokenizer.vocab.values() if t not in specials}

    @property
    def learned(self) -> list[bytes]:
        """Merged tokens in merge-rank order (each once; a PickyBPE side: those it kept)."""
        made = dict.fromkeys(a + b for a, b in self.merges)
        if self.removals:
            kept = set(self.vocab.values())
            return [t for t in made if t in kept]
        return list(made)


def _yaml(path: Path) -> dict:
    if not path.is_file():
        return {}
    return yaml.safe_load(path.read_text("utf-8")) or {}


def _vocab_from_merges(merges: list[tuple[bytes, bytes]], specials: list[str]) -> dict[int, bytes]:
    # the layout every trainer uses: specials, then the 256 bytes, then one id per merge
    vocab = {i: s.encode("utf-8") for i, s in enumerate(specials)}
    vocab.update({len(specials) + b: bytes([b]) for b in range(256)})
    for a, b in merges:
        vocab[len(vocab)] = a + b
    return vocab


def _input_name(run: dict, config: dict) -> str | None:
    """What the run trained on: `run.input_name`, else (older runs) the same rule on the config."""
    if run.get("input_name"):
        return str(run["input_name"])
    ds = config.get("dataset") or {}
    if ds.get("name") and ds.get("path"):
        return input_name(str(ds["name"]), ds["path"])
    return run.get("dataset")


def _run_facts(
    run: dict, metrics: dict, config: dict, *, vocab: dict[int, bytes], pattern: str
) -> dict[str, str]:
    """A run's `LABEL_FACTS` as labels show them, each read from what the run actually used.

    The input is `input_name` (a custom `dataset.path` is `custom-<stem>`, not the config
    group's dataset), the split pattern the one its tokenizer.json records, the vocab size the
    vocab's own (a run that stopped early has fewer tokens than it asked for).
    """
    parent = (metrics.get("init_from") or {}).get("path") or run.get("init_from")
    trainer = run.get("trainer") or (config.get("trainer") or {}).get("name")
    return {
        "input": _input_name(run, config) or "unknown input",
        "pattern": f"{pattern_name(pattern)} split",
        "trainer": str(trainer),
        # runs from before the BPE family trained plain BPE
        "variant": str(schema.get(metrics, schema.VARIANT_NAME, default="bpe")),
        "vocab": f"v{len(vocab)}",
        "init_from": f"from {Path(str(parent)).name}" if parent else "from scratch",
    }


def _lone_label(facts: dict[str, str]) -> str:
    """A run's label when no other run is beside it: what it trained on, and its vocab size."""
    return f"{facts['input']} {facts['vocab']}"


def load_side(path: str | Path, *, label: str | None = None, heldout: bool = True) -> Side:
    """A run directory or a GPT-2 style vocab.json + merges.txt directory, as a `Side`.

    Args:
        label: the name tables use (default: `<input> v<vocab size>` for a run, else the
            directory's name; `side_labels` names several sides so that they differ).
        heldout: also read the run's held-out documents (its `analysis.max_docs` of them).

    Raises:
        FileNotFoundError: the directory has neither metrics.json + merges.txt nor
            vocab.json + merges.txt.
    """
    d = Path(path)
    merges_path = d / MERGES_FILE
    metrics_path = d / METRICS_FILE
    if metrics_path.is_file() and merges_path.is_file():
        metrics = json.loads(metrics_path.read_text("utf-8"))
        run = metrics.get("run") or {}
        config = _yaml(d / HYDRA_DIR / HYDRA_CONFIG)
        merges = load_merges(merges_path)
        vocab_path = d / VOCAB_FILE
        if vocab_path.is_file():
            vocab = load_vocab(vocab_path)
            specials = special_tokens_of(d, vocab, merges)
        else:  # a run that kept only merges.txt: its recorded specials rebuild the vocab
            specials = list(run.get("special_tokens") or [])
            vocab = _vocab_from_merges(merges, specials)
        docs = None
        if heldout:
            ds = (
                from_config(config["dataset"])
                if config.get("dataset")
                else load_named(run["dataset"])
            )
            max_docs = int(analysis_setting(config.get("analysis"), "max_docs"))
            if ds.heldout_path is not None and ds.heldout_path.is_file():
                docs = load_documents(ds.heldout_path, ds.document_separator, max_docs=max_docs)
        pattern = pattern_of_dir(d) or (metrics.get("pattern") or {}).get("regex") or GPT2_PATTERN
        facts = _run_facts(run, metrics, config, vocab=vocab, pattern=pattern)
        removals = ()
        if (d / REMOVALS_FILE).is_file():
            removals = tuple(load_removals(d / REMOVALS_FILE)[0])
        return Side(
            label=label or _lone_label(facts),
            source=d.name,
            kind="run",
            vocab=vocab,
            merges=merges,
            special_tokens=specials,
            dataset=_input_name(run, config),
            heldout=docs or None,
            pattern=pattern,
            facts=facts,
            parent=d.resolve().parent.name,
            removals=removals,
            bits_per_byte=schema.get(metrics, schema.BITS_PER_BYTE_SECTION),
        )
    if (d / VOCAB_FILE).is_file() and merges_path.is_file():
        vocab, merges = load_vocab(d / VOCAB_FILE), load_merges(merges_path)
        return Side(
            label=label or d.name,
            source=d.name,
            kind="GPT-2 style files",
            vocab=vocab,
            merges=merges,
            special_tokens=special_tokens_of(d, vocab, merges),
            parent=d.resolve().parent.name,
        )
    raise FileNotFoundError(
        f"{str(d)!r} is neither a run directory (metrics.json + merges.txt) nor a GPT-2 style "
        "directory (vocab.json + merges.txt); pass a complete run or e.g. data/gpt2"
    )


def side_labels(sides: Sequence[Side], *, given: Sequence[str | None] | None = None) -> list[str]:
    """Short labels that tell the sides apart: only the facts in which the runs differ.

    A given label is kept. GPT-2 style files are named by their directory. A lone run is
    `<input> v<vocab size>`; several runs show the `LABEL_FACTS` that differ between them (e.g.
    `custom-a` vs `custom-b`, or `gpt2 split` vs `cl100k split`), and their directory names when
    none does. Labels that still repeat become directory names, then `<parent>/<directory>`.

    Raises:
        ValueError: `given` does not have one entry per side.
    """
    given = list(given) if given is not None else [None] * len(sides)
    if len(given) != len(sides):
        raise ValueError(f"{len(given)} labels for {len(sides)} directories; pass one each")
    facts = [s.facts for s in sides if s.facts]
    differing = [k for k in LABEL_FACTS if len({f.get(k) for f in facts}) > 1]
    labels = []
    for side, label in zip(sides, given):
        if label:
            labels.append(label)
        elif not side.facts:
            labels.append(side.source)
        elif len(facts) == 1:
            labels.append(_lone_label(side.facts))
        elif differing:
            labels.append(" ".join(side.facts[k] for k in differing))
        else:
            labels.append(side.source)
    for fallback in (lambda s: s.source, lambda s: f"{s.parent}/{s.source}"):
        repeats = Counter(labels)
        labels = [
            fallback(s) if g is None and repeats[lab] > 1 else lab
            for s, g, lab in zip(sides, given, labels)
        ]
    return labels


def jaccard(a: set, b: set) -> float:
    """|A ∩ B| / |A ∪ B| (1.0 for two empty sets).

    >>> jaccard({b"a", b"b"}, {b"b", b"c"})
    0.3333333333333333
    """
    union = len(a | b)
    return len(a & b) / union if union else 1.0


def merge_divergence(a: Sequence, b: Sequence) -> int:
    """Index of the first merge that differs = length of the longest common merge prefix.

    Identical lists give their length; a list that is a prefix of the other gives its length.

    >>> merge_divergence([(b"a", b"b"), (b"c", b"d")], [(b"a", b"b"), (b"e", b"f")])
    1
    >>> merge_divergence([(b"x", b"y")], [(b"a", b"b")]), merge_divergence([1, 2], [1, 2])
    (0, 2)
    """
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def topk_overlap(a: Sequence[bytes], b: Sequence[bytes]) -> list[float]:
    """For k = 1..min(len): |first k of a ∩ first k of b| / k (a and b in merge-rank order).

    >>> topk_overlap([b"th", b"he", b"in"], [b"he", b"th", b"an"])
    [0.0, 1.0, 0.6666666666666666]
    """
    seen_a: set[bytes] = set()
    seen_b: set[bytes] = set()
    shared = 0
    out = []
    for k, (x, y) in enumerate(zip(a, b), start=1):
        seen_a.add(x)
        seen_b.add(y)
        shared += (x in seen_b) + (y in seen_a) - (x == y)
        out.append(shared / k)
    return out


@dataclass
class Comparison:
    """Everything COMPARE.md says, measured before rendering."""

    sides: list[Side]
    #: dataset name -> held-out documents (each run side's, once per dataset)
    heldout: dict[str, list[str]]
    #: (side label, dataset) -> bytes per token
    compression: dict[tuple[str, str], float]
    #: (side label, dataset) -> Rényi efficiency
    efficiency: dict[tuple[str, str], float]
    #: side label -> occurrences of each token (by bytes) over every held-out set
    occurrences: dict[str, Counter[bytes]]


def compare(sides: Sequence[Side]) -> Comparison:
    """Encode every held-out set of the run sides with every side's tokenizer.

    Raises:
        ValueError: fewer than two sides, or two sides with the same label.
    """
    if len(sides) < 2:
        raise ValueError(f"got {len(sides)} side(s); pass at least two directories to compare")
    labels = [s.label for s in sides]
    if len(set(labels)) != len(labels):
        raise ValueError(f"labels {labels!r} repeat; pass distinct runs (or --labels)")
    heldout: dict[str, list[str]] = {}
    for s in sides:
        if s.heldout and s.dataset and s.dataset not in heldout:
            heldout[s.dataset] = s.heldout
    compression, efficiency, occurrences = {}, {}, {}
    for s in sides:
        tok = s.tokenizer
        specials = set(tok.special_tokens.values())
        occ: Counter[bytes] = Counter()
        for name, docs in heldout.items():
            counts = token_counts(tok, docs)
            values = [c for i, c in counts.items() if i not in specials]
            num_bytes = sum(len(d.encode("utf-8")) for d in docs)
            compression[(s.label, name)] = num_bytes / sum(values)
            efficiency[(s.label, name)] = renyi_efficiency(values, ordinary_vocab_size(tok))
            occ.update({tok.vocab[i]: c for i, c in counts.items() if i not in specials})
        occurrences[s.label] = occ
    return Comparison(list(sides), heldout, compression, efficiency, occurrences)


def _tok(token: bytes) -> str:
    return f"`{clip(render(token), 30)}`"


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
        *section_topk(c, figure),
    ]
    extra = "#" * (level - 1)
    return "\n".join(extra + ln if ln.startswith("#") else ln for ln in lines)


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
    for written in (report, figure):
        check_writable(
            written,
            what=f"--out {str(out)!r} ({written.relative_to(out)})",
            inputs=files_in(paths),
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


def pairwise_overlap(runs: pd.DataFrame, *, measure: str = "jaccard") -> pd.DataFrame:
    """A square frame over the runs of a `load_runs` (or `tidy`) frame, for a heat map.

    Args:
        measure: "jaccard" (of the non-special vocabs, by bytes), "shared" (count of shared
            tokens) or "divergence" (length of the common merge prefix).

    Runs without merges.txt (failed early) are left out. Index and columns are run names.

    Raises:
        ValueError: an unknown measure.
    """
    measures = {
        "jaccard": lambda a, b: jaccard(a.tokens, b.tokens),
        "shared": lambda a, b: len(a.tokens & b.tokens),
        "divergence": lambda a, b: merge_divergence(a.merges, b.merges),
    }
    if measure not in measures:
        raise ValueError(f"measure={measure!r} is unknown; choose one of {sorted(measures)}")
    sides = []
    for run_dir in runs["run_dir"]:
        try:
            sides.append(load_side(run_dir, label=Path(run_dir).name, heldout=False))
        except (FileNotFoundError, ValueError) as err:
            logger.warning("leaving %s out of the overlap: %s", run_dir, err)
    names = [s.label for s in sides]
    fn = measures[measure]
    frame = pd.DataFrame(index=names, columns=names, dtype=float)
    for a in sides:
        for b in sides:
            frame.loc[a.label, b.label] = fn(a, b)
    return frame
