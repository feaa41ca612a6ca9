"""The vocab ladder: one training serves every vocab size of a sweep.

BPE's merges are a prefix sequence: the first n merges of a training to V are exactly the
merges of a training to 256 + specials + n. So when a Hydra multirun sweeps `vocab_size`
(`bpe-train -m vocab_size=1000,2000,5000,10000`), the jobs that share everything else (the same
input, split pattern, specials and trainer) train once, to the largest vocab of the sweep, and
each job cuts its own prefix from that one training and goes on to write a complete run
directory, as a direct run of its vocab would.

How the jobs share the training, in `<sweep_dir>/.ladder/<key>/` (key: a hash of the dataset
config, pattern, specials, trainer and largest vocab):

    lock        the first job to take it (an exclusive `flock`) trains; it records itself
                (host, pid, start time) in the file for anyone looking
    ladder.json the training, written atomically when it succeeded: merges, merge counts,
                stage 1's facts, timings, and when the merge stage reached each rung
    failed.json the error, when the training failed: every job of the ladder then fails too

A job that finds the lock taken waits for it. The kernel drops a lock whose process died (even
by SIGKILL), so a waiter then takes it, finds neither ladder.json nor failed.json, and trains
itself: a killed training is retaken, never mistaken for a finished one. The recorded holder
is checked with `bpe.runs.liveness` only to say in the log who is being waited for.

When it applies (`plan_for`): a multirun whose sweep lists two or more `vocab_size` values
(read from Hydra's `multirun.yaml`), this job's vocab among them, plain BPE (`variant=bpe`:
PickyBPE's and SuperBPE's merges are not prefixes), no `init_from`, no profiler, a launcher
whose jobs share one machine (basic, joblib, submitit_local), and `ladder: true` (the default).

Each rung's `timings.merge` is the time at which the one training reached it (seconds since its
merge stage began), so the vocab-scaling figures keep their time curve, measured in one run;
`timings.pretokenize` is the training's. metrics.json's `ladder` section says so.

What it does not do: write run directories (`bpe.experiment.runner` does, from the cut
`TrainResult`), or ladder jobs on separate machines (SLURM).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from bpe.pipeline import TrainResult
from bpe.pipeline.plan import RunPlan
from bpe.pretokenize.counting import PretokenCounts
from bpe.runs.liveness import process_alive, this_process
from bpe.runs.schema import LadderRecord
from bpe.trainers.common import initial_vocab
from bpe.util.io import atomic_write_text
from bpe.variants import Variant, as_variant

logger = logging.getLogger(__name__)

#: Where a sweep keeps its ladders (one subdirectory per key).
LADDER_DIR = ".ladder"
#: Launchers whose jobs share one machine (and so one lock).
LOCAL_LAUNCHERS = ("basic", "joblib", "submitit_local")


class LadderFailed(RuntimeError):
    """The one training of a ladder failed, so no rung can be cut from it."""


@dataclass(frozen=True)
class LadderPlan:
    """One job's place on a ladder: where the ladder lives and how tall it is."""

    directory: Path
    key: str
    rungs: tuple[int, ...]  # the sweep's vocab sizes, ascending
    vocab_size: int  # this job's

    @property
    def largest(self) -> int:
        return self.rungs[-1]


def sweep_vocab_sizes(sweep_dir: Path) -> list[int]:
    """The `vocab_size` values a Hydra multirun sweeps (ascending), from its multirun.yaml.

    Reads the sweeper's params (an experiment overlay's `hydra.sweeper.params`) and the command
    line's overrides, parsed as Hydra's basic sweeper parses them; [] when vocab_size is not
    swept or the file is missing (another sweeper).
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    path = Path(sweep_dir) / "multirun.yaml"
    if not path.is_file():
        return []
    hydra = OmegaConf.load(path).get("hydra") or {}
    params = (hydra.get("sweeper") or {}).get("params") or {}
    args = [f"{k}={v}" for k, v in params.items()]
    args += list((hydra.get("overrides") or {}).get("task") or [])
    values: list[int] = []
    for override in OverridesParser.create().parse_overrides(args):
        if override.get_key_element().lstrip("+~") != "vocab_size":
            continue
        if override.is_sweep_override() and override.is_discrete_sweep():
            found = list(override.sweep_string_iterator())
        else:
            found = [override.get_value_element_as_str()]
        try:
            values = [int(v) for v in found]  # the last override of a key wins, as in Hydra
        except ValueError:
            return []
    return sorted(set(values))


def plan_for(
    cfg: DictConfig, run: RunPlan, *, sweep_dir: str | None, launcher: str
) -> LadderPlan | None:
    """This job's `LadderPlan` for its training call's plan `run`, or None (logged) when it
    must train directly."""
    spec = run.spec
    if sweep_dir is None or not cfg.get("ladder", True):
        return None
    rungs = sweep_vocab_sizes(Path(sweep_dir))
    vocab = spec.vocab_size
    why = None
    if len(rungs) < 2:
        return None  # not a vocab sweep: nothing to say
    if vocab not in rungs:
        why = f"its vocab_size={vocab} is not one of the sweep's {rungs}"
    elif as_variant(spec.variant).name != "bpe":
        why = f"variant={as_variant(spec.variant).name}: its merges are not a prefix sequence"
    elif spec.init_from or spec.seed_tokens:
        why = "init_from or seed_tokens is set (its first merges are given)"
    elif str(cfg.profiler.name) != "none":
        why = f"profiler={cfg.profiler.name} profiles this job's own training"
    elif launcher not in LOCAL_LAUNCHERS:
        why = f"launcher {launcher} may run the jobs on separate machines"
    if why is not None:
        logger.info("vocab ladder not used: %s; training directly", why)
        return None
    identity = {
        "dataset": OmegaConf.to_container(cfg.dataset, resolve=True),
        "pattern": run.pattern,
        **({"protect": list(spec.protect)} if spec.protect else {}),
        "special_tokens": list(spec.special_tokens or ()),
        "trainer": spec.trainer,
        "largest": rungs[-1],
        "limits": spec.limits.as_dict(),
    }
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    directory = Path(sweep_dir) / LADDER_DIR / key
    return LadderPlan(directory=directory, key=key, rungs=tuple(rungs), vocab_size=vocab)


def climb(
    plan: LadderPlan, train: Callable[[], TrainResult], *, run_name: str, run_dir: Path
) -> TrainResult:
    """This job's rung: train the ladder if no job has (under its lock), then cut the prefix.

    `train()` trains to `plan.largest` with `rungs=plan.rungs`. Raises `LadderFailed` when the
    training (this job's or another's) failed, and re-raises this job's own training error.
    """
    try:
        plan.directory.mkdir(parents=True, exist_ok=True)
        with open(plan.directory / "lock", "a+", encoding="utf-8"):
            pass
    except OSError as err:  # read-only, a file in its way, a full disk
        raise type(err)(
            err.errno,
            f"the vocab ladder cannot write its folder {str(plan.directory)!r} "
            f"({err.strerror}); make the sweep directory writable, or run the sweep with "
            "ladder=false (each job then trains its own vocab)",
        ) from None
    stored = _stored(plan)
    trained_here = False
    if stored is None:
        with _lock(plan.directory / "lock"):
            stored = _stored(plan)  # another job may have finished while this one waited
            if stored is None:
                stored = _train(plan, train, run_name=run_name, run_dir=run_dir)
                trained_here = True
    return cut(stored, plan.vocab_size, trained_here=trained_here, key=plan.key)


def _stored(plan: LadderPlan) -> dict | None:
    failed = plan.directory / "failed.json"
    if failed.is_file():
        record = json.loads(failed.read_text("utf-8"))
        raise LadderFailed(
            f"the vocab ladder's training (in run {record['run']!r}) failed, so vocab_size="
            f"{plan.vocab_size} cannot be cut from it: {record['error']}; fix that and rerun "
            "the sweep, or run it with ladder=false"
        )
    done = plan.directory / "ladder.json"
    return json.loads(done.read_text("utf-8")) if done.is_file() else None


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path`, waiting for whoever holds it (the kernel frees it when
    the holder dies, whatever killed it)."""
    with open(path, "a+", encoding="utf-8") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = _holder(f.read())
            alive = process_alive(holder) if holder else None
            logger.info(
                "vocab ladder: waiting for the training in pid %s (%s)",
                holder.get("pid", "?") if holder else "?",
                {True: "running", False: "gone: its lock is being released"}.get(alive, "?"),
            )
            fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        f.truncate()
        f.write(json.dumps(this_process()))
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _holder(text: str) -> dict | None:
    try:
        holder = json.loads(text)
    except ValueError:
        return None
    return holder if isinstance(holder, dict) else None


def _train(
    plan: LadderPlan, train: Callable[[], TrainResult], *, run_name: str, run_dir: Path
) -> dict:
    logger.info(
        "vocab ladder: training once to vocab_size=%d for the sweep's %s",
        plan.largest,
        ", ".join(map(str, plan.rungs)),
    )
    try:
        result = train()
    except BaseException as err:
        record = {"run": run_name, "error": f"{type(err).__name__}: {err}"}
        atomic_write_text(plan.directory / "failed.json", json.dumps(record))
        raise
    stored = _as_stored(result, run_name=run_name, run_dir=run_dir)
    atomic_write_text(plan.directory / "ladder.json", json.dumps(stored))
    for vocab in plan.rungs:
        seconds = stored["rung_seconds"][str(vocab)]
        logger.info("vocab ladder: rung %d reached after %.3f s of merging", vocab, seconds)
    return stored


def _as_stored(result: TrainResult, *, run_name: str, run_dir: Path) -> dict:
    """The training as ladder.json keeps it (everything a cut needs; merges as hex)."""
    stage1 = result.pretokenized
    facts = {f.name: getattr(stage1, f.name) for f in dataclasses.fields(stage1)}
    del facts["counts"]  # handed to the trainer; only their totals are kept
    return {
        "run": run_name,
        "run_dir": str(run_dir),
        "trainer": result.trainer,
        "vocab_size": result.vocab_size,
        "special_tokens": list(result.special_tokens),
        "pattern": result.pattern,
        "protect": result.protect,
        "merges": [[a.hex(), b.hex()] for a, b in result.merges],
        "merge_counts": list(result.merge_counts),
        "timings": dict(result.timings),
        "rung_seconds": {str(v): s for v, s in result.rung_seconds.items()},
        "pretokenized": {
            **facts,
            "num_pretokens": stage1.num_pretokens,
            "num_unique": stage1.num_unique,
        },
        "pretoken_cache": result.pretoken_cache,
        "input_sha256": result.input_sha256,
        "input_manifest": result.input_manifest,
        "compile_cached": result.compile_cached,
        "limits": result.limits,
        "stopped_by": result.stopped_by,
    }


def cut(stored: dict, vocab_size: int, *, trained_here: bool, key: str) -> TrainResult:
    """The `TrainResult` a direct training to `vocab_size` gives, from a stored ladder.

    Its merges are the ladder's first `vocab_size - 256 - specials` (all of them if the
    training stopped early), its vocab the ids those merges made, its `timings.merge` the
    time the training reached this rung.
    """
    specials = list(stored["special_tokens"])
    vocab = initial_vocab(specials)
    n = vocab_size - len(vocab)
    merges = [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in stored["merges"][:n]]
    for left, right in merges:
        vocab[len(vocab)] = left + right
    facts = dict(stored["pretokenized"])
    totals = (facts.pop("num_pretokens"), facts.pop("num_unique"))
    pretokenized = PretokenCounts(counts=Counter(), **facts)
    pretokenized._totals = totals  # noqa: SLF001 - the counts went to the trainer
    seconds = float(stored["rung_seconds"].get(str(vocab_size), stored["timings"]["merge"]))
    timings = {**stored["timings"], "merge": seconds}
    record = LadderRecord(
        key=key,
        trained_in=stored["run"],
        trained_in_dir=stored["run_dir"],
        trained_here=trained_here,
        largest_vocab=int(stored["vocab_size"]),
        rung_merges=len(merges),
        rung_seconds=round(seconds, 6),
        merges_per_second=round(len(merges) / seconds, 1) if seconds > 0 else None,
        ladder_merge_seconds=round(float(stored["timings"]["merge"]), 6),
    )
    return TrainResult(
        vocab=vocab,
        merges=merges,
        trainer=stored["trainer"],
        vocab_size=vocab_size,
        special_tokens=specials,
        pretokenized=pretokenized,
        timings=timings,
        merge_counts=list(stored["merge_counts"][:n]),
        pattern=stored["pattern"],
        protect=stored.get("protect"),
        pretoken_cache=stored["pretoken_cache"],
        input_sha256=stored["input_sha256"],
        input_manifest=stored["input_manifest"],
        variant=Variant().resolve(vocab_size=vocab_size),
        compile_cached=stored["compile_cached"],
        ladder=dict(record),
        limits=stored["limits"],
        # a rung the training reached did not stop early, whatever stopped the training
        stopped_by=stored["stopped_by"] if len(vocab) < vocab_size else None,
    )
