"""metrics.json's `segmentation`: the run's vocabulary used three ways on the same held-out text.

For each segmentation method (`bpe.tokenizer.segmentation`: BPE's `merges`, `longest_prefix`,
`fewest`) the run's tokenizer encodes the training sample and each measured side's documents
with that method, and three numbers say what the method gives: bytes per token (compression),
the Rényi efficiency of its token distribution (`bpe.measures.renyi_efficiency`, how evenly the
vocab is used) and bits per byte under an interpolated Kneser-Ney n-gram model of its own ids
(fitted on the training sample encoded the same way, `bpe.measures.ngram`). The `merges` row
is the run's own: its bits per byte equal the `bits_per_byte` section's.

What it does not do: choose the run's segmentation (training is the same for all three), or
write reports (`bpe.analysis` reads this section).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from bpe.corpus.datasets import Dataset
from bpe.corpus.files import Stop
from bpe.evaluation.measured import MeasuredSide
from bpe.evaluation.usage import training_sample
from bpe.measures import RENYI_ALPHA
from bpe.measures.ngram import KneserNey, bits_per_byte
from bpe.measures.vocab_stats import distribution_metrics
from bpe.tokenizer import Tokenizer
from bpe.tokenizer.segmentation import SEGMENTATIONS, check_segmentation

logger = logging.getLogger(__name__)


@dataclass
class NgramSample:
    """The training documents a run's n-gram models are fitted on (the first `train_bytes`
    of its input, never past `stop`), read once, and each segmentation's models of one
    tokenizer (the run's) fitted once:
    the `bits_per_byte` section and the `merges` row here share one model.

    `sample` says what was read (`bpe.evaluation.usage.training_sample`), `read_seconds`
    how long that took.
    """

    docs: list[str]
    sample: dict
    order: int
    read_seconds: float = 0.0
    _fitted: dict[str, tuple[KneserNey, KneserNey] | None] = field(default_factory=dict, repr=False)

    @classmethod
    def read(
        cls, ds: Dataset, *, train_bytes: int, order: int, stop: Stop | None = None
    ) -> NgramSample | None:
        """The sample of `ds`'s training input, or None (logged) when it cannot be read."""
        start = time.perf_counter()
        try:
            text, sample = training_sample(ds, max_bytes=train_bytes, stop=stop)
        except (FileNotFoundError, UnicodeDecodeError) as err:
            logger.warning("no n-gram model (bits per byte, segmentation measures): %s", err)
            return None
        docs = [doc for doc in text.split(ds.document_separator) if doc]
        return cls(docs, sample, order, time.perf_counter() - start)

    def models(
        self, tokenizer: Tokenizer, method: str = "merges"
    ) -> tuple[KneserNey, KneserNey] | None:
        """The order-`order` model and a unigram model of the tokenizer's ids of the sample
        cut by `method`; None when the sample encodes to nothing."""
        if method not in self._fitted:
            train = [tokenizer.encode(doc, segmentation=method) for doc in self.docs]
            size = tokenizer.max_token_id + 1  # the uniform base covers every id
            self._fitted[method] = (
                (
                    KneserNey.fit(train, vocab_size=size, order=self.order),
                    KneserNey.fit(train, vocab_size=size, order=1),
                )
                if any(train)
                else None
            )
        return self._fitted[method]


def segmentation_metrics(
    tokenizer: Tokenizer,
    measured: list[MeasuredSide],
    ngram: NgramSample | None,
    *,
    methods: Sequence[str] = SEGMENTATIONS,
) -> dict | None:
    """Per method and measured side: bytes per token, Rényi efficiency and bits per byte.

    Returns `{"methods": {method: {side: {...} or None}}, "order", "alpha", "train_bytes",
    "seconds"}`, or None (logged) without methods, or without a training sample that holds
    text (`ngram`).
    """
    methods = [check_segmentation(m) for m in methods]
    if not methods or ngram is None:
        return None
    start = time.perf_counter()
    out: dict = {}
    try:
        for method in methods:
            tokenizer.encode("", segmentation=method)  # builds the method: refuses a vocab
    except ValueError as err:  # of one repeated string, whose tokens are too long
        logger.warning("no segmentation measures: %s", err)
        return {"methods": {}, "skipped": str(err)}
    for method in methods:
        models = ngram.models(tokenizer, method)
        if models is None:
            logger.warning("no segmentation measures: the training sample holds no text")
            return None
        out[method] = {m.side: _side(tokenizer, m, method, models[0]) for m in measured}
    result = {
        "methods": out,
        "skipped": None,
        "order": ngram.order,
        "alpha": RENYI_ALPHA,
        "train_bytes": ngram.sample.get("bytes"),
        "seconds": round(time.perf_counter() - start, 3),
    }
    own = {k: (v.get("own") or {}).get("bytes_per_token") for k, v in out.items()}
    logger.info("bytes per token on own held-out text, by segmentation: %s", own)
    return result


def _side(tokenizer: Tokenizer, m: MeasuredSide, method: str, model: KneserNey) -> dict | None:
    """One side's numbers under one method (None: the side has no documents)."""
    if not m.docs:
        return None
    ids = [tokenizer.encode(doc, segmentation=method) for doc in m.docs]
    sizes = [len(doc.encode("utf-8")) for doc in m.docs]
    scored = bits_per_byte(model, ids, sizes, splits=1)
    counts = Counter(i for doc in ids for i in doc)
    # the efficiency section's measure (specials left out), on this method's counts
    spread = distribution_metrics(tokenizer, m.docs, counts=counts)
    tokens = spread["tokens"]
    return {
        "dataset": m.dataset.name,
        "docs": len(m.docs),
        "bytes": sum(sizes),
        "tokens": tokens,
        "bytes_per_token": round(sum(sizes) / tokens, 4) if tokens else None,
        "renyi_efficiency": spread["renyi_efficiency"],
        "bits_per_byte": round(scored["bits_per_byte"], 4),
    }
