"""The BPE family: which variant of the algorithm a run trains, and its parameters, once.

    bpe       the ordinary merge loop (the default; every trainer)
    superbpe  SuperBPE (Liu et al., 2025): ordinary BPE up to `transition_vocab`, then training
              continues with `stage_two_pattern`, a split pattern that keeps whole phrases
              together, so later merges form superword tokens (`bpe.pipeline`)
    picky     PickyBPE (Chizhov et al., 2024): after each merge a parent whose occurrences now
              sit almost all inside the new token (intersection over self >= `threshold`) is
              removed, and its slot goes to a later merge (`bpe.variants.picky`)
    parity    parity-aware BPE (Foroutan et al., 2025): training text in several languages;
              each merge is the best pair of the language whose parallel development text
              (`dev`) takes the most tokens, after `global_merges` merges of plain BPE
              (`bpe.variants.parity`, `bpe.variants.languages`)
    boundless BoundlessBPE (Schmidt et al., 2025): PickyBPE (`threshold`) plus supermerges,
              which join two adjacent whole pretokens into a superword
              (`bpe.variants.boundless`)

What it does: `Variant` holds a variant's name and parameters with the papers' defaults filled
in (`Variant.resolve`), checks them (`check_variant`, naming the value and the fix), and says
what metrics.json records about them (`Variant.record`).

What it does not do: train (the variants run through `bpe.pipeline.train_bpe_detailed` and
`bpe.trainers.learn_merges`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bpe.corpus.files import Corpus
from bpe.pretokenize.counting import PretokenCounts
from bpe.runs.stages import VARIANT_ORDER
from bpe.trainers import VariantLoop
from bpe.trainers.common import TrainerOutput
from bpe.util.cputime import StageTimes

#: The variants, in the order reports list them (named once, in `bpe.runs.stages`).
VARIANTS = VARIANT_ORDER

#: SuperBPE's default transition point: this share of vocab_size is learned as ordinary BPE
#: (the paper's best 200K tokenizer switches at 180K, 90%).
DEFAULT_TRANSITION_SHARE = 0.9

#: PickyBPE's default intersection-over-self threshold (the paper's recommended 0.9).
DEFAULT_THRESHOLD = 0.9

#: The trainers each variant runs on, where not all of them (`bpe.variants.picky.PICKY_LOOPS`
#: implements exactly these, tested).
SUPPORTED_TRAINERS: dict[str, tuple[str, ...]] = {
    "picky": ("naive", "indexed"),
    "parity": ("naive", "heap"),  # `bpe.variants.parity.PARITY_LOOPS`
    "boundless": ("naive", "indexed"),  # `bpe.variants.boundless.BOUNDLESS_LOOPS`
}
#: Why a variant runs on those trainers only (the error names it).
_WHY_THOSE_TRAINERS = {
    "picky": "its removals need token counts and token -> words, which only those trainers keep",
    "parity": "it keeps pair counts per language, which only those trainers implement",
    "boundless": "its removals (PickyBPE's) need token counts and token -> words, which only "
    "those trainers keep",
}


@dataclass(frozen=True)
class Variant:
    """One variant and its parameters (None: not used by it, or the default when resolved).

    >>> Variant("superbpe").resolve(vocab_size=1000).transition_vocab
    900
    >>> Variant("picky").resolve(vocab_size=1000).threshold
    0.9
    """

    name: str = "bpe"
    #: superbpe: the vocab size (specials + bytes + merges) at which stage two starts
    transition_vocab: int | None = None
    #: superbpe: the split pattern of stage two (a name or a regex; None: `STAGE_TWO_PATTERN`)
    stage_two_pattern: str | None = None
    #: picky, boundless: the intersection-over-self threshold in (0, 1]
    threshold: float | None = None
    #: parity: the first merges made as plain BPE on all languages together (the hybrid)
    global_merges: int | None = None
    #: parity: the parallel development text (a folder with one file per language, named
    #: `<language>.<anything>`), or None: the first half of the bundled FLORES-200 devtest
    dev: str | None = None

    def resolve(self, *, vocab_size: int, specials: Sequence[str] = ()) -> Variant:
        """The same variant with its defaults filled in for a run to `vocab_size` (with
        `specials`, which SuperBPE's transition must leave room for).

        Raises:
            ValueError: a setting of another variant (`variant.threshold` on superbpe), a
                transition vocab above vocab_size, a stage-two pattern that does not compile.

        >>> Variant("superbpe", threshold=0.5).resolve(vocab_size=1000)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: variant.threshold=0.5 is a setting of variant=picky or boundless, not ...
        """
        check_variant(self.name)
        owners = {
            "transition_vocab": "superbpe",
            "stage_two_pattern": "superbpe",
            "threshold": ("picky", "boundless"),
            "global_merges": "parity",
            "dev": "parity",
        }
        for key, owner in owners.items():
            value = getattr(self, key)
            owned = (owner,) if isinstance(owner, str) else owner
            if value is not None and self.name not in owned:
                raise ValueError(
                    f"variant.{key}={value!r} is a setting of variant={' or '.join(owned)}, not "
                    f"of variant={self.name}; remove it, or pick variant={owned[0]}"
                )
        if self.name == "superbpe":
            from bpe.text.patterns import STAGE_TWO_PATTERN, resolve_pattern

            transition = self.transition_vocab
            if transition is None:
                transition = int(vocab_size * DEFAULT_TRANSITION_SHARE)
            check_transition(transition, vocab_size, specials)
            if self.stage_two_pattern is not None:
                resolve_pattern(self.stage_two_pattern)  # raises naming the pattern
            return Variant(
                "superbpe",
                transition_vocab=transition,
                stage_two_pattern=self.stage_two_pattern or STAGE_TWO_PATTERN,
            )
        if self.name in ("picky", "boundless"):
            threshold = DEFAULT_THRESHOLD if self.threshold is None else self.threshold
            return Variant(self.name, threshold=check_threshold(threshold))
        if self.name == "parity":
            merges = 0 if self.global_merges is None else self.global_merges
            return Variant(
                "parity", global_merges=check_global_merges(merges, vocab_size), dev=self.dev
            )
        return Variant("bpe")

    def record(self) -> dict:
        """What metrics.json's `variant` section says about the parameters."""
        return {
            "name": self.name,
            "transition_vocab": self.transition_vocab,
            "stage_two_pattern": self.stage_two_pattern,
            "threshold": self.threshold,
            "global_merges": self.global_merges,
            "dev": self.dev,
        }

    @property
    def tag(self) -> str:
        """The run-directory name part: empty for plain BPE, else `_<name>`.

        >>> Variant().tag, Variant("picky").tag
        ('', '_picky')
        """
        return variant_tag(self.name)


def variant_tag(name: str) -> str:
    """`_<name>` for a variant that is not plain BPE, else "" (run directory names)."""
    return "" if name in ("bpe", "", None) else f"_{name}"


def check_trainer_supports(variant: str, trainer: str) -> None:
    """Raise ValueError when `trainer` cannot run `variant`, naming the trainers that can.

    >>> check_trainer_supports("picky", "indexed")
    >>> try:
    ...     check_trainer_supports("picky", "heap")
    ... except ValueError as err:
    ...     print(str(err)[:66])
    variant=picky runs on the naive and indexed trainers only, not tra
    """
    allowed = SUPPORTED_TRAINERS.get(variant)
    if allowed is not None and trainer not in allowed:
        raise ValueError(
            f"variant={variant} runs on the {' and '.join(allowed)} trainers only, not "
            f"trainer={trainer!r}: use trainer={allowed[-1]} ({_WHY_THOSE_TRAINERS[variant]})"
        )


def check_continuation(variant: str, init_from: object) -> None:
    """Raise ValueError when a variant is asked to continue a parent tokenizer: only plain BPE
    continues one (PickyBPE's removals would rewrite the parent's vocab, and SuperBPE's two
    stages start from scratch). The one check of this rule, for the config, training and the
    trainers alike.

    >>> check_continuation("bpe", "runs/parent")
    >>> check_continuation("picky", None)
    >>> check_continuation("picky", "runs/parent")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: variant=picky cannot continue a parent tokenizer (init_from=): ...
    """
    if variant != "bpe" and init_from is not None and init_from != "":
        raise ValueError(
            f"variant={variant} cannot continue a parent tokenizer (init_from=): train from "
            "scratch, or continue with variant=bpe"
        )


def check_variant(name: str) -> str:
    """Return `name` if it is a variant; otherwise raise ValueError listing the choices.

    >>> check_variant("bpe")
    'bpe'
    """
    if not isinstance(name, str) or name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; choose one of {list(VARIANTS)}")
    return name


def check_threshold(threshold: float) -> float:
    """PickyBPE's threshold must lie in (0, 1]: 1 removes only tokens used up entirely."""
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ValueError(f"variant.threshold={threshold!r} must be a number in (0, 1], e.g. 0.9")
    if not 0 < threshold <= 1:
        raise ValueError(
            f"variant.threshold={threshold!r} is out of range: it must be in (0, 1] (the paper "
            "recommends 0.9; 1 removes only tokens that a merge used up entirely)"
        )
    return float(threshold)


def as_variant(value: Variant | str | None) -> Variant:
    """A `Variant` from a name, a Variant or None (plain BPE)."""
    if value is None:
        return Variant()
    if isinstance(value, Variant):
        check_variant(value.name)
        return value
    return Variant(check_variant(value))


def check_transition(transition: int | None, vocab_size: int, specials: Sequence[str] = ()) -> int:
    """SuperBPE's transition vocab size: room for the specials and bytes, at most vocab_size.

    >>> check_transition(900, 400)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: variant.transition_vocab=900 must lie between 256 (the specials and 256 bytes) ...
    """
    low = 256 + len(specials)
    if not isinstance(transition, int) or isinstance(transition, bool):
        raise ValueError(f"variant.transition_vocab={transition!r} must be an int, e.g. 9000")
    if not low <= transition <= vocab_size:
        raise ValueError(
            f"variant.transition_vocab={transition} must lie between {low} (the specials and "
            f"256 bytes) and vocab_size={vocab_size}; the paper's choice is 90% of vocab_size "
            "(leave it null for that)"
        )
    return transition


def check_global_merges(merges: object, vocab_size: int) -> int:
    """Parity-aware BPE's plain-BPE merges first: a whole number from 0 to the merges that
    `vocab_size` leaves (all of them: plain BPE throughout).

    >>> check_global_merges(-1, 1000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: variant.global_merges=-1 must be a whole number from 0 (parity-aware from the ...
    """
    most = vocab_size - 256
    if isinstance(merges, bool) or not isinstance(merges, int) or not 0 <= merges <= most:
        raise ValueError(
            f"variant.global_merges={merges!r} must be a whole number from 0 (parity-aware from "
            f"the first merge) to {most} (vocab_size={vocab_size} less the 256 bytes); the "
            "paper's hybrid makes some thousands of plain merges first"
        )
    return merges


@dataclass
class RunContext:
    """What a variant's hooks get from the training run around them (`bpe.pipeline` fills it
    in): the corpus and its stage-1 settings, the trainer, and where to add stage times."""

    corpus: Corpus
    specials: list[str]
    #: stage 1's split pattern (a regex)
    pattern: str
    trainer: str
    vocab_size: int
    cache_dir: Any
    #: how stage 1 runs (`bpe.pretokenize.count_stage_one`'s keywords beyond the corpus)
    stage_one_options: dict
    timings: StageTimes
    #: `learn_merges`'s options (progress, log_interval, limits)
    merge_options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Member:
    """What one member of the BPE family changes in a training run, as three hooks that
    `bpe.pipeline` calls in order around the trainer's merge stage (None: nothing):

        prepare(variant, context, counted) -> prepared   before the merges: what it counts
                                                         besides stage 1 (timed as stage 1)
        loop(variant, prepared) -> VariantLoop            its own merge loop for the trainer's
        after(variant, context, output, counted, prepared) -> (output, facts, pattern)
                                                          after the merges: a stage of its own,
                                                          what it measured, the final pattern

    Adding a variant is one module holding its `MEMBER` and one line in `bpe.variants.MEMBERS`
    (plus its name in `bpe.runs.stages.VARIANT_ORDER` and its parameters in `Variant`).
    """

    name: str
    prepare: Callable[[Variant, RunContext, PretokenCounts], Any] | None = None
    loop: Callable[[Variant, Any], VariantLoop] | None = None
    after: Callable[..., tuple[TrainerOutput, dict, str]] | None = None
