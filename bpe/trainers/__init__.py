"""The BPE trainers: one registry of merge loops and the one `learn_merges` that runs them.

Training is three stages, numbered once in `bpe.runs.stages` (`STAGES`; `stage_label` words them
for logs and reports) and named the same way in docstrings, comments and log lines everywhere:

    stage 1  count pretokens    `bpe.pretokenize`, before any trainer runs
    stage 2  count pairs        inside each trainer's `merge_loop`
    stage 3  select and merge   inside each trainer's `merge_loop`

A trainer is one function, `merge_loop(state, tick)` (typed by `MergeLoop`): stages 2 and 3
over a `MergeState`, calling `tick()` once per merge. `learn_merges` does everything around it
(prepare -> loop -> finish): validate the arguments, turn pretoken counts into words, show the
progress bar and log progress lines (`bpe.util.progress`), log an early stop, return a
`TrainerOutput`. All trainers return identical
results (tested): they differ only in how they find the next pair.

    naive    full recount per merge (the readable reference)
    indexed  incremental pair counts + pair -> words index, scan for the best pair
    heap     the same index + a lazily invalidated priority queue
    compiled heap's algorithm over flat arrays, compiled by Numba (`compiled` extra)

Adding a trainer is one module with a `merge_loop`, one line in `TRAINERS` and its name in
`bpe.runs.stages.TRAINER_ORDER` (where readers of runs take the order from). A trainer with an
optional dependency adds the check that loads it to `REQUIRES` (`check_trainer` runs it, so a
missing package fails before any work); one that compiles its loop adds the step to
`COMPILERS` (`compile_trainer`, timed apart from the loop by `bpe.pipeline`).

What it does not do: pre-tokenize (stage 1, `bpe.pretokenize`) or time the stages
(`bpe.pipeline`).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any, Protocol

from bpe.runs.stages import STAGES, stage_label  # noqa: F401  (re-exported: bpe.trainers.STAGES)
from bpe.text.specials import validate_special_tokens
from bpe.trainers import compiled, heap, indexed, naive
from bpe.trainers.common import (
    BELOW_MIN_FREQUENCY,
    EXHAUSTED,
    Limits,
    MergeState,
    Parent,
    TrainerOutput,
    check_vocab_size,
    finish,
    prepare,
)
from bpe.trainers.parent import prepare_from_parent
from bpe.util.compile_clock import CompileInfo
from bpe.util.progress import LOG_INTERVAL_S, Progress

logger = logging.getLogger(__name__)


class MergeLoop(Protocol):
    """A trainer: stages 2 and 3 over `state`, calling `tick()` after each merge.

    It records each merge with `state.add_merge` (at most `state.num_merges` of them) and
    returns early when no pair is left; it neither validates, logs nor shows progress.
    """

    def __call__(self, state: MergeState, tick: Callable[[], object]) -> None: ...


@dataclass(frozen=True)
class VariantLoop:
    """A variant of the algorithm that runs its own merge loop in place of the trainer's
    (PickyBPE, parity-aware BPE: `bpe.variants`), with its parameters bound.

    `learn_merges(..., variant=...)` runs `loops[trainer]` and turns the state into output
    with `finish`; everything around the loop (words, progress, early stop) stays the same.
    """

    name: str
    #: trainer name -> the variant's loop for it, parameters bound
    loops: Mapping[str, MergeLoop]
    #: how the merge state becomes the output (PickyBPE drops its removed tokens)
    finish: Callable[[MergeState], TrainerOutput] = finish

    def loop_for(self, trainer: str, *, parent: object = None) -> MergeLoop:
        """Its loop for `trainer` (ValueError naming the trainers that have one, or refusing
        a parent: no variant with its own loop continues another tokenizer's merges)."""
        if trainer not in self.loops:
            raise ValueError(
                f"variant={self.name} runs on "
                f"{' and '.join(f'trainer={t}' for t in self.loops)} only, not trainer={trainer}"
            )
        if parent is not None:
            raise ValueError(f"variant={self.name} trains from scratch: drop init_from")
        return self.loops[trainer]


#: THE registry, in the canonical trainer order (`bpe.runs.stages.TRAINER_ORDER`, tested).
TRAINERS: dict[str, MergeLoop] = {
    "naive": naive.merge_loop,
    "indexed": indexed.merge_loop,
    "heap": heap.merge_loop,
    # beyond what its 32-bit arrays hold, the compiled loop hands the state to heap's
    "compiled": functools.partial(compiled.merge_loop, fallback=heap.merge_loop),
}


#: Trainers that need an optional package: the check that imports it (ImportError naming the
#: extra that installs it). The Python trainers need nothing beyond the base install.
REQUIRES: dict[str, Callable[[], object]] = {"compiled": compiled.load_kernels}
#: Trainers that compile their merge loop first: the step that compiles it (or loads it from
#: a cache), which `bpe.pipeline` times as its own `compile` timing.
COMPILERS: dict[str, Callable[[], CompileInfo]] = {"compiled": compiled.compile_kernels}


def check_trainer(name: str) -> str:
    """Return `name` if it is a registered trainer whose packages are installed.

    Raises:
        ValueError: not a registered trainer (the message lists the choices).
        ImportError: the trainer needs a package that is missing (the message says how to
            install it).

    >>> check_trainer("heap")
    'heap'
    >>> check_trainer("fast")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown trainer 'fast'...
    """
    if not isinstance(name, str) or name not in TRAINERS:
        raise ValueError(f"unknown trainer {name!r}; choose one of {list(TRAINERS)}")
    if name in REQUIRES:
        REQUIRES[name]()
    return name


def compile_trainer(name: str) -> CompileInfo | None:
    """Compile the merge loop of `name` (or load it from its cache); None if it has none."""
    compile_step = COMPILERS.get(check_trainer(name))
    return None if compile_step is None else compile_step()


def learn_merges(
    name: str,
    pretoken_counts: Mapping[bytes, int],
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    **options: Any,
) -> TrainerOutput:
    """Run stages 2 and 3 with the trainer `name`: learn merges from counted pretokens.

    Args:
        name: a key of `TRAINERS` ("naive", "indexed", "heap" or "compiled": identical
            output).
        pretoken_counts: how often each pretoken (bytes) occurs (stage 1's result).
        vocab_size: total vocab size: special tokens + 256 bytes + merges.
        special_tokens: strings that get the first ids and are never merged.
        **options: `run_merges`'s keywords (progress, parent, log_interval, variant, marks,
            reached, limits), which it documents.

    Returns:
        `vocab` (special tokens, then the 256 bytes, then one token per merge), `merges` in
        creation order, and how often each merged pair occurred. Fewer merges than asked for
        (logged) when no pair is left.

    Raises:
        ValueError: unknown trainer, vocab_size too small (`check_vocab_size`, the one check
            of it), bad special tokens, a variant without a loop for this trainer, or a
            variant continuing a parent.

    >>> # (l, o) and (o, w) tie: "ow" wins
    >>> out = learn_merges("heap", {b"low": 5, b"lowest": 2}, 258)
    >>> out.merges, out.merge_counts
    ([(b'o', b'w'), (b'l', b'ow')], [7, 7])
    """
    specials = validate_special_tokens(special_tokens)
    check_trainer(name)
    check_vocab_size(vocab_size, specials, parent=options.get("parent"))
    return run_merges(name, pretoken_counts, vocab_size, specials, **options)


def run_merges(
    name: str,
    pretoken_counts: Mapping[bytes, int],
    vocab_size: int,
    specials: list[str],
    *,
    progress: bool = False,
    parent: Parent | None = None,
    log_interval: float = LOG_INTERVAL_S,
    variant: VariantLoop | None = None,
    marks: Sequence[int] = (),
    reached: dict[int, float] | None = None,
    limits: Limits | None = None,
) -> TrainerOutput:
    """`learn_merges` on arguments already checked: a run's plan (`bpe.pipeline.plan.plan_run`)
    checks them once, before stage 1, so training does not check them again. `specials` are
    validated (`validate_special_tokens`).

    Args:
        progress: show a progress bar over the merges (with merges/s).
        parent: an existing tokenizer to continue from (its `vocab`, `merges` and
            `special_tokens`): its merges are replayed on the words first and kept, with their
            ids, at the start of the output (`bpe.trainers.parent`).
        log_interval: seconds between INFO progress lines: a heartbeat while stage 2 counts
            pairs, then merges done, merges/s and ETA (`bpe.util.progress.Progress`).
        variant: a variant's own merge loop (`VariantLoop`: PickyBPE's, parity-aware BPE's,
            built by `bpe.variants`) run in place of the trainer's; None runs plain BPE.
        marks: merge counts to time (the vocab ladder, `bpe.experiment.ladder`): when the
            trainer's tick reports the merge that reaches one, `reached[mark]` gets the seconds
            since this call began (stages 2-3 so far, as a run of that many merges would time
            them). The compiled trainer ticks after each batch of merges, so its times are
            late by at most one batch.
        reached: the dict those times go into (required with marks).
        limits: the longest token a merge may make and the rarest pair merged
            (`bpe.trainers.common.Limits`; the same merges in every trainer); None: none.
    """
    merge_loop = TRAINERS[name]
    label = name
    if variant is not None:
        merge_loop = variant.loop_for(name, parent=parent)
        label = f"{name} ({variant.name})"
    meter = Progress(
        stage_label(3),
        total=None,
        unit="merge",
        logger=logger,
        waiting=stage_label(2),
        bar=f"stages 2-3 ({label})" if progress else None,
        interval=log_interval,
    )
    t0 = time.perf_counter()
    if marks and reached is None:
        raise ValueError("learn_merges(marks=...) needs reached={} to record the times in")
    with closing(meter):
        # no workers fork in stages 2-3, so the heartbeat runs from the start: building words
        # and the pair index can take many seconds at scale without a single tick
        meter.start()
        state = _prepare(pretoken_counts, vocab_size, specials, parent)
        state.limits = limits or Limits()
        # The words hold everything the loop needs: drop this reference so a caller that
        # handed the counts over (`PretokenCounts.take_counts`) gets their memory back.
        del pretoken_counts
        meter.set_total(state.num_merges)
        tick = meter.update if not marks else _MarkClock(meter.update, marks, reached, t0).tick
        merge_loop(state, tick)
    output = (finish if variant is None else variant.finish)(state)
    made = f"{len(state.merged) - state.replayed} of {state.num_merges} merges"
    if state.removals:
        made += f" and {len(state.removals)} removals"
    if state.stopped_by is None and len(output.vocab) < vocab_size:
        # the compiled loop stops at the merges its words can make, without asking for more
        state.stopped_by = EXHAUSTED
    output.stopped_by = state.stopped_by
    log_early_stop(
        label,
        made,
        len(output.vocab),
        vocab_size,
        stopped_by=state.stopped_by,
        limits=state.limits,
    )
    return output


def log_early_stop(
    name: str,
    made: str,
    entries: int,
    vocab_size: int,
    *,
    stopped_by: str | None = EXHAUSTED,
    limits: Limits | None = None,
) -> None:
    """The one line every trainer and variant logs when training ends short of `vocab_size`,
    with why: no pair was left (within `limits.max_token_length`), or the best was rarer than
    `limits.min_frequency`.

    >>> log_early_stop("heap", "43 of 43 merges", 300, 300)  # reached: nothing said
    """
    if entries >= vocab_size:
        return
    limits = limits or Limits()
    if stopped_by == BELOW_MIN_FREQUENCY:
        why = (
            f"the best pair occurs fewer than min_frequency={limits.min_frequency} times "
            "(lower min_frequency, or train on more text, for a larger vocab)"
        )
    elif limits.max_token_length is not None:
        why = (
            f"no pair is left whose token fits max_token_length={limits.max_token_length} "
            "bytes (raise it, or train on more text)"
        )
    else:
        why = "no pair is left to merge (the corpus is too small for this vocab size)"
    logger.warning(
        "%s: stopped after %s, with %d of %d vocab entries: %s",
        name,
        made,
        entries,
        vocab_size,
        why,
    )


class _MarkClock:
    """A tick that also records when the merge count reaches each mark (few ops per merge)."""

    def __init__(
        self, tick: Callable[[], object], marks: Sequence[int], reached: dict, t0: float
    ) -> None:
        self._tick, self._reached, self._t0 = tick, reached, t0
        self._pending = sorted({m for m in marks if m > 0}, reverse=True)
        self._done = 0
        for m in [m for m in marks if m <= 0]:
            reached[m] = 0.0

    def tick(self) -> None:
        self._tick()
        self._done += 1
        while self._pending and self._pending[-1] <= self._done:
            self._reached[self._pending.pop()] = time.perf_counter() - self._t0


def _prepare(
    pretoken_counts: Mapping[bytes, int],
    vocab_size: int,
    special_tokens: Sequence[str],
    parent: Parent | None,
) -> MergeState:
    if parent is None:
        return prepare(pretoken_counts, vocab_size, special_tokens)
    return prepare_from_parent(
        pretoken_counts,
        vocab_size,
        special_tokens,
        parent_vocab=parent.vocab,
        parent_merges=parent.merges,
    )
