"""The BPE family: the variants of the algorithm a run can train, each behind one interface.

    bpe       the ordinary merge loop (the default; every trainer)
    superbpe  SuperBPE (Liu et al., 2025): plain BPE to a transition vocab, then stage two
              with a pattern that keeps phrases whole (`bpe.variants.superbpe`)
    picky     PickyBPE (Chizhov et al., 2024): merges that also remove the tokens they used
              up (`bpe.variants.picky`)
    parity    parity-aware BPE (Foroutan et al., 2025): each merge serves the language worst
              compressed on parallel development text (`bpe.variants.parity`, its inputs in
              `bpe.variants.languages`)
    boundless BoundlessBPE (Schmidt et al., 2025): PickyBPE plus supermerges of two adjacent
              whole pretokens into a superword (`bpe.variants.boundless`)

What it does: `Variant` (a variant's name and parameters, checked and resolved: `base`), and
`MEMBERS`, the registry of what each one changes in a training run (`Member`: hooks before,
instead of and after the trainer's merge loop), which `bpe.pipeline` calls without naming any
variant. The trainers (`bpe.trainers`) stay the interchangeable loops that must agree merge for
merge; a variant wraps them.

Adding a variant: a module here holding its `MEMBER`, one line in `MEMBERS` below, its name in
`bpe.runs.stages.VARIANT_ORDER` and its parameters in `Variant` (`base`).

What it does not do: choose the trainer (`bpe.trainers`) or time the stages (`bpe.pipeline`).
"""

from __future__ import annotations

from bpe.variants import boundless, languages, picky, superbpe
from bpe.variants.base import (
    DEFAULT_THRESHOLD,
    DEFAULT_TRANSITION_SHARE,
    SUPPORTED_TRAINERS,
    VARIANTS,
    Member,
    RunContext,
    Variant,
    as_variant,
    check_continuation,
    check_global_merges,
    check_threshold,
    check_trainer_supports,
    check_transition,
    check_variant,
    variant_tag,
)

#: THE registry of the BPE family, in the order reports list it (`VARIANTS`, tested).
MEMBERS: dict[str, Member] = {
    m.name: m
    for m in (Member("bpe"), superbpe.MEMBER, picky.MEMBER, languages.MEMBER, boundless.MEMBER)
}

__all__ = [
    "DEFAULT_THRESHOLD",
    "DEFAULT_TRANSITION_SHARE",
    "MEMBERS",
    "SUPPORTED_TRAINERS",
    "VARIANTS",
    "Member",
    "RunContext",
    "Variant",
    "as_variant",
    "check_continuation",
    "check_global_merges",
    "check_threshold",
    "check_trainer_supports",
    "check_transition",
    "check_variant",
    "variant_tag",
]
