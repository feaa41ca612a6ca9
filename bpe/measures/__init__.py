"""Measures of a tokenizer for the experiment reports, and the token kinds they are filed under.

What it does:
    * `TOKEN_KINDS` and `token_kind`: what a learned token is made of (whole word, number, ...),
      with the label reports use for each kind;
    * `compression_ratio` is UTF-8 bytes per token over a set of documents;
    * `measure_throughput` times `Tokenizer.encode` over documents (bytes per second), reporting
      the first pass (cold pretoken cache) and the steady state (warm cache) separately;
    * `pile_projection` turns a throughput into the time to tokenize The Pile (825 GB);
    * `gpt2_tokenizer` loads the GPT-2 baseline from `data/gpt2`, and
      `tiktoken_gpt2_encoding` builds tiktoken's GPT-2 encoding offline from the same files.

What it does not do: read corpora (the documents come from `bpe.corpus`:
`load_documents`, `head_text`, `tail_documents`), write metrics.json or reports (the experiment
harness does), or run several processes (throughput is single-thread, like the reference it is
compared with). Both the experiment harness (which records these measures) and the analysis (which
reports them) import this module; neither imports the other.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import regex

from bpe.runs.layout import MERGES_FILE, VOCAB_FILE
from bpe.text.patterns import GPT2_PATTERN
from bpe.text.specials import EOT
from bpe.tokenizer import Tokenizer
from bpe.util.io import DATA_DIR

logger = logging.getLogger(__name__)

#: Size of The Pile in bytes (Gao et al., 2020), the yardstick of the projection.
PILE_BYTES = 825e9
#: data/gpt2 inside the repository that holds this package.
GPT2_DIR = DATA_DIR / "gpt2"


class TokenKind(NamedTuple):
    """One kind of learned token and how reports speak of it."""

    name: str
    label: str  # what a share of the learned tokens is: "digit runs"
    one: str  # one token of the kind, in a sentence: "a number"


#: Token kinds in the order metrics.json and reports list them; `token_kind` decides.
TOKEN_KINDS = (
    TokenKind("word", "whole words or word pieces (letters only)", "a whole word"),
    TokenKind("number", "digit runs", "a number"),
    TokenKind("punctuation", "punctuation/symbol runs", "a run of punctuation"),
    TokenKind("whitespace", "whitespace runs", "a run of whitespace"),
    TokenKind("partial_utf8", "partial UTF-8 sequences", "a partial UTF-8 sequence"),
    TokenKind("mixed", "mixed (letters with punctuation, etc.)", "a mix of letters and symbols"),
)

# Tried in order; a token matching none of them is "mixed", one that is not UTF-8 "partial_utf8".
_KIND_PATTERNS = (
    ("word", regex.compile(r"^ ?\p{L}+$")),
    ("number", regex.compile(r"^ ?\p{N}+$")),
    ("punctuation", regex.compile(r"^ ?[^\s\p{L}\p{N}]+$")),
    ("whitespace", regex.compile(r"^\s+$")),
)


def token_kind(token: bytes) -> str:
    """Classify a token by what its text is made of (one of the `TOKEN_KINDS` names).

    >>> [token_kind(t) for t in (b" the", b"ing", b"2024", b"!!", b"\\n\\n", b"\\xe6", b"a.")]
    ['word', 'word', 'number', 'punctuation', 'whitespace', 'partial_utf8', 'mixed']
    """
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        return "partial_utf8"
    for name, pattern in _KIND_PATTERNS:
        if pattern.match(text):
            return name
    return "mixed"


def compression_ratio(tokenizer: Tokenizer, documents: Sequence[str]) -> float:
    """Total UTF-8 bytes divided by total tokens (higher compresses better).

    Raises:
        ValueError: no documents, or documents that encode to no tokens.

    >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
    >>> compression_ratio(tok, ["héllo"])
    1.0
    """
    num_bytes = sum(len(d.encode("utf-8")) for d in documents)
    num_tokens = sum(len(tokenizer.encode(d)) for d in documents)
    if num_tokens == 0:
        raise ValueError(
            f"{len(documents)} document(s) gave no tokens; pass non-empty documents "
            "(see load_documents)"
        )
    return num_bytes / num_tokens


def measure_throughput(
    tokenizer: Tokenizer,
    documents: Sequence[str],
    *,
    min_seconds: float = 1.0,
    max_passes: int = 50,
    cold_start: bool = True,
    label: str = "tokenizer",
) -> dict:
    """Encode all documents repeatedly (single thread) and report bytes per second.

    The first pass starts from an empty pretoken cache (unless `cold_start=False`) and is
    reported as `first_pass_bytes_per_second`; `bytes_per_second` is the steady state: the
    best later pass, repeated until `min_seconds` have been spent overall. The best pass is
    the least disturbed by other load on the machine. `label` names the tokenizer in the log
    line (e.g. "ours", "GPT-2").

    Returns:
        dict with `bytes_per_second`, `first_pass_bytes_per_second`, `num_bytes` and
        `num_tokens` (per pass), `seconds` (of the best pass) and `passes`.

    Raises:
        ValueError: no text to encode, or min_seconds / max_passes out of range.
    """
    if min_seconds < 0 or max_passes < 2:
        raise ValueError(
            f"min_seconds={min_seconds!r} must be >= 0 and max_passes={max_passes!r} >= 2"
        )
    num_bytes = sum(len(d.encode("utf-8")) for d in documents)
    if num_bytes == 0:
        raise ValueError("documents hold no text; pass at least one non-empty document")
    if cold_start:
        tokenizer.clear_cache()
    encode = tokenizer.encode
    times: list[float] = []
    num_tokens = 0
    start = time.perf_counter()
    while len(times) < max_passes and (len(times) < 2 or time.perf_counter() - start < min_seconds):
        t0 = time.perf_counter()
        num_tokens = sum(len(encode(d)) for d in documents)
        times.append(time.perf_counter() - t0)
    best = min(times[1:])
    result = {
        "bytes_per_second": num_bytes / best,
        "first_pass_bytes_per_second": num_bytes / times[0],
        "num_bytes": num_bytes,
        "num_tokens": num_tokens,
        "seconds": best,
        "passes": len(times),
    }
    logger.info(
        "throughput of %s: %.2f MB/s first pass (%s cache), %.2f MB/s warm (best later pass); "
        "%d bytes, %d passes",
        label,
        result["first_pass_bytes_per_second"] / 1e6,
        "empty" if cold_start else "kept",
        result["bytes_per_second"] / 1e6,
        num_bytes,
        len(times),
    )
    return result


def pile_projection(bytes_per_second: float, *, pile_bytes: float = PILE_BYTES) -> dict:
    """Time to tokenize The Pile (825 GB by default) at a given single-process throughput.

    >>> pile_projection(825e9 / 3600)["hours"]
    1.0
    """
    if not bytes_per_second > 0:
        raise ValueError(f"bytes_per_second={bytes_per_second!r} must be > 0")
    seconds = pile_bytes / bytes_per_second
    return {
        "pile_bytes": pile_bytes,
        "seconds": seconds,
        "hours": seconds / 3600,
        "days": seconds / 86400,
    }


def _gpt2_files(gpt2_dir: Path) -> tuple[Path, Path]:
    vocab, merges = gpt2_dir / VOCAB_FILE, gpt2_dir / MERGES_FILE
    for p in (vocab, merges):
        if not p.is_file():
            raise FileNotFoundError(
                f"GPT-2 tokenizer file {str(p)!r} is missing; it ships inside the package "
                "(bpe/data/gpt2): reinstall bpe-lab, or in a checkout restore it with "
                "`git checkout -- bpe/data/`"
            )
    return vocab, merges


@lru_cache(maxsize=1)
def gpt2_tokenizer() -> Tokenizer:
    """The GPT-2 tokenizer (bpe/data/gpt2 files, `<|endoftext|>` special), loaded once per process.

    Raises:
        FileNotFoundError: data/gpt2 is missing.
    """
    vocab, merges = _gpt2_files(GPT2_DIR)
    return Tokenizer.from_files(vocab, merges, [EOT])


def tiktoken_gpt2_encoding():
    """tiktoken's GPT-2 `Encoding` built offline from data/gpt2 (tiktoken cannot download here).

    The mergeable ranks are the vocab's byte strings ranked by id, the pattern is GPT-2's, and
    `<|endoftext|>` is the special token 50256.
    """
    import tiktoken  # here, not at the top: most users of this module never build it

    tok = gpt2_tokenizer()
    eot_id = tok.special_tokens[EOT]
    ranks = {token: idx for idx, token in tok.vocab.items() if idx != eot_id}
    return tiktoken.Encoding(
        name="gpt2-offline",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={EOT: eot_id},
    )


# --- Efficiency of the token distribution (beyond bytes per token) ---------------------------
#
# Self-contained on purpose: these are pure formulas over token counts, with no tokenizer.

#: The Rényi order Zouhar et al. (ACL 2023) found to track downstream quality best.
RENYI_ALPHA = 2.5


def _probabilities(counts: Sequence[int], vocab_size: int) -> list[float]:
    if vocab_size < 2:
        raise ValueError(f"vocab_size={vocab_size!r} must be >= 2 (log 1 = 0 normalises nothing)")
    if any(c < 0 for c in counts):
        raise ValueError(f"counts hold a negative value ({min(counts)!r}); pass token counts")
    total = sum(counts)
    if total == 0:
        raise ValueError("counts sum to 0; encode some text before measuring its distribution")
    if sum(1 for c in counts if c) > vocab_size:
        raise ValueError(
            f"{sum(1 for c in counts if c)} distinct tokens exceed vocab_size={vocab_size!r}; "
            "pass the size of the vocab that produced the counts"
        )
    return [c / total for c in counts if c]


def shannon_efficiency(counts: Sequence[int], vocab_size: int) -> float:
    """Shannon entropy of the unigram token distribution over its maximum: H(p) / log |V|.

    With p_i = c_i / sum(c), H(p) = -sum_i p_i log p_i; 1 means every vocab entry is equally
    frequent, 0 that one token takes all the text. The log base cancels out.

    Worked example: counts (2, 1, 1) in a vocab of 4 give p = (1/2, 1/4, 1/4) and
    H = 1/2 log 2 + 2 * 1/4 log 4 = 1.5 log 2, so H / log 4 = 1.5 / 2 = 0.75.

    >>> shannon_efficiency([2, 1, 1], 4)
    0.75

    Raises:
        ValueError: vocab_size < 2, negative counts, all counts zero, or more distinct tokens
            than vocab_size.
    """
    p = _probabilities(counts, vocab_size)
    entropy = -sum(q * math.log(q) for q in p)
    # rounding can land a hair outside [0, 1] (five equal counts in a vocab of 5: 1 + 2e-16)
    return min(1.0, max(0.0, entropy / math.log(vocab_size)))


def renyi_efficiency(
    counts: Sequence[int], vocab_size: int, *, alpha: float = RENYI_ALPHA
) -> float:
    """Rényi entropy of the unigram token distribution over its maximum: H_a(p) / log |V|.

    H_a(p) = log(sum_i p_i ** a) / (1 - a) (Zouhar et al., ACL 2023, recommend a = 2.5). For
    a > 1 it weighs frequent tokens more than Shannon's entropy does (H_a <= H), so a vocab
    whose text leans on a few very frequent tokens scores lower. 1 means the whole vocab is used
    uniformly; the value lies in [0, 1] because H_a(p) <= log(support) <= log |V|.

    Worked example: counts (2, 1, 1) in a vocab of 4, p = (1/2, 1/4, 1/4), a = 2.5:
    sum p ** 2.5 = 0.17678 + 2 * 0.03125 = 0.23928; H = log(0.23928) / -1.5 = 0.95342 (nats);
    log 4 = 1.38629, so the efficiency is 0.68775.

    >>> round(renyi_efficiency([2, 1, 1], 4), 5)
    0.68775
    >>> renyi_efficiency([5, 5, 5, 5], 4)
    1.0

    Raises:
        ValueError: alpha <= 0 or alpha == 1 (Shannon: see `shannon_efficiency`), and the
            errors of `shannon_efficiency`.
    """
    if alpha <= 0 or alpha == 1:
        raise ValueError(f"alpha={alpha!r} must be > 0 and != 1 (alpha -> 1 is Shannon's)")
    p = _probabilities(counts, vocab_size)
    entropy = math.log(math.fsum(q**alpha for q in p)) / (1 - alpha)
    # rounding can push a uniform distribution a hair past 1 (or a point mass below 0)
    return min(1.0, max(0.0, entropy / math.log(vocab_size)))


def fertility(num_tokens: int, documents: Sequence[str]) -> float:
    """Tokens per whitespace-separated word (`str.split()`) over the documents: lower is better.

    Worked example: "the cat sat" is 3 words; encoded as 4 tokens the fertility is 4/3.

    >>> round(fertility(4, ["the cat  sat"]), 4)
    1.3333

    Raises:
        ValueError: the documents hold no word.
    """
    words = sum(len(d.split()) for d in documents)
    if words == 0:
        raise ValueError(f"{len(documents)} document(s) hold no word; pass non-empty text")
    return num_tokens / words


def vocab_used_share(counts: Sequence[int], vocab_size: int) -> float:
    """Share of the vocab that occurs at least once: |{i : c_i > 0}| / |V|.

    >>> vocab_used_share([3, 0, 1, 0], 8)
    0.25

    Raises:
        ValueError: vocab_size < 1.
    """
    if vocab_size < 1:
        raise ValueError(f"vocab_size={vocab_size!r} must be >= 1")
    return sum(1 for c in counts if c) / vocab_size


#: A merge whose pair was seen at most this often in training makes a token the corpus barely
#: supports: a string met once or twice, not a unit of the language (`merge_support`).
RARE_MERGE_COUNT = 2
#: A vocab has outgrown its corpus when at least this share of its merges are rare.
OUTGROWN_SHARE = 0.10


def merge_support(merge_counts: Sequence[int], *, unique_pretokens: int, base: int) -> dict:
    """How much of a trained vocab its corpus supports, from each merge's pair count.

    Args:
        merge_counts: the count of each merged pair when it was merged, in merge order.
        unique_pretokens: distinct pretokens of the training text (no merge can span two, so
            a vocab with more merges than that is memorising the word list).
        base: vocab entries before the first merge (special tokens + 256 bytes).

    Returns:
        `merges`, `count_1` and `rare` (count <= `RARE_MERGE_COUNT`) merges, `rare_share`,
        `unique_pretokens`, `supported_vocab` (the vocab size before the first rare merge:
        up to it, every merge joined a pair seen more than `RARE_MERGE_COUNT` times) and
        `outgrown` (rare merges are `OUTGROWN_SHARE` or more, or merges outnumber the distinct
        pretokens).

    >>> merge_support([50, 9, 3, 2, 1, 1], unique_pretokens=40, base=257)
    ... # doctest: +NORMALIZE_WHITESPACE
    {'merges': 6, 'count_1': 2, 'rare': 3, 'rare_share': 0.5, 'unique_pretokens': 40,
     'supported_vocab': 260, 'outgrown': True}
    """
    n = len(merge_counts)
    rare = sum(1 for c in merge_counts if c <= RARE_MERGE_COUNT)
    first_rare = next((k for k, c in enumerate(merge_counts) if c <= RARE_MERGE_COUNT), n)
    share = rare / n if n else 0.0
    return {
        "merges": n,
        "count_1": sum(1 for c in merge_counts if c == 1),
        "rare": rare,
        "rare_share": round(share, 4),
        "unique_pretokens": unique_pretokens,
        "supported_vocab": base + first_rare,
        "outgrown": bool(n and (share >= OUTGROWN_SHARE or n > unique_pretokens)),
    }
