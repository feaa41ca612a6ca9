"""The checks a type cannot say, run on a composed `bpe-train` config before any run directory
exists: ranges (vocab_size leaves room for the specials and the 256 bytes, num_workers >= 1,
...), the engine and the variant against the trainer, and keys no group declares.

What it does not do: declare the keys (`bpe.experiment.config`, whose field metadata gives each
bound these checks read).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from bpe.corpus.formats import FORMAT_CHOICES
from bpe.experiment.config import BPB_ORDERS, TrainConfig, dataclass_of, describe_keys
from bpe.pretokenize.dask_backend import check_backend
from bpe.pretokenize.engines import check_engine
from bpe.text.patterns import PATTERNS, resolve_pattern
from bpe.text.specials import validate_special_tokens
from bpe.tokenizer.segmentation import SEGMENTATIONS
from bpe.trainers import check_trainer
from bpe.trainers.common import check_vocab_size
from bpe.trainers.variants import (
    check_continuation,
    check_global_merges,
    check_threshold,
    check_trainer_supports,
    check_variant,
)


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
    try:
        specials = validate_special_tokens(_select(cfg, "dataset.special_tokens"))
    except ValueError as err:
        raise ValueError(f"dataset.special_tokens: {err}") from None
    check_vocab_size(_select(cfg, "vocab_size"), specials)
    trainer = _select(cfg, "trainer.name")
    if trainer is not None:
        try:
            check_trainer(str(trainer))  # its optional package (compiled: Numba) is installed
        except ImportError as err:
            raise ValueError(f"trainer={trainer}: {err}") from None
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
    fmt = _select(cfg, "dataset.format")
    if fmt is not None and fmt not in FORMAT_CHOICES:
        raise ValueError(f"dataset.format={fmt!r} is unknown; choose one of {list(FORMAT_CHOICES)}")
    backend = cfg.get("pretokenize")
    if backend is not None:
        check_backend(str(backend.get("backend", "processes")), backend.get("scheduler"))
    _check_variant(cfg)
    pre = cfg.get("pretokenizer")
    if pre is not None and pre.get("name") not in (*PATTERNS, "custom"):
        raise ValueError(
            f"pretokenizer={pre.get('name')!r} is unknown; choose one of {[*PATTERNS, 'custom']}"
        )
    if pre is not None and pre.get("name") == "custom":
        try:
            resolve_pattern(pre.get("pattern") or "")
        except ValueError as err:
            raise ValueError(f"pretokenizer.pattern: {err}") from None
    _check_engine(cfg)
    _check_segmentations(cfg)


def _check_segmentations(cfg: DictConfig) -> None:
    """`analysis.segmentations` names known methods (they run after training: check now)."""
    methods = _select(cfg, "analysis.segmentations")
    unknown = [m for m in methods or () if m not in SEGMENTATIONS]
    if unknown:
        raise ValueError(
            f"analysis.segmentations has {unknown!r}, not a segmentation method; use any of "
            f"{list(SEGMENTATIONS)} ([] measures none)"
        )


def _check_engine(cfg: DictConfig) -> None:
    """`pretokenize.engine` is known, and `compiled` has GPT-2's pattern and Numba."""
    engine = (cfg.get("pretokenize") or {}).get("engine")
    if engine is None:
        return
    pre = cfg.get("pretokenizer") or {}
    name = pre.get("name", "gpt2")
    pattern = PATTERNS.get(name, pre.get("pattern") or "")
    try:
        check_engine(str(engine), pattern)
    except ImportError as err:
        raise ValueError(str(err)) from None


def _check_variant(cfg: DictConfig) -> None:
    """The variant exists, its parameters are in range, and the trainer runs it."""
    group = cfg.get("variant")
    if group is None:
        return
    name = str(group.get("name", "bpe"))
    check_variant(name)
    if name == "picky" and group.get("threshold") is not None:
        check_threshold(group.get("threshold"))
    if name == "parity" and group.get("global_merges") is not None:
        check_global_merges(group.get("global_merges"), int(cfg.get("vocab_size", 0)))
    trainer = (cfg.get("trainer") or {}).get("name")
    if trainer is not None:
        check_trainer_supports(name, str(trainer))
    check_continuation(name, cfg.get("init_from"))


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
