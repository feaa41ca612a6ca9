"""The keys of metrics.json, once: where each fact a reader needs sits, and how to read it.

The writer (`bpe.experiment.runner`, `bpe.experiment.evaluate`) builds metrics.json section by
section, the sections it owns as the typed structures below (`RunRecord`, `Counts`,
`PatternRecord`, `BackendRecord`, `VariantRecord`: a type checker and `tests/test_runs.py`
hold the writer to them). A reader names the fields it reads through a `Key` here, so a
renamed field breaks `tests/test_runs.py` (which checks every key against a real run) instead
of a report, a tracker or a comparison in the field; that test also fails on a dotted
`metrics.<section>.<field>` path typed anywhere in the readers. Plain reads of a section
(`metrics.get("compression")`) are not caught yet, and the run report, the MLflow view and
the comparison still hold some. Dotted column
names of `bpe.analysis.loader.load_runs` are `"metrics." + key.dotted`.

    >>> get({"run": {"launcher": {"name": "basic"}}}, LAUNCHER_NAME)
    'basic'
    >>> get({"run": {}}, LAUNCHER_NAME, default="n/a"), LAUNCHER_NAME.column
    ('n/a', 'metrics.run.launcher.name')

What it does not do: validate a whole metrics.json or write the file; older runs lack some keys
(`always=False`), and readers fall back as they document.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, TypedDict


class RunRecord(TypedDict):
    """metrics.json's `run`: what was asked for, where it ran, how it was launched."""

    name: str
    dir: str
    dataset: str
    trainer: str
    vocab_size: int
    profiler: str
    num_workers: int | None
    launcher: dict  # `bpe.experiment.launching.launcher_info`
    seed: int
    pretokenizer: str
    init_from: str | None
    special_tokens: list[str]
    input_name: str  # the dataset's name, or custom-<stem> for dataset.path=
    input_path: str
    overrides: list[str]
    extra_overrides: list[str]  # e.g. a dataset.path= the overrides do not show
    sweep_dir: str | None
    job_num: int | None
    command: str  # `bpe.runs.command.rerun_command` of the fields above


class Counts(TypedDict):
    """metrics.json's `counts`: the sizes of what was trained, and how stage 1 ran."""

    bytes: int
    pretokens: int
    unique_pretokens: int
    merges: int
    vocab: int
    chunks: int
    workers: int
    start_method: str


class PatternRecord(TypedDict):
    """metrics.json's `pattern`: the split pattern's name (`bpe.text.patterns.pattern_name`),
    and the engine that split stage 1's text (`bpe.pretokenize.engines`)."""

    name: str
    regex: str
    engine: str  # regex | compiled | cache (counts loaded, nothing split); runs since engines


class BackendRecord(TypedDict):
    """metrics.json's `backend`: where stage 1 ran ("processes" or "dask", and its scheduler)."""

    name: str
    scheduler: str | None


class VariantRecord(TypedDict):
    """metrics.json's `variant`: the member of the BPE family (`bpe.trainers.variants`), its
    parameters (null where the variant has none) and what it measured about itself."""

    name: str  # bpe | superbpe | picky
    transition_vocab: int | None  # superbpe: vocab size where stage two started
    stage_two_pattern: str | None  # superbpe: stage two's split pattern (a regex)
    threshold: float | None  # picky: the intersection-over-self threshold
    removals: int | None  # picky: tokens removed during training
    stage_two: dict | None  # superbpe: stage two's pretokens (unique, bytes, longest), merges


class CompileRecord(TypedDict):
    """metrics.json's `compile`, written by runs of a compiling trainer (`compiled`) only; its
    seconds are `timings.compile`."""

    cached: bool  # machine code loaded from Numba's cache (False: compiled in this run)


class LadderRecord(TypedDict):
    """metrics.json's `ladder`, written by runs cut from a vocab ladder only
    (`bpe.experiment.ladder`): one training to the sweep's largest vocab served this run."""

    key: str  # the ladder's directory under <sweep_dir>/.ladder/
    trained_in: str  # the run (job) whose process trained the ladder
    trained_in_dir: str
    trained_here: bool  # this job's process trained it
    largest_vocab: int  # the vocab the one training went to
    rung_merges: int  # this run's merges: the training's first this many
    rung_seconds: float  # merge stage time when the training reached them (= timings.merge)
    merges_per_second: float | None  # rung_merges / rung_seconds
    ladder_merge_seconds: float  # the whole training's merge stage


class HeldOutTail(TypedDict):
    """Where `compression.own` (and `bits_per_byte.own`, `efficiency.own`) documents come from
    when the dataset has no held-out file: the input's last documents, held out of training."""

    source: str  # "input_tail"
    seen_in_training: bool  # False: training stopped before them
    file: str  # the file they start in
    offset: int  # where in that file: a decompressed byte offset, or a row
    offset_unit: str  # "bytes" or "rows"
    heldout_docs: int  # documents held out (the measure reads at most analysis.max_docs)
    heldout_bytes: int  # their UTF-8 bytes


#: The sections the runner writes as typed structures, by their metrics.json key (in every
#: run; `CompileRecord` only in a compiling trainer's).
SECTIONS: dict[str, type] = {
    "run": RunRecord,
    "counts": Counts,
    "pattern": PatternRecord,
    "backend": BackendRecord,
    "variant": VariantRecord,
}


class Key(NamedTuple):
    """One field of metrics.json: its path, and whether every complete run has it."""

    path: tuple[str, ...]
    always: bool = True

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    @property
    def column(self) -> str:
        """The column `bpe.analysis.loader.load_runs` gives this key."""
        return f"metrics.{self.dotted}"


def key(dotted: str, *, always: bool = True) -> Key:
    return Key(tuple(dotted.split(".")), always)


def has(metrics: Mapping[str, Any] | None, k: Key) -> bool:
    """Whether the path of `k` exists in a metrics.json mapping (its value may be null)."""
    node: Any = metrics
    for part in k.path:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


#: metrics.json's sections of measurements: their numeric leaves are what a tracker charts
#: (`bpe.analysis.tracking` logs them as MLflow metrics).
MEASURE_SECTIONS = (
    "timings",
    "memory",
    "counts",
    "compression",
    "throughput",
    "efficiency",
    "bits_per_byte",
    "token_kinds",
    "tiktoken",
    "leading_space_share",
    "learned_tokens",
    "undertrained",
    "merge_support",
    "variant",
)
#: Every other section: what a run is, how it went and what it names (logged as parameters
#: or tags, or shown in reports only). `tests/test_runs.py` holds every section of a real run
#: to exactly one of the two tuples, so a new section is charted or left out by decision.
RECORD_SECTIONS = (
    "schema",
    "status",
    "status_reason",
    "error",
    "started_at",
    "finished_at",
    "run",
    "process",
    "lineage",
    "backend",
    "pattern",
    "pretoken_cache",
    "profiled",
    "stopped_early",
    "merges_sha256",
    "longest_tokens",
    "token_lengths",
    "init_from",
    "ladder",
)


def get(metrics: Mapping[str, Any] | None, k: Key, default: Any = None) -> Any:
    """The value at `k` in a metrics.json mapping, or `default` where any level is missing."""
    node: Any = metrics
    for part in k.path:
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return default if node is None else node


# -- status and identity ------------------------------------------------------------------------
STATUS = key("status")
ERROR_MESSAGE = key("error.message", always=False)  # failed runs only
RUN_NAME = key("run.name")
RUN_DIR = key("run.dir")
DATASET = key("run.dataset")
INPUT_NAME = key("run.input_name")
INPUT_PATH = key("run.input_path")
TRAINER = key("run.trainer")
VOCAB_SIZE = key("run.vocab_size")
PROFILER = key("run.profiler")
NUM_WORKERS = key("run.num_workers")
SEED = key("run.seed")
SPECIAL_TOKENS = key("run.special_tokens")
PRETOKENIZER = key("run.pretokenizer")
INIT_FROM_ARG = key("run.init_from")
COMMAND = key("run.command")
OVERRIDES = key("run.overrides")
SWEEP_DIR = key("run.sweep_dir")
JOB_NUM = key("run.job_num")
# -- how it ran ----------------------------------------------------------------------------------
LAUNCHER = key("run.launcher")
LAUNCHER_NAME = key("run.launcher.name")
LAUNCHER_OVERRIDES = key("run.launcher.overrides")
LAUNCHER_PARALLEL_JOBS = key("run.launcher.parallel_jobs")
LAUNCHER_WORKERS_PER_JOB = key("run.launcher.workers_per_job")
LAUNCHER_CPUS_PER_TASK = key("run.launcher.cpus_per_task", always=False)  # SLURM only
LAUNCHER_N_JOBS = key("run.launcher.n_jobs")
PROFILED = key("profiled")
STARTED_AT = key("started_at")
FINISHED_AT = key("finished_at")
BACKEND_NAME = key("backend.name")
BACKEND_SCHEDULER = key("backend.scheduler")
PRETOKEN_CACHE_STATUS = key("pretoken_cache.status")
PRETOKEN_CACHE_LOAD_SECONDS = key("pretoken_cache.load_seconds")
# -- what it measured ----------------------------------------------------------------------------
TIMINGS = key("timings")
PRETOKENIZE_SECONDS = key("timings.pretokenize")
MERGE_SECONDS = key("timings.merge")
# compiling trainers, and runs whose stage 1 loaded the compiled pre-tokenizer, only
COMPILE_SECONDS = key("timings.compile", always=False)
COMPILE_CACHED = key("compile.cached", always=False)
TOTAL_SECONDS = key("timings.total")
PEAK_MB = key("memory.peak_mb")  # the whole run, analysis and report included
# runs since training's memory is reported apart (`bpe.experiment.records.with_phases`): the
# tree's memory when the run began, and what training (stages 1-3) added above it: the run's
# memory headline, comparable across runs whether or not a sweep reused the process
BASELINE_MB = key("memory.baseline_mb", always=False)
TRAINING_ADDED_MB = key("memory.training.added_mb", always=False)
TRAINING_PEAK_MB = key("memory.training.peak_mb", always=False)
TRAINING_PEAK_STAGE = key("memory.training.stage", always=False)
MERGE_ADDED_MB = key("memory.merge.added_mb", always=False)  # stages 2-3 alone
ANALYSIS_PEAK_MB = key("memory.analysis.peak_mb", always=False)
PEAK_MB_PER_STAGE = key("memory.per_stage_peak_mb")
COUNTS = key("counts")
MERGES = key("counts.merges")
VOCAB = key("counts.vocab")
PRETOKENS = key("counts.pretokens")
UNIQUE_PRETOKENS = key("counts.unique_pretokens")
WORKERS = key("counts.workers")
START_METHOD = key("counts.start_method")
MERGES_SHA256 = key("merges_sha256")
STOPPED_EARLY = key("stopped_early")
PATTERN_NAME = key("pattern.name")
PATTERN_ENGINE = key("pattern.engine", always=False)  # runs from before engines lack it
# runs from before the BPE family lack the section: they trained plain BPE
VARIANT = key("variant")
VARIANT_NAME = key("variant.name")
VARIANT_THRESHOLD = key("variant.threshold")
VARIANT_TRANSITION_VOCAB = key("variant.transition_vocab")
VARIANT_REMOVALS = key("variant.removals")
VARIANT_STAGE_TWO = key("variant.stage_two")
# runs cut from a vocab ladder only (`LadderRecord`)
LADDER = key("ladder", always=False)
LADDER_TRAINED_IN = key("ladder.trained_in", always=False)
LADDER_LARGEST_VOCAB = key("ladder.largest_vocab", always=False)
LADDER_RUNG_SECONDS = key("ladder.rung_seconds", always=False)
LADDER_MERGES_PER_SECOND = key("ladder.merges_per_second", always=False)
INIT_FROM_PATH = key("init_from.path", always=False)  # continued runs only
INPUT_SHA256 = key("lineage.input.sha256")
INPUT_FILES = key("lineage.input.files", always=False)  # runs since corpus readers
INPUT_FORMAT = key("lineage.input.format", always=False)
INPUT_RECORDS = key("lineage.input.records", always=False)
INPUT_BYTES = key("lineage.input.bytes")
TIKTOKEN_MISMATCHES = key("tiktoken.mismatches")
LONGEST_TOKENS = key("longest_tokens")
# runs since the corpus's support of a vocab is measured (`bpe.measures.merge_support`)
MERGE_SUPPORT = key("merge_support", always=False)
MERGE_SUPPORT_OUTGROWN = key("merge_support.outgrown", always=False)
TOKEN_KINDS = key("token_kinds")
COMPRESSION_RATIO = key("compression.own.ratio")
GPT2_COMPRESSION_RATIO = key("compression.own.gpt2_ratio")
OWN_SOURCE = key("compression.own.source")  # heldout | input_tail
OWN_SEEN_IN_TRAINING = key("compression.own.seen_in_training")
# inputs without held-out file whose last documents were held out (`HeldOutTail`)
HELDOUT_DOCS = key("compression.own.heldout_docs", always=False)
HELDOUT_BYTES = key("compression.own.heldout_bytes", always=False)
HELDOUT_FILE = key("compression.own.file", always=False)
OTHER_DATASET = key("compression.other.dataset")
OTHER_COMPRESSION_RATIO = key("compression.other.ratio")
OTHER_GPT2_COMPRESSION_RATIO = key("compression.other.gpt2_ratio")
BYTES_PER_SECOND = key("throughput.bytes_per_second")
EFFICIENCY = key("efficiency.own")
UNDERTRAINED = key("undertrained")
BITS_PER_BYTE_SECTION = key("bits_per_byte")
BPB_ORDER = key("bits_per_byte.model.order")
BITS_PER_BYTE = key("bits_per_byte.own.bits_per_byte")
BITS_PER_BYTE_MIN = key("bits_per_byte.own.splits.min")
BITS_PER_BYTE_MAX = key("bits_per_byte.own.splits.max")
UNIGRAM_BITS_PER_BYTE = key("bits_per_byte.own.unigram_bits_per_byte")
OTHER_BITS_PER_BYTE = key("bits_per_byte.other.bits_per_byte")

#: Every key above, for the contract test.
KEYS: dict[str, Key] = {n: v for n, v in globals().items() if isinstance(v, Key)}
