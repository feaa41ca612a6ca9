"""How a finished run's vocab is used: efficiency on held-out text and under-trained tokens.

What it does: `usage_metrics` encodes a capped sample of the run's training file and the
measured documents of its own and cross-domain datasets (read once by
`bpe.evaluation.measured.measured_docs`: the held-out file, or the input's last documents,
held out of training, when there is none), and returns the metrics.json entries
`efficiency` (per held-out side: fertility, Shannon and Rényi efficiency, vocab share used) and
`undertrained` (intermediate-only, never-produced and self-unreachable learned tokens, with
clipped examples). The formulas live in `bpe.measures`, the counting in `bpe.measures.vocab_stats`.

What it does not do: format anything; a missing file gives null entries and a logged reason.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from bpe.corpus.datasets import Dataset
from bpe.corpus.documents import head_text
from bpe.corpus.files import Stop
from bpe.measures.vocab_stats import (
    DEFAULT_SAMPLE_BYTES,
    distribution_metrics,
    token_counts,
    undertrained_tokens,
)
from bpe.tokenizer import Tokenizer

logger = logging.getLogger(__name__)


class MeasuredSide(Protocol):
    """One measured side (`bpe.evaluation.measured.MeasuredSide` is one)."""

    side: str
    dataset: Dataset
    docs: list[str] | None


def training_sample(ds: Dataset, *, max_bytes: int, stop: Stop | None = None) -> tuple[str, dict]:
    """The first whole documents of a run's training input, up to `max_bytes`, joined by the
    document separator, and what they are (`bpe.corpus.documents.head_text`: the same for a
    text file as for records or files). With `stop` (documents held out of training), none
    past it: the sample never holds a held-out document."""
    corpus = ds.corpus() if stop is None else dataclasses.replace(ds.corpus(), stop=stop)
    return head_text(corpus, ds.document_separator, max_bytes=max_bytes)


def usage_metrics(
    tokenizer: Tokenizer,
    ds: Dataset,
    measured: Sequence[MeasuredSide],
    *,
    merge_counts: Sequence[int],
    sample_bytes: int = DEFAULT_SAMPLE_BYTES,
    stop: Stop | None = None,
) -> dict:
    """The `efficiency` and `undertrained` entries of metrics.json for one run.

    Args:
        tokenizer: the run's tokenizer.
        ds: the run's dataset (its training file is sampled).
        measured: the documents of each side (`side`, `dataset`, `docs`), own side first.
        merge_counts: the run's merge counts (ranks the under-trained examples).
        sample_bytes: at most this many bytes of the training file are encoded (whole
            documents); `undertrained.sample` records what was.
        stop: where the documents held out of training begin (the sample stops there).
    """
    efficiency: dict[str, dict | None] = {}
    own_counts: Counter[int] = Counter()
    own_docs = 0
    for m in measured:
        if not m.docs:
            efficiency[m.side] = None
            continue
        counts = token_counts(tokenizer, m.docs)
        if m.side == "own":
            own_counts, own_docs = counts, len(m.docs)
        try:
            efficiency[m.side] = {
                "dataset": m.dataset.name,
                **distribution_metrics(tokenizer, m.docs, counts=counts),
            }
        except ValueError as err:  # e.g. documents of whitespace only
            logger.warning("no efficiency for %s: %s", m.dataset.name, err)
            efficiency[m.side] = None

    undertrained = None
    try:
        text, sample = training_sample(ds, max_bytes=sample_bytes, stop=stop)
    except (FileNotFoundError, UnicodeDecodeError) as err:
        logger.warning("no under-trained tokens: %s", err)
    else:
        train_counts = token_counts(tokenizer, [text])
        undertrained = {
            "sample": sample,
            "heldout_docs": own_docs,
            **undertrained_tokens(
                tokenizer,
                train_counts=train_counts,
                heldout_counts=own_counts,
                merge_counts=merge_counts,
            ),
        }
    return {"efficiency": efficiency, "undertrained": undertrained}
