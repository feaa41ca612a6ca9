"""`bpe-train`: the Hydra command line for training runs (also `python -m bpe.cli.train`).

    bpe-train                                        defaults: bpe/conf/config.yaml
    bpe-train dataset=owt_sample vocab_size=32000 trainer=indexed profiler=cprofile
    bpe-train experiment=owt_32k
    bpe-train -m trainer=naive,indexed,heap vocab_size=500,1000 dataset=tinystories_sample
    bpe-train --help                                 groups, keys and their meaning, examples

A thin shell that wires the layers: `bpe.experiment.runner.run_experiment(cfg, report=...)` does
the work and returns the metrics (tests call it without the command line), and this module hands
it the report writer of `bpe.analysis.run.report`, so neither layer imports the other.

Before Hydra starts (and so before it makes any directory), `main` composes the config of every
job the command line asks for against the typed schema of `bpe.experiment.config` and checks its
ranges
and the place run directories would go. A mistake there (a typo'd key, `vocab_size=abc`, a bad
value anywhere in a sweep, a read-only experiments_dir) prints one line on stderr and exits 2:
nothing is created, and a sweep with one bad value runs none of its jobs. `--debug` (or
`HYDRA_FULL_ERROR=1`) shows the full traceback instead.

A failure during a run is recorded in its metrics.json and logged once on stderr; a single run
then exits 1, while in a sweep (-m) the job is marked failed and the sweep goes on.
"""

from __future__ import annotations

import difflib
import importlib.util
import itertools
import logging
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import hydra
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from bpe.cli import version_line
from bpe.corpus.datasets import input_name
from bpe.experiment import compile_ahead, config_checks
from bpe.experiment import config as config_schema
from bpe.experiment.inputs import validate
from bpe.experiment.launching import SWEEP_JOBS_ENV
from bpe.experiment.metrics import RESERVE_BYTES
from bpe.experiment.rundir import preflight
from bpe.experiment.runner import run_experiment
from bpe.runs import schema
from bpe.runs.layout import ANALYSIS_FILE, LATEST
from bpe.runs.search import is_search, search_values, trial_value
from bpe.util.io import CONF_DIR, safe_name, shown_path
from bpe.variants import variant_tag

logger = logging.getLogger("bpe.cli.train")

__all__ = ["ConfigError", "check_command_line", "main"]

#: Flags this module understands; any other flag (--cfg, --info, --config-dir, ...) is Hydra's
#: and skips the up-front check (Hydra still enforces the schema when it composes).
_MULTIRUN_FLAGS = ("-m", "--multirun")
_DEBUG_FLAG = "--debug"

# Run directory names (conf/config.yaml) show a custom dataset.path as custom-<file stem>.
OmegaConf.register_new_resolver("input_name", input_name, replace=True)
OmegaConf.register_new_resolver("safe_name", safe_name, replace=True)
# ... and a variant other than plain BPE as _<variant> (`bpe.variants.variant_tag`).
OmegaConf.register_new_resolver("variant_tag", variant_tag, replace=True)


class ConfigError(ValueError):
    """A mistake on the command line, found before anything is created."""


# subtle: an absolute path derived from this module's location (`bpe/conf`), so an installed
# wheel finds its configs wherever it is run from; a relative config_path would make Hydra look
# for an importable `bpe.conf` package instead.
@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _app(cfg: DictConfig) -> float | str | None:
    # subtle: the report writer (pandas, matplotlib: 1.7 s of imports) loads here, after
    # `main` has started the kernel compile helpers, so they get those seconds too
    from bpe.analysis.run.report import write_run_report

    multirun = str(HydraConfig.get().mode) == "RunMode.MULTIRUN"
    try:
        metrics = run_experiment(cfg, report=write_run_report)
    except KeyboardInterrupt:
        logger.error("interrupted: the run is marked failed in its metrics.json")
        raise
    except Exception:  # noqa: BLE001 - the runner logged it and recorded it in metrics.json
        if multirun:
            if _debug():
                logger.exception("the traceback of this job's failure")
            # keep the sweep going; SWEEP.md lists the failure (a search records a failed trial)
            return "failed"
        if _debug():
            raise
        sys.exit(1)
    run = schema.get(metrics, schema.RUN)
    latest = Path(cfg.experiments_dir) / LATEST
    run_dir = Path(schema.get(metrics, schema.RUN_DIR))
    named = latest if latest.resolve() == run_dir.resolve() else None
    for line in next_steps(run, heldout=_heldout_file(cfg), via=named):
        logger.info("%s", line)
    return trial_value(cfg, metrics)


def _heldout_file(cfg: DictConfig) -> str | None:
    """The run's held-out file (None when its held-out text is the input's tail)."""
    from bpe.corpus.datasets import from_config

    path = from_config(cfg.dataset).heldout_path
    return None if path is None else str(path)


def encode_command() -> str:
    """How to call bpe-encode from this shell: its bare name when it is on PATH (as this
    bpe-train), else the script beside this interpreter, else `python -m bpe.cli.encode`."""
    here = Path(sys.executable).parent / "bpe-encode"
    found = shutil.which("bpe-encode")
    if found is not None and Path(found).resolve() == here.resolve():
        return "bpe-encode"
    if here.is_file():
        return shlex.quote(str(here))
    return f"{shlex.quote(sys.executable)} -m bpe.cli.encode"


def _debug() -> bool:
    return os.environ.get("HYDRA_FULL_ERROR") == "1"


def next_steps(
    run: dict, *, heldout: str | None, encode: str | None = None, via: Path | None = None
) -> list[str]:
    """The last log lines of a run, short: where its report is, then the next useful command
    on a line of its own, which encodes the run's held-out text (the training input when its
    held-out text is the input's tail) into `<experiments dir>/encoded/`, beside the run, never
    into the current directory. `via`: the `latest` link when it names this run, shown instead
    of the run's long name; paths under the current directory are shown relative to it.

    >>> for line in next_steps({"dir": "exp/r", "input_path": "a.txt", "dataset": "a"},
    ...                        heldout="h.txt", encode="bpe-encode", via=Path("exp/latest")):
    ...     print(line)  # doctest: +NORMALIZE_WHITESPACE
    report: exp/latest/ANALYSIS.md
    next, encode the held-out text: bpe-encode --tokenizer exp/latest --input h.txt
      --out exp/encoded/r.heldout.npy
    """
    run_dir = Path(run["dir"])
    shown_dir = via if via is not None else run_dir
    report = f"report: {shown_path(shown_dir / ANALYSIS_FILE)}"
    if run.get("sweep_dir"):
        return [report, f"the sweep's SWEEP.md goes to {shown_path(run['sweep_dir'])} when it ends"]
    source, what = (heldout, "heldout") if heldout else (run["input_path"], "input")
    out = run_dir.parent / "encoded" / f"{run_dir.name}.{what}.npy"
    said = "the held-out text" if heldout else "the training input (its held-out tail is no file)"
    command = " ".join(
        [
            encode or encode_command(),
            "--tokenizer",
            shlex.quote(shown_path(shown_dir)),
            "--input",
            shlex.quote(shown_path(source)),
            "--out",
            shlex.quote(shown_path(out)),
        ]
    )
    return [report, f"next, encode {said}: {command}"]


def check_command_line(argv: list[str]) -> int:
    """Compose and check every job the command line asks for; returns the number of jobs.

    Raises:
        ConfigError: one line naming the offending override and the fix.
    """
    return len(checked_jobs(argv))


def checked_jobs(argv: list[str]) -> list[DictConfig]:
    """The composed config of every job the command line asks for, each checked (see
    `check_command_line`)."""
    multirun = any(a in _MULTIRUN_FLAGS for a in argv)
    overrides = [a for a in argv if not a.startswith("-")]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3", job_name="train"):
            # with the config loader, so that glob() sweeps over group options expand
            parser = OverridesParser.create(config_loader=GlobalHydra.instance().config_loader())
            jobs = _jobs(parser, overrides, multirun=multirun)
            targets: set[Path] = set()
            configs = []
            for i, (job, swept) in enumerate(jobs):
                try:
                    cfg = _compose(job, return_hydra_config=True)
                    configs.append(cfg)
                    extra = config_checks.extra_keys(cfg)
                    if extra:
                        raise ConfigError(_unknown_key(extra[0]))
                    _check_output_names(cfg)
                    _check_inputs(cfg)
                except ConfigError as err:
                    if not multirun:
                        raise
                    where = f"sweep job {i} of {len(jobs)} ({' '.join(swept)}), so no job ran"
                    raise ConfigError(f"{where}: {err}") from None
                key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
                targets.add(Path(str(OmegaConf.select(cfg, key))).parent)
            if multirun:  # one launcher runs every job (a single run uses none)
                _check_launcher(cfg)
            # only once every job is known to be valid: this may create experiments_dir
            for parent in sorted(targets):
                _check_writable(parent)
    finally:
        GlobalHydra.instance().clear()
    return configs


def _check_inputs(cfg: DictConfig) -> None:
    """What the run itself checks first (`bpe.experiment.inputs.validate`: the config's
    ranges; the corpus exists, is a regular file or folder, is readable and of a known format,
    not empty; the training call's plan: trainer, vocab size, variant, parent), checked here
    so a mistake stops before any run directory exists; the plan is kept for the run."""
    try:
        validate(cfg, keep=True)
    except ImportError as err:  # an optional package a key needs (compiled: Numba)
        raise ConfigError(str(err)) from None
    except (ValueError, OSError) as err:
        raise ConfigError(str(err).splitlines()[0] if str(err) else type(err).__name__) from None


def _check_output_names(cfg: DictConfig) -> None:
    """Hydra writes `<job dir>/<hydra.job.name>.log` and puts a sweep's jobs in
    `<hydra.sweep.dir>/<hydra.sweep.subdir>`: neither may lead out of its directory.

    >>> _check_output_names(OmegaConf.create(
    ...     {"hydra": {"job": {"name": "../x"}, "sweep": {"subdir": "0"}}}))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bpe.cli.train.ConfigError: hydra.job.name='../x' names a file outside the run directory ...
    """
    name = str(OmegaConf.select(cfg, "hydra.job.name"))
    if "/" in name or "\\" in name or name in ("", ".", ".."):
        raise ConfigError(
            f"hydra.job.name={name!r} names a file outside the run directory (it holds a '/' "
            "or is '..'); pass a plain name such as hydra.job.name=train"
        )
    subdir = OmegaConf.to_container(cfg.hydra.sweep, resolve=False).get("subdir")
    parts = Path(str(subdir)).parts
    if str(subdir).startswith(("/", "~")) or ".." in parts:
        raise ConfigError(
            f"hydra.sweep.subdir={subdir!r} leads out of the sweep directory; pass a relative "
            "name without '..', e.g. hydra.sweep.subdir=${hydra.job.num}"
        )


def _jobs(
    parser: OverridesParser, overrides: list[str], *, multirun: bool
) -> list[tuple[list[str], list[str]]]:
    """(overrides, the swept ones) of every job, as Hydra's basic sweeper would run them."""
    try:
        parsed = parser.parse_overrides(overrides)
    except HydraException as err:
        bad = getattr(err, "override", None)
        what = f"cannot parse {bad!r}: " if bad else ""
        raise ConfigError(f"{what}{_first_line(err)} (override grammar: KEY=VALUE)") from None
    fixed = [o.input_line for o in parsed if not o.is_sweep_override()]
    swept = [o for o in parsed if o.is_sweep_override()]
    if swept and not multirun:
        raise ConfigError(
            f"{swept[0].input_line!r} lists several values: add -m to run a sweep "
            "(one run per value), or pass a single value"
        )
    if not multirun:
        return [(fixed, [])]
    # the sweep: the config's hydra.sweeper.params (e.g. from an experiment overlay), then the
    # command line's sweeps, which win for the same key
    base = _compose(fixed, return_hydra_config=True)
    params = dict(base.hydra.sweeper.get("params") or {})
    try:
        sweep = {
            o.get_key_element(): o
            for o in parser.parse_overrides([f"{k}={v}" for k, v in params.items()])
        }
        sweep.update({o.get_key_element(): o for o in swept})
        if is_search(base):
            # a search picks its trials as it goes: check every value each key may take (the
            # ends of a range), one key at a time, on top of the fixed overrides
            return [
                (fixed + [f"{k}={v}"], [f"{k}={v}"])
                for k, o in sweep.items()
                for v in search_values(o)
            ] or [(fixed, [])]
        values = [[f"{k}={v}" for v in o.sweep_string_iterator()] for k, o in sweep.items()]
    except HydraException as err:
        raise ConfigError(_first_line(err)) from None
    return [(fixed + list(combo), list(combo)) for combo in itertools.product(*values)]


def _compose(overrides: list[str], **kw) -> DictConfig:
    try:
        return compose("config", overrides=overrides, **kw)
    except (HydraException, OmegaConfBaseException) as err:
        raise ConfigError(_explain(err)) from None


def _explain(err: BaseException) -> str:
    """One line for a composition error: the override, what is wrong, the fix."""
    cause = err.__cause__ or err
    text = str(cause)
    full_key = next(
        (ln.split(":", 1)[1].strip() for ln in text.splitlines() if "full_key:" in ln), None
    )
    message = str(err)
    if "Could not override" in message or ("not in" in text and full_key):
        key = full_key or message.split("'")[1]
        return _unknown_key(key)
    if "Could not find" in message and "Available options in" in message:
        lines = message.splitlines()
        what = lines[0].split("Could not find ", 1)[1].strip("'")
        group = what.rsplit("/", 1)[0]
        start = next(i for i, ln in enumerate(lines) if ln.startswith("Available options in"))
        options = list(itertools.takewhile(lambda ln: ln.startswith("\t"), lines[start + 1 :]))
        options = [o.strip() for o in options]
        extra = ""
        for kind, (plugin, extra_name, module) in _PLUGIN_EXTRAS.items():
            if group.startswith(kind) and plugin in what and not _installed(module):
                extra = (
                    f' ({plugin} needs the {extra_name} extra: pip install -e ".[{extra_name}]")'
                )
        return f"no option {what!r}; choose {group}= one of {', '.join(options)}{extra}"
    if full_key:
        meaning = {k: (t, m) for k, t, m in config_schema.describe_keys()}.get(full_key)
        hint = f"; {full_key} is {meaning[0]}: {meaning[1]}" if meaning else ""
        override = message.removeprefix("Error merging override ").strip()
        return f"{override}: {_first_line(cause).rstrip('.')}{hint}"
    return _first_line(err).rstrip(".") + "; see bpe-train --help"


#: Hydra plugins an extra installs: group -> (what an option's name holds, extra, module).
_PLUGIN_EXTRAS = {
    "hydra/launcher": ("submitit", "slurm", "hydra_plugins.hydra_submitit_launcher"),
    "hydra/sweeper": ("optuna", "search", "hydra_plugins.hydra_optuna_sweeper"),
}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _check_launcher(cfg: DictConfig) -> None:
    """Raise ConfigError when the launcher cannot work here (SLURM's without SLURM)."""
    target = str(OmegaConf.select(cfg, "hydra.launcher._target_") or "")
    if target.endswith("SlurmLauncher") and shutil.which("srun") is None:
        raise ConfigError(
            "hydra/launcher submits to SLURM, but 'srun' is not on PATH here: run the sweep "
            "on a SLURM login node, or try it on this machine with hydra/launcher=submitit_local"
        )


def _unknown_key(key: str) -> str:
    keys = [k for k, _, _ in config_schema.describe_keys()]
    groups = sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir() and p.name != "hydra")
    close = difflib.get_close_matches(key, keys + groups, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    top = [k for k in keys if "." not in k]
    return (
        f"unknown key {key!r}{hint}; config groups are {', '.join(groups)} (e.g. trainer=heap), "
        f"keys are {', '.join(top)}, dataset.*, trainer.*, profiler.*, analysis.* "
        "(all listed by bpe-train --help)"
    )


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _check_writable(parent: Path) -> None:
    """Raise ConfigError unless run directories can be made in parent.

    parent (experiments_dir, or experiments_dir/sweeps) is created now, as Hydra would, and a
    probe file proves it writable (permission bits say nothing for root or a read-only mount).
    """
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as err:
        raise ConfigError(
            f"cannot write run directories in {str(parent)!r} ({err.strerror or err}); pass a "
            "writable experiments_dir, e.g. experiments_dir=/tmp/bpe-experiments"
        ) from None


def _report_cut_sweep() -> None:
    """A sweep that Hydra stopped before its end (a search whose every trial failed has no
    best trial, and Optuna raises): write SWEEP.md from the jobs that ran, and say so."""
    from bpe.analysis.sweep.report import write_sweep_report
    from bpe.cli.sweep_process import LAST_SWEEP

    sweep_dir = LAST_SWEEP.get("sweep_dir")
    if sweep_dir is None or "outcome" in LAST_SWEEP:
        return
    try:
        report = write_sweep_report(Path(str(sweep_dir)))
    except (OSError, ValueError) as err:
        sys.stderr.write(f"bpe-train: error: the sweep stopped before its end ({err})\n")
        return
    sys.stderr.write(
        "bpe-train: error: the sweep stopped before its end (a search stops when no trial "
        f"completed with a value of search.metric: see the error above); its jobs: {report}\n"
    )


def main() -> None:
    """Console-script entry point."""
    argv = sys.argv[1:]
    if argv and argv[0] in ("--version", "-V"):  # bpe-lab's, not Hydra's
        sys.stdout.write(version_line("bpe-train") + "\n")
        return
    if _DEBUG_FLAG in argv:
        argv = [a for a in argv if a != _DEBUG_FLAG]
        sys.argv = [sys.argv[0], *argv]
        os.environ["HYDRA_FULL_ERROR"] = "1"
    if all(not a.startswith("-") or a in _MULTIRUN_FLAGS for a in argv):
        try:
            jobs = checked_jobs(argv)
        except ConfigError as err:
            if _debug():
                raise
            sys.stderr.write(f"bpe-train: error: {err}\n")
            sys.exit(2)
        if any(a in _MULTIRUN_FLAGS for a in argv):
            # jobs a launcher starts all at once (submitit_local) share the CPUs by this count
            at_once = int(jobs[0].hydra.sweeper.n_jobs) if is_search(jobs[0]) else len(jobs)
            os.environ[SWEEP_JOBS_ENV] = str(at_once)
        else:
            # a machine without the analysis' kernels compiles them from now on, beside the
            # rest of the run (the runner takes the helpers over and waits for them)
            compile_ahead.start(compile_ahead.ways_needed(jobs[0]), announce=False)
    try:
        # before Hydra writes into the run directory: a reused or full one stays untouched
        preflight(argv, min_free_bytes=RESERVE_BYTES)
    except OSError as err:
        if _debug():
            raise
        sys.stderr.write(f"bpe-train: error: {err}\n")
        sys.exit(1)
    multirun = any(a in _MULTIRUN_FLAGS for a in argv)
    try:
        _app()
    except SystemExit:
        if multirun:
            _report_cut_sweep()
        raise
    finally:
        compile_ahead.stop_all()
    if not multirun:
        return
    from bpe.cli.sweep_process import LAST_SWEEP  # Hydra's sweep callback filled it

    outcome = LAST_SWEEP.get("outcome")
    if outcome is not None and outcome.unfinished:
        sys.stderr.write(f"bpe-train: error: {outcome.message()}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
