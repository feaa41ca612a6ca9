"""`run_experiment(cfg, report=...)`: one training run from a Hydra config to a complete run dir.

Stages (`bpe.runs.stages.RUN_STAGES`; all but setup and report timed in metrics.json, memory
sampled from training through the report, status kept honest):

    setup       refuse a run dir that already holds a run, create it, write config, status=running
                (naming this process), set aside room for a failure record, environment, validate
    pretokenize, merge    `train_bpe_detailed` (optionally under a profiler), timed by training;
                pretoken counts cached under `<cache_dir>/pretokens` unless cache=false
                (a job of a sweep over vocab_size cuts its rung from one shared training
                instead: `bpe.experiment.ladder`); an input without held-out file is read
                up to its last documents, which are held out (`hold_out`) and measured
    save        vocab.json, merges.txt, tokenizer.json (+ HF configs), tokenizer.tiktoken,
                merge_counts.json (atomic)
    analysis    vocab metrics, compression, throughput, input and held-out sha256, tiktoken
                export mismatches (`bpe.experiment.evaluate`)
    report      the `report` writer the caller passes (the CLI passes ANALYSIS.md + figures),
                then the final memory summary (report stage included) and status=complete,
                in one atomic write, last; `<experiments_dir>/latest` then points at the run

Any exception, Ctrl-C or SIGTERM marks the run `failed` (with the stage and traceback) and is
re-raised; artifacts are written atomically, so each one is either complete or absent, and a
write error names its file. A failure inside the training call is recorded as stage `train`
(pretokenize and merge are one call). A run killed without a chance to record it (SIGKILL, a
power cut) keeps `running`, with the process named, and readers show it as crashed.

What it does not do: parse the command line (see `bpe.cli.train`), or know how reports are written
(the caller hands in the writer, so this layer never imports `bpe.analysis`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from bpe.corpus import datasets
from bpe.corpus.documents import Holdout
from bpe.experiment import environment
from bpe.experiment.config import check_config
from bpe.experiment.evaluate import evaluate
from bpe.experiment.ladder import climb, plan_for
from bpe.experiment.memory import MemorySampler, phase_memory, release_free_memory
from bpe.experiment.metrics import MetricsFile
from bpe.experiment.profilers import check_profiler, run_cprofile, run_scalene
from bpe.experiment.rundir import check_fresh, check_writable, create_run_dir, update_latest
from bpe.formats.exports import export_refusal, save_exports
from bpe.formats.gpt2_format import save_tokenizer_files
from bpe.formats.init_from import check_parent, load_parent
from bpe.formats.removals_json import save_removals
from bpe.measures import RARE_MERGE_COUNT
from bpe.runs.command import rerun_command
from bpe.runs.layout import (
    HYDRA_CONFIG,
    HYDRA_DIR,
    HYDRA_OVERRIDES,
    LOG_FILE,
    MERGE_COUNTS_FILE,
    METRICS_FILE,
    PROFILE_DIR,
    REMOVALS_FILE,
)
from bpe.runs.schema import (
    BackendRecord,
    CompileRecord,
    Counts,
    LadderRecord,
    PatternRecord,
    RunRecord,
    VariantRecord,
)
from bpe.runs.settings import pretokenize_setting
from bpe.runs.stages import ANALYSIS, COMPILE, REPORT, SAVE, SETUP, TRAIN_STAGES, TRAINING
from bpe.text.patterns import pattern_name, resolve_pattern
from bpe.trainers import check_trainer
from bpe.trainers.variants import Variant
from bpe.training import TrainResult, train_bpe_detailed
from bpe.util.io import atomic_write_text
from bpe.util.workers import default_num_workers, workers_per_job

logger = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class ReportWriter(Protocol):
    """Writes a run's report from its directory and final metrics (e.g. ANALYSIS.md)."""

    def __call__(self, run_dir: Path, *, metrics: dict) -> object: ...


class RunInterrupted(KeyboardInterrupt):
    """Raised in the main thread when the run receives SIGTERM."""


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):  # noqa: ARG001
        raise RunInterrupted(f"received signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _run_log(run_dir: Path) -> Iterator[None]:
    """Send this package's logs to run_dir/train.log unless Hydra already does."""
    target = (run_dir / LOG_FILE).resolve()
    root = logging.getLogger()
    for h in root.handlers:
        if isinstance(h, logging.FileHandler) and Path(h.baseFilename).resolve() == target:
            yield
            return
    handler = logging.FileHandler(target, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.setLevel(logging.INFO)
    pkg = logging.getLogger("bpe")
    old_level = pkg.level
    if pkg.getEffectiveLevel() > logging.INFO:
        pkg.setLevel(logging.INFO)
    pkg.addHandler(handler)
    try:
        yield
    finally:
        pkg.removeHandler(handler)
        pkg.setLevel(old_level)
        handler.close()


def _hydra_output_dir() -> tuple[Path | None, list[str], dict]:
    """Hydra's run/job dir, overrides and sweep info when running under @hydra.main."""
    try:
        hc = HydraConfig.get()
    except ValueError:  # not running under @hydra.main
        return None, [], {}
    sweep = {}
    if str(hc.mode) == "RunMode.MULTIRUN":
        sweep = {"sweep_dir": str(Path(hc.sweep.dir)), "job_num": int(hc.job.num)}
    return Path(hc.runtime.output_dir), list(hc.overrides.task), sweep


#: Environment variable through which `bpe-train -m` tells its jobs how many there are (it
#: counts them before Hydra starts): submitit's local executor runs them all at once, and
#: nothing else in a job says how many share the machine. Jobs inherit the environment.
SWEEP_JOBS_ENV = "BPE_SWEEP_JOBS"


def _launcher(cfg: DictConfig, *, log: bool = False) -> dict:
    """`launcher_info` for this job, from Hydra's config when running under @hydra.main."""
    try:
        hc = HydraConfig.get()
        launcher, hydra_overrides = hc.launcher, list(hc.overrides.hydra)
        batch = (hc.sweeper or {}).get("max_batch_size")
    except ValueError:  # not running under @hydra.main
        launcher, hydra_overrides, batch = {}, [], None
    jobs = os.environ.get(SWEEP_JOBS_ENV, "")
    return launcher_info(
        launcher,
        hydra_overrides,
        num_workers=cfg.num_workers,
        sweep_jobs=int(jobs) if jobs.isdigit() else None,
        max_batch_size=batch,
        log=log,
    )


def launcher_info(
    launcher: Mapping,
    hydra_overrides: list[str],
    *,
    num_workers: int | None,
    sweep_jobs: int | None = None,
    max_batch_size: int | None = None,
    log: bool = False,
) -> dict:
    """The Hydra launcher, how many jobs it runs at once, and each job's workers (its CPU share).

    `name` is basic, joblib, submitit_local, submitit_slurm (or none outside Hydra);
    `parallel_jobs` is how many jobs may run at the same time (1: one after another, so timings
    are comparable; None: unknown); `overrides` are the launcher's own command-line overrides
    (e.g. `hydra/launcher=joblib`), so a sweep's reproduce command keeps them.

    `workers_per_job` is what pre-tokenization gets (None: every usable CPU of the job; the
    policy is `bpe.util.workers.workers_per_job`, this function only says who shares the CPUs):
      * joblib runs `n_jobs` jobs side by side on this machine: each gets its `fair_share`,
        unless the user set both n_jobs and num_workers;
      * submitit_local starts every job of the sweep at once as a local process
        (`sweep_jobs` of them, fewer with the sweeper's max_batch_size): fair share of those;
      * submitit_slurm: each job is its own allocation of `cpus_per_task` CPUs, which SLURM
        usually enforces through the CPU affinity (`default_num_workers` reads it). A set
        cpus_per_task is also the bound, for clusters that do not enforce it; a larger
        num_workers is lowered to it.

    >>> slurm = {"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher."
    ...          "SlurmLauncher", "cpus_per_task": 8, "array_parallelism": 16}
    >>> info = launcher_info(slurm, ["hydra/launcher=submitit_slurm"], num_workers=None)
    >>> info["name"], info["workers_per_job"], info["parallel_jobs"], info["cpus_per_task"]
    ('submitit_slurm', 8, 16, 8)
    """
    target = str(launcher.get("_target_", "none"))
    name = target.rsplit(".", 1)[-1].removesuffix("Launcher").lower() or "none"
    if "submitit" in target:
        name = f"submitit_{name}"  # LocalLauncher / SlurmLauncher
    n_jobs = launcher.get("n_jobs")  # joblib only; the basic launcher runs one job at a time
    cpus_per_task = launcher.get("cpus_per_task") if name == "submitit_slurm" else None
    at_once: int | None = None  # jobs sharing this machine's CPUs, when known
    if n_jobs is not None:
        user_n_jobs = any(o.startswith("hydra.launcher.n_jobs=") for o in hydra_overrides)
        if num_workers is None or not user_n_jobs:
            at_once = int(n_jobs)
    elif name == "submitit_local" and sweep_jobs:
        at_once = min(sweep_jobs, max_batch_size or sweep_jobs)
    workers = workers_per_job(
        num_workers, jobs_at_once=at_once, cpus_per_task=cpus_per_task, log=log
    )
    if name in ("basic", "none"):
        parallel: int | None = 1
    elif n_jobs is not None:  # joblib: a negative n_jobs counts back from the CPU count
        parallel = (
            int(n_jobs) if int(n_jobs) > 0 else max(1, default_num_workers() + 1 + int(n_jobs))
        )
    elif name == "submitit_local":  # every job at once (None: the count is unknown)
        parallel = at_once
    else:  # submitit_slurm: the array parallelism bounds it, the cluster decides
        parallel = launcher.get("array_parallelism")
    info = {
        "name": name,
        "n_jobs": n_jobs,
        "workers_per_job": workers,
        "parallel_jobs": parallel,
        "overrides": [
            o for o in hydra_overrides if o.startswith(("hydra/launcher=", "hydra.launcher."))
        ],
    }
    if name.startswith("submitit"):
        info["cpus_per_task"] = cpus_per_task
    return info


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
    check_profiler(cfg.profiler.name)
    ds = datasets.from_config(cfg.dataset)
    ds.check()
    return ds


def run_experiment(cfg: DictConfig, *, report: ReportWriter | None) -> dict:
    """Run one training job described by cfg; returns the final metrics dict.

    The steps, in order (the run stages of `bpe.runs.stages`, each one function below):

        open         `open_run_dir`: Hydra's job directory, or a new one; a used one is refused
        record       `run_record` into metrics.json (status=running), the environment, validate
        train        `_train_stage` (under the profiler), its time split into its stages
        save         `save_artifacts`: tokenizer files, exports, merge counts
        analyse      `evaluate` on held-out text
        facts        `run_facts` (timings, memory, counts, pattern, backend) into metrics.json
        report       the caller's writer, then the whole run's memory, status=complete, `latest`

    Args:
        cfg: the composed config (bpe/conf/config.yaml and its groups).
        report: called as `report(run_dir, metrics=...)` once every artifact is on disk and
            before the status flips to complete; None writes no report.

    Raises whatever stopped the run (after marking it failed in metrics.json, naming the
    stage it failed in).
    """
    run_dir, overrides, sweep = open_run_dir(cfg)
    metrics = MetricsFile(run_dir / METRICS_FILE, run_record(cfg, run_dir, overrides, sweep))
    clock = _StageClock()
    with _run_log(run_dir), _sigterm_raises():
        try:
            _begin(metrics, run_dir, overrides)
            ds = validate(cfg)
            release_free_memory()  # what earlier jobs of this process freed is not ours
            with MemorySampler() as mem:
                clock.sampler = mem
                with clock.stage(TRAINING, timed=False):
                    inputs = input_files(ds)
                    before = input_stamp(inputs)
                    holdout = hold_out(ds)
                    result = _train_stage(
                        cfg, ds, run_dir, holdout=holdout, sweep_dir=sweep.get("sweep_dir")
                    )
                    check_unchanged(before, input_stamp(inputs))
                clock.split_training(result.timings)
                with clock.stage(SAVE):
                    save_artifacts(result, run_dir)
                with clock.stage(ANALYSIS):
                    analysis = evaluate(result, ds, cfg.get("analysis") or {}, holdout=holdout)
                log_merge_support(analysis.get("merge_support"))
                before_report = _before_report(mem.summary())
                metrics.update(**run_facts(cfg, result, clock.timings, before_report), **analysis)
                with clock.stage(REPORT, timed=False):
                    metrics.write()  # every number on disk before the report reads it
                    if report is not None:
                        report(run_dir, metrics=metrics.as_complete())
            _complete(metrics, mem.summary(), before_report, cfg.experiments_dir, run_dir)
            return metrics.data
        except BaseException as err:
            logger.error("run failed in stage %s: %s: %s", clock.current, type(err).__name__, err)
            metrics.fail(err, clock.current)
            raise


def open_run_dir(cfg: DictConfig) -> tuple[Path, list[str], dict]:
    """The run's directory (created, checked empty and writable), its overrides, sweep info.

    Under Hydra it is Hydra's job directory; a directory that already holds a run is refused
    before anything of ours is written there. Called as a library, a new timestamped directory
    under `experiments_dir`, with the config and overrides saved as Hydra would.
    """
    hydra_dir, overrides, sweep = _hydra_output_dir()
    if hydra_dir is None:
        run_dir = create_run_dir(
            cfg.experiments_dir,
            dataset=_input_name(cfg),
            trainer=str(cfg.trainer.name),
            vocab_size=int(cfg.vocab_size),
            variant=variant_of(cfg).name,
        )
        overrides = list(cfg.get("_overrides_", []) or [])
        hydra_meta = run_dir / HYDRA_DIR
        hydra_meta.mkdir(exist_ok=True)
        atomic_write_text(hydra_meta / HYDRA_CONFIG, OmegaConf.to_yaml(cfg, resolve=True))
        atomic_write_text(hydra_meta / HYDRA_OVERRIDES, OmegaConf.to_yaml(overrides))
        return run_dir, overrides, sweep
    try:
        check_fresh(hydra_dir)  # before anything of ours is written there
    except FileExistsError as err:
        logger.error("%s", err)  # no metrics.json of ours to record it in: say it here
        raise
    hydra_dir.mkdir(parents=True, exist_ok=True)
    check_writable(hydra_dir)
    return hydra_dir, overrides, sweep


def _input_name(cfg: DictConfig) -> str:
    """What reports file the run under: the dataset's name, or custom-<stem> for dataset.path=."""
    return datasets.input_name(str(cfg.dataset.name), cfg.dataset.path)


def run_record(cfg: DictConfig, run_dir: Path, overrides: list[str], sweep: dict) -> RunRecord:
    """metrics.json's `run` section: what was asked for, where, how it was launched, and the
    command that reruns it (`bpe.runs.command.rerun_command`)."""
    run = {
        "name": run_dir.name,
        "dir": str(run_dir),
        "dataset": str(cfg.dataset.name),
        "trainer": str(cfg.trainer.name),
        "vocab_size": int(cfg.vocab_size),
        "profiler": str(cfg.profiler.name),
        "num_workers": cfg.num_workers,
        "launcher": _launcher(cfg, log=True),
        "seed": int(cfg.seed),
        "pretokenizer": str((cfg.get("pretokenizer") or {}).get("name", "gpt2")),
        "init_from": str(cfg.init_from) if cfg.get("init_from") else None,
        "special_tokens": list(cfg.dataset.special_tokens or []),
        "input_name": _input_name(cfg),
        "input_path": str(cfg.dataset.path),
        "overrides": overrides,
        "extra_overrides": _path_overrides(cfg),
        "sweep_dir": sweep.get("sweep_dir"),
        "job_num": sweep.get("job_num"),
    }
    return RunRecord(**run, command=rerun_command(run))


def _begin(metrics: MetricsFile, run_dir: Path, overrides: list[str]) -> None:
    """Status running on disk, room set aside for a failure record, the environment."""
    metrics.write()
    metrics.reserve()
    environment.write(run_dir, environment.capture(overrides=overrides))
    logger.info("run %s: %s", run_dir.name, metrics.data["run"]["command"])


class _StageClock:
    """Which run stage is running (a failure names it), its time, and the memory sampler's tag."""

    def __init__(self) -> None:
        self.current = SETUP
        self.timings: dict[str, float] = {}
        self.sampler: MemorySampler | None = None
        self._training_start = 0.0

    @contextlib.contextmanager
    def stage(self, name: str, *, timed: bool = True) -> Iterator[None]:
        self.current = name
        if self.sampler is not None:
            self.sampler.set_stage(name)
            if name == TRAINING:
                self._training_start = self.sampler.elapsed()
        t0 = time.perf_counter()
        yield
        if timed:
            self.timings[name] = time.perf_counter() - t0
            logger.info("stage %s: %.3f s", name, self.timings[name])

    def split_training(self, timings: Mapping[str, float]) -> None:
        """Take the training call's own stage times, and relabel its memory samples by them."""
        self.timings.update(timings)
        if self.sampler is not None:
            _label_stages(self.sampler, dict(timings), start=self._training_start, label=TRAINING)


def save_artifacts(result: TrainResult, run_dir: Path) -> None:
    """vocab.json and merges.txt, the exports (tokenizer.json, tiktoken), merge_counts.json.

    A PickyBPE run writes removals.json instead of the exports, which cannot encode as its
    tokenizer does (`bpe.formats.exports.export_refusal`, logged).
    """
    save_tokenizer_files(result.vocab, result.merges, run_dir)
    tokenizer = result.tokenizer()
    refusal = export_refusal(tokenizer)
    if refusal is None:
        save_exports(tokenizer, run_dir)
    else:
        save_removals(
            tokenizer.removals,
            run_dir / REMOVALS_FILE,
            pattern=result.pattern,
            threshold=result.variant.threshold,
        )
        logger.warning("no tokenizer.json or tokenizer.tiktoken: %s", refusal)
    atomic_write_text(run_dir / MERGE_COUNTS_FILE, json.dumps(result.merge_counts))


def run_facts(
    cfg: DictConfig, result: TrainResult, timings: Mapping[str, float], memory: dict
) -> dict:
    """What the run measured about itself, as metrics.json records it (besides `evaluate`'s)."""
    stage1 = result.pretokenized
    return {
        "profiled": cfg.profiler.name != "none",
        "timings": {
            **{k: round(v, 6) for k, v in timings.items()},
            "total": round(sum(timings.values()), 6),
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
        ),
        "merges_sha256": result.merges_sha256,
        "pretoken_cache": result.pretoken_cache,
        "pattern": PatternRecord(
            name=pattern_name(result.pattern), regex=result.pattern, engine=stage1.engine
        ),
        # where stage 1 ran: "LocalCluster(n)" or the address a dask run used
        "backend": BackendRecord(name=stage1.backend, scheduler=stage1.scheduler),
        "stopped_early": len(result.vocab) < int(cfg.vocab_size),
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
    )


def variant_of(cfg: DictConfig) -> Variant:
    """The run's `Variant` from the `variant` group (plain BPE without one)."""
    group = cfg.get("variant") or {}
    return Variant(
        name=str(group.get("name", "bpe")),
        transition_vocab=group.get("transition_vocab"),
        stage_two_pattern=group.get("stage_two_pattern"),
        threshold=group.get("threshold"),
    )


def _complete(
    metrics: MetricsFile, memory: dict, before_report: dict, experiments_dir: str, run_dir: Path
) -> None:
    """The whole run's memory (report included), status=complete in one write, `latest`."""
    # the report itself could only show what came before it: `before_report`
    memory = with_phases(memory)
    metrics.update(memory={**memory, "before_report": before_report["before_report"]})
    metrics.complete()
    update_latest(experiments_dir, run_dir)
    training, analysis = memory["training"], memory["analysis"]
    logger.info(
        "run complete: %d merges; training memory +%s MB (peak %s MB of the process tree, in "
        "%s; the run began at %s MB); analysis peaked at %s MB, apart; %s",
        metrics.data["counts"]["merges"],
        training["added_mb"],
        training["peak_mb"],
        training["stage"],
        memory["baseline_mb"],
        analysis["peak_mb"],
        run_dir,
    )


def _before_report(summary: dict) -> dict:
    """A memory summary taken before the report stage, with its headline kept apart.

    The report renders these figures; the final metrics keep them under `before_report`
    beside the whole run's, so regenerating the report later shows the same numbers.
    """
    keys = ("peak_mb", "ru_maxrss_mb", "children_ru_maxrss_mb")
    return {**with_phases(summary), "before_report": {k: summary[k] for k in keys}}


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
    return {
        **summary,
        "training": phase_memory(per_stage, TRAINING_MEMORY_STAGES, baseline),
        # stages 2-3 alone: where the trainers differ (stage 1 is shared, or a cache hit)
        "merge": phase_memory(per_stage, TRAIN_STAGES[1:], baseline),
        "analysis": phase_memory(per_stage, (ANALYSIS,), baseline),
    }


def _path_overrides(cfg: DictConfig) -> list[str]:
    """`dataset.path=...` when the path differs from the named dataset's config (for reruns)."""
    try:
        named = datasets.load_named(str(cfg.dataset.name))
    except ValueError:
        return []
    if datasets.resolve(cfg.dataset.path) == named.path:
        return []
    return [f"dataset.path={cfg.dataset.path}"]


def _label_stages(
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


def _train_stage(
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
        "num_workers": _launcher(cfg)["workers_per_job"],
        "pattern": split_pattern(cfg),
        "init_from": str(cfg.init_from) if cfg.get("init_from") else None,
        "cache_dir": pretoken_cache_dir(cfg),
        "backend": str(pretokenize_setting(cfg.get("pretokenize"), "backend")),
        "scheduler": (cfg.get("pretokenize") or {}).get("scheduler"),
        "engine": str(pretokenize_setting(cfg.get("pretokenize"), "engine")),
        "variant": variant_of(cfg),
        "format": ds.format,
        "text_field": ds.text_field,
        "max_files": ds.max_files,
        "max_bytes": ds.max_bytes,
    }
    plan = plan_for(
        cfg, sweep_dir=sweep_dir, pattern=kwargs["pattern"], launcher=_launcher(cfg)["name"]
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
