"""SuperBPE's second stage (Liu et al., 2025): merges across word boundaries, after stage one.

Stage one is plain BPE up to `variant.transition_vocab` with the usual split pattern. Stage two
counts the corpus's pretokens again with SuperBPE's stage-two pattern (words no longer cut at
the spaces between them: `bpe.text.patterns.STAGE_TWO_PATTERN`), replays stage one's merges on
them as continued training does (`bpe.trainers.parent`), and merges on to the full vocab, so
the merges it adds can form superwords ("by the way").

What it does not do: count pretokens itself (the caller passes `count`, which reads the corpus
with the stage-two pattern, through the pretoken cache when there is one), or choose the
transition (`bpe.variants.check_transition`).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from bpe.pretokenize import count_stage_one
from bpe.pretokenize.counting import PretokenCounts
from bpe.text.patterns import pattern_name, resolve_pattern
from bpe.trainers import run_merges
from bpe.trainers.common import TrainerOutput
from bpe.util.cputime import StageTimes, cpu_seconds
from bpe.variants.base import Member, RunContext, Variant

logger = logging.getLogger(__name__)


class _StageOne(NamedTuple):
    """Stage one as the parent stage two continues from (`bpe.trainers.parent.Parent`)."""

    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    special_tokens: list[str]


def stage_two(
    stage_one: TrainerOutput,
    count: Callable[[], tuple[PretokenCounts, str]],
    specials: Sequence[str],
    timings: StageTimes,
    *,
    stage_one_unique: int,
    trainer: str,
    vocab_size: int,
    pattern: str,
    **options: Any,
) -> tuple[TrainerOutput, dict]:
    """Count pretokens again with `pattern` (`count()`: the counts and the pretoken cache's
    status), replay stage one's merges on them and merge on to `vocab_size` with `trainer`.

    Returns the whole output (stage one's merge counts kept for its merges) and what stage two
    measured: its pretokens (how many, unique, their bytes, the longest), an estimate of the
    memory its counts hold, its merges and seconds. Its wall and CPU times are added to `timings`
    (`pretokenize` and `merge`). `options` are `run_merges`'s (progress, log_interval).
    """
    t0, cpu = time.perf_counter(), cpu_seconds()
    counted, cache_status = count()
    counting = time.perf_counter() - t0
    timings.add("pretokenize", counting, cpu_seconds() - cpu)
    counts = counted.take_counts()
    facts = {
        "pretokens": counted.num_pretokens,
        "unique_pretokens": counted.num_unique,
        "unique_ratio": round(counted.num_unique / max(1, stage_one_unique), 2),
        "unique_bytes": sum(map(len, counts)),
        "longest_pretoken_bytes": max(map(len, counts), default=0),
        # the keys and the dict: what the explosion of pretokens costs before any word is built
        "counts_mb": round((sys.getsizeof(counts) + sum(map(sys.getsizeof, counts))) / 1e6, 2),
        "pretoken_cache": cache_status,
        "pretokenize_seconds": round(counting, 6),
    }
    logger.info(
        "superbpe stage two: %d pretokens, %d unique (%s pattern), longest %d bytes, counts "
        "about %.1f MB, %.3f s",
        facts["pretokens"],
        facts["unique_pretokens"],
        pattern_name(pattern),
        facts["longest_pretoken_bytes"],
        facts["counts_mb"],
        counting,
    )
    parent = _StageOne(stage_one.vocab, stage_one.merges, list(specials))
    t1, cpu = time.perf_counter(), cpu_seconds()
    # the plan checked the run's inputs once; stage two's parent is stage one's own output
    output = run_merges(trainer, counts, vocab_size, list(specials), parent=parent, **options)
    merging = time.perf_counter() - t1
    timings.add("merge", merging, cpu_seconds() - cpu)
    done = len(stage_one.merges)
    output.merge_counts = stage_one.merge_counts + output.merge_counts[done:]
    facts["merges"] = len(output.merges) - done
    facts["merge_seconds"] = round(merging, 6)
    return output, facts


def _after(
    variant: Variant,
    context: RunContext,
    output: TrainerOutput,
    counted: PretokenCounts,
    _prepared: object,
) -> tuple[TrainerOutput, dict, str]:
    """Stage two on the corpus counted again with the stage-two pattern; the tokenizer then
    encodes with that pattern (every merge by rank)."""
    pattern = resolve_pattern(variant.stage_two_pattern)

    def count() -> tuple[PretokenCounts, str]:
        again, cache, _ = count_stage_one(
            context.corpus,
            context.specials,
            pattern=pattern,
            cache_dir=context.cache_dir,
            **context.stage_one_options,
        )
        return again, cache.status

    output, facts = stage_two(
        output,
        count,
        context.specials,
        context.timings,
        stage_one_unique=counted.num_unique,
        trainer=context.trainer,
        vocab_size=context.vocab_size,
        pattern=pattern,
        **context.merge_options,
    )
    return output, {"stage_two": facts}, pattern


#: SuperBPE in a training run: plain BPE to the transition (`RunPlan.stage_one_size`), then
#: stage two.
MEMBER = Member("superbpe", after=_after)
