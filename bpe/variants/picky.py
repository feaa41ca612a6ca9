"""PickyBPE (Chizhov et al., 2024, "BPE Gets Picky"): merges that also remove what they used up.

After each merge of (a, b) into t, each parent p (a, then b) is checked: its intersection over
self, IoS(p) = (occurrences of p that went into t) / (occurrences of p just before, as they
stand when p is checked), is the share of p's use that the merge absorbed. At or above the
threshold, p is removed: every remaining occurrence is split back into p's parts (its merge's
left and right, themselves split further if they were removed before), and the vocabulary
shrinks by one, so training goes on until `vocab_size` tokens are present. A single byte and
a special token are never removed. The paper's defaults and rules, read from the paper and its
reference code (facts only; the code here is our own):

    * the threshold the paper recommends is 0.9 (`bpe.variants.DEFAULT_THRESHOLD`);
    * the left parent is checked first, then the right one, with counts that include what the
      left one's removal gave back to its parts;
    * a removed token that a later merge makes again simply comes back, as a new token.

Our choices where the reference code differs: a removal happens at IoS >= threshold (the
paper's inequality; the reference code compares with >); for a merge of a token with itself
(a, a), both occurrences inside each new token count (2 per merge), so a token used only in
pairs with itself has IoS 1.

What a slot is: token ids grow as in plain BPE while training (`MergeState.add_merge`), and the
removed ids are dropped when training ends (`compact`): the tokens still present get the dense
ids 0..n-1 in creation order, so a removed token's slot goes to the next merge, as the paper's
vocabulary counting does. The merges keep every merge in creation order (a removed token's
merge included) and `removals` record when each removal happened, so an encoder that replays
both in order (`bpe.tokenizer.removals`) segments every training pretoken exactly as training
left it.

Two implementations with identical results (tested with hypothesis and on the bundled
samples): `naive_merge_loop` recounts everything per merge (the reference) and
`indexed_merge_loop` keeps `PairIndex` counts plus token counts and token -> words up to date.
The heap trainer does not run PickyBPE (`PICKY_TRAINERS` names those that do).

What it does not do: choose between trainers (`bpe.trainers.learn_merges`) or encode text.
"""

from __future__ import annotations

import logging
from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from functools import partial
from itertools import chain

from bpe.trainers import VariantLoop
from bpe.trainers.common import (
    MergeState,
    Pair,
    TrainerOutput,
    best_fitting,
    count_pairs,
    merge_word,
    word_ids,
)
from bpe.trainers.pair_index import PairIndex
from bpe.variants.base import Member

logger = logging.getLogger(__name__)

#: A removal as training records it: (merges done when it happened, removed id, its parts).
Removal = tuple[int, int, tuple[int, ...]]

#: Merges a PickyBPE run may make, as a multiple of the tokens it adds: removals free slots
#: that later merges fill, and this bounds the loop should removals keep pace with merges.
MAX_MERGES_FACTOR = 8


class PickyRule:
    """The part both implementations share: who may be removed, IoS, and what a token splits into.

    `state.removals` (a list of `Removal`) records every removal in order.
    """

    def __init__(self, state: MergeState, threshold: float) -> None:
        self.state = state
        self.threshold = threshold
        # token id -> (left, right) of the merge that made it (ids of replayed parents too)
        self.parents: dict[int, Pair] = {}
        first = len(state.vocab) - len(state.merged)
        for k, pair in enumerate(state.merged):
            self.parents[first + k] = pair
        self.removed: set[int] = set()
        self.target = len(state.vocab) + state.num_merges  # tokens present at the end
        self.id_of = {token: i for i, token in state.vocab.items()}

    def merge(self, left: int, right: int, count: int) -> int:
        """Record the merge of (left, right); returns the id of its token.

        subtle: a token is its bytes. A merge that makes the bytes of a removed token brings
        that token back under its old id (the reference code's rule), and one that makes the
        bytes of a present token reuses it: so no two tokens ever share bytes, and a removal
        splits into the tokens present with those bytes.
        """
        token = self.state.vocab[left] + self.state.vocab[right]
        known = self.id_of.get(token)
        if known is None:
            new_id = self.state.add_merge(left, right, count)
            self.id_of[token] = new_id
        else:
            new_id = known
            self.state.merged.append((left, right))
            self.state.merge_counts.append(count)
            self.removed.discard(known)
        self.parents[new_id] = (left, right)
        return new_id

    def add_superword(self, left: int, right: int, count: int) -> int:
        """Record a merge of two whole pretokens (BoundlessBPE's supermerge); returns its id.
        A superword has no parents here: it is never removed."""
        new_id = self.state.add_merge(left, right, count)
        self.id_of[self.state.vocab[new_id]] = new_id
        self.state.supermerges.append(len(self.state.merged) - 1)
        return new_id

    @property
    def present(self) -> int:
        return len(self.state.vocab) - len(self.removed)

    def done(self) -> bool:
        return self.present >= self.target

    def removable(self, token: int) -> bool:
        """Only tokens made by a merge (never a byte, never a special) that are still present."""
        return token in self.parents and token not in self.removed

    def exceeds(self, consumed: int, remaining: int) -> bool:
        """IoS = consumed / (remaining + consumed) at or above the threshold."""
        total = remaining + consumed
        return total > 0 and consumed / total >= self.threshold

    def parts(self, token: int) -> tuple[int, ...]:
        """What an occurrence of `token` becomes when it is removed: present tokens only."""
        out: list[int] = []
        stack = list(reversed(self.parents[token]))
        while stack:
            t = stack.pop()
            if t in self.removed:
                stack.extend(reversed(self.parents[t]))
            else:
                out.append(t)
        return tuple(out)

    def remove(self, token: int) -> tuple[int, ...]:
        """Mark `token` removed and record it; returns the parts its occurrences split into."""
        parts = self.parts(token)
        self.removed.add(token)
        self.state.removals.append((len(self.state.merged), token, parts))
        return parts

    def checked_parents(self, left: int, right: int, merged: int) -> list[tuple[int, int]]:
        """(parent, occurrences that went into the `merged` new tokens), left first; one entry
        for (a, a)."""
        if left == right:
            return [(left, 2 * merged)]
        return [(left, merged), (right, merged)]


def check_merge_budget(rule: PickyRule, merges_made: int) -> bool:
    """False (logged) once a run has made `MAX_MERGES_FACTOR` times the merges it set out to."""
    limit = MAX_MERGES_FACTOR * max(rule.state.num_merges, 1)
    if merges_made < limit:
        return True
    logger.warning(
        "picky: stopped after %d merges with %d of %d tokens present: removals kept pace with "
        "merges; raise variant.threshold",
        merges_made,
        rule.present,
        rule.target,
    )
    return False


def choose(
    state: MergeState, pair_counts: dict[Pair, int], rule: PickyRule, side, whole
) -> tuple[Pair, int, bool] | None:
    """The next merge: (pair, count, whether it is a supermerge), or None when the loop stops.

    Without a `side` this is `select_by_scan`'s choice. With BoundlessBPE's
    (`bpe.variants.boundless`), the best pair of whole pretokens competes by count with the
    best pair inside words and wins a tie (the reference code's rule); `whole(word index)` is a
    word's one token, or None.
    """
    word = best_fitting(state, pair_counts)
    sup = None if side is None else side.best(state, whole, rule.id_of)
    if sup is not None and (word is None or sup[1] >= word[1]):
        return None if state.stop(sup[1]) else (*sup, True)
    if state.stop(None if word is None else word[1]):
        return None
    return (*word, False)


# -- the reference: recount everything ------------------------------------------------------------


def naive_merge_loop(
    state: MergeState, tick: Callable[[], object], *, threshold: float, side=None
) -> None:
    """Per merge: count pairs from scratch, merge the best, then check both parents (recounting).
    `side`: BoundlessBPE's pairs of whole pretokens (`bpe.variants.boundless`), or None."""
    rule = PickyRule(state, threshold)
    words = [word_ids(word) for word in state.words]

    def whole(wi: int) -> int | None:
        return words[wi][0] if len(words[wi]) == 1 else None

    made = 0
    while not rule.done() and check_merge_budget(rule, made):
        pair_counts = count_pairs(words, state.counts)
        chosen = choose(state, pair_counts, rule, side, whole)
        if chosen is None:
            return
        (left, right), count, superword = chosen
        made += 1
        if superword:
            side.merge(left, right, rule.add_superword(left, right, count), whole)
            tick()
            continue
        new_id = rule.merge(left, right, count)
        # a token that was already present (made again) had occurrences before this merge
        before = sum(n * w.count(new_id) for w, n in zip(words, state.counts, strict=True))
        words = [merge_word(word, left, right, new_id) for word in words]
        # subtle: not `count`, which counts overlapping pairs ("aaa" holds (a, a) twice) while
        # a merge makes one token of each non-overlapping occurrence
        merged = sum(n * w.count(new_id) for w, n in zip(words, state.counts, strict=True))
        merged -= before
        for parent, consumed in rule.checked_parents(left, right, merged):
            if not rule.removable(parent):
                continue
            remaining = sum(n * w.count(parent) for w, n in zip(words, state.counts, strict=True))
            if rule.exceeds(consumed, remaining):
                parts = list(rule.remove(parent))
                words = [_split(word, parent, parts) for word in words]
        tick()


def _split(word: list[int], token: int, parts: list[int]) -> list[int]:
    if token not in word:
        return word
    return list(chain.from_iterable(parts if t == token else (t,) for t in word))


# -- the fast one: incremental counts -------------------------------------------------------------


class _PickyIndex(PairIndex):
    """`PairIndex` whose pairs may also come back (a removal re-creates pairs that existed before
    any merge) and that remembers which words the last merge visited."""

    def __init__(self, words: list[str], counts: list[int]) -> None:
        super().__init__(words, counts)
        self.visited: dict[int, int] = {}

    def candidates(self, left: int, right: int) -> Iterable[int]:
        made = self._made.pop((left, right), None)
        initial = self._initial.words_with(left, right)
        if made is None:
            found = initial
        else:
            # subtle: after a removal, a pair may have words from both sources (see _register)
            found = [made, *initial] if type(made) is int else [*made, *initial]
        found = list(found)
        # each visited word's length before the merge: the merges made in it are what it lost
        self.visited = {wi: len(self.words[wi]) for wi in found}
        return found

    def register(self, pair: Pair, wi: int) -> None:
        """List word `wi` among the candidates of `pair` (a removal created it there)."""
        seen = self._made.get(pair)
        if seen is None:
            self._made[pair] = wi
        elif type(seen) is int:
            if seen != wi:
                self._made[pair] = _int_array((seen, wi))
        elif seen[-1] != wi:
            seen.append(wi)

    def split(self, wi: int, token: int, parts: tuple[int, ...]) -> None:
        """Replace every `token` in word `wi` by `parts`, keeping pair counts exact."""
        old = self.words[wi]
        new = old.replace(chr(token), "".join(map(chr, parts)))
        n = self.counts[wi]
        pair_counts = self.pair_counts
        old_pairs = Counter(zip(old, old[1:]))
        new_pairs = Counter(zip(new, new[1:]))
        for (a, b), k in old_pairs.items():
            pair = (ord(a), ord(b))
            c = pair_counts[pair] - n * k
            if c:
                pair_counts[pair] = c
            else:
                del pair_counts[pair]
        for (a, b), k in new_pairs.items():
            pair = (ord(a), ord(b))
            pair_counts[pair] = pair_counts.get(pair, 0) + n * k
            if (a, b) not in old_pairs:
                self.register(pair, wi)
        self.words[wi] = new


def _int_array(values: Iterable[int]) -> array:
    return array("i", values)


def indexed_merge_loop(
    state: MergeState, tick: Callable[[], object], *, threshold: float, side=None
) -> None:
    """`PairIndex` counts, a scan for the best pair, token counts and token -> words kept exact.
    `side`: BoundlessBPE's pairs of whole pretokens, told which words changed, or None."""
    rule = PickyRule(state, threshold)
    index = _PickyIndex(state.words, state.counts)
    whole = whole_tokens(index.words)

    pair_counts = index.pair_counts
    token_counts: Counter[int] = Counter()
    for word, n in zip(state.words, state.counts, strict=True):
        for t, k in Counter(word).items():
            token_counts[ord(t)] += n * k
    # token -> words that may hold it (a superset), for the tokens a merge made
    token_words: dict[int, list[int]] = {}
    made = 0
    while not rule.done() and check_merge_budget(rule, made):
        chosen = choose(state, pair_counts, rule, side, whole)
        if chosen is None:
            return
        (left, right), best, superword = chosen
        if superword:
            side.merge(left, right, rule.add_superword(left, right, best), whole)
            made += 1
            tick()
            continue
        new_id = rule.merge(left, right, best)
        index.merge(left, right, new_id)
        holding, merged = [], 0
        for wi, length in index.visited.items():
            k = length - len(state.words[wi])
            if k:
                holding.append(wi)
                merged += k * state.counts[wi]
        # subtle: `merged`, not `best`: overlapping pairs ("aaa" holds (a, a) twice) count in
        # `best`, but a merge makes one token of each non-overlapping occurrence
        token_words.setdefault(new_id, []).extend(holding)
        token_counts[new_id] += merged
        for parent, consumed in rule.checked_parents(left, right, merged):
            token_counts[parent] -= consumed
        made += 1
        changed = holding
        for parent, consumed in rule.checked_parents(left, right, merged):
            if not rule.removable(parent):
                continue
            if rule.exceeds(consumed, token_counts[parent]):
                changed = [*changed, *_remove(rule, index, parent, token_counts, token_words)]
        if side is not None:
            side.changed(changed, whole)
        tick()


def whole_tokens(words: list[str]) -> Callable[[int], int | None]:
    """`whole(word index)`: the one token of a word held as a str (`as_word`), or None while it
    has more; it reads `words` as they are when called.

    >>> whole = whole_tokens(["a", "bc"]); whole(0), whole(1)
    (97, None)
    """

    def whole(wi: int) -> int | None:
        word = words[wi]
        return ord(word) if len(word) == 1 else None

    return whole


def _remove(
    rule: PickyRule,
    index: _PickyIndex,
    token: int,
    token_counts: Counter[int],
    token_words: dict[int, list[int]],
) -> list[int]:
    """Remove `token`; returns the words it was split in."""
    parts = rule.remove(token)
    split = []
    remaining = token_counts.pop(token)
    mark = chr(token)
    for part in parts:
        token_counts[part] += remaining
    for wi in dict.fromkeys(token_words.pop(token, ())):
        if mark not in index.words[wi]:
            continue  # stale: a later merge used every occurrence in this word
        index.split(wi, token, parts)
        split.append(wi)
        for part in set(parts):
            if part in token_words:
                token_words[part].append(wi)
    return split


#: The trainers that run PickyBPE, and their loops.
PICKY_LOOPS = {"naive": naive_merge_loop, "indexed": indexed_merge_loop}
PICKY_TRAINERS = tuple(PICKY_LOOPS)


def still_removed(state: MergeState) -> set[int]:
    """The ids removed and not made again by a later merge (a token is its bytes, see
    `PickyRule.merge`)."""
    id_of = {token: i for i, token in state.vocab.items()}
    removed: set[int] = set()
    pending = iter(state.removals)
    nxt = next(pending, None)
    for k, (a, b) in enumerate(state.merged):
        while nxt is not None and nxt[0] <= k:
            removed.add(nxt[1])
            nxt = next(pending, None)
        removed.discard(id_of[state.vocab[a] + state.vocab[b]])
    while nxt is not None:
        removed.add(nxt[1])
        nxt = next(pending, None)
    return removed


def compact(state: MergeState) -> TrainerOutput:
    """The output of a PickyBPE run: present tokens renumbered 0..n-1, every merge, the removals.

    Returns a `TrainerOutput` whose `removals` are (merges done when it happened, the removed
    token's bytes, its parts' bytes), in the order they happened.
    """
    vocab = state.vocab
    removed = still_removed(state)
    present = [i for i in sorted(vocab) if i not in removed]
    out_vocab = {new: vocab[old] for new, old in enumerate(present)}
    merges = [(vocab[a], vocab[b]) for a, b in state.merged]
    removals = [
        (after, vocab[token], tuple(vocab[p] for p in parts))
        for after, token, parts in state.removals
    ]
    return TrainerOutput(
        out_vocab, merges, state.merge_counts, removals=removals, supermerges=state.supermerges
    )


def variant_loop(threshold: float) -> VariantLoop:
    """PickyBPE's loops with `threshold` bound, ending in `compact` (logged)."""

    def done(state: MergeState) -> TrainerOutput:
        output = compact(state)
        logger.info(
            "picky: %d merges made (what the progress bar counts), %d tokens removed "
            "(threshold %g): %d vocab entries",
            len(state.merged),
            len(state.removals),
            threshold,
            len(output.vocab),
        )
        return output

    loops = {t: partial(loop, threshold=threshold) for t, loop in PICKY_LOOPS.items()}
    return VariantLoop("picky", loops, finish=done)


#: PickyBPE in a training run: its loops, and the removals it made as its facts.
MEMBER = Member(
    "picky",
    loop=lambda variant, _: variant_loop(variant.threshold),
    after=lambda variant, context, output, counted, _: (
        output,
        {"removals": len(output.removals)},
        context.pattern,
    ),
)
