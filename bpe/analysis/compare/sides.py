"""The sides of a comparison: a run directory or a GPT-2 style vocab.json + merges.txt
directory, loaded as a `Side` (its vocab, merges, special tokens, held-out documents and
facts), and labels that tell sides apart by what differs between them.

What it does not do: compare sides (`bpe.analysis.compare.measures`) or write COMPARE.md
(`bpe.analysis.compare.report`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bpe.corpus.datasets import run_dataset
from bpe.corpus.documents import load_documents
from bpe.formats.pretrained import open_tokenizer_dir
from bpe.formats.removals_json import Removal
from bpe.formats.tokenizer_json import pattern_of_dir
from bpe.runs import schema
from bpe.runs.layout import (
    MERGES_FILE,
    METRICS_FILE,
    VOCAB_FILE,
)
from bpe.runs.saved_config import run_config
from bpe.runs.settings import analysis_setting
from bpe.runs.upgrade import read_metrics
from bpe.text.patterns import GPT2_PATTERN, bounded_pattern, pattern_name
from bpe.tokenizer import Tokenizer

logger = logging.getLogger(__name__)


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
    #: a BoundlessBPE run's supermerges (`bpe.tokenizer.superwords`; empty otherwise)
    supermerges: tuple[int, ...] = ()
    #: the protected characters' regex a run recorded (`bpe.text.protect`), or None
    protect: str | None = None
    #: the run's recorded `bits_per_byte` (None for GPT-2 style files and older runs)
    bits_per_byte: dict | None = None
    #: the run's recorded `segmentation` measures (None for GPT-2 style files and older runs)
    segmentation: dict | None = None
    #: the run's recorded `languages` measure (None for GPT-2 style files and older runs)
    languages: dict | None = None
    tokenizer: Tokenizer = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.tokenizer = Tokenizer(
            self.vocab,
            self.merges,
            self.special_tokens,
            pattern=self.pattern,
            removals=self.removals,
            supermerges=self.supermerges,
            protect=self.protect,
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


def _run_facts(metrics: dict, *, vocab: dict[int, bytes], pattern: str) -> dict[str, str]:
    """A run's `LABEL_FACTS` as labels show them, each read from what the run actually used.

    The input is `input_name` (a custom `dataset.path` is `custom-<stem>`, not the config
    group's dataset), the split pattern the one its tokenizer.json records, the vocab size the
    vocab's own (a run that stopped early has fewer tokens than it asked for).
    """
    parent = schema.get(metrics, schema.INIT_FROM_PATH) or schema.get(metrics, schema.INIT_FROM_ARG)
    return {
        "input": str(schema.get(metrics, schema.INPUT_NAME)),
        "pattern": f"{pattern_name(pattern)} split",
        "trainer": str(schema.get(metrics, schema.TRAINER)),
        "variant": str(schema.get(metrics, schema.VARIANT_NAME)),
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
            vocab.json + merges.txt, or a run directory lacks its vocab.json.
    """
    d = Path(path)
    merges_path = d / MERGES_FILE
    metrics_path = d / METRICS_FILE
    if metrics_path.is_file() and merges_path.is_file():
        config = run_config(d)
        metrics = read_metrics(d, config=config)  # today's schema (`bpe.runs.upgrade`)
        # the one opener: specials, history, protected chars, the files checked as saved
        opened = open_tokenizer_dir(d, what="run directory", own_pattern=False)
        vocab, merges, specials = opened.vocab, opened.merges, opened.special_tokens
        docs = None
        if heldout:
            ds = run_dataset(config, metrics)
            max_docs = int(analysis_setting(config.get("analysis"), "max_docs"))
            if ds.heldout_path is not None and ds.heldout_path.is_file():
                docs = load_documents(ds.heldout_path, ds.document_separator, max_docs=max_docs)
        recorded = pattern_of_dir(d) or schema.get(metrics, schema.PATTERN_REGEX)
        pattern = bounded_pattern(recorded, source=str(d))
        facts = _run_facts(metrics, vocab=vocab, pattern=pattern)
        return Side(
            label=label or _lone_label(facts),
            source=d.name,
            kind="run",
            vocab=vocab,
            merges=merges,
            special_tokens=specials,
            dataset=schema.get(metrics, schema.INPUT_NAME),
            heldout=docs or None,
            pattern=pattern,
            facts=facts,
            parent=d.resolve().parent.name,
            removals=opened.removals,
            supermerges=opened.supermerges,
            protect=opened.protect,
            bits_per_byte=schema.get(metrics, schema.BITS_PER_BYTE_SECTION),
            segmentation=schema.get(metrics, schema.SEGMENTATION),
            languages=schema.get(metrics, schema.LANGUAGES),
        )
    if (d / VOCAB_FILE).is_file() and merges_path.is_file():
        opened = open_tokenizer_dir(d, what="directory", own_pattern=False)
        return Side(
            label=label or d.name,
            source=d.name,
            kind="GPT-2 style files",
            vocab=opened.vocab,
            merges=opened.merges,
            special_tokens=opened.special_tokens,
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
