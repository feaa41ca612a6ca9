"""`Tokenizer`: encode text to token ids and back with a byte-level BPE vocab and merges.

What it does:
    * `encode` splits text on special tokens (longest first, as `bpe.pretokenize` does), cuts the
      ordinary text into pretokens with the split pattern the vocab was trained with (GPT-2's
      by default; `pattern=`), and applies the merges inside each pretoken by rank
      (lowest rank first, leftmost on ties), so GPT-2's own files give GPT-2's ids;
    * `encode_ordinary` treats special tokens as plain text; `encode_iterable` streams any
      iterable of str in bounded memory, with `encode`'s ids (`bpe.tokenizer.streaming`);
    * `decode_bytes` is lossless; `decode` turns invalid UTF-8 into U+FFFD;
    * `encode(text, dropout=p, seed=s)` (and `encode_iterable`) applies BPE-dropout
      (Provilkov et al., 2020; `bpe.tokenizer.dropout`): each candidate merge is skipped with
      probability p at every step, without the cache, deterministically for a seed;
    * `encode(text, segmentation=...)` cuts pretokens by the longest token first or into the
      fewest tokens instead of by the merges (`bpe.tokenizer.segmentation`).

How it is fast (the hot path does no per-character Python work):
    * pretokens come from one `findall` per piece of text (`bpe.text.pretokens`: an exact `re`
      translation of the split pattern, up to twice as fast as `regex`);
    * a pretoken -> ids cache (a dict whose `__missing__` runs BPE), so ids are gathered with
      `map(cache.__getitem__, pretokens)` and `itertools.chain` entirely in C;
    * BPE on a cache miss works on ids with a precomputed pair -> rank table and a rank list
      that is updated only next to each merge; pretokens over 64 bytes (base64 blobs, long
      runs) visit each rank once over a linked list instead (`merge_long` of
      `bpe.tokenizer.merging`), so their cost grows linearly with their length, not as O(n^2);
    * with Numba installed, the cold pretokens of a text (up to `GROUP_PRETOKENS` pretokens at a
      time) are merged in one call of a compiled kernel (`bpe.tokenizer.compiled`) that gives
      the same ids ~15x faster; `merge_backend=` chooses (`bpe.tokenizer.cold_path`);
    * with GPT-2's pattern too, a long text goes to one kernel call that also splits it and
      keeps its own pretoken cache (`bpe.tokenizer.compiled_encode`): no pretoken becomes a
      Python `str`, and a cold encode runs faster than tiktoken's.

Files: `from_files` / `from_pretrained` read them, `save_pretrained` / `to_tiktoken` export
(`bpe.formats`).

What it does not do: train (see `bpe.pipeline`), parse or write any file format itself (see
`bpe.formats.gpt2_format` and `bpe.formats.exports`), or add BOS/EOS tokens.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from bpe.formats.gpt2_format import (
    add_specials,
    check_consistent,
    index_vocab,
    load_tokenizer_files,
)
from bpe.formats.pretrained import open_tokenizer_dir
from bpe.formats.removals_json import Removal, as_removals, check_history
from bpe.text.patterns import GPT2_PATTERN, pattern_name, resolve_pattern
from bpe.text.pretokens import find_pretokens
from bpe.text.protect import as_protect, protect_regex, split_all
from bpe.text.specials import special_token_regex, split_on_special_tokens, validate_special_tokens
from bpe.tokenizer.cold_path import ColdPath, PretokenCache, check_merge_backend
from bpe.tokenizer.dropout import dropout_stream
from bpe.tokenizer.merging import merge_bytes, pretoken_utf8
from bpe.tokenizer.removals import Replay
from bpe.tokenizer.segmentation import Segmentations, check_segmentation
from bpe.tokenizer.streaming import StreamingEncoder
from bpe.tokenizer.superwords import Superwords, check_supermerges, refuse_other_segmentations

logger = logging.getLogger(__name__)

#: Default bound on cached pretokens; the cache is emptied when it fills, so memory stays bounded
#: on any corpus (a few hundred thousand distinct pretokens cover most of real text).
DEFAULT_CACHE_SIZE = 1 << 18


class Tokenizer(StreamingEncoder):
    """Byte-level BPE tokenizer (GPT-2 style) over a vocab and an ordered list of merges.

    Args:
        vocab: id -> token bytes; must hold all 256 single bytes and every merge's parts and result.
        merges: (left, right) byte pairs in rank order (creation order).
        special_tokens: strings always encoded as one id; those not in the vocab are appended
            with fresh ids after the largest one.
        cache_size: at most this many pretokens are cached (keyword-only).
        pattern: the split pattern the vocab was trained with: a name of
            `bpe.text.patterns.PATTERNS` or a regex (keyword-only; default GPT-2's).
        protect: classes of characters that never merged in training (`bpe.text.protect`):
            each is its own pretoken here too (keyword-only; default none).
        merge_backend: how pretokens missing from the cache are merged, one of
            `bpe.tokenizer.cold_path.MERGE_BACKENDS` (keyword-only; default "auto": compiled
            when Numba is installed and the text is large enough, else Python). The ids never
            depend on it.
        removals: a PickyBPE tokenizer's removals (`bpe.formats.removals_json.Removal`, in the
            order they happened; keyword-only): encoding then replays merges and removals in
            training's order (in Python), and `merges` may make tokens the vocab no longer
            holds.
        supermerges: a BoundlessBPE tokenizer's supermerges (indices into `merges`,
            keyword-only): those merges join adjacent whole pretokens after the others
            (`bpe.tokenizer.superwords`), in training's order.

    Raises:
        ValueError: a byte missing from the vocab, two ids with the same bytes, a merge whose
            parts or result are not in the vocab, bad special tokens, an unknown
            merge_backend, or merge_backend="compiled" without Numba installed.

    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab"}
    >>> tok = Tokenizer(vocab, [(b"a", b"b")], ["<|eot|>"])
    >>> tok.encode("abc<|eot|>")
    [256, 99, 257]
    >>> tok.decode([256, 99, 257])
    'abc<|eot|>'
    """

    #: The UTF-8 bytes of a pretoken, or a clear error for a lone surrogate.
    _utf8 = staticmethod(pretoken_utf8)

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Sequence[str] | None = None,
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
        pattern: str = GPT2_PATTERN,
        merge_backend: str = "auto",
        removals: Sequence[Removal] | None = None,
        protect: Sequence[str] | str | None = None,
        supermerges: Sequence[int] | None = None,
    ) -> None:
        specials = validate_special_tokens(special_tokens)
        self.merge_backend: str = check_merge_backend(merge_backend)
        #: the split pattern (a regex string), exported with the vocab
        self.pattern: str = resolve_pattern(pattern)
        #: the protected characters' regex (`bpe.text.protect`: each its own pretoken), or None
        self.protect: str | None = as_protect(protect)
        self._protect = protect_regex(self.protect)
        if cache_size < 1:
            raise ValueError(f"cache_size={cache_size!r} must be >= 1")
        self.vocab: dict[int, bytes] = dict(vocab)
        self.merges: list[tuple[bytes, bytes]] = [(bytes(a), bytes(b)) for a, b in merges]
        self._cache_size = cache_size

        self._id_of: dict[bytes, int] = index_vocab(self.vocab)
        #: PickyBPE's removals (empty for every other tokenizer)
        self.removals: list[Removal] = as_removals(removals or ())
        if self.removals:
            check_history(self.vocab, self.merges, self.removals, source="merges and removals")
        else:
            check_consistent(self.vocab, self.merges, source="merges")

        self.special_tokens: dict[str, int] = add_specials(self.vocab, self._id_of, specials)
        self._special_list = specials
        self._special_regex = special_token_regex(specials)
        self._longest_special = max((len(t) for t in specials), default=0)

        self._byte_ids: list[int] = [self._id_of[bytes([b])] for b in range(256)]
        # (left id, right id) -> rank; the first occurrence of a repeated pair wins.
        self._ranks: dict[tuple[int, int], int] = {}
        self._merged: list[int] = []
        #: BoundlessBPE's supermerges (indices into merges; empty for every other tokenizer)
        self.supermerges: list[int] = check_supermerges(supermerges, self.merges)
        self._super = None
        if self.supermerges:
            self._super = Superwords(self._id_of, self.merges, self.supermerges)
        # a PickyBPE or BoundlessBPE tokenizer replays its history instead (merges make
        # removed tokens too, and supermerges apply across pretokens only)
        self._replay = None
        if self.removals or self.supermerges:
            self._replay = Replay(self.merges, self.removals, skip=set(self.supermerges))
        for a, b in self.merges if self._replay is None else ():
            self._ranks.setdefault((self._id_of[a], self._id_of[b]), len(self._merged))
            self._merged.append(self._id_of[a + b])
        self._cache = PretokenCache(self._bpe, cache_size)
        special_ids = set(self.special_tokens.values())
        self._segmentations = Segmentations(
            self.vocab, special_ids, self._utf8, cache_size, merge_backend
        )
        # how the pretokens the cache lacks are merged: in Python, or a batch in the kernel
        self._cold = ColdPath(
            merge_backend,
            ranks=self._ranks,
            merged=self._merged,
            byte_ids=self._byte_ids,
            max_id=self.max_token_id,
            replay=(self._id_of, self.merges, self.removals) if self._replay else None,
            whole_text=self.pattern == GPT2_PATTERN and not self.protect and not self._super,
            cache_size=cache_size,
        )
        logger.debug(
            "tokenizer: %d ids, %d merges, special tokens %s",
            len(self.vocab),
            len(self.merges),
            self.special_tokens,
        )

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_files(
        cls,
        vocab_path: str | os.PathLike,
        merges_path: str | os.PathLike,
        special_tokens: Sequence[str] | None = None,
        **kwargs,
    ) -> Tokenizer:
        """Load GPT-2 format `vocab.json` + `merges.txt` (ours or GPT-2's own).

        Raises:
            FileNotFoundError: a file is missing.
            ValueError: a malformed file (the message names the file and line or entry), or
                files that do not belong together.
        """
        vocab, merges = load_tokenizer_files(vocab_path, merges_path)
        return cls(vocab, merges, special_tokens, **kwargs)

    @classmethod
    def from_pretrained(
        cls,
        run_dir: str | os.PathLike,
        *,
        special_tokens: Sequence[str] | None = None,
        **kwargs,
    ) -> Tokenizer:
        """Load a run directory or one written by `save_pretrained` (Hugging Face's name).

        Args:
            run_dir: directory holding vocab.json and merges.txt.
            special_tokens: override; by default the directory's own, by the one rule of
                `bpe.formats.pretrained` (tokenizer.json, else a run's metrics.json, else the
                vocab entries no merge makes, as GPT-2's `<|endoftext|>`).

        Raises:
            FileNotFoundError: the directory, vocab.json or merges.txt is missing.
            ValueError: malformed files, or files that do not belong together.

        The split pattern is the one recorded in tokenizer.json (GPT-2's without one), unless
        `pattern=` is passed; a custom recorded one is first checked to split adversarial text
        in bounded time (`bpe.text.patterns.bounded_pattern`).
        """
        opened = open_tokenizer_dir(
            run_dir, what="tokenizer directory", own_pattern="pattern" not in kwargs
        )
        if special_tokens is None:
            special_tokens = opened.special_tokens
        kwargs.setdefault("pattern", opened.pattern)
        kwargs.setdefault("protect", opened.protect)
        if opened.removals:
            kwargs.setdefault("removals", opened.removals)
        if opened.supermerges:
            kwargs.setdefault("supermerges", opened.supermerges)
        return cls(opened.vocab, opened.merges, special_tokens, **kwargs)

    def save_pretrained(self, out_dir: str | os.PathLike) -> list[Path]:
        """Write vocab.json, merges.txt, tokenizer.json (+ its configs) and tokenizer.tiktoken.

        `transformers.AutoTokenizer.from_pretrained(out_dir)` and `Tokenizer.from_pretrained`
        load the result with the same ids. Returns the paths written.
        """
        from bpe.formats import exports  # here: it loads numpy, tiktoken and `tokenizers`

        return exports.save_pretrained(self, out_dir)

    def to_tiktoken(self, *, check_on: Iterable[str] | None = None, name: str | None = None):
        """A `tiktoken.Encoding` with the same ids (tiktoken is imported only when called).

        tiktoken's algorithm can differ from merge-list BPE on rare vocabs (see
        `bpe.formats.exports`); pass `check_on=texts` to verify, which raises a ValueError
        naming the first pretoken that differs.
        """
        from bpe.formats import exports  # here: it loads numpy, tiktoken and `tokenizers`

        return exports.to_tiktoken(self, check_on=check_on, name=name)

    def __reduce__(self):
        # Rebuild in the receiving process (e.g. a worker) instead of pickling the cache.
        names = ("pattern", "merge_backend", "removals", "protect", "supermerges")
        options = {name: getattr(self, name) for name in names} | {"cache_size": self._cache_size}
        return (_rebuild, (self.vocab, self.merges, self._special_list, options))

    def __repr__(self) -> str:
        name = pattern_name(self.pattern)
        return (
            f"Tokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)}, "
            f"special_tokens={self._special_list!r}"
            + (f", pattern={name!r})" if name != "gpt2" else ")")
        )

    def clear_cache(self) -> None:
        """Forget cached pretoken encodings (ids do not change; the next encode is cold)."""
        self._cache.clear()
        self._cold.clear()
        if self._super is not None:
            self._super.clear()
        self._segmentations.clear()

    @property
    def cached_pretokens(self) -> int:
        """How many pretokens have their ids cached now, in every cache (`clear_cache`)."""
        return len(self._cache) + self._cold.cached()

    @property
    def vocab_size(self) -> int:
        """Number of ids, special tokens included."""
        return len(self.vocab)

    @property
    def max_token_id(self) -> int:
        """The largest id (what a dtype must hold)."""
        return max(self.vocab)

    # -- BPE on one pretoken ----------------------------------------------------------------

    def _bpe(self, pretoken: str) -> tuple[int, ...]:
        """Ids of one pretoken: repeatedly merge the lowest-ranked adjacent pair (leftmost first).

        >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"aa"}
        >>> Tokenizer(vocab, [(b"a", b"a")])._bpe("aaa")
        (256, 97)
        """
        data = self._utf8(pretoken)
        if self._replay is not None:
            return tuple(map(self._id_of.__getitem__, self._replay.tokens(data)))
        return merge_bytes(data, self._byte_ids.__getitem__, self._ranks.get, self._merged)

    # -- encoding ---------------------------------------------------------------------------

    def pretokens(self, text: str) -> list[str]:
        """Pretokens of ordinary text under this tokenizer's pattern (no special-token handling).

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).pretokens("Hi  there!")
        ['Hi', ' ', ' there', '!']
        """
        return split_all(find_pretokens(text, self.pattern), self._protect)

    def _ids_of_segments(self, segments: Iterable[int | list[str]], pretoken_ids=None) -> list[int]:
        """The ids of a text's segments in order: a special token's id, or a list of pretokens
        (`bpe.tokenizer.cold_path.ColdPath.ids_of_segments`; BoundlessBPE's supermerges join
        pretokens after: `bpe.tokenizer.superwords`)."""
        if self._super is not None:
            return self._super.ids_of_segments(segments, self._cache.__getitem__, pretoken_ids)
        return self._cold.ids_of_segments(segments, self._cache, self._cache_size, pretoken_ids)

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text, treating special-token strings as ordinary text.

        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<s>"])
        >>> tok.encode_ordinary("<s>")
        [60, 115, 62]
        """
        whole = self._encode_whole(text, specials=False)
        return whole if whole is not None else self._ids_of_segments([self.pretokens(text)])

    def encode_ids(self, text: str):
        """`encode(text)`'s ids as the compiled kernel's int32 NumPy array when it takes the
        text, else as `encode`'s list: for callers that keep ids in arrays (`bpe-encode`)."""
        whole = self._encode_whole(text, specials=True, listed=False)
        return whole if whole is not None else self.encode(text)

    def _encode_whole(self, text: str, *, specials: bool, **options):
        """text's ids from the whole-text kernel, or None where it does not apply
        (`bpe.tokenizer.cold_path.ColdPath.encode_whole`, which takes the `options`)."""
        special_regex = self._special_regex if specials else None
        return self._cold.encode_whole(text, special_regex, self.special_tokens, **options)

    def encode(
        self,
        text: str,
        *,
        dropout: float = 0.0,
        seed: int | None = None,
        offset: int = 0,
        segmentation: str = "merges",
    ) -> list[int]:
        """Encode text: special tokens become their ids, the rest is pre-tokenized and merged.

        Args:
            text: the text.
            dropout: BPE-dropout (Provilkov et al., 2020): at each merge step every candidate
                merge is skipped with this probability (in [0, 1)); 0 is ordinary BPE, the
                same code path. Dropout bypasses the pretoken cache
                (`bpe.tokenizer.dropout` says how the steps are sampled).
            seed: with dropout, the same (text, seed) gives the same ids; None draws a fresh
                seed per call. Ignored without dropout.
            offset: with dropout, the byte offset of `text` in a larger stream: each
                pretoken's random draws depend on (seed, its byte offset), so a slice encoded
                with its offset gives the ids it gets inside the whole (`bpe-encode` passes a
                chunk's file offset). Ignored without dropout.
            segmentation: how each pretoken is cut into vocabulary tokens
                (`bpe.tokenizer.segmentation`): "merges" (BPE's merges, the default),
                "longest_prefix" (the longest token first, left to right) or "fewest" (the
                fewest tokens). Dropout applies to "merges" only.

        Raises:
            ValueError: text is not a str, it holds a lone surrogate, dropout is outside
                [0, 1), seed is not an int in [0, 2**64), or an unknown segmentation.

        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<s>"])
        >>> tok.encode("a<s>")
        [97, 256]
        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")])
        >>> tok.encode("ab ab", dropout=0.5, seed=3) == tok.encode("ab ab", dropout=0.5, seed=3)
        True
        """
        if not isinstance(text, str):
            raise ValueError(
                f"encode expects a str, got {type(text).__name__} {text!r:.60}; "
                "decode bytes first (e.g. data.decode('utf-8'))"
            )
        if check_segmentation(segmentation, dropout=dropout) != "merges":
            whole = self._encode_whole(
                text, specials=True, cut=lambda: self._segmentations.whole(segmentation)
            )
            if whole is not None:
                return whole
            cut = self._segmentations.pretoken_ids(segmentation)
            return self._encode_parts(text, cut, self.special_tokens.__getitem__)
        if dropout == 0:
            whole = self._encode_whole(text, specials=True)
            if whole is not None:
                return whole
            if self._special_regex is None:
                return self.encode_ordinary(text)
            return self._encode_parts(text, None, self.special_tokens.__getitem__)
        stream = self._dropout_stream(dropout, seed, offset)
        whole = self._cold.encode_dropout(text, self._special_regex, self.special_tokens, stream)
        if whole is not None:
            return whole
        return self._encode_parts(text, stream.pretoken_ids, stream.special_id)

    def _encode_parts(self, text: str, pretoken_ids, special_id) -> list[int]:
        """Ids of text: `special_id(token)` for special tokens, `pretoken_ids(pretokens)` for
        each piece of ordinary text between them, in text order (`pretoken_ids` None: the
        cache and its cold path, see `_ids_of_segments`)."""
        if self._special_regex is None:
            parts: Iterable[str] = [text]
        else:
            parts = split_on_special_tokens(text, (), compiled=self._special_regex)
        return self._ids_of_segments(self._segments(parts, special_id), pretoken_ids)

    def _segments(self, parts: Iterable[str], special_id) -> Iterator[int | list[str]]:
        """Parts of a text split on special tokens (ordinary, special, ordinary, ...) as
        segments, lazily and in order: `special_id(token)`, or an ordinary part's pretokens."""
        for k, part in enumerate(parts):
            if k & 1:
                yield special_id(part)
            elif part:
                yield self.pretokens(part)

    def _dropout_stream(self, dropout: float, seed: int | None, offset: int):
        """A `DropoutStream` over this vocab (`bpe.tokenizer.dropout.dropout_stream`)."""
        if self._super is not None:
            refuse_other_segmentations()
        return dropout_stream(
            dropout,
            seed,
            offset,
            replays=self._replay is not None,
            utf8=self._utf8,
            byte_ids=self._byte_ids,
            rank_of=self._ranks.get,
            merged=self._merged,
            special_ids=self.special_tokens,
        )

    # -- decoding ---------------------------------------------------------------------------

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Concatenate the bytes of ids (lossless; accepts lists or NumPy arrays).

        Raises:
            ValueError: an id that is not in the vocab (the message names it).

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).decode_bytes([104, 105])
        b'hi'
        """
        if hasattr(ids, "tolist"):
            ids = ids.tolist()  # NumPy arrays: plain ints are much faster to look up
        try:
            return b"".join(map(self.vocab.__getitem__, ids))
        except (KeyError, TypeError) as err:
            bad = (
                err.args[0]
                if isinstance(err, KeyError)
                else next((i for i in ids if not isinstance(i, int)), None)
            )
            raise ValueError(
                f"token id {bad!r} is not in the vocab (ids 0..{self.max_token_id}); "
                "decode ids produced by this tokenizer"
            ) from None

    def decode(self, ids: Iterable[int]) -> str:
        """Decode ids to text; bytes that are not valid UTF-8 become U+FFFD.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).decode([0xE2, 104])
        '\\ufffdh'
        """
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


def _rebuild(vocab, merges, specials, options):
    # The vocab already holds the appended specials; they are found again by their bytes.
    return Tokenizer(vocab, merges, specials, **options)
