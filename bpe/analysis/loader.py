"""Load experiment runs into a pandas DataFrame: one row per run directory.

What it does: finds run directories (any directory holding `metrics.json`) under a path, a run
directory itself, or a glob; reads each run's resolved config (`.hydra/config.yaml`),
`metrics.json` and `environment.json`, and flattens them with `pandas.json_normalize` into
columns prefixed `config.`, `metrics.` and `env.`. Failed and still-running runs are rows too,
with their `status`; a run recorded as `running` whose process is gone reads `crashed` (`stale`
when it ran on another host, which cannot be checked), with `status_reason` saying why
(`bpe.runs.liveness`). A run whose files are corrupt (bad JSON or YAML) is skipped with a
warning naming it; the skipped directories and reasons are kept in `frame.attrs["skipped"]`
so reports can say what they left out. `tidy` gives the short-named view every report uses, and
the rules the reports share live here once: `complete` (which runs count), `input_key` (which
runs saw the same input: equal sha256, or the same path for runs that recorded none),
`merges_agree` (when two runs learned the same merges), `trainer_order` (how trainers are
listed) and `shown_stages` (which recorded stages a report lists).

What it does not do: compute or render anything, or write to run directories.
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Iterable
from functools import partial
from pathlib import Path

import pandas as pd

from bpe.analysis.markdown import input_summary
from bpe.runs import schema
from bpe.runs.layout import ENVIRONMENT_FILE, HYDRA_DIR, METRICS_FILE, PROFILE_DIR
from bpe.runs.liveness import explain, observed_status
from bpe.runs.saved_config import run_config
from bpe.runs.stages import TRAIN_STAGES, TRAINER_ORDER
from bpe.runs.upgrade import read_metrics
from bpe.util.io import read_json_object
from bpe.util.machine import ENV_KEY

logger = logging.getLogger(__name__)


def find_run_dirs(path_or_glob: str | os.PathLike) -> list[Path]:
    """Run directories (holding metrics.json) at, below, or matched by path_or_glob; sorted.

    `find_run_dirs("experiments")` finds every run, sweeps included;
    `find_run_dirs("experiments/*_owt_*")` the runs whose directory name matches.
    """
    text = str(path_or_glob)
    if any(ch in text for ch in "*?["):
        # symlinks (experiments/latest) name a run that the glob also matches by its own name
        roots = [Path(p) for p in sorted(glob.glob(text)) if not os.path.islink(p)]
    else:
        root = Path(text)
        if not root.exists():
            raise FileNotFoundError(
                f"experiments path {text!r} does not exist; run `bpe-train` first or pass the "
                "directory that holds your runs"
            )
        roots = [root]
    found: set[Path] = set()
    for root in roots:
        if (root / METRICS_FILE).is_file():
            found.add(root)
        elif root.is_dir():
            # os.walk beats Path.rglob on hundreds of runs; inside a run dir, skip the folders
            # that can be large and hold no run (profile output, Hydra's records).
            for dirpath, dirnames, filenames in os.walk(root):
                if METRICS_FILE in filenames:
                    found.add(Path(dirpath))
                    dirnames[:] = [d for d in dirnames if d not in {PROFILE_DIR, HYDRA_DIR}]
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
    return sorted(found)


def observed(metrics: dict) -> dict:
    """metrics as a reader shows them: a `running` run whose process is gone is crashed/stale.

    The status is replaced and `status_reason` says why; other runs come back unchanged.

    >>> observed({"status": "running", "process": {"host": "elsewhere", "pid": 1}})["status"]
    'stale'
    """
    status = observed_status(metrics)
    if status == schema.get(metrics, schema.STATUS):
        return metrics
    return {**metrics, "status": status, "status_reason": explain(metrics)}


def read_run(run_dir: Path) -> dict:
    """One run as a nested dict: run_dir, run_name, status, status_reason, config, metrics, env,
    and input_summary (`bpe.analysis.markdown.input_summary`: None for a single text file).

    Raises:
        ValueError: a file is not valid JSON / YAML, or a field of metrics.json is not of its
            declared type (`bpe.runs.sections.malformed`); the message names the file.
    """
    record: dict = {"run_dir": str(run_dir), "run_name": run_dir.name}
    record["config"] = run_config(run_dir)
    try:  # today's schema, whatever the writer's age (`bpe.runs.upgrade`)
        record["metrics"] = read_metrics(run_dir, config=record["config"])
    except FileNotFoundError:  # gone since it was found: skipped, as a corrupt run is
        raise ValueError(f"{run_dir / METRICS_FILE} is missing") from None
    shown = observed(record["metrics"])
    record["status"] = shown.get("status") or "unknown"
    record["status_reason"] = shown.get("status_reason")
    record["input_summary"] = input_summary(record["metrics"])
    record["env"] = _read_json(run_dir / ENVIRONMENT_FILE) or {}
    return record


def _read_json(path: Path) -> dict | None:
    """A JSON object a run may hold (None: the file is absent); a ValueError names a bad file."""
    return read_json_object(path) if path.is_file() else None


def load_runs(path_or_glob: str | os.PathLike = "experiments") -> pd.DataFrame:
    """Load every run under path_or_glob into a DataFrame, one row per run, sorted by run_dir.

    Columns: `run_dir`, `run_name`, `status` (crashed / stale for a `running` run whose
    process is gone or cannot be checked; `status_reason` says why), then `config.*`,
    `metrics.*`, `env.*` (nested keys joined with dots). Corrupt runs are skipped with a
    warning and listed in `frame.attrs["skipped"]` as `(run_dir, reason)` pairs.

    Raises:
        FileNotFoundError: the path does not exist.

    For example `load_runs("experiments")[["run_name", "status", "metrics.timings.merge"]]`.
    """
    records, skipped = [], []
    for run_dir in find_run_dirs(path_or_glob):
        try:
            records.append(read_run(run_dir))
        except ValueError as err:
            _warn_once(run_dir, str(err))
            skipped.append((str(run_dir), str(err)))
    frame = _flatten(records)
    frame.attrs["skipped"] = skipped
    if frame.empty:
        logger.warning(
            "no runs found under %s; train one with `bpe-train` or point at your experiments dir",
            path_or_glob,
        )
    return frame


#: the (run, reason) pairs already warned about in this process: a report reads the runs
#: several times, and one bad run is one warning
_WARNED: set[tuple[str, str]] = set()


def _warn_once(run_dir: Path, reason: str) -> None:
    """Warn that a run is skipped, once per run and reason in this process."""
    if (str(run_dir), reason) in _WARNED:
        logger.debug("skipping run %s: %s", run_dir, reason)
        return
    _WARNED.add((str(run_dir), reason))
    logger.warning("skipping run %s: %s", run_dir, reason)


def _flatten(records: Iterable[dict]) -> pd.DataFrame:
    records = list(records)
    if not records:
        return pd.DataFrame(columns=["run_dir", "run_name", "status"])
    frame = pd.json_normalize(records, sep=".")
    frame["status"] = frame["status"].fillna("unknown")
    # `status` third, by selecting columns in order: inserting into a frame of hundreds of
    # columns (a run's nested keys) would warn that the frame is fragmented
    names = [c for c in frame.columns if c != "status"]
    frame = frame[[*names[:2], "status", *names[2:]]]
    return frame.sort_values("run_dir", kind="stable").reset_index(drop=True)


#: Short names for the columns reports use, and where they come from in load_runs' frame.
#: (metrics.json fields through `bpe.runs.schema`: a renamed field fails tests/test_runs.py)
TIDY_COLUMNS = {
    "run_dir": "run_dir",
    "run_name": "run_name",
    "status": "status",
    # the input's name: the dataset's, or custom-<stem> for a dataset.path (`run.input_name`)
    "dataset": None,
    "input_path": schema.INPUT_PATH.column,
    # "3 files, 1.57 MB, parquet" for a corpus of several files or of records; None for one
    # plain text file (`bpe.analysis.markdown.input_summary`)
    "input_summary": "input_summary",
    "input_key": None,  # `input_key` of input_sha256 and input_path: runs compare within one
    "trainer": schema.TRAINER.column,
    "variant": schema.VARIANT_NAME.column,
    # the training limits (`bpe.trainers.common.Limits`): null where unset, or in older runs
    "max_token_length": schema.MAX_TOKEN_LENGTH.column,
    "min_frequency": schema.MIN_FREQUENCY.column,
    # why a run stopped early: "no_pairs_left" | "min_frequency" (null: it did not)
    "stopped_by": schema.STOPPED_BY.column,
    # FLORES-200 (`bpe.measures.languages`): the Gini of per-language token counts, the
    # highest premium (tokens over English's); null in runs before the measure
    "languages_gini": schema.LANGUAGES_GINI.column,
    "languages_max_premium": schema.LANGUAGES_MAX_PREMIUM.column,
    # the same on devtest's held-out half alone, and bytes per token over all languages
    # there; null in runs before parity-aware BPE
    "languages_heldout_gini": schema.LANGUAGES_HELDOUT_GINI.column,
    "languages_heldout_max_premium": schema.LANGUAGES_HELDOUT_MAX_PREMIUM.column,
    "languages_heldout_bytes_per_token": schema.LANGUAGES_HELDOUT_BYTES_PER_TOKEN.column,
    "vocab_size": schema.VOCAB_SIZE.column,
    "profiler": schema.PROFILER.column,
    "profiled": schema.PROFILED.column,
    "job_num": schema.JOB_NUM.column,
    # jobs its launcher ran at once on one machine (joblib n_jobs, submitit_local): above 1,
    # the jobs shared the CPUs and their timings do not compare (null: not a sweep's job)
    "parallel_jobs": schema.LAUNCHER_PARALLEL_JOBS.column,
    # seconds spent counting pretokens: None for a pretoken cache hit (loading is not
    # pre-tokenization, so it is never compared as one)
    "pretokenize_seconds": schema.PRETOKENIZE_SECONDS.column,
    # hit | miss | rebuilt | off | None (older runs)
    "pretoken_cache": schema.PRETOKEN_CACHE_STATUS.column,
    # stages 2-3's seconds; for a run cut from a vocab ladder, the seconds the ladder's one
    # training took to reach this rung's vocab
    "merge_seconds": schema.MERGE_SECONDS.column,
    # the job whose training a vocab-ladder run was cut from; None for a direct run
    "ladder_trained_in": schema.LADDER_TRAINED_IN.column,
    # a compiling trainer's compile step (`compiled`); None for the Python trainers
    "compile_seconds": schema.COMPILE_SECONDS.column,
    "train_seconds": None,  # the TRAIN_STAGES and compile
    "total_seconds": schema.TOTAL_SECONDS.column,
    "peak_mb": schema.PEAK_MB.column,  # the whole run's (analysis and report included)
    # the memory headline: what training added above the run's start (None in older runs)
    "train_mb": schema.TRAINING_ADDED_MB.column,
    "train_peak_mb": schema.TRAINING_PEAK_MB.column,
    "merge_mb": schema.MERGE_ADDED_MB.column,  # what stages 2-3 added: where trainers differ
    "analysis_peak_mb": schema.ANALYSIS_PEAK_MB.column,
    "merges": schema.MERGES.column,
    "vocab": schema.VOCAB.column,
    "merges_sha256": schema.MERGES_SHA256.column,
    "pattern": schema.PATTERN_NAME.column,
    "init_from": schema.INIT_FROM_PATH.column,
    "pretokens": schema.PRETOKENS.column,
    "unique_pretokens": schema.UNIQUE_PRETOKENS.column,
    "input_sha256": schema.INPUT_SHA256.column,
    "tiktoken_mismatches": schema.TIKTOKEN_MISMATCHES.column,
    "compression": schema.COMPRESSION_RATIO.column,
    # how many held-out documents measured it: runs measured on different numbers (a
    # `debug=fast` run measures 10) do not compare on one curve
    "measured_docs": schema.OWN_DOCS.column,
    "gpt2_compression": schema.GPT2_COMPRESSION_RATIO.column,
    "other_dataset": schema.OTHER_DATASET.column,
    "other_compression": schema.OTHER_COMPRESSION_RATIO.column,
    "other_gpt2_compression": schema.OTHER_GPT2_COMPRESSION_RATIO.column,
    "outgrown": schema.MERGE_SUPPORT_OUTGROWN.column,  # the vocab outgrew its corpus (or None)
    "bits_per_byte": schema.BITS_PER_BYTE.column,  # own held-out text, n-gram model of the ids
    "unigram_bits_per_byte": schema.UNIGRAM_BITS_PER_BYTE.column,
    "throughput_mb_s": None,  # bytes_per_second / 1e6
    "error": schema.ERROR_MESSAGE.column,
    # environment.json: machine and load at start (`bpe.util.machine.host`), code, Numba
    "host": None,
    "git_sha": "env.git.sha",
    "git_dirty": "env.git.dirty",
    "numba": "env.packages.numba",
}


def tidy(frame: pd.DataFrame) -> pd.DataFrame:
    """The report-friendly view of `load_runs`: one row per run, short column names.

    Missing measurements are NaN/None, never invented. Sorted by dataset, vocab size, trainer
    and run directory, so every report lists runs in the same order.
    """
    out = pd.DataFrame(index=frame.index)
    for name, source in TIDY_COLUMNS.items():
        if source is not None:
            out[name] = frame[source] if source in frame else None
    stages = [f"{schema.TIMINGS.column}.{s}" for s in TRAIN_STAGES]
    if all(s in frame for s in stages):
        out["train_seconds"] = frame[stages].sum(axis=1, min_count=len(stages))
        if schema.COMPILE_SECONDS.column in frame:  # part of a compiling trainer's call
            out["train_seconds"] += frame[schema.COMPILE_SECONDS.column].fillna(0.0)
    else:
        out["train_seconds"] = None
    out["dataset"] = frame[schema.INPUT_NAME.column] if schema.INPUT_NAME.column in frame else None
    out["input_key"] = [
        input_key(sha, path)
        for sha, path in zip(out["input_sha256"], out["input_path"], strict=True)
    ]
    hit = out["pretoken_cache"] == "hit"
    if hit.any():
        out["pretokenize_seconds"] = out["pretokenize_seconds"].astype(float).mask(hit)
    # a run cut from a vocab ladder did not train its own vocab: its memory is the ladder's
    # training to the largest size (in one job) or a wait for it, never this rung's
    laddered = out["ladder_trained_in"].notna()
    if laddered.any():
        for column in ("train_mb", "merge_mb", "train_peak_mb"):
            out[column] = out[column].astype(float).mask(laddered)
    bps = schema.BYTES_PER_SECOND.column
    out["throughput_mb_s"] = frame[bps] / 1e6 if bps in frame else None
    out["profiled"] = out["profiled"].fillna(False).astype(bool)
    if "status_reason" in frame:  # a crashed or stale run recorded no error: say why it shows so
        out["error"] = out["error"].where(out["error"].notna(), frame["status_reason"])
    out["host"] = _hosts(frame)
    order = ["dataset", "vocab_size", "trainer", "run_dir"]
    return out.sort_values(order, kind="stable", na_position="last").reset_index(drop=True)


def _hosts(frame: pd.DataFrame) -> pd.Series:
    """Per row, the run's host record as a dict (None for runs made before it was recorded).

    >>> frame = pd.DataFrame({"env.host.cpus": [2, None], "env.host.python": ["3.11.7", None]})
    >>> _hosts(frame).tolist()
    [{'cpus': 2.0, 'python': '3.11.7'}, None]
    """
    prefix = f"env.{ENV_KEY}."  # environment.json's host record: columns env.host.<key>
    columns = {c: c[len(prefix) :] for c in frame.columns if c.startswith(prefix)}
    rows = frame[list(columns)].to_dict("records") if columns else [{}] * len(frame)
    hosts = [
        {columns[c]: v for c, v in r.items() if isinstance(v, list) or not pd.isna(v)} for r in rows
    ]
    return pd.Series([h or None for h in hosts], index=frame.index, dtype=object)


def input_key(sha256: object, path: object) -> str | None:
    """What identifies a run's input for comparisons: its sha256, else (older runs) its path.

    Runs are grouped, and their merges compared, only when their keys are equal.

    >>> input_key("ab12", "x.txt"), input_key(None, "data/x.txt"), input_key(None, None)
    ('sha256:ab12', 'path:data/x.txt', None)
    """
    if isinstance(sha256, str) and sha256:
        return f"sha256:{sha256}"
    if isinstance(path, str) and path:
        return f"path:{path}"
    return None


def load_tidy(path: str | os.PathLike, *, hint: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`load_runs(path)` and its `tidy` view: what every report over many runs starts from.

    Raises:
        FileNotFoundError: the path does not exist.
        ValueError: it holds no run directory at all, not even a corrupt one; `hint` says
            what to run first.
    """
    frame = load_runs(path)
    if frame.empty and not frame.attrs.get("skipped"):
        raise ValueError(f"no runs under {str(path)!r} (no metrics.json below it); {hint}")
    return frame, tidy(frame)


def complete(runs: pd.DataFrame, *, unprofiled: bool = False) -> pd.DataFrame:
    """The runs (a `tidy` frame) that completed; with `unprofiled`, only those fit for timing:
    not profiled, and not run side by side with other jobs of a sweep.

    Failed and unfinished runs have no trustworthy measurements; profiled runs' times include
    the profiler's overhead; jobs a launcher ran at once shared the CPUs (SWEEP.md marks them
    "not comparable"), so their times never enter a median or a curve.

    >>> runs = pd.DataFrame({"status": ["complete"] * 3, "profiled": [False, True, False],
    ...                      "parallel_jobs": [1, 1, 2]})
    >>> complete(runs).index.tolist(), complete(runs, unprofiled=True).index.tolist()
    ([0, 1, 2], [0])
    """
    keep = runs["status"] == "complete"
    if unprofiled:
        keep &= ~runs["profiled"]
        if "parallel_jobs" in runs:
            keep &= ~(runs["parallel_jobs"].astype(float) > 1)
    return runs[keep]


def comparable_measures(done: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(kept, apart): per dataset, the runs measured on its most common number of held-out
    documents, and the others (a `debug=fast` run measures 10 where a full run measures 128),
    whose compression does not compare with theirs.

    >>> runs = pd.DataFrame({"dataset": ["a", "a", "a", "b"], "measured_docs": [128, 128, 10, 5]})
    >>> kept, apart = comparable_measures(runs)
    >>> kept.index.tolist(), apart.index.tolist()
    ([0, 1, 3], [2])
    """
    if "measured_docs" not in done or done.empty:
        return done, done.iloc[:0]
    docs = done["measured_docs"].fillna(-1)
    usual = docs.groupby(done["dataset"]).transform(lambda d: d.mode().max())
    same = docs == usual
    return done[same], done[~same]


def merges_agree(*merges_sha256: object) -> bool:
    """Whether runs learned the same merges: every merges sha256 known and all equal.

    >>> merges_agree("ab", "ab"), merges_agree("ab", "cd"), merges_agree("ab", None)
    (True, False, False)
    """
    return all(isinstance(s, str) for s in merges_sha256) and len(set(merges_sha256)) == 1


def trainer_order(names: Iterable[object]) -> list[str]:
    """The distinct trainer names given, in the canonical order, others after.

    The order is `bpe.runs.stages.TRAINER_ORDER`, the registry's.

    >>> trainer_order(["heap", "naive", "heap", float("nan")])
    ['naive', 'heap']
    """
    present = {n for n in names if isinstance(n, str)}
    return [t for t in TRAINER_ORDER if t in present] + sorted(present - set(TRAINER_ORDER))


def shown_stages(recorded: Iterable[str]) -> list[str]:
    """The recorded stage names a report lists, in recorded order (no total).

    >>> shown_stages(["pretokenize", "merge", "total"])
    ['pretokenize', 'merge']
    """
    return [s for s in recorded if s != "total"]


#: The measures of one segmentation method on one held-out side, by `segmentation_rows` column.
SEGMENTATION_MEASURES = {
    "bytes_per_token": schema.SEG_BYTES_PER_TOKEN,
    "renyi_efficiency": schema.SEG_RENYI,
    "bits_per_byte": schema.SEG_BITS_PER_BYTE,
    "tokens": schema.SEG_TOKENS,
}


def segmentation_rows(path_or_glob: str | os.PathLike = "experiments") -> pd.DataFrame:
    """One row per run, segmentation method and held-out side, so that `segmentation` is a
    column to group by, as `vocab_size` or `trainer` are: run_dir, dataset, trainer,
    vocab_size, max_token_length, segmentation, side, and the measures of
    `SEGMENTATION_MEASURES`. Runs without the `segmentation` section give no rows.

    >>> import tempfile
    >>> segmentation_rows(tempfile.mkdtemp()).empty
    True
    """
    rows = []
    for run_dir in find_run_dirs(path_or_glob):
        metrics = read_run(run_dir).get("metrics") or {}
        get = partial(schema.get, metrics)
        for method in get(schema.SEGMENTATION_METHODS, default={}):
            for side in ("own", "other"):
                if not get(schema.SEG_OF, method=method, side=side):
                    continue
                rows.append(
                    {
                        "run_dir": str(run_dir),
                        "dataset": get(schema.DATASET),
                        "trainer": get(schema.TRAINER),
                        "vocab_size": get(schema.VOCAB_SIZE),
                        "max_token_length": get(schema.MAX_TOKEN_LENGTH),
                        "segmentation": method,
                        "side": side,
                        **{
                            name: get(k, method=method, side=side)
                            for name, k in SEGMENTATION_MEASURES.items()
                        },
                    }
                )
    return pd.DataFrame(rows)
