"""BoundlessBPE's supermerges at encode time: joining adjacent whole pretokens into superwords.

A BoundlessBPE run (`bpe.variants.boundless`) makes two kinds of merge, recorded in one
merges.txt: merges inside pretokens, and supermerges (listed by index in removals.json,
`bpe.formats.removals_json`), each joining two adjacent pretokens that are single tokens at
that point of training into one token. Encoding does both:

    * each pretoken is encoded by the merges and removals inside pretokens (the tokenizer's
      `bpe.tokenizer.removals.Replay`, the supermerges skipped);
    * then, over each run of adjacent pretokens whose bytes are a token some supermerge
      joins, the supermerges apply as BPE applies merges: the lowest rank first, to every
      adjacent pair of its two tokens, left to right without overlaps.

Why that is training's order: whether a pretoken is one token at some point of training
depends on its bytes alone, and a supermerge's two tokens were whole pretokens when it was
made (else training would not have counted the pair), so every pair of them a text holds was
joined then, whatever happened to those pretokens before or after. On every training document
this is exactly the segmentation training left (tested with hypothesis, removals included).

What it does not do: split text (the tokenizer's pattern and special tokens do), or export
(tokenizer.json and tiktoken cannot merge across pretokens: `bpe.formats.exports` refuses).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

#: Runs of pretokens whose joining is remembered (cleared when full).
RUN_CACHE_SIZE = 1 << 16


class Superwords:
    """Encode pretokens with a BoundlessBPE tokenizer's history (see the module).

    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b" a", 257: b" b", 258: b" a b"}
    >>> merges = [(b" ", b"a"), (b" ", b"b"), (b" a", b" b")]
    >>> sw = Superwords({v: k for k, v in vocab.items()}, merges, [2])
    >>> sw.ids([" a", " b", " a"], lambda p: [ord(c) for c in p])
    [258, 32, 97]
    """

    def __init__(
        self,
        id_of: dict[bytes, int],
        merges: Sequence[tuple[bytes, bytes]],
        supermerges: Sequence[int],
    ) -> None:
        self._id_of = id_of
        # (left id, right id) -> (the supermerge's rank, the id it makes)
        self._ranks: dict[tuple[int, int], tuple[int, int]] = {}
        for k in supermerges:
            a, b = merges[k]
            self._ranks.setdefault((id_of[a], id_of[b]), (k, id_of[a + b]))
        self._joins = {t for pair in self._ranks for t in pair}
        self._runs: dict[tuple[str, ...], list[int]] = {}

    def _token(self, pretoken: str) -> int | None:
        """The token a pretoken is when whole, if some supermerge joins it; else None."""
        token = self._id_of.get(pretoken.encode("utf-8"))
        return token if token in self._joins else None

    def ids(self, pretokens: Sequence[str], ids_of: Callable[[str], Sequence[int]]) -> list[int]:
        """The ids of one segment's pretokens: `ids_of(pretoken)` for each, but where
        supermerges join adjacent ones."""
        out: list[int] = []
        run: list[str] = []
        for p in [*pretokens, None]:
            if p is not None and self._token(p) is not None:
                run.append(p)
                continue
            if len(run) > 1:
                for entry in self._joined(tuple(run)):
                    out.extend((entry,) if entry >= 0 else ids_of(run[~entry]))
            elif run:
                out.extend(ids_of(run[0]))
            run = []
            if p is not None:
                out.extend(ids_of(p))
        return out

    def _joined(self, run: tuple[str, ...]) -> list[int]:
        """A run's items after the supermerges: a superword's id (>= 0), or `~i` for the i-th
        pretoken of the run left as it is."""
        cached = self._runs.get(run)
        if cached is not None:
            return cached
        tokens = [self._token(p) for p in run]
        entries = [~i for i in range(len(run))]
        ranks = self._ranks
        while len(tokens) > 1:
            found = [ranks[p] for p in zip(tokens, tokens[1:]) if p in ranks]
            if not found:
                break
            rank, made = min(found)
            i, joined_tokens, joined_entries = 0, [], []
            while i < len(tokens):
                pair = (tokens[i], tokens[i + 1]) if i + 1 < len(tokens) else None
                if pair in ranks and ranks[pair][0] == rank:
                    joined_tokens.append(made)
                    joined_entries.append(made)
                    i += 2
                else:
                    joined_tokens.append(tokens[i])
                    joined_entries.append(entries[i])
                    i += 1
            tokens, entries = joined_tokens, joined_entries
        if len(self._runs) >= RUN_CACHE_SIZE:
            self._runs.clear()
        self._runs[run] = entries
        return entries

    def safe_cut(self, pretokens: Sequence[str], keep: int) -> int:
        """The largest cut at or before `keep` (pretokens[:cut] | pretokens[cut:]) that no
        supermerge can cross: not between two pretokens that can both join.

        >>> sw = Superwords({b" a": 256, b" b": 257, b" a b": 258}, [(b" a", b" b")], [0])
        >>> sw.safe_cut([" a", " b", "!", " a", " b"], 4), sw.safe_cut([" a", " b"], 1)
        (3, 0)
        """
        token = self._token
        while 0 < keep < len(pretokens) and None not in (
            token(pretokens[keep - 1]),
            token(pretokens[keep]),
        ):
            keep -= 1
        return keep

    def ids_of_segments(self, segments, ids_of, pretoken_ids=None) -> list[int]:
        """The ids of a text's segments (a special token's id, or a list of pretokens:
        `bpe.tokenizer.Tokenizer._ids_of_segments`), each pretoken by `ids_of`."""
        if pretoken_ids is not None:
            refuse_other_segmentations()
        ids: list[int] = []
        for segment in segments:
            if isinstance(segment, int):
                ids.append(segment)
            else:
                ids.extend(self.ids(segment, ids_of))
        return ids

    def clear(self) -> None:
        self._runs.clear()


def refuse_other_segmentations() -> None:
    """Raise the one error for BPE-dropout or another segmentation on supermerges."""
    raise ValueError(
        "BPE-dropout and segmentations other than 'merges' are not defined for a BoundlessBPE "
        "tokenizer (its supermerges join whole pretokens); encode without them"
    )


def check_supermerges(supermerges: Sequence[int] | None, merges: Sequence) -> list[int]:
    """The supermerges as a sorted list, each a merge index (ValueError naming the first that
    is not, with the fix).

    >>> check_supermerges([3], [(b"a", b"b")])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: supermerge 3 is not the index of a merge (there are 1); the removals.json ...
    """
    out = sorted(set(supermerges or ()))
    for k in out:
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(merges):
            raise ValueError(
                f"supermerge {k!r} is not the index of a merge (there are {len(merges)}); the "
                "removals.json and merges.txt do not belong together"
            )
    return out
