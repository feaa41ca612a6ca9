"""ANALYSIS.md's section on sibling runs: the other complete runs on the same input, their
times, memory and whether their merges agree with this run's.

What it does not do: find the siblings (`bpe.analysis.run.facts.sibling_rows` reads the
experiments directory) or describe this run alone (`bpe.analysis.run.sections`).
"""

from __future__ import annotations

from functools import partial

from bpe.analysis.markdown import fmt, table
from bpe.runs import schema


def section_siblings(metrics: dict, sibs: list[dict]) -> list[str]:
    lines = ["## Sibling runs (same input)", ""]
    if not sibs:
        lines.append("No other complete runs on the same input in the experiments directory yet.")
        return [*lines, ""]
    my_merge = schema.get(metrics, schema.MERGE_SECONDS)
    rows = []
    for s in sibs:
        speed = fmt(s["merge"] / my_merge, ".2f") if s["merge"] and my_merge else "n/a"
        rows.append(
            [
                s["rel"],
                s["variant"],
                s["trainer"],
                s["vocab_size"],
                fmt(s["merge"]),
                fmt(s["total"]),
                fmt(s["train_mb"], ".1f"),
                speed + (" (profiled)" if s["profiled"] else ""),
                s["agree"],
            ]
        )
    headers = [
        "run",
        "variant",
        "trainer",
        "vocab",
        "merge s",
        "total s",
        "training MB added",
        "their merge time / ours",
        "merges vs this run",
    ]
    return [*lines, table(rows, headers), "", _sibling_summary(sibs, metrics), ""]


def _sibling_summary(sibs: list[dict], metrics: dict) -> str:
    get = partial(schema.get, metrics)
    others = sorted({s["variant"] for s in sibs if not s["same_variant"]})
    sibs = [s for s in sibs if s["same_variant"]]
    same_size = [s for s in sibs if s["vocab_size"] == get(schema.VOCAB_SIZE)]
    sentences = []
    if others:
        sentences.append(
            f"Runs of other BPE-family members on this input ({', '.join(others)}) are listed "
            "for their time and memory; they learn other merges by design (reports/variants.md "
            "or `bpe-compare` compares their vocabularies)."
        )
    if same_size:
        different = [s for s in same_size if not s["same_merges"]]
        if different:
            sentences.append(
                f"{len(different)} run(s) at the same vocab size produced DIFFERENT merges: "
                + ", ".join(s["rel"] for s in different)
                + "."
            )
        else:
            sentences.append(
                f"All {len(same_size)} other run(s) at vocab size {get(schema.VOCAB_SIZE)} "
                "produced "
                "identical merges."
            )
        clean = [s for s in same_size if s["merge"] and not s["profiled"]]
        mine = get(schema.MERGE_SECONDS)
        if clean and mine and not get(schema.PROFILED):
            for s in sorted(clean, key=lambda s: s["trainer"] or ""):
                if s["trainer"] == get(schema.TRAINER):
                    continue
                ratio = s["merge"] / mine
                sentences.append(
                    f"Against {s['trainer']} at the same size, this run's merge stage is "
                    f"{fmt(ratio, '.1f')}x {'faster' if ratio >= 1 else 'slower'}."
                )
    return " ".join(sentences) or "No other run at the same vocab size to compare with."
