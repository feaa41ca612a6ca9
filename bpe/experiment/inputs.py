"""A run's input, checked before and after training: the config validated before any run
directory exists, the input's files stamped (size, mtime) so that a file changed while training
read it is reported, the pretoken cache's directory, the documents held out of training, and
the training call itself (under a profiler or a vocab ladder when asked).

What it does not do: write the run directory (`bpe.experiment.runner`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from omegaconf import DictConfig

from bpe.corpus import datasets
from bpe.corpus.documents import Holdout
from bpe.experiment.config_checks import check_config
from bpe.experiment.ladder import climb, plan_for
from bpe.experiment.launching import launcher_target
from bpe.experiment.profilers import check_profiler, run_cprofile, run_scalene
from bpe.experiment.records import limits_of, variant_of
from bpe.formats.init_from import check_parent, load_parent
from bpe.runs.layout import (
    PROFILE_DIR,
)
from bpe.runs.settings import pretokenize_setting
from bpe.text.patterns import resolve_pattern
from bpe.trainers import check_trainer
from bpe.training import TrainResult, train_bpe_detailed

logger = logging.getLogger(__name__)


def split_pattern(cfg: DictConfig) -> str:
    """The run's split pattern (a regex) from the `pretokenizer` group (GPT-2's without one)."""
    pre = cfg.get("pretokenizer") or {}
    name = pre.get("name", "gpt2")
    return resolve_pattern((pre.get("pattern") or "") if name == "custom" else name)


def validate(cfg: DictConfig) -> datasets.Dataset:
    """Check everything that can be checked before any work; returns the dataset.

    `bpe-train` has already composed cfg against the typed schema and checked its ranges
    before any directory existed (`bpe.cli.train.check_command_line`); this repeats the range
    checks for callers that build cfg themselves, then checks what only the run can: the
    trainer and profiler exist, the training file is there.
    """
    check_config(cfg)
    pattern = split_pattern(cfg)
    if cfg.get("init_from"):
        check_parent(
            load_parent(str(cfg.init_from)), pattern=pattern, vocab_size=int(cfg.vocab_size)
        )
    check_trainer(cfg.trainer.name)
    variant_of(cfg).resolve(vocab_size=int(cfg.vocab_size))
    limits_of(cfg)
    check_profiler(cfg.profiler.name)
    ds = datasets.from_config(cfg.dataset)
    ds.check()
    return ds


def input_files(ds: datasets.Dataset) -> list[str]:
    """The local files a run reads (listed once: the stamps before and after training compare
    the same files); none for a streamed Hub source."""
    if str(ds.path).startswith(("hf:", "hf-stream:")):
        return []
    return [f.path for f in ds.corpus().files]


def input_stamp(paths: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Each file's (size, modification time in ns), to tell whether the input changed while
    the run read it (a file that is gone has no stamp: the comparison names it)."""
    stamps = {}
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        stamps[path] = (st.st_size, st.st_mtime_ns)
    return stamps


def check_unchanged(
    before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]]
) -> None:
    """Raise when an input file changed (size or modification time) between the start and the
    end of training: the counts then mix two versions of it, and the run must not read as
    complete.

    >>> check_unchanged({"a": (10, 1)}, {"a": (10, 1)})
    >>> check_unchanged({"a": (40, 1)}, {"a": (12, 2)})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    RuntimeError: input file 'a' changed while the run read it (40 bytes -> 12, modified ...
    """
    for path, (size, mtime) in before.items():
        now = after.get(path)
        if now == (size, mtime):
            continue
        said = "removed" if now is None else f"{size} bytes -> {now[0]}"
        if now is not None and now[1] != mtime:
            said += ", modified during the run"
        raise RuntimeError(
            f"input file {path!r} changed while the run read it ({said}): its counts mix two "
            "versions of the file; rerun once it no longer changes"
        )


def pretoken_cache_dir(cfg: DictConfig) -> str | None:
    """Where this run keeps pretoken counts (`<cache_dir>/pretokens`), or None with cache=false.

    >>> from omegaconf import OmegaConf
    >>> pretoken_cache_dir(OmegaConf.create({"cache": True, "cache_dir": "experiments/.cache"}))
    'experiments/.cache/pretokens'
    >>> pretoken_cache_dir(OmegaConf.create({"cache": False, "cache_dir": "x"})) is None
    True
    """
    if not cfg.get("cache", False) or not cfg.get("cache_dir"):
        return None
    return str(Path(str(cfg.cache_dir)) / "pretokens")


def hold_out(ds: datasets.Dataset) -> Holdout | None:
    """The input's last documents this run holds out of training (`Dataset.holdout`), logged;
    None with a held-out file or when nothing is held out (the log says why)."""
    if ds.heldout_path is not None:
        return None
    t0 = time.perf_counter()
    holdout = ds.holdout()
    if holdout is None:  # ANALYSIS.md says so too (seen in training): not a warning
        logger.info(
            "dataset %s has no held-out file and nothing of its input is held out "
            "(dataset.heldout_fraction=%s, heldout_max_bytes=%d: a zero fraction, one "
            "document, or a last document larger than that): training reads every document, "
            "and compression is measured on the input's tail, seen in training",
            ds.name,
            ds.heldout_fraction,
            ds.heldout_max_bytes,
        )
        return None
    stop = holdout.stop
    logger.info(
        "dataset %s has no held-out file: its last %d documents (%d bytes, from %s %d of %s) "
        "are held out of training and measured (found in %.3f s)",
        ds.name,
        stop.docs,
        stop.bytes,
        "byte" if stop.unit == "bytes" else "row",
        stop.offset,
        Path(holdout.file).name,
        time.perf_counter() - t0,
    )
    return holdout


def train_stage(
    cfg: DictConfig,
    ds: datasets.Dataset,
    run_dir: Path,
    *,
    holdout: Holdout | None = None,
    sweep_dir: str | None = None,
) -> TrainResult:
    """The training call (under the profiler), or this job's rung of a vocab ladder; training
    stops before the held-out documents when there are any."""
    source = (
        str(ds.path) if holdout is None else dataclasses.replace(ds.corpus(), stop=holdout.stop)
    )
    kwargs = {
        "input_path": source,
        "vocab_size": int(cfg.vocab_size),
        "special_tokens": list(ds.special_tokens),
        "trainer": str(cfg.trainer.name),
        "num_workers": launcher_target(cfg)["workers_per_job"],
        "pattern": split_pattern(cfg),
        "init_from": str(cfg.init_from) if cfg.get("init_from") else None,
        "cache_dir": pretoken_cache_dir(cfg),
        "backend": str(pretokenize_setting(cfg.get("pretokenize"), "backend")),
        "scheduler": (cfg.get("pretokenize") or {}).get("scheduler"),
        "engine": str(pretokenize_setting(cfg.get("pretokenize"), "engine")),
        "variant": variant_of(cfg),
        **limits_of(cfg).as_dict(),
        "format": ds.format,
        "text_field": ds.text_field,
        "max_files": ds.max_files,
        "max_bytes": ds.max_bytes,
    }
    plan = plan_for(
        cfg, sweep_dir=sweep_dir, pattern=kwargs["pattern"], launcher=launcher_target(cfg)["name"]
    )
    if plan is not None:
        ladder_kwargs = {**kwargs, "vocab_size": plan.largest, "rungs": plan.rungs}
        return climb(
            plan,
            lambda: train_bpe_detailed(**ladder_kwargs, progress=bool(cfg.get("progress", False))),
            run_name=run_dir.name,
            run_dir=run_dir,
        )
    profiler = cfg.profiler.name
    if profiler == "scalene":
        return run_scalene(
            kwargs,
            run_dir / PROFILE_DIR,
            top_n=int(cfg.profiler.top_n),
            cpu_only=bool(cfg.profiler.get("cpu_only", False)),
            progress=bool(cfg.get("progress", False)),
        )

    def call() -> TrainResult:
        return train_bpe_detailed(**kwargs, progress=bool(cfg.get("progress", False)))

    if profiler == "cprofile":
        return run_cprofile(call, run_dir / PROFILE_DIR, top_n=int(cfg.profiler.top_n))
    return call()
