"""What metrics.json says about a run besides its measures: the run record (what was asked,
where, launched how), the facts training reported (counts, pattern, backend, variant, ladder),
memory split into stages, and the merges' support in the corpus.

What it does not do: measure the tokenizer (`bpe.evaluation.evaluate`) or write the file
(`bpe.experiment.metrics`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial
from pathlib import Path

from omegaconf import DictConfig

from bpe.corpus import datasets
from bpe.experiment.launching import launcher_target
from bpe.experiment.memory import MemorySampler, phase_memory
from bpe.measures import RARE_MERGE_COUNT
from bpe.pipeline import TrainResult
from bpe.pipeline.plan import TrainSpec
from bpe.runs.command import rerun_command
from bpe.runs.schema import (
    BackendRecord,
    CompileRecord,
    Counts,
    LadderRecord,
    PatternRecord,
    RunRecord,
    VariantRecord,
)
from bpe.runs.stages import ANALYSIS, COMPILE, TRAIN_STAGES
from bpe.text.patterns import pattern_name

logger = logging.getLogger(__name__)


def input_name(cfg: DictConfig) -> str:
    """What reports file the run under: the dataset's name, or custom-<stem> for dataset.path=."""
    return datasets.input_name(str(cfg.dataset.name), cfg.dataset.path)


def run_record(
    cfg: DictConfig, spec: TrainSpec, run_dir: Path, overrides: list[str], sweep: dict
) -> RunRecord:
    """metrics.json's `run` section: what was asked for (the training call's options from
    `spec`, the one they are planned and trained from), where, how it was launched, and the
    command that reruns it (`bpe.runs.command.rerun_command`)."""
    run = {
        "name": run_dir.name,
        "dir": str(run_dir),
        "dataset": str(cfg.dataset.name),
        "trainer": spec.trainer,
        "vocab_size": spec.vocab_size,
        "profiler": str(cfg.profiler.name),
        "num_workers": cfg.num_workers,
        "launcher": launcher_target(cfg, log=True),
        "seed": int(cfg.seed),
        "pretokenizer": str((cfg.get("pretokenizer") or {}).get("name", "gpt2")),
        "init_from": None if spec.init_from is None else str(spec.init_from),
        **spec.limits.as_dict(),
        "seed_tokens": list(spec.seed_tokens),
        "protect": list(spec.protect),
        "special_tokens": list(spec.special_tokens or ()),
        "input_name": input_name(cfg),
        "input_path": str(cfg.dataset.path),
        "train_fraction": float(cfg.dataset.get("train_fraction", 1.0)),
        "overrides": overrides,
        "extra_overrides": path_overrides(cfg),
        "sweep_dir": sweep.get("sweep_dir"),
        "job_num": sweep.get("job_num"),
    }
    return RunRecord(**run, command=rerun_command(run))


def run_facts(
    cfg: DictConfig,
    result: TrainResult,
    timings: Mapping[str, float],
    memory: dict,
    *,
    cpu: Mapping[str, float],
) -> dict:
    """What the run measured about itself, as metrics.json records it (besides `evaluate`'s):
    `timings` (wall seconds per stage) and `cpu_timings` (CPU seconds of the same stages)."""
    stage1 = result.pretokenized
    return {
        "profiled": cfg.profiler.name != "none",
        "timings": {
            **{k: round(v, 6) for k, v in timings.items()},
            "total": round(sum(timings.values()), 6),
        },
        "cpu_timings": {
            **{k: round(v, 6) for k, v in cpu.items()},
            "total": round(sum(cpu.values()), 6),
        },
        "memory": memory,
        "counts": Counts(
            bytes=stage1.num_bytes,
            pretokens=stage1.num_pretokens,
            unique_pretokens=stage1.num_unique,
            merges=result.num_merges,
            vocab=len(result.vocab),
            chunks=stage1.num_chunks,
            workers=stage1.num_workers,
            start_method=stage1.start_method,
            worker_startup_s=None
            if stage1.worker_startup_s is None
            else round(stage1.worker_startup_s, 4),
        ),
        "merges_sha256": result.merges_sha256,
        "pretoken_cache": result.pretoken_cache,
        "pattern": PatternRecord(
            name=pattern_name(result.pattern), regex=result.pattern, engine=stage1.engine
        ),
        # where stage 1 ran: "LocalCluster(n)" or the address a dask run used
        "backend": BackendRecord(name=stage1.backend, scheduler=stage1.scheduler),
        # the trainer's own word on why it ended short of the vocab asked for (None: it did not)
        "stopped_early": result.stopped_by is not None,
        "stopped_by": result.stopped_by,
        "variant": variant_record(result),
        **(
            {}
            if result.compile_cached is None
            else {"compile": CompileRecord(cached=result.compile_cached)}
        ),
        **({} if result.ladder is None else {"ladder": LadderRecord(**result.ladder)}),
    }


def variant_record(result: TrainResult) -> VariantRecord:
    """metrics.json's `variant` section: the variant's parameters and its own measurements."""
    facts = result.variant_facts
    return VariantRecord(
        **result.variant.record(),
        removals=facts.get("removals"),
        stage_two=facts.get("stage_two"),
        parity=facts if result.variant.name == "parity" else None,
        boundless=facts.get("boundless"),
    )


#: The run stages whose memory is training's own (the training call: stage 1, a compiling
#: trainer's compile step, stages 2-3), in the order they run.
TRAINING_MEMORY_STAGES = (TRAIN_STAGES[0], COMPILE, *TRAIN_STAGES[1:])


def with_phases(summary: dict) -> dict:
    """A sampler summary with the training and analysis phases (`phase_memory`) beside it.

    Training's `added_mb` is the run's memory headline: what stages 1-3 added above the tree's
    memory when the run began, so a job reports the same whether it ran alone or late in a
    sweep whose earlier jobs left modules and caches in its process. Analysis (GPT-2's
    tokenizer, the held-out measures) is reported apart, never as training's.
    """
    per_stage, baseline = summary["per_stage_peak_mb"], summary.get("baseline_mb") or 0.0
    phase = partial(
        phase_memory, per_stage, baseline=baseline, gaps=summary.get("per_stage_widest_gap_s")
    )
    return {
        **summary,
        "training": phase(TRAINING_MEMORY_STAGES),
        # stages 2-3 alone: where the trainers differ (stage 1 is shared, or a cache hit)
        "merge": phase(TRAIN_STAGES[1:]),
        "analysis": phase((ANALYSIS,)),
    }


def label_stages(
    mem: MemorySampler, timings: dict[str, float], *, start: float, label: str
) -> None:
    """Relabel the samples tagged `label` during training by the stage boundaries now known.

    The training call started at `start` (seconds on the sampler's clock) and ran its stages
    back to back in the order `timings` records them; each timing says where its stage ended.
    Samples after the last boundary (the call's own bookkeeping) go to the last stage.
    """
    mem.collect(settle=True)  # the watcher's samples of the training call, all of them
    bounds, t = [], start
    for name, seconds in timings.items():
        t += seconds
        bounds.append((t, name))
    last = bounds[-1][1] if bounds else label
    relabelled = []
    for ts, mb, stage in mem.samples:
        if stage == label:
            stage = next((name for limit, name in bounds if ts <= limit), last)
        relabelled.append((ts, mb, stage))
    mem.samples[:] = relabelled


def log_merge_support(support: dict | None) -> None:
    """A WARNING when the vocab has outgrown its corpus (`bpe.measures.merge_support`), with the
    numbers and the remedy; ANALYSIS.md says the same."""
    if not support or not support.get("outgrown"):
        return
    logger.warning(
        "the vocab has outgrown its corpus: %d of %d merges (%.1f%%) joined a pair seen at most "
        "%d times (%d once), against %d distinct pretokens in the training text; every merge up "
        "to vocab size %d joined a pair seen more often: train with vocab_size=%d or less, or "
        "on more text",
        support["rare"],
        support["merges"],
        100 * support["rare_share"],
        RARE_MERGE_COUNT,
        support["count_1"],
        support["unique_pretokens"],
        support["supported_vocab"],
        support["supported_vocab"],
    )


def path_overrides(cfg: DictConfig) -> list[str]:
    """`dataset.path=...` when the path differs from the named dataset's config (for reruns)."""
    try:
        named = datasets.load_named(str(cfg.dataset.name))
    except ValueError:
        return []
    if datasets.resolve(cfg.dataset.path) == named.path:
        return []
    return [f"dataset.path={cfg.dataset.path}"]
