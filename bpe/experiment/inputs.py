"""A run's input, checked before and after training: the config turned into the training call's
`TrainSpec` (`train_spec`, the one place its keys become options) and planned once
(`validate`: `bpe-train` plans every job before any run directory exists, and the job's run
trains that plan), the input's files stamped (size, mtime) so that a file changed while training
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
from bpe.corpus.files import Corpus
from bpe.experiment.config_checks import check_config
from bpe.experiment.ladder import climb, plan_for
from bpe.experiment.launching import launcher_target
from bpe.experiment.profilers import check_profiler, run_cprofile, run_scalene
from bpe.pipeline import TrainResult, train_planned
from bpe.pipeline.plan import RunPlan, TrainSpec, plan_run
from bpe.runs.layout import PROFILE_DIR
from bpe.runs.settings import pretokenize_setting
from bpe.trainers.common import Limits
from bpe.variants import Variant

logger = logging.getLogger(__name__)


def split_pattern(cfg: DictConfig) -> str:
    """The run's split pattern option from the `pretokenizer` group: a pattern's name ("gpt2"
    without one) or, for `custom`, its regex (resolved and checked by the plan).

    >>> from omegaconf import OmegaConf
    >>> split_pattern(OmegaConf.create({"pretokenizer": {"name": "custom", "pattern": "a+"}}))
    'a+'
    """
    pre = cfg.get("pretokenizer") or {}
    name = pre.get("name", "gpt2")
    return (pre.get("pattern") or "") if name == "custom" else name


def variant_of(cfg: DictConfig) -> Variant:
    """The run's `Variant` from the `variant` group (plain BPE without one)."""
    group = cfg.get("variant") or {}
    return Variant(
        name=str(group.get("name", "bpe")),
        transition_vocab=group.get("transition_vocab"),
        stage_two_pattern=group.get("stage_two_pattern"),
        threshold=group.get("threshold"),
        global_merges=group.get("global_merges"),
        dev=group.get("dev"),
    )


def train_spec(cfg: DictConfig, ds: datasets.Dataset) -> TrainSpec:
    """The run's training call, typed: the one place the config's keys become its options.

    metrics.json's `run` section records this spec, `validate` plans it, and a vocab ladder
    trains it with two fields changed. Nothing is checked here (`validate` does).
    """
    pre = cfg.get("pretokenize")
    return TrainSpec(
        str(ds.path),
        int(cfg.vocab_size),
        tuple(ds.special_tokens),
        trainer=str(cfg.trainer.name),
        num_workers=launcher_target(cfg)["workers_per_job"],
        progress=bool(cfg.get("progress", False)),
        pattern=split_pattern(cfg),
        init_from=str(cfg.init_from) if cfg.get("init_from") else None,
        cache_dir=pretoken_cache_dir(cfg),
        backend=str(pretokenize_setting(pre, "backend")),
        scheduler=(pre or {}).get("scheduler"),
        variant=variant_of(cfg),
        format=ds.format,
        text_field=ds.text_field,
        max_files=ds.max_files,
        max_bytes=ds.max_bytes,
        engine=str(pretokenize_setting(pre, "engine")),
        seed_tokens=tuple(str(s) for s in cfg.get("seed_tokens") or ()),
        protect=tuple(str(s) for s in cfg.get("protect") or ()),
        limits=Limits(
            max_token_length=cfg.get("max_token_length"), min_frequency=cfg.get("min_frequency")
        ),
    )


#: Plans `validate(keep=True)` made in this process, by `_checked_key`: `bpe-train` plans
#: every job before any run directory exists, and each job's run then trains its plan rather
#: than checking it, and loading its parent, again.
_PLANNED: dict[str, tuple[datasets.Dataset, RunPlan]] = {}


def _checked_key(spec: TrainSpec, ds: datasets.Dataset) -> str:
    """What a plan checked: the spec less how this process runs it (workers, progress bars),
    and the dataset, whose settings beyond the spec's corpus (a training prefix, the held-out
    share) make jobs of one spec differ."""
    return repr((dataclasses.replace(spec, num_workers=None, progress=False), ds))


def validate(
    cfg: DictConfig,
    *,
    keep: bool = False,
    inputs: tuple[datasets.Dataset, TrainSpec] | None = None,
) -> tuple[datasets.Dataset, RunPlan]:
    """Check everything that can be checked before any work: the ranges a type cannot say
    (`check_config`), the profiler, the dataset's files, and the training call's plan
    (`bpe.pipeline.plan.plan_run`: trainer, vocab size, variant, parent, corpus...).

    Each run plans once: `keep=True` (`bpe-train`'s check of every job) keeps the plan for
    the run that follows in this process, which takes it instead of planning again. A Hub
    source is listed by the run only (it needs the network): `keep=True` checks the rest.
    `inputs`: the dataset and spec the caller already built from cfg (the runner names its
    run directory from them), so they are built once.
    """
    if inputs is None:
        ds = datasets.from_config(cfg.dataset)
        inputs = ds, train_spec(cfg, ds)
    ds, spec = inputs
    # the config's own checks always run (they are cheap, and a kept plan's key leaves out
    # how a process runs it: num_workers=0 must be refused whatever was planned before)
    check_config(cfg)
    check_profiler(cfg.profiler.name)
    key = _checked_key(spec, ds)
    if not keep and key in _PLANNED:
        ds, plan = _PLANNED.pop(key)
        return ds, dataclasses.replace(plan, spec=spec)
    check_only = keep and str(ds.path).startswith(("hf:", "hf-stream:"))
    if not check_only:
        ds.check()
    plan = plan_run(spec, list_input=not check_only)
    if keep and not check_only:
        _PLANNED[key] = (ds, plan)
    return ds, plan


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


def training_corpus(ds: datasets.Dataset, holdout: Holdout | None) -> Corpus:
    """What training reads (`Dataset.training_corpus`), with a log line for a prefix."""
    t0 = time.perf_counter()
    corpus = ds.training_corpus(holdout)
    stop, held = corpus.stop, (holdout.stop if holdout is not None else None)
    if stop is not None and stop != held:  # a prefix of the trainable text
        logger.info(
            "dataset.train_fraction=%g: training reads the input's first documents, up to %s "
            "%d of file %d; %d documents (%d bytes) are left unread, held-out ones included "
            "(found in %.3f s)",
            ds.train_fraction,
            "byte" if stop.unit == "bytes" else "row",
            stop.offset,
            stop.file,
            stop.docs,
            stop.bytes,
            time.perf_counter() - t0,
        )
    return corpus


def train_stage(
    cfg: DictConfig,
    plan: RunPlan,
    run_dir: Path,
    *,
    sweep_dir: str | None = None,
) -> TrainResult:
    """The training call of `plan` (under the profiler), or this job's rung of a vocab ladder
    (the same spec trained to the sweep's largest vocab, with its rungs)."""
    ladder = plan_for(cfg, plan, sweep_dir=sweep_dir, launcher=launcher_target(cfg)["name"])
    if ladder is not None:
        largest = dataclasses.replace(
            plan.spec, vocab_size=ladder.largest, rungs=tuple(ladder.rungs)
        )
        return climb(
            ladder, lambda: train_planned(plan_run(largest)), run_name=run_dir.name, run_dir=run_dir
        )
    profiler = cfg.profiler.name
    if profiler == "scalene":
        return run_scalene(
            plan,
            run_dir / PROFILE_DIR,
            top_n=int(cfg.profiler.top_n),
            cpu_only=bool(cfg.profiler.get("cpu_only", False)),
        )
    if profiler == "cprofile":
        return run_cprofile(
            lambda: train_planned(plan), run_dir / PROFILE_DIR, top_n=int(cfg.profiler.top_n)
        )
    return train_planned(plan)
