"""Encoding a stream of text in bounded memory: `Tokenizer.encode_iterable`.

Items are gathered into blocks; each block is encoded up to the last point where no later
text can change the result (`_stable_split`: a settled special token, then ordinary text up
to its last pretokens, which more text could still extend), and the rest is carried over, so
the ids equal those of encoding the whole text at once.

`StreamingEncoder` is a mixin of `bpe.tokenizer.Tokenizer`: it reads the tokenizer's special
tokens and its encoding steps (`_encode_parts`, `_segments`, `_ids_of_segments`, `pretokens`,
`_encode_whole`, `_dropout_stream`, and `_super`, whose supermerges move a cut), and holds
only the streaming.

What it does not do: read files (pass an open text file as the iterable) or run BPE.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain

from bpe.text.specials import split_on_special_tokens

#: Characters gathered from an iterable before a block is encoded in `encode_iterable`.
DEFAULT_STREAM_CHARS = 1 << 16

# invariant: a pretoken ending this close to the end of the text seen so far may still change
# when more text arrives (a contraction reads up to 3 characters ahead, and o200k's words take
# a contraction that follows them). Holds for the built-in patterns; a custom pattern that looks
# further ahead needs a larger value.
_UNSTABLE_TAIL_CHARS = 8


class StreamingEncoder:
    """`encode_iterable` for a tokenizer (see the module)."""

    def encode_iterable(
        self,
        iterable: Iterable[str],
        *,
        block_chars: int = DEFAULT_STREAM_CHARS,
        dropout: float = 0.0,
        seed: int | None = None,
        offset: int = 0,
    ) -> Iterator[int]:
        """Lazily encode an iterable of str (e.g. an open text file) in bounded memory.

        Items are gathered into blocks of about `block_chars` characters; each block is encoded
        up to the last point where no later text can change the result (see `_stable_split`),
        and the rest is carried over. The ids equal `encode("".join(iterable))`, with the same
        `dropout`, `seed` and `offset` (see `encode`; one seed serves the whole stream).

        Raises:
            ValueError: an item is not a str (e.g. a file opened in binary mode), or a bad
                dropout, seed or offset.

        >>> from bpe.tokenizer import Tokenizer
        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<s>"])
        >>> list(tok.encode_iterable(["a<", "s>b"]))
        [97, 256, 98]
        """
        if block_chars < 1:
            raise ValueError(f"block_chars={block_chars!r} must be >= 1")
        if dropout == 0:
            pretoken_ids, special_id = None, self.special_tokens.__getitem__
        else:
            stream = self._dropout_stream(dropout, seed, offset)
            pretoken_ids, special_id = stream.pretoken_ids, stream.special_id
        return self._encode_stream(iterable, block_chars, pretoken_ids, special_id)

    def _encode_stream(self, iterable, block_chars, pretoken_ids, special_id) -> Iterator[int]:
        pending: list[str] = []
        size = 0
        carry = ""
        threshold = block_chars
        for k, item in enumerate(iterable):
            if not isinstance(item, str):
                raise ValueError(
                    f"encode_iterable expects str items, but item {k} is "
                    f"{type(item).__name__} {item!r:.60}; open files in text mode "
                    "(open(path, encoding='utf-8')) or decode the bytes first"
                )
            pending.append(item)
            size += len(item)
            if size >= threshold:
                text = carry + "".join(pending)
                pending.clear()
                ids, carry = self._stable_split(text, pretoken_ids, special_id)
                size = len(carry)
                # subtle: text with no safe cut (one huge pretoken) is carried over; waiting
                # for twice as much keeps the rescanning linear overall instead of quadratic.
                threshold = max(block_chars, 2 * size)
                yield from ids
        pending.insert(0, carry)
        yield from self._encode_parts("".join(pending), pretoken_ids, special_id)

    def _stable_split(
        self, text: str, pretoken_ids=None, special_id=None
    ) -> tuple[Iterable[int], str]:
        """Encode the longest prefix of text whose ids cannot depend on text appended later.

        Returns the prefix's ids (a list, or from the whole-text kernel an iterator over its
        array, so a block's ids never all exist as Python ints) and the remaining suffix to
        carry over. `pretoken_ids` and
        `special_id` turn pretokens and special tokens into ids, in text order (by default the
        cache and its cold path, and the special-token table; `encode_iterable` passes
        dropout's).

        subtle: a special-token match starting at position p is settled once p + longest
        special <= len(text): every alternative at p can be decided, and matches before p are
        settled by the same argument. After the last settled special, ordinary text is safe
        up to (not including) its last pretoken and any pretoken starting within a few
        characters of the end (the contraction alternative reads ahead).

        >>> from bpe.tokenizer import Tokenizer
        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
        >>> tok._stable_split("hello there world")
        ([104, 101, 108, 108, 111], ' there world')
        """
        special_id = special_id or self.special_tokens.__getitem__
        parts = (
            split_on_special_tokens(text, (), compiled=self._special_regex)
            if self._special_regex is not None
            else [text]
        )
        settled_limit = len(text) - self._longest_special  # last p with p + longest <= len
        # Find the last settled special: parts alternate ordinary, special, ordinary, ...
        last = 0  # number of parts (ending with a special) whose ids are final
        pos = end_of_last = 0
        for k, part in enumerate(parts):
            if k & 1:
                if pos > settled_limit:
                    break
                last, end_of_last = k + 1, pos + len(part)
            pos += len(part)
        # Ordinary text after the last settled special, cut where no special can start.
        window_end = max(end_of_last, min(len(text), settled_limit + 1))
        window = text[end_of_last:window_end]
        pretokens = self.pretokens(window)
        keep = len(pretokens) - 1  # the last pretoken may grow
        start = len(window) - (len(pretokens[-1]) if pretokens else 0)
        while keep > 0 and start > len(window) - _UNSTABLE_TAIL_CHARS:
            keep -= 1
            start -= len(pretokens[keep])
        if self._super is not None:  # supermerges join pretokens: cut where none can
            keep = self._super.safe_cut(pretokens, keep)
            start = sum(map(len, pretokens[:keep]))
        if keep <= 0:
            start = 0
        if pretoken_ids is None:  # to the kernel whole, where it applies
            # subtle: split up to the window's end, as above, and stop at the cut: a prefix
            # ending at the cut could split differently (a run of spaces before what follows)
            cut = end_of_last + start
            whole = self._encode_whole(text[:window_end], specials=True, stop=cut, listed=False)
            if whole is not None:
                return _ints(whole), text[cut:]
        # subtle: lazily, so that special_id and pretoken_ids run in text order (dropout's
        # draws follow the byte offset they advance)
        segments = chain(self._segments(parts[:last], special_id), [pretokens[:keep]] * (keep > 0))
        return self._ids_of_segments(segments, pretoken_ids), text[end_of_last + start :]


def _ints(ids) -> Iterator[int]:
    """The ids of the whole-text kernel's array as Python ints, a slice at a time."""
    from bpe.tokenizer.compiled import id_list

    for k in range(0, len(ids), 4096):
        yield from id_list(ids[k : k + 4096])
