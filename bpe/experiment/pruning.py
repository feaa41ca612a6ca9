"""Pruning a run's vocabulary and measuring what it changed: `bpe-prune`'s work.

`prune_run` reads a run directory's tokenizer and its text (the first `train_bytes` of its
training input and its held-out documents, as the run's own analysis read them), counts each
token's use as itself on both (`bpe.measures.vocab_stats.token_counts`), prunes to the vocab size
asked for (`bpe.tokenizer.pruning.prune`), and measures the tokenizer before and after on the
same text: tokens and bytes per token on the held-out documents, bits per byte under a
Kneser-Ney n-gram model of each tokenizer's ids fitted on the training sample, and the share of
the vocab that is intermediate-only (made by a merge, never left by encoding the training
sample). `write_pruned` saves the tokenizer directory and its record, `prune.json`.

What it does not do: choose what to remove (`bpe.tokenizer.pruning`) or write Markdown
(`bpe.analysis.compare.prune_report` renders PRUNE.md from prune.json).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from pathlib import Path

from bpe.corpus.datasets import run_dataset
from bpe.evaluation.measured import measured_docs
from bpe.evaluation.usage import training_sample
from bpe.formats.gpt2_format import render
from bpe.measures.ngram import KneserNey, bits_per_byte
from bpe.measures.vocab_stats import distribution_metrics, token_counts, undertrained_tokens
from bpe.runs.layout import PRUNE_RECORD
from bpe.runs.saved_config import run_config
from bpe.runs.settings import analysis_setting
from bpe.runs.upgrade import read_metrics
from bpe.tokenizer import Tokenizer
from bpe.tokenizer.pruning import prune
from bpe.util.io import atomic_write_text

logger = logging.getLogger(__name__)


def prune_run(
    run_dir: str | Path,
    vocab_size: int,
    *,
    train_bytes: int | None = None,
    max_docs: int | None = None,
    order: int | None = None,
) -> tuple[Tokenizer, dict]:
    """The pruned tokenizer of a run and the record of what pruning removed and changed.

    `train_bytes`, `max_docs` and `order` default to the run's own `analysis` settings
    (`bpb_train_bytes`, `max_docs`, `bpb_order`).
    """
    start = time.perf_counter()
    run_dir = Path(run_dir).resolve()  # `latest` names the run it points to
    tokenizer = Tokenizer.from_pretrained(run_dir)
    config = run_config(run_dir)
    ds = run_dataset(config, read_metrics(run_dir, config=config))
    analysis = config.get("analysis")
    train_bytes = train_bytes or int(analysis_setting(analysis, "bpb_train_bytes"))
    # two samples of the training input, as the run's own analysis read them: the bits-per-byte
    # model's, and the usage sample of its under-trained count (null: the whole file)
    text, sample = training_sample(ds, max_bytes=train_bytes)
    train_docs = [doc for doc in text.split(ds.document_separator) if doc]
    usage_bytes = analysis_setting(analysis, "train_sample_bytes")
    usage_text, _ = training_sample(ds, max_bytes=usage_bytes or 1 << 62)
    own = measured_docs(ds, max_docs=max_docs or int(analysis_setting(analysis, "max_docs")))[0]
    heldout = list(own.docs or [])
    if not heldout:
        raise ValueError(
            f"{run_dir.name}: its dataset {ds.name!r} has no held-out documents to measure "
            "pruning on; pass a run whose dataset has a held-out file"
        )
    usage = token_counts(tokenizer, [usage_text, *heldout])
    pruned, removals = prune(tokenizer, vocab_size=vocab_size, usage=usage)
    order = order or int(analysis_setting(analysis, "bpb_order"))
    before = _measure(tokenizer, train_docs, usage_text, heldout, order=order)
    after = _measure(pruned, train_docs, usage_text, heldout, order=order)
    id_of = {t: i for i, t in tokenizer.vocab.items()}
    record = {
        "source": run_dir.name,
        "dataset": ds.name,
        "vocab_size": {"before": tokenizer.vocab_size, "after": pruned.vocab_size},
        "text": {
            "train_sample": sample,
            "heldout_docs": len(heldout),
            "heldout_bytes": sum(len(d.encode("utf-8")) for d in heldout),
            "usage_sample_bytes": len(usage_text.encode("utf-8")),
            "note": "usage was counted on the usage sample and these held-out documents",
        },
        "order": order,
        "removed": [
            {
                "token": render(r.token),
                "bytes": len(r.token),
                "parts": [render(p) for p in r.parts],
                "usage": usage.get(id_of[r.token], 0),
            }
            for r in removals
        ],
        "before": before,
        "after": after,
        "seconds": round(time.perf_counter() - start, 3),
    }
    logger.info(
        "pruned %s from %d to %d entries: held-out tokens %d -> %d, bits per byte %.4f -> %.4f",
        run_dir.name,
        tokenizer.vocab_size,
        pruned.vocab_size,
        before["heldout_tokens"],
        after["heldout_tokens"],
        before["bits_per_byte"],
        after["bits_per_byte"],
    )
    return pruned, record


def _measure(
    tokenizer: Tokenizer, train: list[str], usage_text: str, heldout: list[str], *, order: int
) -> dict:
    """Held-out tokens, bytes per token, Rényi efficiency, bits per byte and the
    intermediate-only share."""
    train_ids = [tokenizer.encode(doc) for doc in train]
    held_ids = [tokenizer.encode(doc) for doc in heldout]
    sizes = [len(doc.encode("utf-8")) for doc in heldout]
    model = KneserNey.fit(train_ids, vocab_size=tokenizer.max_token_id + 1, order=order)
    scored = bits_per_byte(model, held_ids, sizes, splits=1)
    under = undertrained_tokens(
        tokenizer,
        train_counts=token_counts(tokenizer, [usage_text]),
        heldout_counts=Counter(i for ids in held_ids for i in ids),
        top_k=0,
    )
    tokens = sum(map(len, held_ids))
    counts = Counter(i for ids in held_ids for i in ids)
    return {
        "vocab_size": tokenizer.vocab_size,
        "heldout_tokens": tokens,
        "bytes_per_token": round(sum(sizes) / tokens, 4),
        "renyi_efficiency": distribution_metrics(tokenizer, heldout, counts=counts)[
            "renyi_efficiency"
        ],
        "bits_per_byte": round(scored["bits_per_byte"], 4),
        "intermediate_only": under["intermediate_only"],
        "intermediate_only_share": under["intermediate_only_share"],
    }


def write_pruned(pruned: Tokenizer, record: dict, out_dir: Path) -> list[Path]:
    """The pruned tokenizer's files and `prune.json` in `out_dir` (created)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = pruned.save_pretrained(out_dir)
    record_path = out_dir / PRUNE_RECORD
    atomic_write_text(record_path, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return [*paths, record_path]
