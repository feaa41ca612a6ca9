"""What a finished training run is measured on: its vocab, and its tokenizer on held-out text.

What it does:
    * `vocab_metrics`: the longest tokens (length, kind, and a preview of at most
      `PREVIEW_BYTES` of their GPT-2 rendering and decoded text), the distribution of token
      lengths, and what the learned tokens are made of (`bpe.measures.TOKEN_KINDS`), as shares
      the report turns into a judgement;
    * `corpus_metrics`: compression ratio (bytes per token) on held-out documents of the run's
      own dataset and of its cross-domain dataset, encode throughput and the Pile projection,
      each next to GPT-2's tokenizer on the same documents. An input without a held-out file
      (a custom `dataset.path`) is measured on its last documents, which the run held out of
      training (`bpe.corpus.datasets.Dataset.holdout`); with `heldout_fraction=0` (or
      nothing to hold out) on the input's tail, which training saw. `compression.own.source`
      and `seen_in_training` say which;
    * `evaluate`: both, for a `TrainResult` and the run's `analysis` config, plus the sha256 of
      the corpus and held-out files (`bpe.encode.lineage`), how many held-out pretokens the
      tiktoken export encodes differently (`bpe.formats.exports.tiktoken_mismatches`), and how the
      vocab is used (`bpe.evaluation.usage`: efficiency and under-trained tokens);
    * `bits_per_byte_metrics`: bits per byte of the held-out text under a Kneser-Ney n-gram
      model of the run's ids (`bpe.measures.ngram`), a model-side measure that, unlike
      per-token loss, compares across vocabularies.

Cost: hostile corpora (`'a' * 10_000_000`) learn tokens of megabytes, so nothing here is
quadratic or proportional to the longest token times the vocab: previews are clipped (full
bytes stay in vocab.json), the length histogram has one entry per distinct length, and each
token is classified once (linear in the vocab's bytes, as writing vocab.json is).

What it does not do: format anything; missing inputs give null values plus a logged reason.
"""

from __future__ import annotations

import codecs
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from bpe.corpus.datasets import (
    Dataset,
)
from bpe.corpus.documents import Holdout
from bpe.encode.lineage import dataset_lineage
from bpe.evaluation.measured import MeasuredSide, measured_docs
from bpe.evaluation.segmentations import NgramSample, segmentation_metrics
from bpe.evaluation.usage import usage_metrics
from bpe.formats.exports import tiktoken_export_refusal, tiktoken_mismatches
from bpe.formats.gpt2_format import render
from bpe.measures import (
    TOKEN_KINDS,
    compression_ratio,
    gpt2_tokenizer,
    measure_throughput,
    merge_support,
    pile_projection,
    token_kind,
)
from bpe.measures.languages import languages_metrics
from bpe.measures.ngram import DEFAULT_SPLITS, bits_per_byte
from bpe.pipeline import TrainResult
from bpe.runs.settings import ANALYSIS_DEFAULTS, analysis_setting
from bpe.tokenizer import Tokenizer

logger = logging.getLogger(__name__)

#: Bytes of a token shown in metrics.json and reports; longer ones are marked `clipped`.
PREVIEW_BYTES = 64
#: Training-file bytes the bits-per-byte n-gram model is fitted on (`analysis.bpb_train_bytes`):
#: the whole bundled samples, and about 2 s of fitting and scoring.
DEFAULT_BPB_TRAIN_BYTES = ANALYSIS_DEFAULTS["bpb_train_bytes"]


def evaluate(
    result: TrainResult,
    ds: Dataset,
    analysis: Mapping,
    *,
    holdout: Holdout | None = None,
    kernels_for: Callable[[str], object] | None = None,
) -> dict:
    """Every measure of a trained run, as the metrics.json keys they are stored under.

    Args:
        result: what training produced.
        ds: the run's dataset (its held-out file and cross-domain dataset are measured).
        analysis: the run's `analysis` config (`longest_tokens`, `max_docs`,
            `throughput_seconds`, `gpt2_baseline`, `train_sample_bytes`, `bpb_train_bytes`,
            `bpb_order`); missing keys take their defaults.
        holdout: the input's last documents that training did not read
            (`bpe.corpus.datasets.Dataset.holdout`), when the dataset has no held-out
            file: the own side is measured on them, and the training samples stop before them.
        kernels_for: called with a way of encoding (`bpe.tokenizer.warm.WAYS`) just before
            the first encode that way (the runner waits there for the helper compiling its
            kernels, `bpe.experiment.compile_ahead`).
    """
    out = vocab_metrics(
        result.vocab,
        result.special_tokens,
        top_k=int(analysis_setting(analysis, "longest_tokens")),
        merges=result.merges,
        merge_counts=result.merge_counts,
    )
    out["merge_support"] = merge_support(
        result.merge_counts,
        unique_pretokens=result.pretokenized.num_unique,
        base=256 + len(result.special_tokens),
    )
    tokenizer = result.tokenizer()
    measured = measured_docs(
        ds, max_docs=int(analysis_setting(analysis, "max_docs")), holdout=holdout
    )
    stop = None if holdout is None else holdout.stop
    ready = kernels_for or (lambda way: None)
    ready("merges")
    ready("replay")  # a PickyBPE tokenizer encodes by replaying its history
    out.update(
        corpus_metrics(
            tokenizer,
            measured,
            throughput_seconds=float(analysis_setting(analysis, "throughput_seconds")),
            gpt2_baseline=bool(analysis_setting(analysis, "gpt2_baseline")),
        )
    )
    # Lineage (sha256 of the corpus and held-out files) and the tiktoken export's agreement.
    # training hashed the input when it used the pretoken cache: reuse it, do not read twice
    out["lineage"] = dataset_lineage(
        ds,
        input_sha256=result.input_sha256,
        input_seconds=result.pretoken_cache.get("hash_seconds"),
        manifest=result.input_manifest,
        records=result.pretokenized.records,
    )
    # every measure below reads the same documents, read once here
    texts = [doc for side in measured for doc in side.docs or ()]
    refusal = tiktoken_export_refusal(tokenizer)
    out["tiktoken"] = {
        "heldout": [side.label for side in measured if side.docs],
        **(tiktoken_mismatches(tokenizer, texts) if refusal is None else _not_exported(refusal)),
    }
    sample_bytes = analysis_setting(analysis, "train_sample_bytes")
    out.update(
        usage_metrics(
            tokenizer,
            ds,
            measured,
            merge_counts=result.merge_counts,
            stop=stop,
            **({} if sample_bytes is None else {"sample_bytes": int(sample_bytes)}),
        )
    )
    # one training sample, and one model per segmentation, for both measures that fit one
    ngram = NgramSample.read(
        ds,
        train_bytes=int(analysis_setting(analysis, "bpb_train_bytes")),
        order=int(analysis_setting(analysis, "bpb_order")),
        stop=stop,
    )
    out["bits_per_byte"] = bits_per_byte_metrics(tokenizer, ds, measured, ngram)
    ready("cut")
    out.update(_usage_of_the_vocab(tokenizer, measured, analysis, ngram))
    if result.init_from is not None:
        out["init_from"] = {
            **result.init_from,
            **parent_comparison(tokenizer, result, measured),
        }
    return out


def _usage_of_the_vocab(
    tokenizer: Tokenizer,
    measured: list[MeasuredSide],
    analysis: Mapping,
    ngram: NgramSample | None,
) -> dict:
    """metrics.json's `segmentation` (the vocab cut three ways on the held-out text) and
    `languages` (what the same sentences cost in each language, next to GPT-2)."""
    out = {}
    out["segmentation"] = segmentation_metrics(
        tokenizer, measured, ngram, methods=list(analysis_setting(analysis, "segmentations"))
    )
    out["languages"] = languages_metrics(
        tokenizer.encode,
        lines=analysis_setting(analysis, "language_lines"),
        gpt2_encode=gpt2_tokenizer().encode
        if analysis_setting(analysis, "gpt2_baseline")
        else None,
    )
    return out


def _not_exported(reason: str) -> dict:
    """The `tiktoken` section of a run whose tokenizer cannot be exported (PickyBPE)."""
    return {
        "pretokens": None,
        "unique_pretokens": None,
        "mismatches": None,
        "unique_mismatches": None,
        "first": None,
        "not_exported": reason,
    }


def bits_per_byte_metrics(
    tokenizer: Tokenizer, ds: Dataset, measured: list[MeasuredSide], ngram: NgramSample | None
) -> dict | None:
    """metrics.json's `bits_per_byte`: a Kneser-Ney n-gram model of the run's ids, per side.

    The model (`bpe.measures.ngram`) is fitted on the tokenizer's ids of `ngram`'s training
    sample (the first `bpb_train_bytes` of the training file, whole documents, never past
    where the held-out documents of an input without held-out file begin), and a unigram
    model beside it; both score each measured side's documents. Returns `model` (order,
    discounts per order, the training sample and its tokens, seconds) and, per side, the bits
    per byte with its spread over `DEFAULT_SPLITS` splits and the unigram bits per byte; None
    (logged) when the training file cannot be read or holds no text.
    """
    if ngram is None:
        return None
    start = time.perf_counter()
    models = ngram.models(tokenizer)
    if models is None:
        logger.warning("no bits per byte: the training sample of %s holds no text", ds.name)
        return None
    model, unigram = models
    order, vocab_size = ngram.order, model.vocab_size
    out: dict = {}
    for m in measured:
        if not m.docs:
            out[m.side] = None
            continue
        ids = [tokenizer.encode(doc) for doc in m.docs]
        sizes = [len(doc.encode("utf-8")) for doc in m.docs]
        scored = bits_per_byte(model, ids, sizes)
        base = bits_per_byte(unigram, ids, sizes, splits=1)
        spread = scored["splits"]
        out[m.side] = {
            "dataset": m.dataset.name,
            "source": m.origin.get("source"),
            "seen_in_training": m.origin.get("seen_in_training"),
            "docs": scored["docs"],
            "bytes": scored["bytes"],
            "tokens": scored["tokens"],
            "bits_per_byte": round(scored["bits_per_byte"], 4),
            "bits_per_token": round(scored["bits_per_token"], 4),
            "unigram_bits_per_byte": round(base["bits_per_byte"], 4),
            "splits": {
                "values": [round(v, 4) for v in spread["values"]],
                "min": round(spread["min"], 4),
                "max": round(spread["max"], 4),
                "std": round(spread["std"], 4),
            },
        }
    out["model"] = {
        "kind": "interpolated Kneser-Ney",
        "order": order,
        "discounts": [round(d, 4) for d in model.discounts[1:]],
        "vocab_size": vocab_size,
        "train": {**ngram.sample, "docs": len(ngram.docs), "tokens": model.train_tokens},
        "splits": DEFAULT_SPLITS,
        "seconds": round(ngram.read_seconds + time.perf_counter() - start, 3),
    }
    named = {m.side: _side_name(m) for m in measured}
    logger.info(
        "bits per byte of this tokenizer (%d-gram Kneser-Ney on %d training tokens): %s",
        order,
        model.train_tokens,
        ", ".join(f"{named[k]} {v['bits_per_byte']}" for k, v in out.items() if k != "model" and v),
    )
    return out


def _side_name(m: MeasuredSide) -> str:
    """How a log line names a measured side: `own held-out text (tinystories_sample)`,
    `other-domain held-out text (owt_sample)`, or the input's tail."""
    seen = m.origin.get("seen_in_training")
    what = "held-out text"
    if seen:
        tail = m.origin.get("source") == "input_tail"
        what = "input tail, seen in training" if tail else "held-out file, found in training"
    return f"{'own' if m.side == 'own' else 'other-domain'} {what} ({m.dataset.name})"


def parent_comparison(
    tokenizer: Tokenizer, result: TrainResult, measured: list[MeasuredSide]
) -> dict:
    """The extended tokenizer next to the one it continued from, on the run's held-out text.

    Returns `heldout` (compression ratio, bytes per token, of the parent and of the extended
    tokenizer, and the share of the extended tokenizer's tokens that are new ids, i.e. ids the
    parent does not have), and `new_tokens` (how many ids were added).
    """
    parent = Tokenizer.from_pretrained(
        result.init_from["path"], special_tokens=list(result.special_tokens), pattern=result.pattern
    )
    first_new = result.init_from["vocab_size"]
    own = measured[0]
    docs = own.docs
    heldout = None
    if docs:
        ids = [i for d in docs for i in tokenizer.encode(d)]
        heldout = {
            "dataset": own.dataset.name,
            "docs": len(docs),
            "parent_ratio": round(compression_ratio(parent, docs), 4),
            "ratio": round(compression_ratio(tokenizer, docs), 4),
            "new_token_share": round(sum(i >= first_new for i in ids) / max(len(ids), 1), 4),
        }
    return {"new_tokens": len(result.vocab) - first_new, "heldout": heldout}


def vocab_metrics(
    vocab: dict[int, bytes],
    special_tokens: Sequence[str],
    *,
    top_k: int,
    merges: Sequence[tuple[bytes, bytes]] = (),
    merge_counts: Sequence[int] = (),
) -> dict:
    """Longest tokens, token length histogram and token kinds of the learned (merged) tokens.

    With the merges and their counts, each longest token also says `merge_count`: how often
    the pair it was made from occurred when it was merged (1: a string seen once in training).

    Learned tokens are told apart by their bytes, not their ids (a merge always yields two bytes
    or more; special tokens are excluded), so a vocab laid out as GPT-2's (bytes 0..255, merges,
    then `<|endoftext|>` at 50256) counts the same way as ours (specials first).

    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"a" * 100}
    >>> top = vocab_metrics(vocab, [], top_k=1)["longest_tokens"][0]
    >>> top["bytes"], len(top["text"]), top["clipped"], top["kind"]
    (100, 64, True, 'word')
    >>> gpt2_like = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"<|endoftext|>"}
    >>> vocab_metrics(gpt2_like, ["<|endoftext|>"], top_k=1)["learned_tokens"]
    1
    """
    specials = {t.encode("utf-8") for t in special_tokens}
    ordinary = {i: t for i, t in vocab.items() if t not in specials}
    learned = {i: t for i, t in ordinary.items() if len(t) > 1}
    kind_of = {i: token_kind(t) for i, t in learned.items()}
    ordered = sorted(learned, key=lambda i: (-len(learned[i]), i))[:top_k]
    count_of = {left + right: c for (left, right), c in zip(merges, merge_counts, strict=False)}
    longest = [
        {
            "id": i,
            "bytes": len(learned[i]),
            "kind": kind_of[i],
            **preview(learned[i]),
            **({"merge_count": count_of[learned[i]]} if learned[i] in count_of else {}),
        }
        for i in ordered
    ]
    lengths = Counter(len(t) for t in ordinary.values())
    kinds = Counter(kind_of.values())
    total = max(len(learned), 1)
    leading_space = sum(1 for t in learned.values() if t.startswith(b" "))
    return {
        "longest_tokens": longest,
        "token_lengths": {str(k): lengths[k] for k in sorted(lengths)},
        "token_kinds": {
            kind.name: round(kinds.get(kind.name, 0) / total, 4) for kind in TOKEN_KINDS
        },
        "leading_space_share": round(leading_space / total, 4),
        "learned_tokens": len(learned),
    }


def preview(token: bytes, *, limit: int = PREVIEW_BYTES) -> dict:
    """`{"gpt2", "text", "clipped"}`: the GPT-2 rendering and text of at most `limit` bytes.

    The rendering shows every byte kept; the text leaves out a character the cut splits (no
    U+FFFD from the cut itself).

    >>> preview(" café".encode(), limit=5)
    {'gpt2': 'ĠcafÃ', 'text': ' caf', 'clipped': True}
    """
    head = token[:limit]
    clipped = len(token) > limit
    # not final when clipped: an incomplete character at the cut stays buffered, not shown
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(head, final=not clipped)
    return {"gpt2": render(head), "text": text, "clipped": clipped}


def corpus_metrics(
    tokenizer: Tokenizer,
    measured: list[MeasuredSide],
    *,
    throughput_seconds: float,
    gpt2_baseline: bool,
) -> dict:
    """Compression on own and cross-domain held-out documents, throughput, Pile projection.

    The cross-domain side is stored under `compression.other`: existing run directories and
    `bpe.analysis.loader.TIDY_COLUMNS` read that key.
    Each side records its `source`: `heldout` (the dataset's held-out file) or `input_tail`
    (no held-out file: the input's last documents, from `offset`, held out of training, or,
    when nothing was held out, seen in training: `seen_in_training` says which).
    """
    gpt2 = None
    if gpt2_baseline:
        try:
            gpt2 = gpt2_tokenizer()
        except FileNotFoundError as err:
            logger.warning("GPT-2 baseline unavailable: %s", err)

    compression: dict[str, dict | None] = {}
    own_docs = None
    for m in measured:
        docs = m.docs
        if m.side == "own":
            own_docs = docs
        if not docs:
            compression[m.side] = None
            continue
        compression[m.side] = {
            "dataset": m.dataset.name,
            **m.origin,
            "docs": len(docs),
            "bytes": sum(len(d.encode("utf-8")) for d in docs),
            "ratio": round(compression_ratio(tokenizer, docs), 4),
            "gpt2_ratio": round(compression_ratio(gpt2, docs), 4) if gpt2 else None,
        }

    throughput = None
    if own_docs:
        ours = measure_throughput(tokenizer, own_docs, min_seconds=throughput_seconds, label="ours")
        throughput = _throughput_keys(ours, prefix="")
        throughput.update(dict.fromkeys(_throughput_keys(ours, prefix="gpt2_")))
        if gpt2:
            base = measure_throughput(
                gpt2, own_docs, min_seconds=throughput_seconds, label="GPT-2 (same encoder)"
            )
            throughput.update(_throughput_keys(base, prefix="gpt2_"))
    return {"compression": compression, "throughput": throughput}


def _throughput_keys(measured: dict, *, prefix: str) -> dict:
    """Warm and first-pass bytes/s and their Pile projections, as metrics.json stores them."""
    warm, first = measured["bytes_per_second"], measured["first_pass_bytes_per_second"]
    return {
        f"{prefix}bytes_per_second": round(warm, 1),
        f"{prefix}first_pass_bytes_per_second": round(first, 1),
        f"{prefix}pile_hours": round(pile_projection(warm)["hours"], 2),
        f"{prefix}first_pass_pile_hours": round(pile_projection(first)["hours"], 2),
    }
