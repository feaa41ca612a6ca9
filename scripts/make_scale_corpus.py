"""Build a large benchmark corpus from the bundled real text, with realistic vocabulary growth.

The corpus is shuffled copies of the real documents of a bundled sample (`bpe/data`, see
`data/SOURCES.md`; OpenWebText by default), each followed by `<|endoftext|>`. Copying alone
would stop the vocabulary at the sample's ~39 K unique pretokens, so a share of the words
(`REPLACE_SHARE` of the GPT-2 pretokens that are a space and letters, like " house") is
replaced by new words:

* which new word: a draw from the ranked word probabilities of a Pitman-Yor process with
  discount d, which fall off as a power law in the rank (a shifted Zipf law,
  P(rank >= k) = (1 + k/q)^-alpha with alpha = 1/d - 1 in the tail). Drawing ranks i.i.d. from
  that law gives the process's Heaps' law (distinct words ~ n^d) while keeping no per-draw
  state: only the vocabulary of new words is held in memory, whatever the corpus size.
* what a new word looks like: letters from a character trigram model fit on the sample's ASCII
  words (so its byte pairs are the language's; at least 4 letters, as rare words are long),
  never equal to a word of the sample or to an earlier new word, capitalized as often as the
  sample's words seen once are (42 % for OWT).

`alpha` and `q` are calibrated (`calibrate`, least squares in log space over 16 MiB ... 11.9 GB)
so that the corpus's unique GPT-2 pretokens follow a target Heaps curve, unique ~ K * bytes^beta:

* the sample's own fit (`--novelty sample`): counting unique pretokens on doubling prefixes
  (16 KiB ... 2.5 MB) of the bundled OWT sample gives beta = 0.693, K = 1.52 (`fit_heaps`).
  Extrapolated it predicts 0.16 M unique at 16 MiB, 0.41 M at 64 MiB, 1.06 M at 256 MiB,
  2.8 M at 1 GiB and 14.7 M at 11.9 GB: 2.2x the 6.6 M unique pretokens of the real 11.9 GB
  OpenWebText. Heaps' exponent falls as a corpus grows, so a fit on 2.5 MB overshoots.
* the OpenWebText curve (`--novelty owt`, the default): the power law through the sample fit at
  the sample's size (2.5 MB, 39 K unique) and the real corpus's 6.6 M unique at 11.9 GB:
  beta = 0.599, K = 6.14. It gives 0.13 M unique at 16 MiB, 0.30 M at 64 MiB, 0.68 M at
  256 MiB and 1.56 M at 1 GiB. The calibrated generator predicts 0.146 / 0.303 / 0.678 /
  1.58 M and 7.0 M at 11.9 GB (within 12 % of the curve everywhere; the sample's own 39 K
  words make the low end a little high); measured (seed 0): 142,612 unique at 16 MiB,
  294,930 at 64 MiB and 1,529,704 at 1 GiB, 2-3 % under the prediction. The earlier benchmark's
  corpora had 0.10, 0.22 and 0.51 M at 16, 64 and 256 MiB: ours are 1.3-1.4x as novel there,
  and on the line that reaches the real OWT's count at its real size.
* `--novelty none`: shuffled copies only (the vocabulary stops at the sample's).

Speed: the bytes are built per document and only the replaced words are touched in Python
(new words are sampled from the trigram model in numpy batches). Measured on one core of the
2-core development machine: 21.5 MB per CPU second at 1 GiB (50 CPU seconds, plus about 3 s
to fit the sample and calibrate), 19 at 64 MiB; so 1 GiB takes about a minute on a quiet
core. The process holds about 0.45 GB at 1 GiB (the sample, the 1.6 M new words and the set
of words taken).

Output is deterministic for a seed (same bytes: the document order, the replaced words and the
new words all come from seeded numpy generators), written through a temp file renamed into
place, and streamed document by document (memory: the sample, and the new words' vocabulary).

Usage:

    python scripts/make_scale_corpus.py --size 256M --seed 0 --out data/scale/owt_256M.txt
    python scripts/make_scale_corpus.py --fit          # print the Heaps fits and the calibration

What it does not do: tokenize, train or benchmark (see `scripts/bench_scale.py`); model
documents beyond word novelty (sentence structure, topics and numbers are the sample's).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import regex

from bpe.text.patterns import GPT2_PATTERN
from bpe.text.specials import EOT
from bpe.util.io import DATA_DIR, atomic_open, check_writable

#: The bundled samples a corpus can be built from.
#: The (git-ignored) cache of generated corpora: a file here was made by this script.
SCALE_DIR = Path(__file__).resolve().parent.parent / "data" / "scale"
SOURCES = {"owt": DATA_DIR / "owt_sample.txt", "tinystories": DATA_DIR / "tinystories_sample.txt"}
#: The full OpenWebText: its size in bytes and its unique GPT-2 pretokens.
OWT_FULL_BYTES = 11.9e9
OWT_FULL_UNIQUE = 6.6e6
#: Share of the replaceable words (space + letters) that become draws of the new-word process.
REPLACE_SHARE = 0.1
#: The novelty targets `--novelty` accepts.
NOVELTY = ("owt", "sample", "none")
#: Corpus sizes the calibration matches the target at (16 MiB ... the full OWT).
CALIBRATION_BYTES = np.geomspace(16 * 2**20, OWT_FULL_BYTES, 12)

_PRETOKEN = regex.compile(GPT2_PATTERN)
_WORD = regex.compile(r" \p{L}+")
_SIZE = regex.compile(r"(?i)^\s*(\d+(?:\.\d+)?)\s*([kmg]?)i?b?\s*$")


def parse_size(text: str | int) -> int:
    """Bytes from `256M`, `1G`, `300K` or a plain number (binary units: 1M = 2**20).

    >>> parse_size("256M"), parse_size("1G"), parse_size("300k"), parse_size(1000)
    (268435456, 1073741824, 307200, 1000)
    """
    if isinstance(text, int):
        return text
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"size {text!r} is not a size: write e.g. 256M, 1G, 300K or bytes")
    power = " kmg".index(match.group(2).lower() or " ")
    return int(float(match.group(1)) * 1024**power)


def size_label(num_bytes: int) -> str:
    """The short name of a size: `256M`, `1G`, `300K`, or bytes.

    >>> size_label(268435456), size_label(2**30), size_label(307200), size_label(1000)
    ('256M', '1G', '300K', '1000')
    """
    for unit, power in (("G", 3), ("M", 2), ("K", 1)):
        if num_bytes % 1024**power == 0:
            return f"{num_bytes // 1024**power}{unit}"
    return str(num_bytes)


def load_documents(source: str = "owt") -> list[str]:
    """The bundled sample's documents (text between `<|endoftext|>`, empty ones dropped)."""
    return list(_sample(source).docs)


@dataclass(frozen=True)
class _Sample:
    docs: tuple[str, ...]
    #: per document, the (start, end) of each replaceable word (a space and letters)
    slots: tuple[tuple[tuple[int, int], ...], ...]


@functools.cache
def _sample(source: str) -> _Sample:
    if source not in SOURCES:
        raise ValueError(f"source {source!r} is unknown: choose one of {sorted(SOURCES)}")
    text = SOURCES[source].read_text(encoding="utf-8")
    docs = tuple(doc for doc in text.split(EOT) if doc.strip())
    return _Sample(docs, tuple(tuple(_word_slots(doc)) for doc in docs))


# --------------------------------------------------------------------------------------------
# Heaps' law
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Heaps:
    """unique pretokens ~ K * bytes**beta."""

    beta: float
    K: float

    def __call__(self, num_bytes: float) -> float:
        return self.K * num_bytes**self.beta


def loglog_fit(xs: Sequence[float], ys: Sequence[float]) -> Heaps:
    """Least-squares line through (log x, log y): y ~ K * x**beta.

    >>> fit = loglog_fit([1, 10, 100], [2, 20, 200])
    >>> round(fit.beta, 6), round(fit.K, 6)
    (1.0, 2.0)
    """
    beta, intercept = np.polyfit(np.log(xs), np.log(ys), 1)
    return Heaps(beta=float(beta), K=float(math.exp(intercept)))


def unique_growth(docs: Sequence[str], *, first: int = 16 * 1024) -> list[tuple[int, int]]:
    """(bytes, unique pretokens) at doubling prefixes of the documents, and at their end."""
    seen: set[str] = set()
    points, num_bytes, next_point = [], 0, first
    for doc in docs:
        seen.update(_PRETOKEN.findall(doc))
        num_bytes += len(doc.encode("utf-8")) + len(EOT)
        while num_bytes >= next_point:
            points.append((num_bytes, len(seen)))
            next_point *= 2
    if not points or points[-1][0] != num_bytes:
        points.append((num_bytes, len(seen)))
    return points


def fit_heaps(docs: Sequence[str]) -> Heaps:
    """Heaps' law of the documents in their order, fit on their doubling prefixes."""
    points = unique_growth(docs)
    return loglog_fit([b for b, _ in points], [u for _, u in points])


def owt_curve(sample_fit: Heaps, sample_bytes: int) -> Heaps:
    """The power law through the sample fit at its size and the full OWT's unique pretokens."""
    start = sample_fit(sample_bytes)
    beta = math.log(OWT_FULL_UNIQUE / start) / math.log(OWT_FULL_BYTES / sample_bytes)
    return Heaps(beta=beta, K=OWT_FULL_UNIQUE / OWT_FULL_BYTES**beta)


# --------------------------------------------------------------------------------------------
# new words: a trigram model of the sample's words, ranks from the Pitman-Yor power law
# --------------------------------------------------------------------------------------------


class WordModel:
    """Character trigram model of words, sampled in numpy batches (many words per call).

    >>> model = WordModel(["house", "horse", "houses"])
    >>> words = model.sample(np.random.Generator(np.random.PCG64(0)), 50)
    >>> sorted(set(words)) == ["horse", "horses", "house", "houses"]
    True
    """

    #: shorter words would mostly repeat a word already taken; rare words are long anyway
    MIN_LETTERS = 4
    #: longer walks are cut (a few words in a million)
    MAX_LETTERS = 24

    def __init__(self, words: Sequence[str]) -> None:
        counts: defaultdict[str, Counter[str]] = defaultdict(Counter)
        for word, count in Counter(words).items():
            chars = "^^" + word + "$"
            for i in range(2, len(chars)):
                counts[chars[i - 2 : i]][chars[i]] += count
        # symbol 0 ends the word; contexts are pairs of characters ("^" before the start)
        self._symbols = ["$"] + sorted(
            {c for following in counts.values() for c in following} - {"$"}
        )
        index = {c: i for i, c in enumerate(self._symbols)}
        contexts = sorted(counts)
        ctx_index = {c: i for i, c in enumerate(contexts)}
        self._start = ctx_index["^^"]
        table = np.zeros((len(contexts), len(self._symbols)))
        self._next = np.zeros((len(contexts), len(self._symbols)), dtype=np.int64)
        for c, following in counts.items():
            for symbol, count in following.items():
                table[ctx_index[c], index[symbol]] = count
                if symbol != "$":
                    self._next[ctx_index[c], index[symbol]] = ctx_index[c[1] + symbol]
        going_on = table.copy()
        going_on[:, 0] = 0
        going_on[going_on.sum(axis=1) == 0, 0] = 1  # contexts that can only end
        # each row's cumulative probabilities shifted by the row's number: one sorted array,
        # so one searchsorted samples every walk's next symbol (row ctx, draw u -> ctx + u)
        shift = np.arange(len(contexts))[:, None]
        self._cumulative = (
            np.cumsum(table / table.sum(axis=1, keepdims=True), axis=1) + shift
        ).ravel()
        self._cumulative_going_on = (
            np.cumsum(going_on / going_on.sum(axis=1, keepdims=True), axis=1) + shift
        ).ravel()
        self._code_points = np.array([0] + [ord(c) for c in self._symbols[1:]], dtype=np.uint32)

    def sample(self, rng: np.random.Generator, n: int) -> list[str]:
        """n words, walking the model for all of them at once."""
        ctx = np.full(n, self._start)
        alive = np.ones(n, dtype=bool)
        letters = np.zeros((n, self.MAX_LETTERS), dtype=np.uint32)
        for step in range(self.MAX_LETTERS):
            table = self._cumulative if step >= self.MIN_LETTERS else self._cumulative_going_on
            found = np.searchsorted(table, ctx + rng.random(n)) - ctx * len(self._symbols)
            symbol = np.minimum(found, len(self._symbols) - 1)  # rounding at the row's top
            alive &= symbol != 0
            letters[alive, step] = self._code_points[symbol[alive]]
            ctx = np.where(alive, self._next[ctx, symbol], ctx)
            if not alive.any():
                break
        return letters.view(f"<U{self.MAX_LETTERS}").ravel().tolist()


@dataclass(frozen=True)
class Novelty:
    """The new-word process: replace `share` of the words by ranks drawn from the power law."""

    target: str
    beta: float
    K: float
    share: float
    alpha: float
    q: float
    sample_unique: int
    words_per_byte: float
    sample_beta: float
    sample_K: float

    def predicted_unique(self, num_bytes: float) -> float:
        """Expected unique pretokens of a corpus of this size (sample types + new words)."""
        # below the sample's size the corpus is (shuffled) sample text: its own growth
        real = min(self.sample_unique, self.sample_K * num_bytes**self.sample_beta)
        draws = self.share * self.words_per_byte * num_bytes
        return real + expected_distinct(draws, self.alpha, self.q)


def expected_distinct(draws: float, alpha: float, q: float) -> float:
    """Expected distinct ranks among `draws` i.i.d. draws with P(rank >= k) = (1 + k/q)^-alpha.

    Poissonized: sum over ranks of 1 - exp(-draws * p_k), exact for the first ranks, then
    integrated on a log grid.

    >>> round(expected_distinct(1, 0.7, 100.0), 2)
    1.0
    """
    if draws <= 0:
        return 0.0
    head = np.arange(0, 4096, dtype=float)
    p_head = (1 + head / q) ** -alpha - (1 + (head + 1) / q) ** -alpha
    total = float(np.sum(-np.expm1(-draws * p_head)))
    ks = np.geomspace(4096, 1e18, 4000)
    density = alpha / q * (1 + ks / q) ** -(alpha + 1)
    return total + float(np.trapezoid(-np.expm1(-draws * density), ks))


@functools.cache
def calibrate(
    target: str, *, source: str = "owt", share: float = REPLACE_SHARE
) -> tuple[Novelty, Heaps]:
    """Choose the power law's alpha and q so unique pretokens follow the target curve.

    Returns the new-word process and the sample's own Heaps fit.
    """
    if target not in NOVELTY:
        raise ValueError(f"novelty {target!r} is unknown: choose one of {list(NOVELTY)}")
    sample = _sample(source)
    docs = sample.docs
    sample_fit = fit_heaps(docs)
    sample_bytes = sum(len(d.encode("utf-8")) + len(EOT) for d in docs)
    sample_unique = len({t for d in docs for t in _PRETOKEN.findall(d)})
    words = sum(len(doc_slots) for doc_slots in sample.slots)
    curve = owt_curve(sample_fit, sample_bytes) if target == "owt" else sample_fit
    base = Novelty(
        target=target,
        beta=curve.beta,
        K=curve.K,
        share=share,
        alpha=1.0,
        q=1.0,
        sample_unique=sample_unique,
        words_per_byte=words / sample_bytes,
        sample_beta=sample_fit.beta,
        sample_K=sample_fit.K,
    )
    if target == "none":
        return Novelty(**{**asdict(base), "share": 0.0}), sample_fit
    sizes = CALIBRATION_BYTES
    want = np.log([curve(n) for n in sizes])

    def error(alpha: float, q: float) -> float:
        trial = Novelty(**{**asdict(base), "alpha": alpha, "q": q})
        got = np.log([trial.predicted_unique(n) for n in sizes])
        return float(np.sum((got - want) ** 2))

    def best_q(alpha: float) -> float:
        # distinct draws grow with q: bisect (in log q) on the middle size's target
        lo, hi = 0.0, 12.0
        middle = sizes[len(sizes) // 2]
        for _ in range(40):
            mid = (lo + hi) / 2
            trial = Novelty(**{**asdict(base), "alpha": alpha, "q": 10**mid})
            lo, hi = (mid, hi) if trial.predicted_unique(middle) < curve(middle) else (lo, mid)
        return 10 ** ((lo + hi) / 2)

    alphas = np.arange(0.30, 1.50, 0.01)
    scored = [(error(a, best_q(a)), a) for a in alphas]
    _, alpha = min(scored)
    return Novelty(**{**asdict(base), "alpha": float(alpha), "q": best_q(alpha)}), sample_fit


def _word_slots(doc: str) -> list[tuple[int, int]]:
    """(start, end) of the pretokens that are a space and letters: the replaceable words."""
    return [(m.start(), m.end()) for m in _PRETOKEN.finditer(doc) if _WORD.fullmatch(m.group())]


# --------------------------------------------------------------------------------------------
# the corpus
# --------------------------------------------------------------------------------------------


class _NewWords:
    """rank -> new word, assigned at the rank's first draw (so the same for a seed).

    New words come from a stream of trigram-model words (its own random stream, so it does not
    depend on how the corpus draws), skipping any word of the sample or already taken.
    """

    BATCH = 8192

    def __init__(self, source: str, seed: int) -> None:
        self.model, sample_words, self.capital_share = _word_stats(source)
        self.used = set(sample_words)
        self.words: dict[int, str] = {}
        self._rng = np.random.Generator(np.random.PCG64([seed, 1]))
        self._fresh: Iterator[str] = iter(())

    def add(self, rank: int) -> str:
        """The word of a rank drawn for the first time."""
        word = self.words[rank] = next(self._fresh, None) or self._refill()
        return word

    def _refill(self) -> str:
        fresh = []
        while not fresh:
            candidates = self.model.sample(self._rng, self.BATCH)
            capitals = (self._rng.random(self.BATCH) < self.capital_share).tolist()
            for word, capital in zip(candidates, capitals):
                if len(word) >= 2 and word not in self.used:
                    self.used.add(word)
                    fresh.append(" " + (word.capitalize() if capital else word))
        self._fresh = iter(fresh)
        return next(self._fresh)


@functools.cache
def _word_stats(source: str) -> tuple[WordModel, frozenset[str], float]:
    """The sample's trigram model, its words (lowercase), its share of capitalized hapaxes."""
    sample = _sample(source)
    words = [
        doc[s + 1 : e] for doc, doc_slots in zip(sample.docs, sample.slots) for s, e in doc_slots
    ]
    lowered = Counter(w.lower() for w in words)
    once = [w for w in words if lowered[w.lower()] == 1]
    capital_share = sum(w[0].isupper() for w in once) / max(1, len(once))
    # ASCII words only: a small alphabet keeps the model's tables in cache (3x faster), and
    # the words a corpus keeps inventing are mostly ASCII in English web text
    model = WordModel([w.lower() for w in words if w.isascii()])
    return model, frozenset(lowered), capital_share


def iter_corpus(
    num_bytes: int, *, seed: int = 0, source: str = "owt", novelty: Novelty | None = None
) -> Iterator[bytes]:
    """The corpus's documents (each ending in `<|endoftext|>`) as UTF-8, until num_bytes."""
    sample = _sample(source)
    docs = sample.docs
    novelty = novelty or calibrate("owt", source=source)[0]
    starts = [[s for s, _ in doc_slots] for doc_slots in sample.slots]
    ends = [[e for _, e in doc_slots] for doc_slots in sample.slots]
    rng = np.random.Generator(np.random.PCG64(seed))
    new_words = _NewWords(source, seed)
    known = new_words.words.get  # the inner loop's one lookup (no method call per word)
    written = 0
    while True:
        for d in rng.permutation(len(docs)).tolist():
            doc, doc_starts, doc_ends = docs[d], starts[d], ends[d]
            picked = np.flatnonzero(rng.random(len(doc_starts)) < novelty.share)
            draws = rng.random(len(picked))
            ranks = np.floor(novelty.q * ((1 - draws) ** (-1 / novelty.alpha) - 1))
            pieces, prev = [], 0
            for i, rank in zip(picked.tolist(), np.minimum(ranks, 2**62).astype(np.int64).tolist()):
                pieces.append(doc[prev : doc_starts[i]])
                pieces.append(known(rank) or new_words.add(rank))
                prev = doc_ends[i]
            pieces.append(doc[prev:])
            pieces.append(EOT)
            data = "".join(pieces).encode("utf-8")
            yield data
            written += len(data)
            if written >= num_bytes:
                return


def make_corpus(
    out: str | Path,
    num_bytes: int,
    *,
    seed: int = 0,
    source: str = "owt",
    novelty: str = "owt",
    force: bool = False,
) -> dict:
    """Write the corpus to `out` (atomically) and return what was written and how fast.

    The file ends after the first document that reaches num_bytes (so it is at most one
    document longer). `out` is never a source sample, even with `force`; an existing file
    outside the scale cache is replaced only with `force` (`check_writable`).
    """
    if num_bytes <= 0:
        raise ValueError(f"size {num_bytes!r} must be positive")
    check_writable(
        out,
        what="--out",
        inputs=list(SOURCES.values()),
        force=force,
        ours=Path(out).resolve().parent == SCALE_DIR.resolve(),
        fix="pass another --out",
        not_ours="is not a corpus in the scale cache (data/scale/)",
    )
    process, sample_fit = calibrate(novelty, source=source)
    start, cpu_start = time.perf_counter(), time.process_time()
    written = docs = 0
    with atomic_open(out) as f:
        for data in iter_corpus(num_bytes, seed=seed, source=source, novelty=process):
            f.write(data)
            written += len(data)
            docs += 1
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    return {
        "path": str(out),
        "bytes": written,
        "documents": docs,
        "seed": seed,
        "source": source,
        "novelty": asdict(process),
        "sample_fit": asdict(sample_fit),
        "predicted_unique": round(process.predicted_unique(written)),
        "seconds": round(seconds, 3),
        "mb_per_s": round(written / 1e6 / seconds, 1),
        # CPU time (on a busy machine the wall clock measures the neighbours)
        "cpu_seconds": round(cpu_seconds, 3),
        "mb_per_cpu_s": round(written / 1e6 / cpu_seconds, 1),
    }


def describe(source: str = "owt") -> dict:
    """The sample's Heaps fit, each target curve and its calibration, with predictions."""
    out: dict = {}
    for target in NOVELTY:
        process, sample_fit = calibrate(target, source=source)
        out["sample_fit"] = asdict(sample_fit)
        out[target] = {
            **asdict(process),
            "predicted_unique": {
                size: round(process.predicted_unique(parse_size(size)))
                for size in ("16M", "64M", "256M", "1G", "2100M", str(int(OWT_FULL_BYTES)))
            },
        }
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="256M", help="corpus size: 256M, 1G, 300K or bytes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--source", choices=sorted(SOURCES), default="owt")
    parser.add_argument("--novelty", choices=NOVELTY, default="owt", help="target Heaps curve")
    parser.add_argument("--out", help="output file (default data/scale/<source>_<size>_...txt)")
    parser.add_argument("--fit", action="store_true", help="print the fits and exit")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --out outside data/scale/ (never a source sample)",
    )
    args = parser.parse_args(argv)
    if args.fit:
        print(json.dumps(describe(args.source), indent=2))
        return
    size = parse_size(args.size)
    out = args.out or default_path(size, seed=args.seed, source=args.source, novelty=args.novelty)
    try:
        stats = make_corpus(
            out, size, seed=args.seed, source=args.source, novelty=args.novelty, force=args.force
        )
    except (OSError, ValueError) as err:
        parser.error(str(err))
    print(json.dumps(stats, indent=2))


def default_path(num_bytes: int, *, seed: int, source: str, novelty: str) -> Path:
    """Where a corpus lives in the (git-ignored) corpus cache, named by what made it."""
    return SCALE_DIR / f"{source}_{size_label(num_bytes)}_{novelty}_seed{seed}.txt"


if __name__ == "__main__":
    sys.exit(main())
