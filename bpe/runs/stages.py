"""Stage names, once: the numbered algorithm stages and the stages of a run (and the trainers'
order, which readers need without loading a trainer).

Two vocabularies, each named here and nowhere else:

    algorithm stages (numbered)   1 count pretokens, 2 count pairs, 3 select and merge
    run stages (metrics.json)     setup, pretokenize, merge, save, analysis, report

`STAGE_TIMINGS` ties them: the training call times `pretokenize` (stage 1) and `merge`
(stages 2-3), the keys of metrics.json's `timings`; a trainer that compiles its loop also
times `COMPILE` between them (in no algorithm stage). Logs and reports word a stage with
`stage_label`.

What it does not do: time or run anything. It imports nothing, so the trainers, the runner and
every reader can share it without loading each other.
"""

from __future__ import annotations

#: The stages of training, by number (where each runs: `bpe.trainers`' module docstring).
STAGES: dict[int, str] = {1: "count pretokens", 2: "count pairs", 3: "select and merge"}

#: The keys of `TrainResult.timings` (and metrics.json's `timings`), in the order they run,
#: and the algorithm stages each one times.
STAGE_TIMINGS: dict[str, tuple[int, ...]] = {"pretokenize": (1,), "merge": (2, 3)}

#: The stages of one training call (`bpe.pipeline`), in the order they run.
TRAIN_STAGES = tuple(STAGE_TIMINGS)
#: The timing of a trainer that compiles its merge loop before running it (`compiled`: Numba
#: compiles, or loads its cached machine code): recorded between `pretokenize` and `merge`,
#: so `merge` stays the loop alone. The compiled pre-tokenizer's load (Numba's import, its
#: scanner compiled or loaded), done at the start of stage 1, is added to it and taken out of
#: `pretokenize`. Runs without either record no such key.
COMPILE = "compile"
#: Numba compiling the kernels that the save and analysis stages use (the encoder's, GPT-2's
#: scanner), on their first use on a machine; later runs load the machine code from disk and
#: record no such key. Timed apart (`bpe.util.compile_clock`) so that a first run's analysis
#: measures analysis, recorded just before the stage that set it off.
KERNEL_COMPILE = "kernel_compile"
#: The run stages by name (`bpe.experiment.runner` runs them in this order). `TRAINING` is
#: the one training call: its memory samples and its time are split into `TRAIN_STAGES` once
#: it returns, and a failure inside it is recorded as `TRAINING` (the call is one step).
SETUP, TRAINING, SAVE, ANALYSIS, REPORT = "setup", "train", "save", "analysis", "report"
#: The stages metrics.json records a time for, in the order they run.
TIMED_STAGES = (*TRAIN_STAGES, SAVE, ANALYSIS)
#: The stages of a run, in order (memory samples are tagged with them).
RUN_STAGES = (SETUP, TRAIN_STAGES[0], COMPILE, *TIMED_STAGES[1:], REPORT)


#: The trainers in their canonical order (slowest and simplest first), as reports list them.
#: `bpe.trainers.TRAINERS` registers exactly these, in this order (tested): readers take the
#: order from here so that reading a run never loads a trainer.
TRAINER_ORDER = ("naive", "indexed", "heap", "compiled")

#: The members of the BPE family in the order reports list them (`bpe.variants`
#: defines them with this tuple; plain BPE is what a run without a `variant` section trained).
VARIANT_ORDER = ("bpe", "superbpe", "picky", "parity", "boundless")


def stage_label(*numbers: int) -> str:
    """How logs and reports name one stage or a run of consecutive stages.

    >>> stage_label(1)
    'stage 1 (count pretokens)'
    >>> stage_label(2, 3)
    'stages 2-3 (count pairs, select and merge)'
    """
    names = ", ".join(STAGES[n] for n in numbers)
    if len(numbers) == 1:
        return f"stage {numbers[0]} ({names})"
    return f"stages {numbers[0]}-{numbers[-1]} ({names})"
