"""The data curve: how a tokenizer changes with the text it is trained on. Runs that differ only
in `dataset.train_fraction` (`bpe-train -m experiment=data_curve`) are one curve; each point is
compared with the curve's largest run (the most training bytes): the share of its merges the
largest run learned too, the rank where the two merge lists first differ, and its held-out
bytes per token, Rényi efficiency and bits per byte, against the bytes it trained on.

What it writes: `data_curve.json` (the facts, one file), `data_curve.md` rendered from that
JSON alone, and `figures/data_curve.png`; `section_data_curve` gives SWEEP.md the same table
for a sweep that is a curve. `bpe-report --page data_curve` runs it.

What it does not do: train (the sweep does), or compare runs of different inputs, trainers,
vocab sizes or patterns (each is its own curve).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

from bpe.analysis import figures
from bpe.analysis.loader import complete, load_tidy
from bpe.analysis.markdown import fmt, generated_by, measured, table
from bpe.formats.gpt2_format import load_merges
from bpe.runs import schema
from bpe.runs.layout import FIGURES_DIR, MERGES_FILE
from bpe.util.io import atomic_write_text

logger = logging.getLogger(__name__)

DATA_CURVE_JSON = "data_curve.json"
DATA_CURVE_MD = "data_curve.md"
DATA_CURVE_FIGURE = "data_curve.png"
#: What a curve's runs share (the loader's tidy columns): one curve per distinct tuple.
CURVE_KEY = ("dataset", "input_key", "trainer", "vocab_size", "pattern", "variant")


def first_difference(merges: list, reference: list) -> int | None:
    """The 1-based rank of the first merge where two merge lists differ; None when one is a
    prefix of the other (an early stop keeps the same order).

    >>> first_difference([1, 2, 3], [1, 2, 4]), first_difference([1, 2], [1, 2, 3])
    (3, None)
    """
    for rank, (a, b) in enumerate(zip(merges, reference), start=1):
        if a != b:
            return rank
    return None


def overlap(merges: list, reference: list) -> float | None:
    """The share of a run's merges that the reference run learned too (as sets of pairs).

    >>> overlap([1, 2, 3, 4], [1, 2, 5, 4])
    0.75
    """
    return len(set(merges) & set(reference)) / len(merges) if merges else None


def curves(frame: pd.DataFrame, runs: pd.DataFrame) -> list[dict]:
    """Every curve among the runs: a group of two or more complete runs sharing `CURVE_KEY`
    with distinct training fractions, each point measured against the group's largest run."""
    done = complete(runs).copy()
    if done.empty:
        return []
    raw = frame.set_index("run_dir")
    column = schema.TRAIN_FRACTION.column
    done["fraction"] = [
        measured(raw[column].get(d)) if column in raw else 1.0 for d in done["run_dir"]
    ]
    done["fraction"] = done["fraction"].fillna(1.0)
    out = []
    for key, group in done.groupby(list(CURVE_KEY), sort=True, dropna=False):
        if group["fraction"].nunique() < 2:
            continue
        group = group.sort_values(["fraction", "run_dir"])
        bytes_read = [_int(raw.loc[d].get(schema.COUNTS_BYTES.column)) for d in group["run_dir"]]
        largest = group["run_dir"].iloc[max(range(len(group)), key=lambda i: bytes_read[i] or 0)]
        reference = load_merges(Path(largest) / MERGES_FILE)
        points = []
        for (_, run), read in zip(group.iterrows(), bytes_read):
            path = Path(run["run_dir"]) / MERGES_FILE
            merges = reference if run["run_dir"] == largest else load_merges(path)
            src = raw.loc[run["run_dir"]]
            points.append(
                {
                    "run": Path(run["run_dir"]).name,
                    "fraction": float(run["fraction"]),
                    "training_bytes": read,
                    "merges": len(merges),
                    "stopped_by": _str(src.get(schema.STOPPED_BY.column)),
                    "merge_overlap": overlap(merges, reference),
                    "first_difference": first_difference(merges, reference),
                    "bytes_per_token": measured(src.get(schema.COMPRESSION_RATIO.column)),
                    "renyi_efficiency": measured(
                        src.get(schema.EFFICIENCY_RENYI.at(side="own").column)
                    ),
                    "bits_per_byte": measured(src.get(schema.BITS_PER_BYTE.column)),
                }
            )
        dataset, _, trainer, vocab, pattern, variant = key
        out.append(
            {
                "dataset": str(dataset),
                # the input's file name (a path would name the machine it ran on)
                "input": Path(str(group["input_path"].iloc[0])).name,
                "trainer": str(trainer),
                "vocab_size": int(vocab),
                "pattern": str(pattern),
                "variant": str(variant),
                "reference": Path(largest).name,
                "points": points,
            }
        )
    return out


def gather(sweep_dirs: list[Path], *, command: str, code: str | None) -> dict:
    """The data curve document of one or more sweeps (what `data_curve.json` holds), made by
    `command` at code version `code`."""
    found = []
    for sweep in sweep_dirs:
        frame, runs = load_tidy(sweep, hint="pass a sweep directory of bpe-train -m")
        for curve in curves(frame, runs):
            found.append({**curve, "sweep": Path(sweep).name})
    if not found:
        raise ValueError(
            f"no data curve in {[str(s) for s in sweep_dirs]}: a curve needs two or more "
            "complete runs of one input that differ in dataset.train_fraction (run "
            "bpe-train -m experiment=data_curve)"
        )
    return {"command": command, "code": code, "curves": found}


def render(doc: dict, *, figure: str | None = None) -> str:
    """data_curve.md from the JSON document alone."""
    lines = [
        "# How much data does a tokenizer need?",
        "",
        "Each curve trains one input's first documents, from a small share of its text to all "
        "of it (`dataset.train_fraction`), everything else fixed, and compares each tokenizer "
        "with the one trained on the most text: the share of its merges that one learned too, "
        "the rank where the two merge lists first differ (none: one is a prefix of the "
        "other), and held-out bytes per token, Rényi efficiency (α = 2.5) and bits per byte "
        "(a 3-gram model, lower is better) on the input's held-out documents.",
        "",
        f"{generated_by(doc['command'], doc['code'])}, from `{DATA_CURVE_JSON}` alone.",
        "",
    ]
    for curve in doc["curves"]:
        lines += curve_lines(curve, level="##")
    if figure:
        lines += [f"![Data curve]({figure})", ""]
    return "\n".join(lines).rstrip() + "\n"


#: What a generated corpus's file name holds (`scripts/make_scale_corpus.py --out ...`): its
#: curve is labelled as such.
GENERATED_MARK = "generated"


def curve_lines(curve: dict, *, level: str) -> list[str]:
    """One curve: a heading naming what it shares, and its points as a table."""
    variant = f" ({curve['variant']})" if curve.get("variant", "bpe") != "bpe" else ""
    head = (
        f"{level} {curve['dataset']}: {curve['trainer']}{variant}, vocab "
        f"{curve['vocab_size']:,}, {curve['pattern']} pattern"
    )
    rows = [
        [
            fmt(p["fraction"], ".3g"),
            f"{p['training_bytes']:,}" if p["training_bytes"] is not None else "n/a",
            str(p["merges"]) + (f" ({p['stopped_by']})" if p["stopped_by"] else ""),
            fmt(p["merge_overlap"], ".3f"),
            "none" if p["first_difference"] is None else str(p["first_difference"]),
            fmt(p["bytes_per_token"], ".4f"),
            fmt(p["renyi_efficiency"], ".4f"),
            fmt(p["bits_per_byte"], ".4f"),
        ]
        for p in curve["points"]
    ]
    headers = [
        "share",
        "training bytes",
        "merges",
        "overlap",
        "first difference",
        "bytes/token",
        "Rényi eff.",
        "bits/byte",
    ]
    source = f" (input `{curve['input']}`)" if curve.get("input") else ""
    return [
        head,
        "",
        f"Compared with `{curve['reference']}`{source}.",
        "",
        table(rows, headers),
        "",
        *_findings(curve),
        *(_GENERATED if GENERATED_MARK in f"{curve['dataset']} {curve.get('input')}" else []),
    ]


_GENERATED = [
    "> This input is **generated** (`scripts/make_scale_corpus.py`): the bundled OWT sample's "
    "documents resampled, with new words drawn to follow a real vocabulary-growth curve. Its "
    "text repeats far more than real OpenWebText, so its curve levels off sooner than a real "
    "corpus's would; it measures the pipeline at 1 GiB, not how much real text a tokenizer "
    "needs.",
    "",
]


def _findings(curve: dict) -> list[str]:
    """Where the curve levels off: the fewest training bytes whose held-out bytes per token
    are within 1% of the largest run's, and whose merges overlap the largest run's by 90%.

    >>> print(_findings({"points": [
    ...     {"training_bytes": 10, "bytes_per_token": 3.0, "merge_overlap": 0.5},
    ...     {"training_bytes": 100, "bytes_per_token": 3.99, "merge_overlap": 0.95},
    ...     {"training_bytes": 1000, "bytes_per_token": 4.0, "merge_overlap": 1.0}]})[0])
    ... # doctest: +NORMALIZE_WHITESPACE
    Held-out bytes per token are within 1% of the largest run's from 100 training bytes (10% of
    its 1,000); its merges overlap the largest run's by 90% or more from 100.
    """
    points = [p for p in curve["points"] if p.get("training_bytes")]
    if len(points) < 2:
        return []
    last = max(points, key=lambda p: p["training_bytes"])

    def first(ok) -> dict | None:
        return next((p for p in sorted(points, key=lambda p: p["training_bytes"]) if ok(p)), None)

    full = last.get("bytes_per_token")
    near = first(
        lambda p: full and p.get("bytes_per_token") and p["bytes_per_token"] >= 0.99 * full
    )
    close = first(lambda p: (p.get("merge_overlap") or 0) >= 0.9)
    if near is None or close is None:
        return []
    share = near["training_bytes"] / last["training_bytes"]
    return [
        f"Held-out bytes per token are within 1% of the largest run's from "
        f"{near['training_bytes']:,} training bytes ({share:.0%} of its "
        f"{last['training_bytes']:,}); its merges overlap the largest run's by 90% or more "
        f"from {close['training_bytes']:,}.",
        "",
    ]


def section_data_curve(frame: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """SWEEP.md's data curve (sweeps over `dataset.train_fraction` only)."""
    column = schema.TRAIN_FRACTION.column
    if column not in frame or frame[column].nunique() < 2:
        return []
    found = curves(frame, runs)
    if not found:
        return []
    lines = ["## Data curve", ""]
    for curve in found:
        lines += curve_lines(curve, level="###")
    return lines


def draw(doc: dict, path: Path) -> None:
    """Bytes per token, bits per byte and merge overlap against training bytes, per curve."""
    series = {
        f"{c['dataset']} v{c['vocab_size']}": [
            (p["training_bytes"], p["bytes_per_token"], p["bits_per_byte"], p["merge_overlap"])
            for p in c["points"]
            if p["training_bytes"]
        ]
        for c in doc["curves"]
    }
    figures.data_curve(series, path)


def write_data_curve(
    sweep_dirs: list[Path], out_dir: Path, *, command: str, code: str | None
) -> Path:
    """Write data_curve.json, its figure and data_curve.md into out_dir; returns the .md."""
    doc = gather([Path(s) for s in sweep_dirs], command=command, code=code)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / DATA_CURVE_JSON, json.dumps(doc, indent=2) + "\n")
    (out_dir / FIGURES_DIR).mkdir(exist_ok=True)
    draw(doc, out_dir / FIGURES_DIR / DATA_CURVE_FIGURE)
    text = render(
        json.loads((out_dir / DATA_CURVE_JSON).read_text("utf-8")),
        figure=f"{FIGURES_DIR}/{DATA_CURVE_FIGURE}",
    )
    atomic_write_text(out_dir / DATA_CURVE_MD, text)
    return out_dir / DATA_CURVE_MD


def _int(value: object) -> int | None:
    out = measured(value)
    return None if out is None else int(out)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
