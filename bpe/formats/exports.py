"""Export a `bpe.Tokenizer` to the formats other tools load: Hugging Face and tiktoken.

What it does:
    * `to_hf_tokenizer` builds a `tokenizers.Tokenizer` with the library's own API: a byte-level
      BPE model holding our vocab and merges in rank order, the tokenizer's split pattern
      (spelled for its regex engine, `bpe.formats.tokenizer_json.hf_pattern`), the
      byte-level decoder, and our special tokens as added tokens (`special=True`) at their own
      ids; `save_hf_files` writes its `tokenizer.json` plus the `tokenizer_config.json` and
      `special_tokens_map.json` that `transformers.AutoTokenizer` reads;
    * `to_tiktoken` builds a `tiktoken.Encoding` (ranks = ids, same split pattern, our special
      tokens), optionally checked against our encoder on given texts; `save_tiktoken_file`
      writes tiktoken's ranks file (`base64(token) rank` per line);
    * `tiktoken_mismatches` counts the pretokens of some texts that tiktoken encodes
      differently from merge-list BPE (see below), and `encode_with_tiktoken` /
      `tiktoken_chunk_arrays` (the `bpe-encode --backend tiktoken` path) encode text with an
      Encoding while cutting at special tokens exactly as `bpe.Tokenizer` does;
    * `save_pretrained`: a whole Hugging Face style directory (vocab.json, merges.txt,
      tokenizer.json and its configs, tokenizer.tiktoken); `Tokenizer.from_pretrained` reads
      it back (its special tokens and split pattern from tokenizer.json: `special_tokens_of_dir`
      and `pattern_of_dir` in `bpe.formats.tokenizer_json`).

tiktoken vs merge-list BPE: tiktoken merges the adjacent pair whose *concatenated bytes* have the
lowest rank, and returns a pretoken that is itself a token as one id. Merge-list BPE only applies
the listed (left, right) merges. They differ when a token's bytes can be formed by a split that is
not its merge: with merges a+b, b+c, a+bc, the pretoken "abc" is [ab, c] for BPE (there is no
merge ab+c) but [abc] for tiktoken. Trained vocabs rarely contain such a case, so the export is
checked (`check_on`) and measured (`tiktoken_mismatches`) rather than assumed.

What it does not do: train, or hand-write JSON that the `tokenizers` library writes itself
(`transformers` is not needed to write the files, only to load them in a model's code).
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import numpy as np
import tiktoken
from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer

from bpe.formats.gpt2_format import merges_sha256, render, save_tokenizer_files
from bpe.formats.manifest import save_whole
from bpe.formats.removals_json import save_removals
from bpe.formats.tokenizer_json import hf_pattern
from bpe.runs.layout import HF_FILES, REMOVALS_FILE, TIKTOKEN_FILE, TOKENIZER_JSON
from bpe.text.protect import tiktoken_refusal
from bpe.text.specials import EOT, split_on_special_tokens
from bpe.util.io import atomic_write_text


class TokenizerLike(Protocol):
    """What the exports read of a `bpe.Tokenizer`. Formats sit below the tokenizer (it imports
    them for `from_pretrained` and `save_pretrained`), so they name its shape, not its class."""

    vocab: Mapping[int, bytes]
    merges: Sequence[tuple[bytes, bytes]]
    special_tokens: Mapping[str, int]
    pattern: str
    removals: Sequence
    protect: str | None
    supermerges: Sequence[int]

    def encode(self, text: str) -> list[int]: ...

    def encode_ordinary(self, text: str) -> list[int]: ...

    def pretokens(self, text: str) -> list[str]: ...


logger = logging.getLogger(__name__)


class TiktokenMismatch(ValueError):
    """tiktoken encodes some text differently from our merge-list BPE."""


def export_refusal(tok: TokenizerLike) -> str | None:
    """Why tokenizer.json and tiktoken cannot encode exactly as `tok` does, or None if they can.

    A PickyBPE tokenizer removes tokens between merges, a pruned one after them
    (`bpe.tokenizer.removals`), a BoundlessBPE one merges across pretokens; Hugging Face's BPE
    model and tiktoken can do neither, so they would give other ids on some text.

    >>> from bpe import Tokenizer
    >>> export_refusal(Tokenizer({i: bytes([i]) for i in range(256)}, [])) is None
    True
    """
    if tok.supermerges:
        return (
            f"this tokenizer joins whole pretokens ({len(tok.supermerges)} BoundlessBPE "
            "supermerges), which neither tokenizer.json (Hugging Face BPE) nor tiktoken can do, "
            "so they would encode differently; use bpe.Tokenizer (Tokenizer.from_pretrained "
            "reads vocab.json, merges.txt and removals.json)"
        )
    if not tok.removals:
        return None
    return (
        f"this tokenizer removes {len(tok.removals)} tokens (PickyBPE training, or bpe-prune), "
        "and neither tokenizer.json (Hugging Face BPE) nor tiktoken can split a removed token "
        "back into its parts, so they would encode differently; use bpe.Tokenizer "
        "(Tokenizer.from_pretrained reads vocab.json, merges.txt and removals.json) or "
        "bpe-encode --backend python"
    )


def tiktoken_export_refusal(tok: TokenizerLike) -> str | None:
    """Why tiktoken cannot encode exactly as `tok` does, or None: `export_refusal`'s reasons,
    and protected characters of more than one byte (`bpe.text.protect.tiktoken_refusal`)."""
    return export_refusal(tok) or tiktoken_refusal(tok.protect)


def _refuse(what: str, reason: str | None) -> None:
    if reason is not None:
        raise ValueError(f"no {what} export: {reason}")


# ---------------------------------------------------------------------------------------------
# Hugging Face
# ---------------------------------------------------------------------------------------------


def _special_ids(tok: TokenizerLike) -> set[int]:
    return set(tok.special_tokens.values())


def to_hf_tokenizer(tok: TokenizerLike):
    """A `tokenizers.Tokenizer` that gives exactly `tok.encode`'s ids.

    Special tokens are added tokens with `special=True`. They are also entries of the BPE
    model's vocab under their own text, at their own ids: the library gives an added token the
    model's id for its text when there is one, and otherwise the next free id after the model's
    vocab, which is not ours (ours sit at 0..k-1 after training).

    Raises:
        ValueError: a special token's text equals the GPT-2 rendering of a different token (the
            model vocab cannot hold both under one key).

    >>> from bpe import Tokenizer
    >>> vocab = {0: b"<|eot|>"} | {i + 1: bytes([i]) for i in range(256)} | {257: b" a"}
    >>> tok = Tokenizer(vocab, [(b" ", b"a")], ["<|eot|>"])
    >>> to_hf_tokenizer(tok).encode("a a<|eot|>").ids
    [98, 257, 0]
    """
    _refuse(TOKENIZER_JSON, export_refusal(tok))
    specials = _special_ids(tok)
    model_vocab: dict[str, int] = {}
    for idx in sorted(tok.vocab):
        if idx in specials:
            continue
        model_vocab[render(tok.vocab[idx])] = idx
    for text, idx in tok.special_tokens.items():
        clash = model_vocab.get(text)
        if clash is not None and clash != idx:
            raise ValueError(
                f"special token {text!r} (id {idx}) is spelled like the GPT-2 rendering of token "
                f"{clash} ({tok.vocab[clash]!r}); rename the special token"
            )
        model_vocab[text] = idx
    merges = [(render(a), render(b)) for a, b in tok.merges]
    # ignore_merges=False: a pretoken that is itself a token is still built by the merges, as
    # ours is (True would be tiktoken's shortcut, see the module docstring).
    model = models.BPE(vocab=model_vocab, merges=merges, fuse_unk=False, ignore_merges=False)
    hf = HFTokenizer(model)
    # Our split pattern (GPT-2's spells the contractions differently from the library's
    # built-in regex), then the byte-to-unicode mapping without a second split.
    # Protected characters (`bpe.text.protect`) are split off each pretoken by a second Split.
    splits = [hf_pattern(tok.pattern)] + ([tok.protect] if tok.protect else [])
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [
            *(pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in splits),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False, trim_offsets=False),
        ]
    )
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens(
        [
            AddedToken(text, special=True, normalized=False, lstrip=False, rstrip=False)
            for text in sorted(tok.special_tokens, key=tok.special_tokens.__getitem__)
        ]
    )
    for text, idx in tok.special_tokens.items():
        # invariant: every special keeps our id (see the docstring for why it would not).
        assert hf.token_to_id(text) == idx, (text, idx, hf.token_to_id(text))
    return hf


def _hf_configs(tok: TokenizerLike) -> tuple[dict, dict]:
    """tokenizer_config.json and special_tokens_map.json contents.

    `<|endoftext|>` is GPT-2's end of text and also serves as its bos and unk; other special
    tokens are listed as additional special tokens.
    """
    ordered = sorted(tok.special_tokens, key=tok.special_tokens.__getitem__)
    roles = {"bos_token": EOT, "eos_token": EOT, "unk_token": EOT} if EOT in ordered else {}
    extra = [t for t in ordered if t != EOT]
    special_map: dict = dict(roles)
    if extra:
        special_map["additional_special_tokens"] = extra
    added = {
        str(idx): {
            "content": text,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for text, idx in sorted(tok.special_tokens.items(), key=lambda kv: kv[1])
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "added_tokens_decoder": added,
        **special_map,
    }
    return config, special_map


def save_hf_files(tok: TokenizerLike, out_dir: str | os.PathLike) -> list[Path]:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json, atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config, special_map = _hf_configs(tok)
    paths = [out / name for name in HF_FILES]
    atomic_write_text(paths[0], to_hf_tokenizer(tok).to_str(pretty=True) + "\n")
    atomic_write_text(paths[1], json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    atomic_write_text(paths[2], json.dumps(special_map, indent=2, ensure_ascii=False) + "\n")
    return paths


# ---------------------------------------------------------------------------------------------
# tiktoken
# ---------------------------------------------------------------------------------------------


def tiktoken_ranks(tok: TokenizerLike) -> dict[bytes, int]:
    """tiktoken's mergeable ranks: token bytes -> id for every token that is not special.

    >>> from bpe import Tokenizer
    >>> tok = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")])
    >>> tiktoken_ranks(tok)[b"ab"], tiktoken_ranks(tok)[b"a"]
    (256, 97)
    """
    specials = _special_ids(tok)
    return {t: i for i, t in sorted(tok.vocab.items()) if i not in specials}


def tiktoken_file_text(tok: TokenizerLike) -> str:
    """tiktoken's ranks file: one `base64(token) id` line per mergeable token, ids ascending.

    >>> from bpe import Tokenizer
    >>> tiktoken_file_text(Tokenizer({i: bytes([i]) for i in range(256)}, [])).splitlines()[97]
    'YQ== 97'
    """
    lines = [
        f"{base64.b64encode(t).decode('ascii')} {i}"
        for t, i in sorted(tiktoken_ranks(tok).items(), key=lambda kv: kv[1])
    ]
    return "\n".join(lines) + "\n"


def save_tiktoken_file(tok: TokenizerLike, path: str | os.PathLike) -> Path:
    """Write the ranks file (load it with `tiktoken.load.load_tiktoken_bpe`), atomically."""
    atomic_write_text(path, tiktoken_file_text(tok))
    return Path(path)


def to_tiktoken(
    tok: TokenizerLike, *, check_on: Iterable[str] | None = None, name: str | None = None
):
    """A `tiktoken.Encoding` with our ids: ranks = ids, the tokenizer's split pattern, specials.

    Args:
        tok: the tokenizer to export.
        check_on: texts to verify on; every pretoken must get the same ids from both.
        name: the Encoding's name (default: built from the merges fingerprint).

    Raises:
        TiktokenMismatch: (a ValueError) a pretoken of `check_on` that tiktoken encodes
            differently; the message names the first one and both id lists.

    >>> from bpe import Tokenizer
    >>> tok = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")])
    >>> to_tiktoken(tok, check_on=["abc ab"]).encode_ordinary("abc")
    [256, 99]
    """
    _refuse("tiktoken", tiktoken_export_refusal(tok))
    enc = tiktoken.Encoding(
        name or f"bpe-lab-{merges_sha256(tok.merges)[:12]}",
        pat_str=tok.pattern,
        mergeable_ranks=tiktoken_ranks(tok),
        special_tokens=dict(tok.special_tokens),
    )
    if check_on is not None:
        report = tiktoken_mismatches(tok, check_on, encoding=enc, stop_at_first=True)
        if report["mismatches"]:
            first = report["first"]
            raise TiktokenMismatch(
                f"tiktoken encodes pretoken {first['pretoken']!r} as {first['tiktoken']} but "
                f"merge-list BPE gives {first['bpe']}; this vocab has a token that tiktoken "
                "reaches by a split that is not its merge. Encode with bpe.Tokenizer (or "
                "bpe-encode --backend python) instead"
            )
    return enc


def tiktoken_mismatches(
    tok: TokenizerLike, texts: Iterable[str], *, encoding=None, stop_at_first: bool = False
) -> dict:
    """How many pretokens of texts tiktoken encodes differently from `tok` (ordinary text).

    Returns:
        dict with `pretokens` (all), `unique_pretokens`, `mismatches` (pretokens, counted with
        repetition), `unique_mismatches` and `first` (None, or the first differing pretoken
        with both id lists).

    >>> from bpe import Tokenizer
    >>> tok = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")])
    >>> tiktoken_mismatches(tok, ["ab ab abc"])["mismatches"]
    0
    """
    enc = encoding if encoding is not None else to_tiktoken(tok)
    counts: dict[str, int] = {}
    specials = list(tok.special_tokens)
    for text in texts:
        for k, part in enumerate(split_on_special_tokens(text, specials)):
            if k & 1 or not part:
                continue
            for p in tok.pretokens(part):
                counts[p] = counts.get(p, 0) + 1
    out = {
        "pretokens": sum(counts.values()),
        "unique_pretokens": len(counts),
        "mismatches": 0,
        "unique_mismatches": 0,
        "first": None,
    }
    for p, n in counts.items():
        ours = tok.encode_ordinary(p)
        theirs = enc.encode_ordinary(p)
        if ours != theirs:
            out["mismatches"] += n
            out["unique_mismatches"] += 1
            if out["first"] is None:
                out["first"] = {"pretoken": p, "bpe": ours, "tiktoken": theirs}
            if stop_at_first:
                break
    return out


def encode_with_tiktoken(enc, tok: TokenizerLike, text: str) -> list[int]:
    """Encode text with a tiktoken Encoding, cutting at special tokens as `tok.encode` does.

    tiktoken's own special-token matching tries the specials in no fixed order, so with
    overlapping specials ("<|a|>" and "<|a|><|a|>") it may pick the shorter one; we cut first
    (longest match, as everywhere in bpe-lab) and hand only ordinary text to tiktoken.

    >>> from bpe import Tokenizer
    >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<s>", "<s><s>"])
    >>> encode_with_tiktoken(to_tiktoken(tok), tok, "a<s><s>")
    [97, 257]
    """
    specials = tok.special_tokens
    parts = split_on_special_tokens(text, list(specials))
    ordinary = enc.encode_ordinary_batch(parts[0::2], num_threads=1) if len(parts) > 1 else None
    if ordinary is None:
        return enc.encode_ordinary(text)
    ids: list[int] = []
    for k, part in enumerate(parts):
        if k & 1:
            ids.append(specials[part])
        else:
            ids.extend(ordinary[k // 2])
    return ids


def _ordered_map(fn, items: Iterable, threads: int) -> Iterator:
    """`map(fn, items)` on `threads` threads, in order, with at most 2 * threads in flight.

    (`ThreadPoolExecutor.map` would submit every item at once, i.e. read a whole corpus.)
    """
    if threads <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(threads) as pool:
        pending: deque = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= 2 * threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def tiktoken_chunk_arrays(
    tok: TokenizerLike,
    path: str | os.PathLike,
    ranges: Sequence[tuple[int, int]],
    *,
    read_text: Callable[[str, int, int], str],
    dtype: str,
    threads: int,
) -> Iterator[np.ndarray] | None:
    """Ids of each byte range of a file, encoded by tiktoken on threads; None if it differs.

    The first range is encoded by both `tok` and the tiktoken export first: if they differ the
    mismatch is logged as a warning and None is returned, so the caller encodes with `tok`.
    tiktoken releases the GIL while it encodes, so threads scale without copying the tokenizer
    into processes. `read_text(path, start, end)` reads one range as text. A tokenizer that
    cannot be exported (`tiktoken_export_refusal`: PickyBPE) returns None at once, logged.
    """
    reason = tiktoken_export_refusal(tok)
    if reason is not None:
        logger.warning("encoding with the python backend: %s", reason)
        return None
    enc = to_tiktoken(tok)
    if ranges:
        first = read_text(str(path), *ranges[0])
        ours, theirs = tok.encode(first), encode_with_tiktoken(enc, tok, first)
        if ours != theirs:
            at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
            at = min(len(ours), len(theirs)) if at is None else at
            logger.warning(
                "the tiktoken export encodes the first chunk of %s differently from bpe.Tokenizer "
                "(first difference at token %d: %s vs %s); encoding with the python backend",
                path,
                at,
                ours[at : at + 5],
                theirs[at : at + 5],
            )
            return None

    def encode(span: tuple[int, int]) -> np.ndarray:
        return np.array(encode_with_tiktoken(enc, tok, read_text(str(path), *span)), dtype=dtype)

    return _ordered_map(encode, ranges, threads)


# ---------------------------------------------------------------------------------------------
# Whole directories
# ---------------------------------------------------------------------------------------------


def save_exports(tok: TokenizerLike, out_dir: str | os.PathLike) -> list[Path]:
    """Write tokenizer.json (+ its configs) and tokenizer.tiktoken; returns their paths.

    Raises:
        ValueError: `export_refusal` says they cannot encode as `tok` does (PickyBPE).
    """
    _refuse("tokenizer.json or tiktoken", export_refusal(tok))
    out = Path(out_dir)
    reason = tiktoken_export_refusal(tok)
    if reason is not None:
        logger.warning("writing no tokenizer.tiktoken: %s", reason)
        return save_hf_files(tok, out)
    return [*save_hf_files(tok, out), save_tiktoken_file(tok, out / TIKTOKEN_FILE)]


def save_pretrained(
    tok: TokenizerLike, out_dir: str | os.PathLike, *, picky_threshold: float | None = None
) -> list[Path]:
    """Write vocab.json, merges.txt, tokenizer.json (+ configs) and tokenizer.tiktoken, then
    the manifest (`bpe.formats.manifest.save_whole`: files an earlier tokenizer left there that
    this one does not rewrite are removed).

    A PickyBPE or BoundlessBPE tokenizer writes removals.json (its pattern, `picky_threshold`,
    supermerges) instead of the exports, which cannot encode as it does (`export_refusal`).

    Returns the paths written.
    """

    def write(out: Path) -> list[Path]:
        # vocab.json keeps GPT-2's format (specials under their rendered text): GPT-2's own
        # files and every loader of them (ours, HF's) expect exactly that.
        paths = list(save_tokenizer_files(tok.vocab, tok.merges, out))
        reason = export_refusal(tok)
        if reason is None:
            return paths + save_exports(tok, out)
        logger.warning("writing no tokenizer.json or tokenizer.tiktoken: %s", reason)
        removals = save_removals(
            tok.removals,
            out / REMOVALS_FILE,
            pattern=tok.pattern,
            threshold=picky_threshold,
            protect=tok.protect,
            supermerges=tok.supermerges,
        )
        return [*paths, removals]

    return save_whole(out_dir, write)
