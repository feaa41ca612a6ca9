"""Load the tokenizer a training run continues from (`init_from=`): a run directory or GPT-2 files.

What it does: `load_parent` reads `vocab.json` + `merges.txt` from a directory (a bpe-lab run,
anything `save_pretrained` wrote, or GPT-2's own files), with its special tokens (from its
tokenizer.json, or for bare GPT-2 files the tokens that are neither bytes nor merge results,
i.e. `<|endoftext|>`) and its split pattern (from tokenizer.json; bare GPT-2 files have none
recorded and mean GPT-2's); `check_parent` refuses a parent whose pattern differs from the
run's, before any work.

What it does not do: train (`bpe.trainers.parent` replays the parent's merges and keeps its
ids; the ids of a GPT-2 parent are explained there).
"""

from __future__ import annotations

import os

from bpe.formats.gpt2_format import merges_sha256
from bpe.formats.pretrained import TokenizerDir, open_tokenizer_dir
from bpe.text.patterns import pattern_name

#: A tokenizer to continue training from: an opened tokenizer directory (its vocab, merges,
#: special tokens and split pattern, as `bpe.formats.pretrained` reads them).
Parent = TokenizerDir


def load_parent(path: str | os.PathLike) -> Parent:
    """Read the tokenizer in directory `path` (vocab.json + merges.txt, tokenizer.json optional).

    Raises:
        FileNotFoundError: the directory or one of its two files is missing.
        ValueError: malformed files, or files that do not belong together.
    """
    return open_tokenizer_dir(path, what="init_from=")


def check_parent(parent: Parent, *, pattern: str) -> None:
    """Raise ValueError when the run cannot continue `parent`: a PickyBPE or BoundlessBPE
    parent, or another split pattern. Its vocab size and special tokens are checked with the
    run's vocab size (`bpe.trainers.common.check_vocab_size`)."""
    if parent.supermerges:
        raise ValueError(
            f"init_from={str(parent.path)!r} is a BoundlessBPE tokenizer: its supermerges join "
            "whole pretokens, which a continued run's words cannot replay; continue from a bpe "
            "or superbpe run"
        )
    if parent.removals:
        raise ValueError(
            f"init_from={str(parent.path)!r} is a PickyBPE tokenizer: its merges make tokens "
            "it later removed, which a continued run cannot replay; continue from a bpe or "
            "superbpe run"
        )
    if parent.pattern != pattern:
        raise ValueError(
            f"init_from={str(parent.path)!r} was trained with the {pattern_name(parent.pattern)!r} "
            f"split pattern but this run uses {pattern_name(pattern)!r}; continue with the "
            "parent's pattern (pretokenizer=...), or its merges would meet other pretokens"
        )


def parent_record(parent: Parent) -> dict:
    """What a continued run records about its parent: path, merges sha256, sizes."""
    return {
        "path": str(parent.path),
        "merges_sha256": merges_sha256(parent.merges),
        "vocab_size": len(parent.vocab),
        "merges": len(parent.merges),
    }
