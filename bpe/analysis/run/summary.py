"""ANALYSIS.md's summary: the five numbers a reader looks for first, each from its section.

What it does: `section_summary` renders training time (the training stages, a compile
included), training memory (what training added to the process tree), bytes per token on
held-out text against GPT-2's, bits per byte and the longest token; the sections below
explain each. What it does not do: compute a measure (every number is read from
metrics.json through `bpe.runs.schema`), or say more than a line per number.
"""

from __future__ import annotations

from functools import partial

from bpe.analysis.markdown import fmt
from bpe.analysis.run.token_sections import longest_token_phrase
from bpe.runs import schema
from bpe.runs.stages import COMPILE, TRAIN_STAGES


def section_summary(metrics: dict) -> list[str]:
    """The summary lines (none for a run that did not complete).

    >>> m = {"status": "complete", "timings": {"pretokenize": 0.5, "merge": 1.5},
    ...      "memory": {"training": {"added_mb": 7.3, "peak_mb": 160.0, "stage": "merge"}},
    ...      "compression": {"own": {"ratio": 3.9, "gpt2_ratio": 4.0, "docs": 128}},
    ...      "bits_per_byte": {"model": {"order": 3}, "own": {"bits_per_byte": 1.26}},
    ...      "longest_tokens": [{"bytes": 14, "text": " compassionate"}]}
    >>> print("\\n".join(section_summary(m)))  # doctest: +NORMALIZE_WHITESPACE
    ## Summary
    <BLANKLINE>
    - **Training**: 2.000 s (pretokenize 0.500 s, merge 1.500 s), training memory +7.3 MB
    - **Bytes per token** on 128 held-out documents: 3.900, GPT-2's 4.000 (0.975x)
    - **Bits per byte** (3-gram model of the ids): 1.260
    - **Longest token**: ' compassionate' (14 bytes)
    <BLANKLINE>
    """
    get = partial(schema.get, metrics)
    if get(schema.STATUS) != "complete":
        return []
    timings = get(schema.TIMINGS) or {}
    stages = [s for s in (TRAIN_STAGES[0], COMPILE, *TRAIN_STAGES[1:]) if s in timings]
    added = get(schema.TRAINING_ADDED_MB)
    memory = "n/a (not measured apart in this run)" if added is None else f"+{fmt(added, '.1f')} MB"
    cached = get(schema.PRETOKEN_CACHE_STATUS) == "hit"
    lines = [
        "- **Training**: "
        f"{fmt(sum(timings[s] for s in stages))} s "
        f"({', '.join(f'{s} {fmt(timings[s])} s' for s in stages)}"
        f"{'; pretoken counts loaded from the cache' if cached else ''}), "
        f"training memory {memory}"
    ]
    ratio, gpt2 = get(schema.COMPRESSION_RATIO), get(schema.GPT2_COMPRESSION_RATIO)
    if ratio is not None:
        against = "" if gpt2 is None else f", GPT-2's {fmt(gpt2)} ({fmt(ratio / gpt2)}x)"
        docs = get(schema.COMPRESSION_DOCS, side="own")
        on = "held-out text" if docs is None else f"{docs} held-out documents"
        lines.append(f"- **Bytes per token** on {on}: {fmt(ratio)}{against}")
    bpb = get(schema.BITS_PER_BYTE)
    if bpb is not None:
        lines.append(
            f"- **Bits per byte** ({get(schema.BPB_ORDER)}-gram model of the ids): {fmt(bpb)}"
        )
    longest = longest_token_phrase(metrics)
    if longest is not None:
        lines.append(f"- **Longest token**: {longest}")
    return ["## Summary", "", *lines, ""]
