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
                export mismatches (`bpe.evaluation.evaluate`)
    report      the `report` writer the caller passes (the CLI passes ANALYSIS.md + figures),
                then the final memory summary (report stage included) and status=complete,
                in one atomic write, last; `<experiments_dir>/latest` then points at the run
                (not for a sweep's job: `latest` is the last run a person started)

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
import json
import logging
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol

from omegaconf import DictConfig, OmegaConf

from bpe.corpus import datasets
from bpe.evaluation.evaluate import evaluate
from bpe.experiment import compile_ahead, environment
from bpe.experiment.inputs import (
    check_unchanged,
    hold_out,
    input_files,
    input_stamp,
    train_spec,
    train_stage,
    training_corpus,
    validate,
)
from bpe.experiment.launching import hydra_output_dir
from bpe.experiment.memory import MemorySampler, release_free_memory
from bpe.experiment.metrics import MetricsFile
from bpe.experiment.records import (
    input_name,
    label_stages,
    log_merge_support,
    run_facts,
    run_record,
    with_phases,
)
from bpe.experiment.rundir import check_fresh, check_writable, create_run_dir, update_latest
from bpe.formats.exports import save_pretrained
from bpe.pipeline import TrainResult
from bpe.pipeline.plan import TrainSpec
from bpe.runs import schema
from bpe.runs.layout import (
    HYDRA_CONFIG,
    HYDRA_DIR,
    HYDRA_OVERRIDES,
    LOG_FILE,
    MERGE_COUNTS_FILE,
    METRICS_FILE,
)
from bpe.runs.stages import ANALYSIS, KERNEL_COMPILE, REPORT, SAVE, SETUP, TRAINING
from bpe.util import compile_clock
from bpe.util.cputime import cpu_seconds
from bpe.util.interrupts import sigterm_raises
from bpe.util.io import atomic_write_text
from bpe.variants import as_variant

logger = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class ReportWriter(Protocol):
    """Writes a run's report from its directory and final metrics (e.g. ANALYSIS.md)."""

    def __call__(self, run_dir: Path, *, metrics: dict) -> object: ...


class RunInterrupted(KeyboardInterrupt):
    """Raised in the main thread when the run receives SIGTERM."""


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


def run_experiment(cfg: DictConfig, *, report: ReportWriter | None) -> dict:
    """Run one training job described by cfg; returns the final metrics dict.

    The steps, in order (the run stages of `bpe.runs.stages`, each one function below):

        open         `open_run_dir`: Hydra's job directory, or a new one; a used one is refused
        record       `run_record` into metrics.json (status=running), the environment, validate
        train        `train_stage` (under the profiler), its time split into its stages
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
    ds = datasets.from_config(cfg.dataset)
    spec = train_spec(cfg, ds)
    run_dir, overrides, sweep = open_run_dir(cfg, spec)
    metrics = MetricsFile(run_dir / METRICS_FILE, run_record(cfg, spec, run_dir, overrides, sweep))
    clock = _StageClock()
    ahead: compile_ahead.Ahead | None = None
    with _run_log(run_dir), sigterm_raises(RunInterrupted):
        try:
            _begin(metrics, run_dir, overrides)
            ds, plan = validate(cfg, inputs=(ds, spec))
            # the analysis' kernels compile beside training on a machine that lacks them
            ahead = compile_ahead.start(compile_ahead.ways_needed(cfg))
            release_free_memory()  # what earlier jobs of this process freed is not ours
            with MemorySampler() as mem:
                clock.sampler = mem
                with clock.stage(TRAINING, timed=False):
                    inputs = input_files(ds)
                    before = input_stamp(inputs)
                    holdout = hold_out(ds)
                    if holdout is not None or ds.train_fraction < 1:
                        # training stops before the held-out documents, or its prefix's end
                        plan = plan.reading(training_corpus(ds, holdout))
                    result = train_stage(cfg, plan, run_dir, sweep_dir=sweep.get("sweep_dir"))
                    check_unchanged(before, input_stamp(inputs))
                clock.split_training(result.timings, result.cpu_timings)
                with clock.stage(SAVE):
                    save_artifacts(result, run_dir)
                with clock.stage(ANALYSIS):
                    # each way's kernels are waited for just before its first use: the
                    # segmentation methods' (`cut`) go on compiling while the merges are measured
                    analysis = evaluate(
                        result,
                        ds,
                        cfg.get("analysis") or {},
                        holdout=holdout,
                        kernels_for=lambda way: clock.wait_for(ahead, ways=[way]),
                    )
                log_merge_support(analysis.get("merge_support"))
                before_report = _before_report(mem.summary())
                facts = run_facts(cfg, result, clock.timings, before_report, cpu=clock.cpu)
                metrics.update(**facts, **analysis)
                with clock.stage(REPORT, timed=False):
                    metrics.write()  # every number on disk before the report reads it
                    if report is not None:
                        report(run_dir, metrics=metrics.as_complete())
            # `latest` is what a person ran last: a sweep's job leaves it alone (its sweep
            # directory and SWEEP.md name the jobs)
            latest_in = None if sweep.get("sweep_dir") else cfg.experiments_dir
            _complete(metrics, mem.summary(), before_report, latest_in, run_dir)
            return metrics.data
        except BaseException as err:
            logger.error("run failed in stage %s: %s: %s", clock.current, type(err).__name__, err)
            metrics.fail(err, clock.current)
            raise
        finally:
            if ahead is not None:
                ahead.stop()


def open_run_dir(cfg: DictConfig, spec: TrainSpec) -> tuple[Path, list[str], dict]:
    """The run's directory (created, checked empty and writable), its overrides, sweep info.

    Under Hydra it is Hydra's job directory; a directory that already holds a run is refused
    before anything of ours is written there. Called as a library, a new timestamped directory
    under `experiments_dir`, with the config and overrides saved as Hydra would.
    """
    hydra_dir, overrides, sweep = hydra_output_dir()
    if hydra_dir is None:
        run_dir = create_run_dir(
            cfg.experiments_dir,
            dataset=input_name(cfg),
            trainer=spec.trainer,
            vocab_size=spec.vocab_size,
            variant=as_variant(spec.variant).name,
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


def _begin(metrics: MetricsFile, run_dir: Path, overrides: list[str]) -> None:
    """Status running on disk, room set aside for a failure record, the environment."""
    metrics.write()
    metrics.reserve()
    environment.write(run_dir, environment.capture(overrides=overrides))
    logger.info("run %s: %s", run_dir.name, schema.get(metrics.data, schema.COMMAND))


class _StageClock:
    """Which run stage is running (a failure names it), its time, and the memory sampler's tag."""

    def __init__(self) -> None:
        self.current = SETUP
        self.timings: dict[str, float] = {}
        #: CPU seconds of the same stages (`bpe.util.cputime`)
        self.cpu: dict[str, float] = {}
        self.sampler: MemorySampler | None = None
        self._training_start = 0.0
        #: wall seconds spent waiting for the compile helper (`wait_for`), so far
        self._waited = 0.0

    @contextlib.contextmanager
    def stage(self, name: str, *, timed: bool = True) -> Iterator[None]:
        self.current = name
        if self.sampler is not None:
            self.sampler.set_stage(name)
            if name == TRAINING:
                self._training_start = self.sampler.elapsed()
        t0, cpu = time.perf_counter(), cpu_seconds()
        jit, jit_cpu = compile_clock.seconds(), compile_clock.cpu_seconds()
        waited = self._waited
        yield
        if timed:
            # Numba compiling on a first use is its own stage, not this one's work (and so is
            # waiting for the helper that compiles it, which `wait_for` records)
            own = compile_clock.seconds() - jit  # compiled in this process
            compiled_cpu = compile_clock.cpu_seconds() - jit_cpu
            if own > 0:
                self._add_compile(own, compiled_cpu)
            compiled = own + self._waited - waited
            self.timings[name] = time.perf_counter() - t0 - compiled
            self.cpu[name] = max(0.0, cpu_seconds() - cpu - compiled_cpu)
            logger.info(
                "stage %s: %.3f s (CPU %.3f s)%s",
                name,
                self.timings[name],
                self.cpu[name],
                f"; compiling kernels took {compiled:.1f} s more, recorded apart as "
                f"{KERNEL_COMPILE}"
                if compiled > 0
                else "",
            )

    def wait_for(self, ahead: compile_ahead.Ahead | None, *, ways: list[str] | None = None) -> None:
        """Wait for the compile helper, if one runs, to warm `ways` (default: all of its
        own): the wait is recorded as `KERNEL_COMPILE` (with the helper's CPU seconds for
        them), not as the stage that waited."""
        if ahead is None:
            return
        ways = ahead.ways() if ways is None else [w for w in ways if w in ahead.ways()]
        if not ways:
            return
        waited = ahead.wait(ways)
        self._waited += waited.seconds
        self._add_compile(waited.seconds, waited.helper_cpu_seconds)
        logger.info(
            "the encoder's kernels for %s are compiled (the helper used %.1f s of CPU for "
            "them; this run waited %.1f s), recorded as %s",
            ", ".join(ways),
            waited.helper_cpu_seconds,
            waited.seconds,
            KERNEL_COMPILE,
        )

    def _add_compile(self, wall: float, cpu: float) -> None:
        self.timings[KERNEL_COMPILE] = self.timings.get(KERNEL_COMPILE, 0.0) + wall
        self.cpu[KERNEL_COMPILE] = self.cpu.get(KERNEL_COMPILE, 0.0) + cpu

    def split_training(self, timings: Mapping[str, float], cpu: Mapping[str, float]) -> None:
        """Take the training call's own stage times (wall and CPU), and relabel its memory
        samples by them."""
        self.timings.update(timings)
        self.cpu.update(cpu)
        if self.sampler is not None:
            label_stages(self.sampler, dict(timings), start=self._training_start, label=TRAINING)


def save_artifacts(result: TrainResult, run_dir: Path) -> None:
    """The tokenizer directory (`bpe.formats.exports.save_pretrained`: vocab.json, merges.txt,
    the exports or PickyBPE's removals.json, the manifest), then merge_counts.json."""
    save_pretrained(result.tokenizer(), run_dir, picky_threshold=result.variant.threshold)
    atomic_write_text(run_dir / MERGE_COUNTS_FILE, json.dumps(result.merge_counts))


def _complete(
    metrics: MetricsFile, memory: dict, before_report: dict, latest_in: str | None, run_dir: Path
) -> None:
    """The whole run's memory (report included), status=complete in one write, then the
    `latest` link of `latest_in` (the experiments directory; None for a sweep's job)."""
    # the report itself could only show what came before it: `before_report`
    memory = with_phases(memory)
    metrics.update(memory={**memory, "before_report": before_report["before_report"]})
    metrics.complete()
    if latest_in is not None:
        update_latest(latest_in, run_dir)
    training, analysis = memory["training"], memory["analysis"]
    logger.info(
        "run complete: %d merges; training memory +%s MB (peak %s MB of the process tree, in "
        "%s; the run began at %s MB); analysis peaked at %s MB, apart; %s",
        schema.get(metrics.data, schema.MERGES),
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
