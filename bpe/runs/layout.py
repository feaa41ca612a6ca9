"""The names inside a run directory and around it, once: what a run writes, where readers look.

    <experiments_dir>/
      latest -> <run>                  the newest complete run inside this directory
      .cache/                          rebuildable caches (pretoken counts)
      <run>/                           one run (`bpe.experiment.rundir.run_name`)
      sweeps/<timestamp>/SWEEP.md      a sweep, its jobs one level below
        search.json                    a search (hparams_search=...): what it searched
        <job>/                         a run, as above

Every module names these files through here: `tests/test_runs.py` fails on a run file's name
typed anywhere else in `bpe/` (docstrings aside).

What it does not do: create, write or read anything (the writer is `bpe.experiment`, the
readers `bpe.analysis` and `bpe.cli`). It imports nothing, so every layer may name a file
through it.
"""

from __future__ import annotations

from pathlib import Path

#: GPT-2 format files: the tokenizer itself (`bpe.formats.gpt2_format`).
VOCAB_FILE = "vocab.json"
MERGES_FILE = "merges.txt"
#: Hugging Face's files, loadable by `transformers.AutoTokenizer` (`bpe.formats.exports`).
HF_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
TOKENIZER_JSON = HF_FILES[0]
#: tiktoken's ranks file.
TIKTOKEN_FILE = "tokenizer.tiktoken"
#: PickyBPE's removals, beside merges.txt (`bpe.tokenizer.removals`): only its runs have one.
REMOVALS_FILE = "removals.json"
#: The record of which files make a tokenizer directory's tokenizer (`bpe.formats.manifest`).
MANIFEST_FILE = "tokenizer_manifest.json"
#: Every file that changes what loads from a tokenizer directory (ours, HF's or tiktoken's).
LOADED_FILES = (VOCAB_FILE, MERGES_FILE, *HF_FILES, TIKTOKEN_FILE, REMOVALS_FILE)
#: Every file a tokenizer directory (a run, or `save_pretrained`'s output) holds.
TOKENIZER_FILES = (VOCAB_FILE, MERGES_FILE, *HF_FILES, TIKTOKEN_FILE, MANIFEST_FILE)

#: What the run recorded about itself (`bpe.runs.schema` for the keys of metrics.json).
METRICS_FILE = "metrics.json"
ENVIRONMENT_FILE = "environment.json"
LOG_FILE = "train.log"
MERGE_COUNTS_FILE = "merge_counts.json"
DIFF_FILE = "diff.patch"  # only when the code had uncommitted changes
HYDRA_DIR = ".hydra"  # config.yaml, overrides.yaml (and hydra.yaml under Hydra)
#: Inside `HYDRA_DIR`: the resolved config, the command line's overrides, Hydra's own record.
HYDRA_CONFIG = "config.yaml"
HYDRA_OVERRIDES = "overrides.yaml"
HYDRA_META_FILES = frozenset({HYDRA_CONFIG, "hydra.yaml", HYDRA_OVERRIDES})
PROFILE_DIR = "profile"  # only for a profiled run
#: Inside `PROFILE_DIR`: the top functions (and lines) any profiler records, which ANALYSIS.md
#: shows; beside it each profiler's own files (`bpe.experiment.profilers`).
PROFILE_SUMMARY = "summary.json"
#: The report generated from the files above (`bpe.analysis.run.report`).
ANALYSIS_FILE = "ANALYSIS.md"
#: The folder of a report's figures (a run's, a sweep's, reports/'s).
FIGURES_DIR = "figures"
#: The figures a run report can show: key -> path inside the run directory.
FIGURES = {
    "memory": f"{FIGURES_DIR}/memory_timeline.png",
    "lengths": f"{FIGURES_DIR}/token_lengths.png",
    "merge_counts": f"{FIGURES_DIR}/merge_counts.png",
}
#: The records of a run (besides its tokenizer files), as trackers log them.
RECORD_FILES = (ANALYSIS_FILE, METRICS_FILE, ENVIRONMENT_FILE, LOG_FILE)
#: Files every complete run holds (tested against a real run).
COMPLETE_RUN_FILES = (
    *TOKENIZER_FILES,
    METRICS_FILE,
    ENVIRONMENT_FILE,
    LOG_FILE,
    MERGE_COUNTS_FILE,
    ANALYSIS_FILE,
    f"{HYDRA_DIR}/{HYDRA_CONFIG}",
    f"{HYDRA_DIR}/{HYDRA_OVERRIDES}",
    *FIGURES.values(),
)

#: Around the runs, inside an experiments directory.
LATEST = "latest"
CACHE_DIR = ".cache"
SWEEPS_DIR = "sweeps"
SWEEP_FILE = "SWEEP.md"
#: A search's own record in its sweep directory (`bpe.runs.search`), and Optuna's result file.
SEARCH_FILE = "search.json"
OPTUNA_RESULTS_FILE = "optimization_results.yaml"
COMPARE_FILE = "COMPARE.md"
#: `bpe-prune`'s output directory: the pruned tokenizer's files, its record and its report.
PRUNE_RECORD = "prune.json"
PRUNE_FILE = "PRUNE.md"
#: `bpe-parity`'s output directory: one row per tokenizer and language, the record, the report.
PARITY_CSV = "parity.csv"
PARITY_RECORD = "parity.json"
PARITY_FILE = "PARITY.md"
#: Inside a sweep directory: the pruned copies of its runs (`bpe-report --page segmentation`).
PRUNED_DIR = "pruned"


def experiments_root(run_dir: Path) -> Path:
    """The experiments directory a run directory belongs to (a sweep job sits two levels lower).

    >>> experiments_root(Path("exp/2026-01-01_run")), experiments_root(Path("exp/sweeps/s/0_job"))
    (PosixPath('exp'), PosixPath('exp'))
    """
    parent = run_dir.parent
    if parent.parent.name == SWEEPS_DIR:
        return parent.parent.parent
    return parent
