"""How a finished run's vocab is used: efficiency on held-out text and under-trained tokens.

What it does: `usage_metrics` encodes a capped sample of the run's training file and the
held-out documents of its own and cross-domain datasets, and returns the metrics.json entries
`efficiency` (per held-out side: fertility, Shannon and Rényi efficiency, vocab share used) and
`undertrained` (intermediate-only, never-produced and self-unreachable learned tokens, with
clipped examples). The formulas live in `bpe.measures`, the counting in `bpe.vocab_stats`.

What it does not do: format anything; a missing file gives null entries and a logged reason.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

from bpe.datasets import Dataset, measured_sides
from bpe.measures import load_documents
from bpe.tokenizer import Tokenizer
from bpe.vocab_stats import (
    DEFAULT_SAMPLE_BYTES,
    distribution_metrics,
    read_training_sample,
    token_counts,
    undertrained_tokens,
)

logger = logging.getLogger(__name__)


def _heldout(ds: Dataset, max_docs: int) -> list[str] | None:
    path = ds.heldout_path
    if path is None or not path.is_file():
        return None
    return load_documents(path, ds.document_separator, max_docs=max_docs) or None


def usage_metrics(
    tokenizer: Tokenizer,
    ds: Dataset,
    *,
    merge_counts: Sequence[int],
    max_docs: int,
    sample_bytes: int = DEFAULT_SAMPLE_BYTES,
) -> dict:
    """The `efficiency` and `undertrained` entries of metrics.json for one run.

    Args:
        tokenizer: the run's tokenizer.
        ds: the run's dataset (training file, held-out file, cross-domain dataset).
        merge_counts: the run's merge counts (ranks the under-trained examples).
        max_docs: held-out documents per dataset, as for compression.
        sample_bytes: at most this many bytes of the training file are encoded (whole
            documents); `undertrained.sample` records what was.
    """
    efficiency: dict[str, dict | None] = {}
    sides = measured_sides(ds)
    own_counts: Counter[int] = Counter()
    for side, dataset in sides:
        docs = _heldout(dataset, max_docs)
        if not docs:
            efficiency[side] = None
            continue
        counts = token_counts(tokenizer, docs)
        if side == "own":
            own_counts = counts
        try:
            efficiency[side] = {
                "dataset": dataset.name,
                **distribution_metrics(tokenizer, docs, counts=counts),
            }
        except ValueError as err:  # e.g. documents of whitespace only
            logger.warning("no efficiency for %s: %s", dataset.name, err)
            efficiency[side] = None

    undertrained = None
    try:
        text, sample = read_training_sample(
            ds.path, max_bytes=sample_bytes, separator=ds.document_separator
        )
    except (FileNotFoundError, UnicodeDecodeError) as err:
        logger.warning("no under-trained tokens: %s", err)
    else:
        train_counts = token_counts(tokenizer, [text])
        undertrained = {
            "sample": sample,
            "heldout_docs": len(_heldout(ds, max_docs) or []),
            **undertrained_tokens(
                tokenizer,
                train_counts=train_counts,
                heldout_counts=own_counts,
                merge_counts=merge_counts,
            ),
        }
    return {"efficiency": efficiency, "undertrained": undertrained}
