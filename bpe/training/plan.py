"""What a training call checks and resolves before any work: the run's plan.

What it does: every check a bad argument fails (trainer, backend, vocab size, special tokens,
variant, continuation, ladder rungs, pattern, engine, parent, corpus) in milliseconds, not
after stage 1, and the resolved inputs as one `RunPlan`.

What it does not do: read the corpus's text, count or train (`bpe.training`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from bpe.corpus.files import Corpus
from bpe.corpus.sources import resolve_source
from bpe.formats.init_from import Parent, check_parent, load_parent
from bpe.pretokenize.counting import check_input_file
from bpe.pretokenize.dask_backend import check_backend
from bpe.pretokenize.engines import resolve_engine
from bpe.text.patterns import resolve_pattern
from bpe.text.specials import validate_special_tokens
from bpe.trainers import check_trainer
from bpe.trainers.common import Limits, check_vocab_size
from bpe.trainers.variants import (
    Variant,
    as_variant,
    check_continuation,
    check_trainer_supports,
    check_transition,
)


@dataclass(frozen=True)
class RunPlan:
    """What `train_bpe_detailed` checked and resolved before any work."""

    corpus: Corpus
    specials: list[str]
    trainer: str
    vocab_size: int
    #: the vocab stage one trains to (SuperBPE's transition; else `vocab_size`)
    stage_one_size: int
    variant: Variant
    #: the split pattern of stage 1 (a regex string)
    pattern: str
    engine: str
    parent: Parent | None
    #: the vocab ladder's rungs as merge counts
    marks: list[int]
    #: the longest token a merge may make, the rarest pair merged (`Limits()`: none)
    limits: Limits = field(default_factory=Limits)


def plan_run(
    input_path: str | os.PathLike | Sequence[str | os.PathLike] | Corpus,
    vocab_size: int,
    special_tokens: Sequence[str] | None,
    *,
    trainer: str,
    backend: str,
    scheduler: str | None,
    pattern: str | None,
    init_from: str | os.PathLike | Parent | None,
    variant: Variant | str | None,
    rungs: Sequence[int],
    engine: str,
    corpus_options: dict,
    limits: Limits | None = None,
) -> RunPlan:
    """Every check before any work (a bad trainer name or vocab size fails in milliseconds,
    not after stage 1), and the run's inputs resolved: variant, pattern, engine, parent,
    corpus."""
    specials = validate_special_tokens(special_tokens)
    check_trainer(trainer)
    check_backend(backend, scheduler)
    check_vocab_size(vocab_size, specials)
    chosen = as_variant(variant).resolve(vocab_size=vocab_size)
    check_trainer_supports(chosen.name, trainer)
    check_continuation(chosen.name, init_from)
    marks = [int(v) - 256 - len(specials) for v in rungs]
    if marks and (chosen.name != "bpe" or init_from is not None):
        raise ValueError(
            f"rungs={list(rungs)!r} time plain BPE from scratch only (variant={chosen.name}, "
            f"init_from={init_from!r}): drop rungs="
        )
    stage_one_size = vocab_size
    if chosen.name == "superbpe":
        stage_one_size = check_transition(chosen.transition_vocab, vocab_size, specials)
    regex_pattern = resolve_pattern(pattern)
    chosen_engine = resolve_engine(engine, pattern=regex_pattern, trainer=trainer)
    parent = load_parent(init_from) if isinstance(init_from, str | os.PathLike) else init_from
    if parent is not None:
        check_parent(parent, pattern=regex_pattern, vocab_size=vocab_size)
    corpus = (
        input_path
        if isinstance(input_path, Corpus)
        else resolve_source(input_path, **corpus_options)
    )
    if corpus.is_plain_text_file:
        check_input_file(corpus.files[0].path)
    return RunPlan(
        corpus,
        specials,
        trainer,
        vocab_size,
        stage_one_size,
        chosen,
        regex_pattern,
        chosen_engine,
        parent,
        marks,
        limits or Limits(),
    )
