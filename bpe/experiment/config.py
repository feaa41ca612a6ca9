"""The typed schema of `bpe-train`'s configuration: types, one-line meanings, ranges, help.

What it does:
    * dataclasses (`TrainConfig` and one per group) registered in Hydra's ConfigStore as
      `bpe_schema`, the first entry of `conf/config.yaml`'s defaults list, so composition
      itself rejects a wrong type (`vocab_size=abc`, `vocab_size=500.5`,
      `dataset.special_tokens="[EOS]"`) and an unknown key (struct mode);
    * the ranges a type cannot say are checked by `bpe.experiment.config_checks.check_config`
      (vocab_size leaves room for the specials and the 256 bytes, num_workers >= 1, ...),
      from the bounds this module's fields carry;
    * `help_template()`: the `bpe-train --help` text, built from the same field metadata, so
      each key's meaning is written once (here);
    * `BelowLevel`: the logging filter that keeps warnings and errors off stdout.

Values live in `bpe/conf/` (config.yaml and the group files); this module says what they may
be. Adding a key or a group means adding a field here (struct mode rejects anything else).
Importing this module registers the schema, so compose configs after `import bpe.experiment.config`
(`bpe.cli.train` and `bpe.experiment.runner` import it), e.g.::

    import bpe.experiment.config
    from hydra import compose, initialize_config_dir
    from bpe.util.io import CONF_DIR
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["debug=fast"])

What it does not do: compose configs or create run directories (see `bpe.cli.train` and
`bpe.experiment.runner`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from bpe.corpus.datasets import HELDOUT_FRACTION, HELDOUT_MAX_BYTES
from bpe.runs.settings import ANALYSIS_DEFAULTS, PRETOKENIZE_DEFAULTS
from bpe.runs.stages import TRAINER_ORDER, VARIANT_ORDER
from bpe.text.specials import EOT

__all__ = [
    "AnalysisConfig",
    "BelowLevel",
    "DatasetConfig",
    "PretokenizeConfig",
    "PretokenizerConfig",
    "ProfilerConfig",
    "SearchConfig",
    "TrainConfig",
    "TrainerConfig",
    "VariantConfig",
    "describe_keys",
    "help_template",
]

try:  # the project's joblib launcher (installed beside the package, in hydra_plugins/)
    from hydra_plugins.bpe_lab_launchers.joblib_launcher import quiet_schema_warning
except ImportError:  # pragma: no cover - the joblib plugin is a dependency
    pass
else:
    # every process that composes a run's config imports this module first: bpe-train's,
    # and each joblib worker (which unpickles the task function and what it refers to)
    quiet_schema_warning()


_A, _P = ANALYSIS_DEFAULTS, PRETOKENIZE_DEFAULTS


def _key(meaning: str, default: Any = MISSING, *, minimum: float | None = None, **kw) -> Any:
    """A dataclass field carrying its one-line meaning and its lower bound (if any)."""
    metadata = {"help": meaning, "min": minimum, **kw}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class DatasetConfig:
    """What to train on (`conf/dataset/*.yaml`)."""

    name: str = _key("dataset name used in run directory names and reports")
    path: str = _key(
        "corpus: a file, folder, glob, hf:owner/name/pattern or "
        "hf-stream:owner/name[:config[:split]][@revision] (relative: from the cwd, else the "
        "bundled data)"
    )
    heldout_path: str | None = _key("held-out documents for compression/throughput", None)
    heldout_fraction: float = _key(
        "without heldout_path: the input's last documents held out of training, up to this "
        "share of its text, not its size on disk (0: train on everything, measure the seen tail)",
        HELDOUT_FRACTION,
        minimum=0,
    )
    heldout_max_bytes: int = _key(
        "without heldout_path: at most this many bytes of documents held out",
        HELDOUT_MAX_BYTES,
        minimum=1,
    )
    train_fraction: float = _key(
        "train on the first share of the trainable text (whole documents; the held-out ones "
        "excluded): a data curve's point (experiment=data_curve); 1 = all of it",
        1.0,
        minimum=0,
        exclusive=True,
    )
    format: str = _key("auto (by suffix, then content) | text | jsonl | parquet | arrow", "auto")
    text_field: str = _key("JSON field or parquet/Arrow column holding each document", "text")
    max_files: int | None = _key("train on the corpus's first N files only", None, minimum=1)
    max_bytes: int | None = _key(
        "train on the corpus's first files, up to this many bytes on disk", None, minimum=1
    )
    special_tokens: list[str] = _key(
        "special tokens: a list of distinct strings of 2+ bytes, e.g. ['<|endoftext|>']", []
    )
    document_separator: str = _key("separator between held-out documents", EOT)
    cross_domain: str | None = _key("dataset whose held-out text measures cross-domain", None)
    download: str | None = _key("name for scripts/download_data.py (null: bundled)", None)


@dataclass
class TrainerConfig:
    """Which trainer runs the merge loop (`conf/trainer/*.yaml`)."""

    name: str = _key(
        f"{' | '.join(TRAINER_ORDER)}: identical merges, different speed (compiled: Numba)"
    )


@dataclass
class VariantConfig:
    """Which member of the BPE family is trained (`conf/variant/*.yaml`; see
    `bpe.variants`)."""

    name: str = _key(
        f"{' | '.join(VARIANT_ORDER)} (picky: naive and indexed trainers only; parity: naive "
        "and heap)"
    )
    transition_vocab: int | None = _key(
        "superbpe only: vocab size where stage two starts; null = 90% of vocab_size",
        None,
        minimum=257,
    )
    stage_two_pattern: str | None = _key(
        "superbpe only: stage two's split pattern (a name or regex); null = the paper's", None
    )
    threshold: float | None = _key(
        "picky only: intersection-over-self threshold in (0, 1]; null = 0.9",
        None,
        minimum=0,
        exclusive=True,
    )
    global_merges: int | None = _key(
        "parity only: the first merges made as plain BPE (the hybrid); null = 0", None, minimum=0
    )
    dev: str | None = _key(
        "parity only: parallel development text, a folder with a file per language; null = "
        "the first half of FLORES-200 devtest",
        None,
    )


@dataclass
class PretokenizerConfig:
    """The split pattern pre-tokenization uses (`conf/pretokenizer/*.yaml`)."""

    name: str = _key("gpt2 | cl100k | o200k | custom (then pretokenizer.pattern)")
    pattern: str | None = _key("custom only: the regex (Python `regex` syntax)", None)


@dataclass
class PretokenizeConfig:
    """Where and how pre-tokenization runs (`pretokenize:` in conf/config.yaml)."""

    backend: str = _key("processes (this machine) | dask (tasks on a Dask cluster)", _P["backend"])
    scheduler: str | None = _key(
        "dask only: tcp://host:8786 of a running cluster; null = a LocalCluster", None
    )
    engine: str = _key(
        "auto (compiled for trainer=compiled + gpt2) | regex | compiled (gpt2 only, Numba): "
        "same counts",
        _P["engine"],
    )


@dataclass
class ProfilerConfig:
    """Optional profiler around training (`conf/profiler/*.yaml`)."""

    name: str = _key("none | cprofile | scalene")
    top_n: int = _key("hot spots listed in ANALYSIS.md", 0, minimum=0)
    cpu_only: bool = _key("scalene only: skip memory profiling", False)


#: What a search may do with its objective (`search.direction`), as Optuna names it.
SEARCH_DIRECTIONS = ("minimize", "maximize")


@dataclass
class SearchConfig:
    """What a hyperparameter search optimizes (`hparams_search=...`, `conf/hparams_search/`)."""

    metric: str | None = _key(
        "the metrics.json key a search optimizes, e.g. bits_per_byte.own.bits_per_byte; "
        "null = no search (each run's value is then only recorded)",
        None,
    )
    direction: str = _key("minimize | maximize: which way the metric is better", "minimize")


#: The orders the bits-per-byte n-gram model may have (`analysis.bpb_order`).
BPB_ORDERS = (3, 4, 5)


@dataclass
class AnalysisConfig:
    """What the analysis stage measures after training (defaults: `bpe.runs.settings`)."""

    max_docs: int = _key(
        "held-out documents per dataset for compression", _A["max_docs"], minimum=1
    )
    throughput_seconds: float = _key(
        "seconds spent measuring encode throughput, per tokenizer",
        _A["throughput_seconds"],
        minimum=0,
        exclusive=True,
    )
    longest_tokens: int = _key(
        "how many of the longest tokens to record", _A["longest_tokens"], minimum=0
    )
    gpt2_baseline: bool = _key(
        "also measure GPT-2's tokenizer on the same documents", _A["gpt2_baseline"]
    )
    train_sample_bytes: int | None = _key(
        "training-file bytes encoded to find under-trained tokens",
        _A["train_sample_bytes"],
        minimum=0,
    )
    bpb_train_bytes: int = _key(
        "training-file bytes the bits-per-byte n-gram model is fitted on",
        _A["bpb_train_bytes"],
        minimum=1,
    )
    bpb_order: int = _key(
        "n of the bits-per-byte Kneser-Ney n-gram model: 3, 4 or 5", _A["bpb_order"]
    )
    segmentations: list[str] = _key(
        "ways to cut pretokens measured on held-out text: merges, longest_prefix, fewest",
        _A["segmentations"],
    )
    language_lines: int | None = _key(
        "FLORES-200 lines per split for the languages section; null = all (Petrov et al.)",
        _A["language_lines"],
        minimum=1,
    )
    figure_formats: list[str] = _key(
        "formats of each figure: png (what reports link), and svg or pdf beside it for papers",
        _A["figure_formats"],
    )


@dataclass
class TrainConfig:
    """The whole `bpe-train` config: the groups, the top-level keys, `pretokenize.*`,
    `analysis.*`."""

    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    variant: VariantConfig = field(default_factory=VariantConfig)
    pretokenizer: PretokenizerConfig = field(default_factory=PretokenizerConfig)
    profiler: ProfilerConfig = field(default_factory=ProfilerConfig)
    # its lower bound depends on the specials: `check_vocab_size` says so with the numbers
    vocab_size: int = _key("special tokens + 256 bytes + merges; >= 256 + the specials")
    num_workers: int | None = _key(
        "pre-tokenization processes (dask: LocalCluster workers); null = all CPUs", minimum=1
    )
    pretokenize: PretokenizeConfig = field(default_factory=PretokenizeConfig)
    init_from: str | None = _key(
        "continue from this run dir or GPT-2 style vocab.json+merges.txt dir", None
    )
    max_token_length: int | None = _key(
        "longest token a merge may make, in bytes (the next best pair is merged instead); "
        "null = no limit",
        None,
        minimum=1,
    )
    min_frequency: int | None = _key(
        "stop once the best pair occurs fewer times (an early stop); null = no limit",
        None,
        minimum=1,
    )
    seed_tokens: list[str] = _key(
        "strings in the vocab before the first merge (their merges first), which merges may "
        "build on, e.g. [' the', 'ing']",
        [],
    )
    protect: list[str] = _key(
        "classes of characters that never merge with anything, each its own token, e.g. "
        "['\\p{N}'] for single digits",
        [],
    )
    seed: int = _key("recorded in metrics.json only: nothing in a run is random")
    experiments_dir: str = _key("where run directories go (relative to the cwd)")
    progress: bool = _key("tqdm bars: pre-tokenization in MB (MB/s, ETA), merges (merges/s)")
    cache: bool = _key("reuse pretoken counts of the same bytes/pattern/specials (false: count)")
    ladder: bool = _key(
        "a -m sweep over vocab_size trains once, to its largest, and cuts each rung (false: "
        "train every job directly)"
    )
    cache_dir: str = _key("caches (pretoken counts in its pretokens/); delete it to clear")
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    search: SearchConfig = field(default_factory=SearchConfig)


#: Config groups and the schema of their options (the remaining groups are overlays:
#: `experiment` and `debug` set keys of the whole config).
GROUPS: dict[str, type] = {
    "dataset": DatasetConfig,
    "trainer": TrainerConfig,
    "variant": VariantConfig,
    "pretokenizer": PretokenizerConfig,
    "profiler": ProfilerConfig,
}

HELP_EXAMPLES = """\
  bpe-train                                     TinyStories sample, heap trainer, vocab 5,000
  bpe-train dataset=owt_sample vocab_size=32000 trainer=indexed
  bpe-train dataset.path=my.txt dataset.name=mine dataset.heldout_path=null
  bpe-train experiment=owt_32k profiler=scalene
  bpe-train debug=fast                          seconds-long smoke run (tests use it)
  bpe-train -m trainer=naive,indexed,heap vocab_size=500,1000    a sweep
  bpe-train -m hparams_search=optuna            a search: Optuna picks each next trial
                                                (extra: .[search]; docs/sweeps.md)
  bpe-train -m hydra/launcher=slurm hydra.launcher.partition=cpu vocab_size=10000,32000
                                                one SLURM job per run (extra: .[slurm])
  bpe-train --cfg job vocab_size=500            print the composed config, run nothing"""


def describe_keys(schema: type = TrainConfig, prefix: str = "") -> Iterator[tuple[str, str, str]]:
    """(dotted key, type, meaning) for every leaf key of the schema, in declaration order.

    >>> next(k for k in describe_keys() if k[0] == "vocab_size")
    ('vocab_size', 'int', 'special tokens + 256 bytes + merges; >= 256 + the specials')
    """
    for f in dataclasses.fields(schema):
        key = f"{prefix}{f.name}"
        nested = dataclass_of(f)
        if nested is not None:
            yield from describe_keys(nested, f"{key}.")
            continue
        meaning = f.metadata.get("help", "")
        low = f.metadata.get("min")
        if low is not None:
            op = ">" if f.metadata.get("exclusive") else ">="
            meaning += f" ({op} {low:g})"
        yield key, str(f.type).replace(" | None", " or null"), meaning


def dataclass_of(f: dataclasses.Field) -> type | None:
    # subtle: with `from __future__ import annotations`, f.type is a string
    nested = (*GROUPS.values(), AnalysisConfig, PretokenizeConfig, SearchConfig)
    named = {cls.__name__: cls for cls in nested}
    return named.get(f.type) if isinstance(f.type, str) else None


#: Hydra's launcher plugins bpe-train can use, and the module each needs (an extra installs it).
LAUNCHER_PLUGINS = {
    "joblib": "hydra_plugins.hydra_joblib_launcher",
    "submitit_local": "hydra_plugins.hydra_submitit_launcher",
    "submitit_slurm": "hydra_plugins.hydra_submitit_launcher",
}


def hydra_groups() -> str:
    """The Hydra groups a bpe-train user picks from (`hydra/launcher`, `hydra/callbacks`), with
    the options this installation has: Hydra's own, the installed plugins', and ours."""
    import importlib.util

    from bpe.util.io import CONF_DIR

    def ours(group: str) -> list[str]:
        return [p.stem for p in (CONF_DIR / "hydra" / group).glob("*.yaml")]

    def installed(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            return False

    launchers = ["basic", *(n for n, m in LAUNCHER_PLUGINS.items() if installed(m))]
    launchers += ours("launcher")
    callbacks = ours("callbacks")
    return (
        f"hydra/launcher: {', '.join(sorted(set(launchers)))}   (sweeps: -m)\n"
        f"hydra/callbacks: {', '.join(sorted(callbacks))}   (sweep_report, always on, writes "
        "SWEEP.md)\n"
    )


def help_template() -> str:
    """The `bpe-train --help` text (Hydra fills in `$APP_CONFIG_GROUPS`)."""
    keys = list(describe_keys())
    width = max(len(k) for k, _, _ in keys)
    type_width = max(len(t) for _, t, _ in keys)
    lines = [f"  {k:<{width}}  {t:<{type_width}}  {m}" for k, t, m in keys]
    return (
        "bpe-train: train a byte-level BPE tokenizer into a self-describing run directory\n"
        "(vocab.json, merges.txt, metrics.json, ANALYSIS.md) under experiments_dir.\n\n"
        "Usage: bpe-train [GROUP=OPTION] [KEY=VALUE] ...      one run\n"
        "       bpe-train -m KEY=A,B ...                       a sweep (one run per combination)\n"
        "       add --debug (or HYDRA_FULL_ERROR=1) for full tracebacks\n\n"
        "Config groups (GROUP=OPTION):\n$APP_CONFIG_GROUPS\n" + hydra_groups() + "\n"
        "Keys (KEY=VALUE; a wrong type or an unknown key fails before any directory is made):\n"
        + "\n".join(lines)
        + "\n\nExamples:\n"
        + HELP_EXAMPLES
        + "\n\nConfigs live in the package's conf/ directory (bpe/conf in the repository);"
        " see the README and docs/experiments.md.\n"
    )


class BelowLevel(logging.Filter):
    """Pass records below `level` only (`conf/hydra/job_logging/bpe.yaml` sends the rest to
    stderr, so an error is printed once, on stderr)."""

    def __init__(self, level: int | str = logging.WARNING) -> None:
        super().__init__()
        self.level = logging.getLevelName(level) if isinstance(level, str) else level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < self.level


def register() -> None:
    """Register the schema and the help page in Hydra's ConfigStore (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(name="bpe_schema", node=TrainConfig)
    cs.store(
        group="hydra/help",
        name="bpe_train",
        node={"app_name": "bpe-train", "header": "", "footer": "", "template": help_template()},
    )


register()
