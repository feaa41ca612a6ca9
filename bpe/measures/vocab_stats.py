"""How a trained vocab is used: token counts on text, efficiency, and under-trained tokens.

What it does:
    * `token_counts`: how often each id occurs when a tokenizer encodes some documents;
    * `distribution_metrics`: fertility, Shannon and Rényi efficiency and the share of the vocab
      used, for one set of documents (formulas in `bpe.measures`);
    * `undertrained_tokens`: learned tokens a model trained on the corpus would (almost) never
      see: those that are never the final token of any training pretoken because every
      occurrence was merged further ("intermediate only", unreachable in the sense of Land &
      Bartolo, 2024), those never produced on the training sample nor on held-out text, and those
      whose own text does not encode to them; with the most striking examples, clipped.

What it does not do: write metrics.json or format reports (the experiment harness and the
analysis do), or look at anything but the vocab, the merges and the text it is given.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence

from bpe.formats.gpt2_format import render
from bpe.measures import (
    RENYI_ALPHA,
    fertility,
    renyi_efficiency,
    shannon_efficiency,
    vocab_used_share,
)
from bpe.tokenizer import Tokenizer

logger = logging.getLogger(__name__)

#: Longest token text kept in metrics.json examples (characters): the file stays small.
CLIP_CHARS = 48
#: How many training-file bytes are encoded to count tokens (whole documents up to this).
DEFAULT_SAMPLE_BYTES = 4_000_000
#: Tokens longer than this are not encoded for the `self_unreachable` check (bounded cost).
SELF_CHECK_MAX_BYTES = 1024


def clip_text(text: str, width: int = CLIP_CHARS) -> str:
    """Keep at most `width` characters, marking a cut with an ellipsis.

    >>> clip_text("abcdef", 4), clip_text("abc", 4)
    ('abc…', 'abc')
    """
    return text if len(text) <= width else text[: width - 1] + "…"


def token_counts(tokenizer: Tokenizer, documents: Iterable[str]) -> Counter[int]:
    """How often each id occurs in the encodings of the documents (special tokens included).

    >>> tok = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")])
    >>> sorted(token_counts(tok, ["abab", "ba"]).items())
    [(97, 1), (98, 1), (256, 2)]
    """
    counts: Counter[int] = Counter()
    for doc in documents:
        counts.update(tokenizer.encode(doc))
    return counts


def ordinary_vocab_size(tokenizer: Tokenizer) -> int:
    """Ids that ordinary text can produce: the vocab without special tokens."""
    return tokenizer.vocab_size - len(set(tokenizer.special_tokens.values()))


def distribution_metrics(
    tokenizer: Tokenizer, documents: Sequence[str], *, counts: Counter[int] | None = None
) -> dict:
    """Fertility, efficiencies and vocab share used on the documents, as metrics.json stores them.

    |V| is the vocab without special tokens (held-out documents never hold one). Pass `counts`
    when the documents were already counted.

    >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
    >>> m = distribution_metrics(tok, ["ab ab"])
    >>> m["tokens"], m["words"], m["fertility"], m["vocab_used"]
    (5, 2, 2.5, 3)
    >>> distribution_metrics(tok, ["\\n"])["fertility"] is None
    True
    """
    specials = set(tokenizer.special_tokens.values())
    if counts is None:
        counts = token_counts(tokenizer, documents)
    values = [c for i, c in counts.items() if i not in specials]
    size = ordinary_vocab_size(tokenizer)
    num_tokens = sum(values)
    words = sum(len(d.split()) for d in documents)
    return {
        "docs": len(documents),
        "tokens": num_tokens,
        "words": words,
        # documents of whitespace only (a file's last line break) hold no word: no fertility
        "fertility": round(fertility(num_tokens, documents), 4) if words else None,
        "shannon_efficiency": round(shannon_efficiency(values, size), 4),
        "renyi_efficiency": round(renyi_efficiency(values, size, alpha=RENYI_ALPHA), 4),
        "renyi_alpha": RENYI_ALPHA,
        "vocab_size": size,
        "vocab_used": sum(1 for c in values if c),
        "vocab_used_share": round(vocab_used_share(values, size), 4),
    }


def undertrained_tokens(
    tokenizer: Tokenizer,
    *,
    train_counts: Counter[int],
    heldout_counts: Counter[int],
    merge_counts: Sequence[int] = (),
    top_k: int = 20,
) -> dict:
    """Learned tokens that a model trained on this corpus would rarely or never see.

    Three sets of learned tokens (the results of merges), each with its share of the vocab
    (special tokens included, as `Tokenizer.vocab_size` counts):

    * `intermediate_only`: count 0 when the training text is encoded, although a merge made
      them: every occurrence was merged further (" Li" once " Lily" exists);
    * `never_produced`: count 0 on the training text and on the held-out text;
    * `self_unreachable`: tokens whose own text (when valid UTF-8, at most
      `SELF_CHECK_MAX_BYTES` long) does not encode to them alone.

    `examples` lists up to `top_k` intermediate-only tokens, most striking first: highest merge
    count (how often the pair occurred when it was merged), then longest.

    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc"}
    >>> tok = Tokenizer(vocab, [(b"a", b"b"), (b"ab", b"c")])
    >>> out = undertrained_tokens(tok, train_counts=token_counts(tok, ["abc abc"]),
    ...                           heldout_counts=token_counts(tok, ["ab"]), merge_counts=[2, 2])
    >>> out["intermediate_only"], out["never_produced"], out["examples"][0]["text"]
    (1, 0, 'ab')
    """
    id_of = {token: i for i, token in tokenizer.vocab.items()}
    # subtle: a PickyBPE tokenizer's merges also make tokens it removed later (None here); a
    # token it made again after removing it counts from its last merge, the one that stayed
    merged_ids = [id_of.get(a + b) for a, b in tokenizer.merges]
    learned = list(dict.fromkeys(i for i in merged_ids if i is not None))
    size = tokenizer.vocab_size
    # the token each learned token is first merged into (the earliest later merge using it)
    merged_into: dict[int, int] = {}
    for (a, b), result in zip(tokenizer.merges, merged_ids):
        for part in (a, b):
            if result is not None and part in id_of:
                merged_into.setdefault(id_of[part], result)
    rank_of = {idx: k for k, idx in enumerate(merged_ids) if idx is not None}
    intermediate = [i for i in learned if train_counts.get(i, 0) == 0]
    never = [i for i in intermediate if heldout_counts.get(i, 0) == 0]
    unreachable = []
    for i in learned:
        if len(tokenizer.vocab[i]) > SELF_CHECK_MAX_BYTES:
            # bounded cost: a hostile corpus ('a' * 10_000_000) learns tokens of megabytes,
            # and encoding each of them would take minutes; such tokens are left unchecked
            continue
        try:
            text = tokenizer.vocab[i].decode("utf-8")
        except UnicodeDecodeError:
            continue  # a partial UTF-8 sequence has no text of its own to encode
        if tokenizer.encode_ordinary(text) != [i]:
            unreachable.append(i)

    def merge_count(i: int) -> int | None:
        k = rank_of[i]
        return merge_counts[k] if k < len(merge_counts) else None

    striking = sorted(
        intermediate, key=lambda i: (-(merge_count(i) or 0), -len(tokenizer.vocab[i]), i)
    )
    examples = []
    for i in striking[:top_k]:
        token = tokenizer.vocab[i]
        into = merged_into.get(i)
        examples.append(
            {
                "id": i,
                "rank": rank_of[i] + 1,
                "bytes": len(token),
                "gpt2": clip_text(render(token)),
                "text": clip_text(token.decode("utf-8", errors="replace")),
                "merge_count": merge_count(i),
                "heldout_count": heldout_counts.get(i, 0),
                "merged_into": None if into is None else clip_text(render(tokenizer.vocab[into])),
            }
        )
    byte_ids = {id_of[bytes([b])] for b in range(256)}
    return {
        "learned": len(learned),
        "vocab_size": size,
        "intermediate_only": len(intermediate),
        "intermediate_only_share": round(len(intermediate) / size, 4),
        "intermediate_only_in_heldout": len(intermediate) - len(never),
        "never_produced": len(never),
        "never_produced_share": round(len(never) / size, 4),
        "self_unreachable": len(unreachable),
        "self_unreachable_share": round(len(unreachable) / size, 4),
        "unused_bytes": sum(
            1 for i in byte_ids if not train_counts.get(i) and not heldout_counts.get(i)
        ),
        "examples": examples,
    }
