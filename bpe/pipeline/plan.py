"""What a training call is asked, and what it checks and resolves before any work.

What it does: `TrainSpec`, every option of one training call as one typed object (the keywords
of `bpe.pipeline.train_bpe_detailed`, and what `bpe-train` builds from its config in one
function, `bpe.experiment.inputs.train_spec`); `plan_run`, the one validator: every check a bad
option fails (trainer, backend, vocab size, special tokens, variant, continuation, ladder
rungs, pattern, engine, parent, corpus) in milliseconds, not after stage 1, and the resolved
inputs (the parent loaded, once) as one `RunPlan`, which training then runs as it is.

What it does not do: read the corpus's text, count or train (`bpe.pipeline`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from bpe.corpus.files import DEFAULT_TEXT_FIELD, Corpus
from bpe.corpus.sources import resolve_source
from bpe.formats.init_from import Parent, check_parent, load_parent
from bpe.pipeline.seeds import check_seeds, seed_parent
from bpe.pretokenize.counting import check_input_file
from bpe.pretokenize.dask_backend import check_backend
from bpe.pretokenize.engines import resolve_engine
from bpe.text.patterns import resolve_pattern
from bpe.text.protect import check_merges_protected, check_protect, protect_pattern, protect_regex
from bpe.text.specials import validate_special_tokens
from bpe.trainers import check_trainer
from bpe.trainers.common import Limits, check_vocab_size
from bpe.util.progress import LOG_INTERVAL_S
from bpe.variants import (
    Variant,
    as_variant,
    check_continuation,
    check_trainer_supports,
)

Source = str | os.PathLike | Sequence[str | os.PathLike] | Corpus


@dataclass(frozen=True)
class TrainSpec:
    """One training call's options, typed: the keywords of `train_bpe_detailed` (which says
    what each means), with `limits` holding its `max_token_length` and `min_frequency`.

    A vocab ladder trains the same spec with two fields changed
    (`dataclasses.replace(spec, vocab_size=largest, rungs=...)`).

    >>> spec = TrainSpec("corpus.txt", 300, ["<|endoftext|>"], trainer="naive")
    >>> spec.trainer, spec.limits.max_token_length, spec.stage_one_options()["backend"]
    ('naive', None, 'processes')
    """

    input_path: Source
    vocab_size: int
    special_tokens: Sequence[str] | None = None
    trainer: str = "heap"
    num_workers: int | None = None
    progress: bool = False
    pattern: str | None = None
    init_from: str | os.PathLike | Parent | None = None
    cache_dir: str | os.PathLike | None = None
    backend: str = "processes"
    scheduler: str | None = None
    log_interval: float = LOG_INTERVAL_S
    variant: Variant | str | None = None
    format: str = "auto"  # noqa: A003 - the config key's name
    text_field: str = DEFAULT_TEXT_FIELD
    max_files: int | None = None
    max_bytes: int | None = None
    rungs: Sequence[int] = ()
    engine: str = "auto"
    seed_tokens: Sequence[str] = ()
    protect: Sequence[str] = ()
    limits: Limits = field(default_factory=Limits)

    def corpus_options(self) -> dict:
        """How the input is read (`bpe.corpus.sources.resolve_source`'s keywords)."""
        return {
            "format": self.format,
            "text_field": self.text_field,
            "max_files": self.max_files,
            "max_bytes": self.max_bytes,
        }

    def stage_one_options(self) -> dict:
        """How stage 1 runs, and the protected characters it splits off what it counted
        (`bpe.pretokenize.count_stage_one`'s keywords)."""
        return {
            "protect": protect_pattern(self.protect),
            "num_workers": self.num_workers,
            "progress": self.progress,
            "backend": self.backend,
            "scheduler": self.scheduler,
            "log_interval": self.log_interval,
        }


@dataclass(frozen=True)
class RunPlan:
    """What `plan_run` checked and resolved before any work: the training call runs this."""

    #: what was asked
    spec: TrainSpec
    #: None in a plan made with `list_input=False` (for checking only: not trained)
    corpus: Corpus | None
    specials: list[str]
    #: the vocab stage one trains to (SuperBPE's transition; else `vocab_size`)
    stage_one_size: int
    variant: Variant
    #: the split pattern of stage 1 (a regex string)
    pattern: str
    engine: str
    parent: Parent | None
    #: the vocab ladder's rungs as merge counts
    marks: list[int]

    def reading(self, corpus: Corpus) -> RunPlan:
        """The same plan reading `corpus` (e.g. the input cut before its held-out documents).

        No check runs again: the corpus must be this plan's, or a part of it."""
        return dataclasses.replace(
            self, corpus=corpus, spec=dataclasses.replace(self.spec, input_path=corpus)
        )


def plan_run(spec: TrainSpec, *, list_input: bool = True) -> RunPlan:
    """Every check before any work (a bad trainer name or vocab size fails in milliseconds,
    not after stage 1), and the run's inputs resolved: variant, pattern, engine, parent
    (loaded here, once), corpus. `list_input=False` checks all but the input (listing a Hub
    source needs the network): that plan, whose `corpus` is None, is for checking only.

    >>> plan_run(TrainSpec("corpus.txt", 100))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: vocab_size=100 is too small: ...
    """
    vocab_size, trainer, init_from = spec.vocab_size, spec.trainer, spec.init_from
    rungs = spec.rungs
    specials = validate_special_tokens(spec.special_tokens)
    try:
        check_trainer(trainer)
    except ImportError as err:  # its optional package is missing: name the option that asked
        raise ImportError(f"trainer={trainer}: {err}") from None
    check_backend(spec.backend, spec.scheduler)
    asked = as_variant(spec.variant)
    check_trainer_supports(asked.name, trainer)
    check_continuation(asked.name, init_from)
    protect = protect_regex(tuple(check_protect(spec.protect)) or None)
    regex_pattern = resolve_pattern(spec.pattern)
    parent = load_parent(init_from) if isinstance(init_from, str | os.PathLike) else init_from
    if parent is not None:
        check_parent(parent, pattern=regex_pattern)
    if spec.seed_tokens:
        parent = _seeded(spec, asked.name, specials, regex_pattern, parent)
    # the one check of vocab_size: room for the specials and bytes, or the parent and its seeds
    check_vocab_size(vocab_size, specials, parent=parent, source=_parent_name(spec))
    chosen = asked.resolve(vocab_size=vocab_size, specials=specials)
    marks = [int(v) - 256 - len(specials) for v in rungs]
    if marks and (chosen.name != "bpe" or init_from is not None or spec.seed_tokens):
        raise ValueError(
            f"rungs={list(rungs)!r} time plain BPE from scratch only (variant={chosen.name}, "
            f"init_from={init_from!r}): drop rungs="
        )
    # plain BPE up to SuperBPE's transition, then its stage two
    stage_one_size = chosen.transition_vocab or vocab_size
    chosen_engine = resolve_engine(spec.engine, pattern=regex_pattern, trainer=trainer)
    if parent is not None and protect is not None:
        check_merges_protected(parent.merges, protect, source=_parent_name(spec))
    source, corpus = spec.input_path, None
    if isinstance(source, Corpus):
        corpus = source
    elif list_input:
        corpus = resolve_source(source, **spec.corpus_options())
    if corpus is not None and corpus.is_plain_text_file:
        check_input_file(corpus.files[0].path)
    return RunPlan(
        spec,
        corpus,
        specials,
        stage_one_size,
        chosen,
        regex_pattern,
        chosen_engine,
        parent,
        marks,
    )


def _parent_name(spec: TrainSpec) -> str:
    return "seed_tokens" if spec.seed_tokens else f"init_from={spec.init_from!r}"


def _seeded(
    spec: TrainSpec, variant: str, specials: list[str], pattern: str, parent: Parent | None
) -> Parent:
    """The parent of a seeded run (`bpe.pipeline.seeds`), checked: plain BPE from scratch
    (room in the vocab for every seed's merges: `check_vocab_size`, as for any parent)."""
    if parent is not None:
        raise ValueError(
            "seed_tokens and init_from together: a parent's merges already decide the first "
            "tokens; seed a run from scratch, or continue the parent without seeds"
        )
    if variant != "bpe":
        raise ValueError(
            f"seed_tokens with variant={variant}: seeds start plain BPE (PickyBPE could remove "
            "a seed, SuperBPE's second stage starts over); use variant=bpe"
        )
    seeds = check_seeds(spec.seed_tokens, special_tokens=specials, pattern=pattern)
    seeded = seed_parent(seeds, special_tokens=specials, pattern=pattern)
    return seeded
