"""How two or more vocabularies differ: the measures of COMPARE.md.

What it does (the sides come from `bpe.analysis.compare.sides`: `load_side` reads a run
directory or a GPT-2 style `vocab.json` + `merges.txt` directory, `side_labels` names them by
what differs; COMPARE.md is rendered and written by `bpe.analysis.compare.report`):
    * pure measures over sides: `jaccard`, `merge_divergence` (length of the longest common
      merge prefix, i.e. the index of the first merge that differs), `topk_overlap` (shared
      share of the first k learned tokens by merge rank, for every k);
    * `compare`: every side's tokenizer on every run side's held-out documents (bytes per token,
      Rényi efficiency, token occurrences);
    * `pairwise_overlap`: a square frame of Jaccard (or shared count, or merge divergence) over
      the runs of a `load_runs` frame, for a heat map across a sweep.

What it does not do: train or change any run; it reads run directories and writes only the
output directory's COMPARE.md and figure.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bpe.analysis.compare.sides import Side, load_side
from bpe.measures import renyi_efficiency
from bpe.measures.vocab_stats import ordinary_vocab_size, token_counts

logger = logging.getLogger(__name__)

#: The k at which the top-k overlap table reads the curve (and the full learned vocab).
TOPK_POINTS = (100, 1000, 5000, 10000)


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
    _measure_languages(sides)
    return Comparison(list(sides), heldout, compression, efficiency, occurrences)


def _measure_languages(sides: Sequence[Side]) -> None:
    """Give each side of GPT-2 style files (which record nothing) its language premiums, as
    `bpe-parity` measures them: on the lines the runs recorded theirs on when they agree,
    else on every line."""
    from bpe.measures.languages import languages_metrics

    recorded = {s.languages.get("lines") for s in sides if s.languages and s.kind == "run"}
    lines = next(iter(recorded)) if len(recorded) == 1 else None
    for s in sides:
        if s.languages is None and s.kind != "run":
            s.languages = languages_metrics(s.tokenizer.encode, lines=lines)


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
