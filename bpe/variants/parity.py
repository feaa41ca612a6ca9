"""Parity-aware BPE (Foroutan et al., 2025): each merge serves the worst-compressed language.

Training text comes in several languages, and a *parallel* development text (the same
sentences in each language) says how well each is compressed. Before each merge the language
whose development text takes the most tokens is the worst served; the merge is the best pair of
*that language's* training text (THE candidate order, `bpe.trainers.common.candidate_key`, on
its counts), and it is applied to every language's words alike. Plain BPE would instead take
the best pair of all languages' text together, which favours the languages with the most text
and the most compact script. The paper's hybrid first makes `global_merges` merges of plain BPE
(on all languages' text together: those merges equal plain BPE's), then turns parity-aware.

    languages tied for the most tokens: the one listed first is served
    the worst language has no pair left: the next worst is served (the paper's code stops
        training there; one exhausted language should not end everyone's training)
    a merge's recorded count: how often its pair occurs in the text it was chosen on (the
        served language's, or all languages' for a global merge)

Two merge loops with identical merges (tested):

    naive  recounts the served language's pairs, and every development text's tokens, per merge
           (the reference: read it against the definition above)
    heap   one `PairIndex` and one lazily invalidated heap per language (`bpe.trainers.heap`),
           and one `PairIndex` per development text whose words keep their total tokens

What it does: the loops, and what they measured (`ParityRecord`: merges per language, each
development text's tokens before and after). What it does not do: read or pretokenize text
(`bpe.variants.languages` counts each language's files), or choose the development text.
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain

from bpe.trainers import VariantLoop
from bpe.trainers.common import (
    MergeState,
    build_words,
    candidate_key,
    count_pairs,
    merge_word,
    select_by_scan,
    word_ids,
)
from bpe.trainers.heap import exact_top
from bpe.trainers.pair_index import PairIndex

#: The served language of a global merge (the hybrid's first merges), in `ParityRecord.served`.
GLOBAL = -1


@dataclass
class ParityRecord:
    """What a parity-aware loop measured: for each merge the language it served (an index
    into `ParityCorpus.languages`, or `GLOBAL`), and each development text's tokens before the
    first merge and after the last."""

    served: list[int] = field(default_factory=list)
    dev_tokens_before: list[int] = field(default_factory=list)
    dev_tokens_after: list[int] = field(default_factory=list)

    def merges_per_language(self, languages: Sequence[str]) -> dict[str, int]:
        """How many merges served each language ("global" for the hybrid's first merges).

        >>> ParityRecord(served=[-1, 0, 1, 1]).merges_per_language(["eng", "deu"])
        {'global': 1, 'eng': 1, 'deu': 2}
        """
        out = {"global": self.served.count(GLOBAL)}
        out.update({lang: self.served.count(i) for i, lang in enumerate(languages)})
        return out


@dataclass(frozen=True)
class ParityCorpus:
    """The input of a parity-aware loop: per language (in `languages` order, which breaks ties
    between languages) the pretoken counts of its training text and of its development text.

    The loop's `MergeState` is prepared from the training counts summed over the languages
    (`summed`): what plain BPE on all the text together would start from.
    """

    languages: tuple[str, ...]
    train: tuple[Mapping[bytes, int], ...]
    dev: tuple[Mapping[bytes, int], ...]
    global_merges: int = 0
    record: ParityRecord = field(default_factory=ParityRecord)

    def __post_init__(self) -> None:
        n = len(self.languages)
        if n < 2 or len(self.train) != n or len(self.dev) != n:
            raise ValueError(
                f"parity-aware BPE needs training and development text in at least 2 languages, "
                f"the same ones: got {n} languages, {len(self.train)} training and "
                f"{len(self.dev)} development texts"
            )
        for lang, train, dev in zip(self.languages, self.train, self.dev, strict=True):
            if not any(train.values()) or not any(dev.values()):
                which = "training" if not any(train.values()) else "development"
                raise ValueError(
                    f"language {lang!r} has no {which} text outside special tokens; give it "
                    "text, or leave the language out"
                )

    def summed(self) -> dict[bytes, int]:
        """The training counts of all languages together."""
        total: dict[bytes, int] = {}
        for counts in self.train:
            for pretoken, n in counts.items():
                total[pretoken] = total.get(pretoken, 0) + n
        return total


def worst_first(dev_tokens: Sequence[int]) -> list[int]:
    """Languages from the worst served (most development tokens) on; ties: the first listed.

    >>> worst_first([10, 30, 30, 20])
    [1, 2, 3, 0]
    """
    return sorted(range(len(dev_tokens)), key=lambda i: (-dev_tokens[i], i))


def _is_global(state: MergeState, corpus: ParityCorpus) -> bool:
    """Whether the next merge is one of the hybrid's first, plain-BPE merges."""
    return len(state.merged) - state.replayed < corpus.global_merges


def naive_loop(state: MergeState, tick: Callable[[], object], *, corpus: ParityCorpus) -> None:
    """The reference: per merge, every development text's tokens and the served language's
    pairs counted from scratch, the best pair merged in every word of every language."""
    offset = len(state.vocab) - 256 - len(state.merged)  # the special tokens' ids come first
    train = [_id_words(counts, offset) for counts in corpus.train]
    dev = [_id_words(counts, offset) for counts in corpus.dev]
    record = corpus.record
    record.dev_tokens_before = _tokens(dev)
    for _ in range(state.num_merges):
        if _is_global(state, corpus):
            words = list(chain.from_iterable(w for w, _ in train))
            counts = list(chain.from_iterable(c for _, c in train))
            served = [(GLOBAL, count_pairs(words, counts))]
        else:
            served = ((i, count_pairs(*train[i])) for i in worst_first(_tokens(dev)))
        lang, pair_counts = next(
            ((i, pc) for i, pc in served if any(state.fits(*p) for p in pc)), (None, {})
        )
        chosen = select_by_scan(state, pair_counts)  # stops the loop when nothing is left
        if chosen is None:
            break
        (left, right), count = chosen
        new_id = state.add_merge(left, right, count)
        record.served.append(lang)
        for words, _ in chain(train, dev):
            words[:] = [merge_word(w, left, right, new_id) for w in words]
        tick()
    record.dev_tokens_after = _tokens(dev)


def _id_words(counts: Mapping[bytes, int], offset: int) -> tuple[list[list[int]], list[int]]:
    words, n = build_words(counts, offset=offset)
    return [word_ids(w) for w in words], n


def _tokens(texts: Iterable[tuple[list[list[int]], list[int]]]) -> list[int]:
    return [sum(len(w) * n for w, n in zip(words, counts, strict=True)) for words, counts in texts]


def heap_loop(state: MergeState, tick: Callable[[], object], *, corpus: ParityCorpus) -> None:
    """Per language a `PairIndex` of its training words and a heap of its candidates; per
    development text a `PairIndex` whose `tokens` stays exact. Each merge pops the served
    language's heap (`exact_top`) and updates every index; the hybrid's global merges use
    one more index, over the summed words of `state`, dropped once they are made."""
    offset = len(state.vocab) - 256 - len(state.merged)
    langs = [_Indexed(corpus_counts, offset, state) for corpus_counts in corpus.train]
    devs = [_DevText(*build_words(counts, offset=offset)) for counts in corpus.dev]
    whole = _Indexed(None, offset, state) if corpus.global_merges else None
    record = corpus.record
    record.dev_tokens_before = [d.tokens for d in devs]
    for _ in range(state.num_merges):
        if whole is not None and _is_global(state, corpus):
            order: list[tuple[int, _Indexed]] = [(GLOBAL, whole)]
        else:
            whole = None  # the global merges are made: free their index
            order = [(i, langs[i]) for i in worst_first([d.tokens for d in devs])]
        lang, top, served = next(
            ((i, t, x) for i, x in order if (t := x.top(state)) is not None), (None, None, None)
        )
        if state.stop(top[0] if top else None):
            break
        count, left, right = top
        heapq.heappop(served.heap)
        new_id = state.add_merge(left, right, count)
        record.served.append(lang)
        for indexed in [*langs, *([whole] if whole is not None else [])]:
            indexed.merge(left, right, new_id, state.token_keys)
        for dev in devs:
            dev.merge(left, right, new_id)
        tick()
    record.dev_tokens_after = [d.tokens for d in devs]


class _TrackedWords(list):
    """A text's words that keep their total tokens (each word's length times its count) exact
    as `PairIndex.merge` rewrites them: the one place a word changes is `words[i] = ...`.

    >>> words = _TrackedWords(["ab", "abab"], [3, 1])
    >>> words.tokens
    10
    >>> words[1] = "XX"
    >>> words.tokens
    8
    """

    def __init__(self, words: list[str], counts: list[int]) -> None:
        super().__init__(words)
        self.counts = counts
        self.tokens = sum(map(operator.mul, map(len, words), counts))

    def __setitem__(self, i, word) -> None:  # type: ignore[override]  (int index only)
        self.tokens -= (len(self[i]) - len(word)) * self.counts[i]
        super().__setitem__(i, word)


class _DevText(PairIndex):
    """A development text: its `PairIndex` (which words hold a pair), and its length in tokens
    (`tokens`), kept exact through every merge without a cost in plain BPE's loop."""

    def __init__(self, words: list[str], counts: list[int]) -> None:
        super().__init__(_TrackedWords(words, counts), counts)

    @property
    def tokens(self) -> int:
        return self.words.tokens


class _Indexed:
    """One text's `PairIndex` and its heap of candidates (`bpe.trainers.heap`); `counts` None:
    the state's own words (all languages together)."""

    def __init__(self, counts: Mapping[bytes, int] | None, offset: int, state: MergeState) -> None:
        words = (
            (state.words, state.counts) if counts is None else build_words(counts, offset=offset)
        )
        self.index = PairIndex(*words)
        keys = state.token_keys
        self.heap = [candidate_key(c, a, b, keys) for (a, b), c in self.index.pair_counts.items()]
        heapq.heapify(self.heap)

    def top(self, state: MergeState) -> tuple[int, int, int] | None:
        return exact_top(self.heap, self.index.pair_counts, state)

    def merge(self, left: int, right: int, new_id: int, keys: Sequence[bytes]) -> None:
        pair_counts = self.index.pair_counts
        for pair in self.index.merge(left, right, new_id):
            heapq.heappush(self.heap, candidate_key(pair_counts[pair], *pair, keys))


#: The trainers that run parity-aware BPE, and their loops (`variant_loop`).
PARITY_LOOPS: dict[str, Callable[..., None]] = {"naive": naive_loop, "heap": heap_loop}


def variant_loop(corpus: ParityCorpus) -> VariantLoop:
    """Parity-aware BPE's loops on `corpus` (`learn_merges(..., variant=...)`)."""
    return VariantLoop(
        "parity", {t: partial(loop, corpus=corpus) for t, loop in PARITY_LOOPS.items()}
    )


__all__ = [
    "GLOBAL",
    "PARITY_LOOPS",
    "ParityCorpus",
    "ParityRecord",
    "variant_loop",
    "worst_first",
]
