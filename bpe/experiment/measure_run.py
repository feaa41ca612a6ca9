"""What a finished training run is measured on: its vocab, and its tokenizer on held-out text.

What it does:
    * `vocab_metrics`: the longest tokens (GPT-2 rendering and decoded text), the distribution of
      token lengths, and what the learned tokens are made of (whole words, numbers, punctuation,
      whitespace, partial UTF-8, mixed), as shares the report turns into a judgement;
    * `corpus_metrics`: compression ratio (bytes per token) on held-out documents of the run's
      own dataset and of the other dataset, encode throughput and the Pile projection, each
      next to GPT-2's tokenizer on the same documents.

What it does not do: format anything; missing inputs give null values plus a logged reason.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

import regex

from bpe.datasets import Dataset, load_named
from bpe.gpt2_format import render

logger = logging.getLogger(__name__)

_KINDS = (
    ("word", regex.compile(r"^ ?\p{L}+$")),
    ("number", regex.compile(r"^ ?\p{N}+$")),
    ("punctuation", regex.compile(r"^ ?[^\s\p{L}\p{N}]+$")),
    ("whitespace", regex.compile(r"^\s+$")),
)


def token_kind(token: bytes) -> str:
    """Classify a token by what its text is made of.

    >>> [token_kind(t) for t in (b" the", b"ing", b"2024", b"!!", b"\\n\\n", b"\\xe6", b"a.")]
    ['word', 'word', 'number', 'punctuation', 'whitespace', 'partial_utf8', 'mixed']
    """
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        return "partial_utf8"
    for name, pattern in _KINDS:
        if pattern.match(text):
            return name
    return "mixed"


def vocab_metrics(
    vocab: dict[int, bytes], special_tokens: Sequence[str], *, num_bytes_tokens: int, top_k: int
) -> dict:
    """Longest tokens, token length histogram and token kinds of the learned (merged) tokens."""
    first_learned = len(special_tokens) + num_bytes_tokens
    learned = {i: t for i, t in vocab.items() if i >= first_learned}
    ordered = sorted(learned.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:top_k]
    longest = [
        {
            "id": i,
            "bytes": len(tok),
            "gpt2": render(tok),
            "text": tok.decode("utf-8", errors="replace"),
        }
        for i, tok in ordered
    ]
    lengths = Counter(len(t) for i, t in vocab.items() if i >= len(special_tokens))
    kinds = Counter(token_kind(t) for t in learned.values())
    total = max(len(learned), 1)
    leading_space = sum(1 for t in learned.values() if t.startswith(b" "))
    return {
        "longest_tokens": longest,
        "token_lengths": {str(k): lengths[k] for k in sorted(lengths)},
        "token_kinds": {
            name: round(kinds.get(name, 0) / total, 4)
            for name in ("word", "number", "punctuation", "whitespace", "partial_utf8", "mixed")
        },
        "leading_space_share": round(leading_space / total, 4),
        "learned_tokens": len(learned),
    }


def _docs(ds: Dataset, max_docs: int) -> list[str] | None:
    from bpe.measures import load_documents

    path = ds.heldout_path
    if path is None or not path.is_file():
        logger.warning("dataset %s has no held-out file at %s: skipping it", ds.name, path)
        return None
    return load_documents(path, ds.document_separator, max_docs=max_docs)


def corpus_metrics(
    tokenizer,
    ds: Dataset,
    *,
    max_docs: int,
    throughput_seconds: float,
    gpt2_baseline: bool,
) -> dict:
    """Compression on own and other held-out documents, throughput and Pile projection."""
    from bpe.measures import compression_ratio, gpt2_tokenizer, measure_throughput, pile_projection

    gpt2 = None
    if gpt2_baseline:
        try:
            gpt2 = gpt2_tokenizer()
        except FileNotFoundError as err:
            logger.warning("GPT-2 baseline unavailable: %s", err)

    compression: dict[str, dict | None] = {}
    own_docs = None
    sides = [("own", ds)]
    if ds.other:
        try:
            sides.append(("other", load_named(ds.other)))
        except ValueError as err:
            logger.warning("other dataset unavailable: %s", err)
    for side, dataset in sides:
        docs = _docs(dataset, max_docs)
        if side == "own":
            own_docs = docs
        if not docs:
            compression[side] = None
            continue
        compression[side] = {
            "dataset": dataset.name,
            "docs": len(docs),
            "bytes": sum(len(d.encode("utf-8")) for d in docs),
            "ratio": round(compression_ratio(tokenizer, docs), 4),
            "gpt2_ratio": round(compression_ratio(gpt2, docs), 4) if gpt2 else None,
        }

    throughput = None
    if own_docs:
        ours = measure_throughput(tokenizer, own_docs, min_seconds=throughput_seconds)
        throughput = {
            "bytes_per_second": round(ours["bytes_per_second"], 1),
            "first_pass_bytes_per_second": round(ours["first_pass_bytes_per_second"], 1),
            "pile_hours": round(pile_projection(ours["bytes_per_second"])["hours"], 2),
            "gpt2_bytes_per_second": None,
            "gpt2_pile_hours": None,
        }
        if gpt2:
            base = measure_throughput(gpt2, own_docs, min_seconds=throughput_seconds)
            throughput["gpt2_bytes_per_second"] = round(base["bytes_per_second"], 1)
            throughput["gpt2_pile_hours"] = round(
                pile_projection(base["bytes_per_second"])["hours"], 2
            )
    return {"compression": compression, "throughput": throughput}
