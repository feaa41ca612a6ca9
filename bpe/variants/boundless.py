"""BoundlessBPE (Schmidt et al., 2025): merges that also join two whole pretokens into one token.

Plain BPE never merges across a pretoken boundary. BoundlessBPE keeps PickyBPE's training of
the words (`bpe.variants.picky`: merges inside pretokens, with removals) and adds a second
kind of merge, the supermerge: two adjacent pretokens that are each a single token by now,
and that each look like a word (`JOINABLE`: letters, marks, spaces, `_` and apostrophes, at
least one letter), may become one token, a superword (" of" + " the" -> " of the"). Both
kinds compete by count: each step merges whichever pair occurs more often, the pair inside
words or the pair of whole pretokens, and a supermerge wins a tie (the reference code's
rule). A superword may join further whole pretokens (" of the" + " world"), and is never
removed. The facts here come from the paper and its reference code; the code is our own.

What a training run sees (`count_phrases`): each document's pretokens, cut into phrases, the
longest runs of adjacent joinable pretokens (a phrase of one pretoken can never join, so only
runs of two or more are kept); identical phrases are counted once with their count, as
identical pretokens are. A pretoken of a phrase takes part in supermerges while its word is
one token: from the merge that makes it whole (or from the start, for a one-byte pretoken:
the reference code waits for a merge) until a removal splits it again.

Where ours differs from the reference code, and why: a removal splits a token into the two
tokens its merge joined (PickyBPE's rule; the paper splits into bytes), and a removal that
splits a whole pretoken takes it out of later supermerges (the reference code keeps it), so
that the encoder (`bpe.tokenizer.superwords`) segments every training document exactly as
training left it; pairs of identical tokens count every adjacent pair, as inside words.

Two implementations with identical results (tested with hypothesis): the naive trainer's
recounts every pair of every phrase per merge (the reference), the indexed trainer's keeps
the phrases' pair counts up to date, revisits only the phrases a merge changed, and takes the
best pair of whole pretokens from a lazy heap in THE candidate order (as the heap trainer).

What it does not do: merge inside words (PickyBPE's loops do, and call the `side` here), or
encode text (`bpe.tokenizer.superwords`).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from heapq import heappop, heappush

import regex

from bpe.corpus.documents import iter_documents
from bpe.pretokenize.counting import PretokenCounts
from bpe.text.patterns import GPT2_PATTERN
from bpe.text.pretokens import find_pretokens
from bpe.text.protect import protect_regex, split_all
from bpe.text.specials import EOT, special_token_regex, split_on_special_tokens
from bpe.trainers import VariantLoop
from bpe.trainers.common import MergeState, Pair, TrainerOutput, best_by_scan, candidate_key
from bpe.util.cputime import cpu_seconds
from bpe.variants import picky
from bpe.variants.base import Member, RunContext, Variant

logger = logging.getLogger(__name__)

#: A pretoken that may join others: letters (each with its marks), spaces, `_` and
#: apostrophes, at least one letter (the paper's pattern, written as our own regex).
JOINABLE = regex.compile(r"(?=.*\p{L})(?:\p{L}\p{M}*|[ _'\u2019])+")

#: A phrase: adjacent joinable pretokens (their UTF-8 bytes), two or more.
Phrase = tuple[bytes, ...]

#: How a phrase item is held while training: a word (pretoken) index `wi` as `~wi` (< 0),
#: or a superword's token id (>= 0).
Item = int


def joinable(pretoken: str) -> bool:
    """Whether a pretoken may ever join another (`JOINABLE`).

    >>> joinable(" the"), joinable("don't"), joinable(" 42"), joinable(" "), joinable("_")
    (True, True, False, False, False)
    """
    return JOINABLE.fullmatch(pretoken) is not None


def phrases_of(pretokens: Iterable[str]) -> Iterable[Phrase]:
    """The phrases of a list of pretokens: each longest run of two or more joinable ones.

    >>> list(phrases_of(["Hi", ",", " you", " all", "!", " x"]))
    [(b' you', b' all')]
    """
    run: list[bytes] = []
    for p in pretokens:
        if joinable(p):
            run.append(p.encode("utf-8"))
            continue
        if len(run) > 1:
            yield tuple(run)
        run = []
    if len(run) > 1:
        yield tuple(run)


def count_phrases(
    texts: Iterable[str],
    *,
    pattern: str = GPT2_PATTERN,
    specials: Iterable[str] = (),
    protect: str | None = None,
) -> Counter[Phrase]:
    """How often each phrase occurs in `texts` (documents), pretokenized by `pattern`, split
    on special tokens and protected characters as stage 1 splits them.

    >>> count_phrases(["a cat and a cat", "a cat"])[(b"a", b" cat", b" and", b" a", b" cat")]
    1
    """
    special_rx = special_token_regex(list(specials))
    protect_rx = protect_regex(protect)
    counts: Counter[Phrase] = Counter()
    for text in texts:
        parts = (
            [text] if special_rx is None else split_on_special_tokens(text, (), compiled=special_rx)
        )
        for part in parts[::2]:
            counts.update(phrases_of(split_all(find_pretokens(part, pattern), protect_rx)))
    return counts


# -- the words' side of a phrase ------------------------------------------------------------------


def phrase_items(
    state: MergeState, phrases: Mapping[Phrase, int]
) -> tuple[list[list[Item]], list[int]]:
    """The phrases as items (`~word index`) over the state's words, and their counts.

    Raises:
        ValueError: a phrase's pretoken is not among the words (the phrases were counted on
            other text than stage 1).
    """
    index: dict[bytes, int] = {}
    for wi, word in enumerate(state.words):
        index[b"".join(state.vocab[ord(c)] for c in word)] = wi
    items, counts = [], []
    for phrase, n in phrases.items():
        try:
            items.append([~index[p] for p in phrase])
        except KeyError as err:
            raise ValueError(
                f"boundless: the phrase pretoken {err.args[0]!r} is not among stage 1's "
                "pretokens; the phrases must be counted on the same text with the same pattern"
            ) from None
        counts.append(n)
    return items, counts


def _token(item: Item, whole: Callable[[int], int | None]) -> int | None:
    """An item's one token now: a superword's id, a whole word's token, else None."""
    return item if item >= 0 else whole(~item)


def phrase_pairs(items: list[Item], whole: Callable[[int], int | None]) -> list[Pair]:
    """The adjacent pairs of whole items of one phrase, left to right (repeats kept).

    >>> phrase_pairs([~0, ~1, 300], {0: 10, 1: 11}.get)
    [(10, 11), (11, 300)]
    """
    tokens = [_token(i, whole) for i in items]
    return [(a, b) for a, b in zip(tokens, tokens[1:]) if a is not None and b is not None]


def merge_phrase(items: list[Item], left: int, right: int, new_id: int, whole) -> list[Item]:
    """Replace each non-overlapping whole (left, right) in a phrase by `new_id`, left to right.

    >>> merge_phrase([~0, ~1, ~0, ~1], 10, 11, 300, {0: 10, 1: 11}.get)
    [300, 300]
    """
    out: list[Item] = []
    i, n = 0, len(items)
    while i < n:
        if i + 1 < n and _token(items[i], whole) == left and _token(items[i + 1], whole) == right:
            out.append(new_id)
            i += 2
        else:
            out.append(items[i])
            i += 1
    return out


def best_superpair(
    state: MergeState, pair_counts: Mapping[Pair, int], known: Mapping[bytes, int]
) -> tuple[Pair, int] | None:
    """The best pair of whole pretokens by THE candidate order, within the state's limits and
    skipping a pair whose bytes are already a token (present or removed), or None.

    Only the pairs tied at the highest count are checked; a lower count is looked at only
    when none of them may be merged (rare), so a merge costs one pass over the counts in C.
    """
    vocab = state.vocab
    counts = pair_counts
    while counts:
        best = max(counts.values())
        if best <= 0:
            return None
        tied = {
            p: best
            for p, c in counts.items()
            if c == best and state.fits(*p) and vocab[p[0]] + vocab[p[1]] not in known
        }
        if tied:
            return best_by_scan(tied, state.token_keys)
        counts = {p: c for p, c in counts.items() if c < best}
    return None


class NaiveSide:
    """The reference: every phrase's pairs recounted per merge."""

    def __init__(self, items: list[list[Item]], counts: list[int]) -> None:
        self.items, self.counts = items, counts

    def best(self, state: MergeState, whole, known) -> tuple[Pair, int] | None:
        pair_counts: Counter[Pair] = Counter()
        for items, n in zip(self.items, self.counts, strict=True):
            for pair in phrase_pairs(items, whole):
                pair_counts[pair] += n
        return best_superpair(state, pair_counts, known)

    def merge(self, left: int, right: int, new_id: int, whole) -> None:
        self.items = [merge_phrase(items, left, right, new_id, whole) for items in self.items]

    def changed(self, _words: Iterable[int], _whole) -> None:
        """Nothing to keep: `best` recounts."""


class IndexedSide:
    """Pair counts kept exact: a merge, or a word becoming whole or not, revisits only the
    phrases that hold it (pair -> phrases and word -> phrases, supersets); the best pair comes
    from a lazily invalidated heap in THE candidate order, refreshed with the pairs whose
    count changed since the last merge."""

    def __init__(self, items: list[list[Item]], counts: list[int], whole) -> None:
        self.items, self.counts = items, counts
        self.pair_counts: Counter[Pair] = Counter()
        self.pair_phrases: dict[Pair, set[int]] = {}
        self.word_phrases: dict[int, set[int]] = {}
        self.pairs_of: list[list[Pair]] = [[] for _ in items]
        self.heap: list[tuple] = []
        self.dirty: set[Pair] = set()
        for k, phrase in enumerate(items):
            for item in phrase:
                self.word_phrases.setdefault(~item, set()).add(k)
            self._count(k, whole)
        self.whole_now: dict[int, int | None] = {wi: whole(wi) for wi in self.word_phrases}

    def _count(self, k: int, whole) -> None:
        """Take phrase k's old pairs out of the counts and put its current ones in."""
        n, counts = self.counts[k], self.pair_counts
        for pair in self.pairs_of[k]:
            left = counts[pair] - n
            if left:
                counts[pair] = left
            else:
                del counts[pair]
        pairs = phrase_pairs(self.items[k], whole)
        for pair in pairs:
            counts[pair] += n
            self.pair_phrases.setdefault(pair, set()).add(k)
        self.dirty.update(self.pairs_of[k])
        self.dirty.update(pairs)
        self.pairs_of[k] = pairs

    def best(self, state: MergeState, _whole, known) -> tuple[Pair, int] | None:
        counts, heap, vocab = self.pair_counts, self.heap, state.vocab
        for a, b in self.dirty:
            c = counts.get((a, b))
            if c:
                heappush(heap, candidate_key(c, a, b, state.token_keys))
        self.dirty.clear()
        while heap:
            neg, _, _, a, b = heap[0]
            if counts.get((a, b)) != -neg:
                heappop(heap)  # stale: the count changed since (a fresh entry was pushed)
            elif not state.fits(a, b) or vocab[a] + vocab[b] in known:
                heappop(heap)  # never mergeable: its bytes are a token, or too long
            else:
                return (a, b), -neg
        return None

    def merge(self, left: int, right: int, new_id: int, whole) -> None:
        for k in self.pair_phrases.pop((left, right), ()):
            self.items[k] = merge_phrase(self.items[k], left, right, new_id, whole)
            self._count(k, whole)

    def changed(self, words: Iterable[int], whole) -> None:
        for wi in words:
            if wi not in self.whole_now:
                continue
            now = whole(wi)
            if now == self.whole_now[wi]:
                continue
            self.whole_now[wi] = now
            for k in self.word_phrases[wi]:
                self._count(k, whole)


def naive_loop(state: MergeState, tick, *, threshold: float, phrases: Mapping[Phrase, int]) -> None:
    """BoundlessBPE on the naive trainer: PickyBPE's reference loop with `NaiveSide`."""
    side = NaiveSide(*phrase_items(state, phrases))
    picky.naive_merge_loop(state, tick, threshold=threshold, side=side)


def indexed_loop(
    state: MergeState, tick, *, threshold: float, phrases: Mapping[Phrase, int]
) -> None:
    """BoundlessBPE on the indexed trainer: PickyBPE's indexed loop with `IndexedSide`."""
    items, counts = phrase_items(state, phrases)
    side = IndexedSide(items, counts, picky.whole_tokens(state.words))
    picky.indexed_merge_loop(state, tick, threshold=threshold, side=side)


#: The trainers that run BoundlessBPE, and their loops (PickyBPE's removals need them).
BOUNDLESS_LOOPS = {"naive": naive_loop, "indexed": indexed_loop}


def variant_loop(threshold: float, phrases: Mapping[Phrase, int]) -> VariantLoop:
    """BoundlessBPE's loops with `threshold` and the phrases bound, ending in PickyBPE's
    `compact` (logged)."""

    def done(state: MergeState) -> TrainerOutput:
        output = picky.compact(state)
        logger.info(
            "boundless: %d merges made, %d of them supermerges, %d tokens removed "
            "(threshold %g): %d vocab entries",
            len(state.merged),
            len(state.supermerges),
            len(state.removals),
            threshold,
            len(output.vocab),
        )
        return output

    loops = {
        t: partial(loop, threshold=threshold, phrases=phrases)
        for t, loop in BOUNDLESS_LOOPS.items()
    }
    return VariantLoop("boundless", loops, finish=done)


def _prepare(variant: Variant, context: RunContext, counted: PretokenCounts) -> Counter[Phrase]:
    """The corpus's phrases, read again document by document (timed with stage 1)."""
    t0, cpu = time.perf_counter(), cpu_seconds()
    specials = context.specials
    docs = iter_documents(context.corpus, specials[0] if specials else EOT)
    phrases = count_phrases(
        docs,
        pattern=context.pattern,
        specials=specials,
        protect=context.stage_one_options.get("protect"),
    )
    seconds = time.perf_counter() - t0
    context.timings.add("pretokenize", seconds, cpu_seconds() - cpu)
    logger.info(
        "boundless: %d phrases (%d distinct) of joinable pretokens, %.3f s",
        sum(phrases.values()),
        len(phrases),
        seconds,
    )
    return phrases


def _after(variant, context, output, counted, phrases) -> tuple[TrainerOutput, dict, str]:
    facts = {
        "supermerges": len(output.supermerges),
        "phrases": sum(phrases.values()),
        "distinct_phrases": len(phrases),
    }
    return output, {"removals": len(output.removals), "boundless": facts}, context.pattern


#: BoundlessBPE in a training run: its phrases, its loops, and what it made as its facts.
MEMBER = Member(
    "boundless",
    prepare=_prepare,
    loop=lambda variant, phrases: variant_loop(variant.threshold, phrases),
    after=_after,
)
