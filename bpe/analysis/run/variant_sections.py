"""ANALYSIS.md's lines on what a run of a BPE-family variant did differently from plain BPE.

What it does not do: describe plain BPE runs (nothing to say) or compare variants
(`bpe.analysis.pages.variants`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from bpe.runs import schema


def variant_lines(metrics: dict) -> list[str]:
    """What a run of a BPE-family variant did differently (nothing for plain BPE).

    >>> variant_lines({"variant": {"name": "picky", "threshold": 0.9, "removals": 12}})[0][:45]
    'Variant: **picky** (PickyBPE, Chizhov et al.,'
    >>> variant_lines({"variant": {"name": "bpe"}}), variant_lines({})
    ([], [])
    """
    get = partial(schema.get, metrics)
    name = get(schema.VARIANT_NAME)
    if name == "picky":
        return [
            f"Variant: **picky** (PickyBPE, Chizhov et al., 2024): intersection-over-self "
            f"threshold {get(schema.VARIANT_THRESHOLD)}; "
            f"{get(schema.VARIANT_REMOVALS, default='n/a')} tokens were "
            "removed during training and their slots went to later merges.",
            "",
        ]
    if name == "superbpe":
        return [
            f"Variant: **superbpe** (SuperBPE, Liu et al., 2025): ordinary BPE to "
            f"{get(schema.VARIANT_TRANSITION_VOCAB)} tokens, then "
            f"{get(schema.VARIANT_STAGE_TWO_MERGES, default='n/a')} superword merges under the "
            "stage-two pattern above, "
            f"over {get(schema.VARIANT_STAGE_TWO_UNIQUE_PRETOKENS, default='n/a')} unique "
            "pretokens "
            f"({get(schema.VARIANT_STAGE_TWO_UNIQUE_RATIO, default='n/a')}x stage one's; longest "
            f"{get(schema.VARIANT_STAGE_TWO_LONGEST, default='n/a')} bytes).",
            "",
        ]
    if name == "parity":
        return _parity_lines(get)
    if name == "boundless":
        return [
            f"Variant: **boundless** (BoundlessBPE, Schmidt et al., 2025): "
            f"{get(schema.BOUNDLESS_SUPERMERGES, default='n/a')} supermerges joined two whole "
            f"pretokens into one token, over {get(schema.BOUNDLESS_PHRASES, default='n/a')} "
            "phrases of joinable pretokens "
            f"({get(schema.BOUNDLESS_DISTINCT_PHRASES, default='n/a')} distinct); "
            f"intersection-over-self threshold {get(schema.VARIANT_THRESHOLD)}, "
            f"{get(schema.VARIANT_REMOVALS, default='n/a')} tokens removed.",
            "",
        ]
    return []


def _parity_lines(get: Callable[..., Any]) -> list[str]:
    """Parity-aware BPE: whom its merges served, and what that did to the development text.

    >>> _parity_lines(partial(schema.get, {"variant": {"name": "parity", "global_merges": 0,
    ...     "parity": {"languages": ["a", "b"], "dev_text": "dev/",
    ...     "merges_per_language": {"global": 0, "a": 1, "b": 3},
    ...     "dev_gini_before": 0.2, "dev_gini_after": 0.05}}}))[0][:60]
    'Variant: **parity** (parity-aware BPE, Foroutan et al., 2025'
    """
    served = get(schema.PARITY_MERGES_PER_LANGUAGE, default={})
    ranked = sorted(((n, lang) for lang, n in served.items() if lang != "global"), reverse=True)
    listed = ", ".join(f"{lang} {n}" for n, lang in ranked if n) or "none"
    return [
        f"Variant: **parity** (parity-aware BPE, Foroutan et al., 2025): "
        f"{len(get(schema.PARITY_LANGUAGES, default=[]))} languages; "
        f"{get(schema.VARIANT_GLOBAL_MERGES, default=0)} merges of plain BPE first, then each "
        "merge was the best pair of the language whose development text "
        f"({get(schema.PARITY_DEV_TEXT, default='n/a')}) took the most tokens. Merges per "
        f"language served: {listed}. The Gini coefficient of the development text's tokens "
        f"went from {get(schema.PARITY_DEV_GINI_BEFORE, default='n/a')} before the first "
        f"merge to {get(schema.PARITY_DEV_GINI_AFTER, default='n/a')} after the last (what "
        "the rule drives down; the languages section below measures held-out text).",
        "",
    ]
