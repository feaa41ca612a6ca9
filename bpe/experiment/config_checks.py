"""The checks of a composed `bpe-train` config that neither its types nor the training call's
plan say, run before any run directory exists: ranges (num_workers >= 1, ...), the analysis'
settings, the input's format and pattern names, and keys no group declares.

What it does not do: declare the keys (`bpe.experiment.config`, whose field metadata gives each
bound these checks read), or check what the training call's options mean together (the vocab
size against the specials, the trainer, backend, engine and variant: one validator does that,
`bpe.pipeline.plan.plan_run`, called by `bpe.experiment.inputs.validate`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from bpe.corpus.formats import FORMAT_CHOICES
from bpe.experiment.config import (
    BPB_ORDERS,
    SEARCH_DIRECTIONS,
    TrainConfig,
    dataclass_of,
    describe_keys,
)
from bpe.runs.schema import measure
from bpe.runs.settings import FIGURE_FORMATS
from bpe.text.patterns import PATTERNS
from bpe.tokenizer.segmentation import SEGMENTATIONS


def check_config(cfg: DictConfig) -> None:
    """Raise ValueError, naming the key and the fix, for a value outside its range.

    Types were checked when the config was composed; this checks what a type cannot say.
    """
    for key, _, _ in describe_keys():
        low, exclusive = _bound(key)
        if low is None:
            continue
        value = _select(cfg, key)
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if (value <= low) if exclusive else (value < low):
            op = ">" if exclusive else ">="
            raise ValueError(f"{key}={value!r} is out of range: it must be {op} {low:g}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{key}={value!r} must be a finite number")
    order = _select(cfg, "analysis.bpb_order")
    if order is not None and order not in BPB_ORDERS:
        raise ValueError(
            f"analysis.bpb_order={order!r} is not supported: use one of {list(BPB_ORDERS)} "
            "(a bigram model says little; beyond 5 the counts of a few MB are too sparse)"
        )
    fraction = _select(cfg, "dataset.heldout_fraction")
    if isinstance(fraction, int | float) and not fraction < 1:
        raise ValueError(
            f"dataset.heldout_fraction={fraction!r} is out of range: it must be < 1 (0 holds "
            "nothing out; 0.05 holds out the last 5% of the input's documents)"
        )
    share = _select(cfg, "dataset.train_fraction")
    if isinstance(share, int | float) and share > 1:
        raise ValueError(
            f"dataset.train_fraction={share!r} is out of range: it must be <= 1 (1 trains on "
            "all of the input; 0.1 on its first tenth, in whole documents)"
        )
    fmt = _select(cfg, "dataset.format")
    if fmt is not None and fmt not in FORMAT_CHOICES:
        raise ValueError(f"dataset.format={fmt!r} is unknown; choose one of {list(FORMAT_CHOICES)}")
    pre = cfg.get("pretokenizer")
    if pre is not None and pre.get("name") not in (*PATTERNS, "custom"):
        raise ValueError(
            f"pretokenizer={pre.get('name')!r} is unknown; choose one of {[*PATTERNS, 'custom']}"
        )
    _check_segmentations(cfg)
    formats = _select(cfg, "analysis.figure_formats")
    unknown = [f for f in formats or () if f not in FIGURE_FORMATS]
    if unknown:
        raise ValueError(
            f"analysis.figure_formats has {unknown!r}; use any of {list(FIGURE_FORMATS)}"
        )
    _check_search(cfg)


def _check_search(cfg: DictConfig) -> None:
    """`search.metric` names a measurement (`bpe.runs.schema.measure`), `search.direction` a
    way, and a search's sweeper optimizes the same way as the metric says is better."""
    direction = _select(cfg, "search.direction")
    if direction is not None and direction not in SEARCH_DIRECTIONS:
        raise ValueError(
            f"search.direction={direction!r} is unknown; use one of {list(SEARCH_DIRECTIONS)}"
        )
    metric = _select(cfg, "search.metric")
    if metric is not None:
        measure(metric)
    swept = _select(cfg, "hydra.sweeper.direction")
    if metric is not None and swept is not None and str(swept) != str(direction):
        raise ValueError(
            f"hydra.sweeper.direction={swept!s} but search.direction={direction!s}: set "
            "search.direction only (the search's config passes it to the sweeper)"
        )


def _check_segmentations(cfg: DictConfig) -> None:
    """`analysis.segmentations` names known methods (they run after training: check now)."""
    methods = _select(cfg, "analysis.segmentations")
    unknown = [m for m in methods or () if m not in SEGMENTATIONS]
    if unknown:
        raise ValueError(
            f"analysis.segmentations has {unknown!r}, not a segmentation method; use any of "
            f"{list(SEGMENTATIONS)} ([] measures none)"
        )


def _bound(key: str) -> tuple[float | None, bool]:
    schema: type = TrainConfig
    *parents, leaf = key.split(".")
    for part in parents:
        f = next(f for f in dataclasses.fields(schema) if f.name == part)
        schema = dataclass_of(f) or f.type
    f = next(f for f in dataclasses.fields(schema) if f.name == leaf)
    return f.metadata.get("min"), bool(f.metadata.get("exclusive"))


def _select(cfg: DictConfig, key: str) -> Any:
    value = OmegaConf.select(cfg, key, default=None)
    return list(value) if isinstance(value, ListConfig) else value


def extra_keys(cfg: DictConfig) -> list[str]:
    """Dotted keys of cfg that the schema does not know (added with `+key=value`).

    >>> from omegaconf import OmegaConf
    >>> extra_keys(OmegaConf.create({"vocab_size": 1, "dataset": {"pth": "x"}, "hydra": {}}))
    ['dataset.pth']
    """
    known = {k for k, _, _ in describe_keys()}
    prefixes = {k.rsplit(".", 1)[0] for k in known if "." in k}
    out = []

    def walk(node: DictConfig, prefix: str) -> None:
        for k in node:
            key = f"{prefix}{k}"
            if key == "hydra" or key in known:
                continue
            if key in prefixes and isinstance(node[k], DictConfig):
                walk(node[k], f"{key}.")
            else:
                out.append(key)

    walk(cfg, "")
    return out
