"""The keys of metrics.json, once: where each fact a reader needs sits, and how to read it.

The writer (`bpe.experiment.runner`, `bpe.evaluation.evaluate`) builds metrics.json section by
section, the sections it owns as the typed structures of `bpe.runs.sections` (`RunRecord`,
`Counts`, `PatternRecord`, `BackendRecord`, `VariantRecord`: a type checker and `tests/test_runs.py`
hold the writer to them). A reader reads every field through a `Key` here, so a renamed
field breaks `tests/test_runs.py` (which checks every key against a real run) instead of a
report, a tracker or a comparison in the field. That test also scans every module of `bpe/`
for a literal read of metrics.json (`metrics["run"]`, `metrics.get("compression")`, and the
same on any name bound to a part of it) and for a dotted `metrics.<section>.<field>` path.
A key with a `{side}` part names a held-out side ("own" or "other"); `{i}` an item of a list.
Dotted column names of `bpe.analysis.loader.load_runs` are `"metrics." + key.dotted`.

    >>> get({"run": {"launcher": {"name": "basic"}}}, LAUNCHER_NAME)
    'basic'
    >>> get({"run": {}}, LAUNCHER_NAME, default="n/a"), LAUNCHER_NAME.column
    ('n/a', 'metrics.run.launcher.name')

What it does not do: validate a whole metrics.json, write the file, or read it
(`bpe.runs.upgrade.read_metrics` reads it, in today's layout whatever the run's age); a key
marked `always=False` is one that some runs lack: a measure of a later version, or of one kind
of run (failed, continued, a variant's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from bpe.runs.sections import (  # noqa: F401  (re-exported: the writer's types)
    SECTIONS,
    BackendRecord,
    CompileRecord,
    Counts,
    HeldOutTail,
    LadderRecord,
    PatternRecord,
    RunRecord,
    VariantRecord,
    malformed,
)


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

    def at(self, **parts: object) -> Key:
        """This key with its `{name}` parts filled in: a held-out side, or an item of a list.

        >>> key("compression.{side}.ratio").at(side="other").dotted
        'compression.other.ratio'
        >>> key("undertrained.examples.{i}.gpt2").at(i=0).path
        ('undertrained', 'examples', '0', 'gpt2')
        """
        return Key(tuple(part.format(**parts) for part in self.path), self.always)

    @property
    def parts(self) -> set[str]:
        """The `{name}` parts `at` fills ({"side"} for `compression.{side}.ratio`)."""
        return {p[1:-1] for p in self.path if p.startswith("{") and p.endswith("}")}


def key(dotted: str, *, always: bool = True) -> Key:
    return Key(tuple(dotted.split(".")), always)


def has(metrics: Mapping[str, Any] | None, k: Key) -> bool:
    """Whether the path of `k` exists in a metrics.json mapping (its value may be null)."""
    node: Any = metrics
    for part in k.path:
        found, node = _step(node, part)
        if not found:
            return False
    return True


def _step(node: Any, part: str) -> tuple[bool, Any]:
    """One level down: a mapping's field, or a list's item where the part is an index."""
    if isinstance(node, Mapping):
        return (True, node[part]) if part in node else (False, None)
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return True, node[int(part)]
    return False, None


#: metrics.json's sections of measurements: their numeric leaves are what a tracker charts
#: (`bpe.tracking.to_mlflow` logs them as MLflow metrics).
MEASURE_SECTIONS = (
    "timings",
    "cpu_timings",
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
    "segmentation",
    "languages",
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
    "stopped_by",
    "merges_sha256",
    "longest_tokens",
    "token_lengths",
    "init_from",
    "ladder",
)


def get(metrics: Mapping[str, Any] | None, k: Key, default: Any = None, **parts: object) -> Any:
    """The value at `k` in a metrics.json mapping, or `default` where any level is missing;
    `parts` fill a key's `{name}` parts (`get(m, COMPRESSION_RATIO_OF, side="other")`)."""
    node: Any = metrics
    for part in (k.at(**parts) if parts else k).path:
        found, node = _step(node, part)
        if not found:
            return default
    return default if node is None else node


# -- status and identity ------------------------------------------------------------------------
STATUS = key("status")
ERROR_MESSAGE = key("error.message", always=False)  # failed runs only
RUN_NAME = key("run.name")
RUN_DIR = key("run.dir")
DATASET = key("run.dataset")
INPUT_NAME = key("run.input_name")
INPUT_PATH = key("run.input_path")
# runs since data curves: the share of the trainable text training read (1: all of it)
TRAIN_FRACTION = key("run.train_fraction", always=False)
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
# runs since CPU time per stage (`bpe.util.cputime`): the same stages' CPU seconds, this
# process's threads and its ended workers
CPU_TIMINGS = key("cpu_timings", always=False)
CPU_SECONDS_OF = key("cpu_timings.{stage}", always=False)
CPU_TOTAL_SECONDS = key("cpu_timings.total", always=False)
PEAK_MB = key("memory.peak_mb")  # the whole run, analysis and report included
# runs since training's memory is reported apart (`bpe.experiment.records.with_phases`): the
# tree's memory when the run began, and what training (stages 1-3) added above it: the run's
# memory headline, comparable across runs whether or not a sweep reused the process
BASELINE_MB = key("memory.baseline_mb", always=False)
TRAINING_ADDED_MB = key("memory.training.added_mb", always=False)
TRAINING_PEAK_MB = key("memory.training.peak_mb", always=False)
TRAINING_PEAK_STAGE = key("memory.training.stage", always=False)
TRAINING_WIDEST_GAP_S = key("memory.training.widest_gap_s", always=False)  # longest sample wait
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
WORKER_STARTUP_SECONDS = key("counts.worker_startup_s", always=False)
MERGES_SHA256 = key("merges_sha256")
STOPPED_EARLY = key("stopped_early")
# runs since training limits: why a run stopped early (one of these two), else null
STOPPED_BY = key("stopped_by", always=False)
STOPPED_NO_PAIRS, STOPPED_MIN_FREQUENCY = "no_pairs_left", "min_frequency"
MAX_TOKEN_LENGTH = key("run.max_token_length", always=False)
MIN_FREQUENCY = key("run.min_frequency", always=False)
SEED_TOKENS = key("run.seed_tokens", always=False)  # runs since seed tokens
PROTECT = key("run.protect", always=False)  # runs since protected characters
PATTERN_NAME = key("pattern.name")
# older complete runs split with the regex engine, and read so (`bpe.runs.upgrade`)
PATTERN_ENGINE = key("pattern.engine")
# older runs trained plain BPE, and read so (`bpe.runs.upgrade`)
VARIANT = key("variant")
VARIANT_NAME = key("variant.name")
VARIANT_THRESHOLD = key("variant.threshold")
VARIANT_TRANSITION_VOCAB = key("variant.transition_vocab")
VARIANT_REMOVALS = key("variant.removals")
VARIANT_STAGE_TWO = key("variant.stage_two")
# parity-aware runs (`bpe.variants.languages.parity_facts`)
VARIANT_GLOBAL_MERGES = key("variant.global_merges", always=False)
PARITY = key("variant.parity", always=False)
PARITY_LANGUAGES = key("variant.parity.languages", always=False)
PARITY_DEV_TEXT = key("variant.parity.dev_text", always=False)
PARITY_MERGES_PER_LANGUAGE = key("variant.parity.merges_per_language", always=False)
PARITY_DEV_GINI_BEFORE = key("variant.parity.dev_gini_before", always=False)
PARITY_DEV_GINI_AFTER = key("variant.parity.dev_gini_after", always=False)
# BoundlessBPE runs (`bpe.variants.boundless`)
BOUNDLESS = key("variant.boundless", always=False)
BOUNDLESS_SUPERMERGES = key("variant.boundless.supermerges", always=False)
BOUNDLESS_PHRASES = key("variant.boundless.phrases", always=False)
BOUNDLESS_DISTINCT_PHRASES = key("variant.boundless.distinct_phrases", always=False)
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
OWN_DOCS = key("compression.own.docs")  # the held-out documents the own side measured
GPT2_COMPRESSION_RATIO = key("compression.own.gpt2_ratio")
OWN_SOURCE = key("compression.own.source")  # heldout | input_tail
OWN_SEEN_IN_TRAINING = key("compression.own.seen_in_training")
# a held-out file: how many of its measured documents the training input holds too, and how
# much of the input was read to find them ("all", or its head's characters)
OWN_DOCS_IN_TRAINING = key("compression.own.docs_in_training", always=False)
OWN_TRAINING_SCANNED = key("compression.own.training_scanned", always=False)
# inputs without held-out file whose last documents were held out (`HeldOutTail`)
HELDOUT_DOCS = key("compression.own.heldout_docs", always=False)
HELDOUT_BYTES = key("compression.own.heldout_bytes", always=False)
HELDOUT_FILE = key("compression.own.file", always=False)
HELDOUT_OFFSET = key("compression.own.offset", always=False)
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
# runs since segmentation methods are measured (`bpe.evaluation.segmentations`): per method
# (merges | longest_prefix | fewest) and held-out side
SEGMENTATION = key("segmentation", always=False)
SEGMENTATION_METHODS = key("segmentation.methods", always=False)
SEGMENTATION_ORDER = key("segmentation.order", always=False)
SEGMENTATION_SKIPPED = key("segmentation.skipped", always=False)  # why none was measured
SEG_OF = key("segmentation.methods.{method}.{side}", always=False)
SEG_BYTES_PER_TOKEN = key("segmentation.methods.{method}.{side}.bytes_per_token", always=False)
SEG_RENYI = key("segmentation.methods.{method}.{side}.renyi_efficiency", always=False)
SEG_BITS_PER_BYTE = key("segmentation.methods.{method}.{side}.bits_per_byte", always=False)
SEG_TOKENS = key("segmentation.methods.{method}.{side}.tokens", always=False)
SEG_DATASET = key("segmentation.methods.{method}.{side}.dataset", always=False)
# runs since the languages measure (`bpe.measures.languages`): FLORES-200 by Petrov et al.'s
# protocol; {who} is "ours" or "gpt2" (null without the GPT-2 baseline), {i} a language's row
LANGUAGES = key("languages", always=False)
LANGUAGE_LINES = key("languages.lines", always=False)
LANG_OF = key("languages.{who}", always=False)
LANG_ROWS = key("languages.{who}.rows", always=False)
LANG_ROW_LANGUAGE = key("languages.{who}.rows.{i}.language", always=False)
LANG_ROW_NAME = key("languages.{who}.rows.{i}.name", always=False)
LANG_ROW_TOKENS = key("languages.{who}.rows.{i}.tokens", always=False)
LANG_ROW_PREMIUM = key("languages.{who}.rows.{i}.premium", always=False)
LANG_GINI = key("languages.{who}.summary.gini", always=False)
LANG_MAX_PREMIUM = key("languages.{who}.summary.max_premium", always=False)
LANG_MAX_LANGUAGE = key("languages.{who}.summary.max_language", always=False)
LANG_BYTES_PER_TOKEN = key("languages.{who}.summary.bytes_per_token", always=False)
# the held-out half of devtest alone (`bpe.measures.languages.heldout_text`): runs since
# parity-aware BPE
LANG_HELDOUT_ROWS = key("languages.{who}.heldout.rows", always=False)
LANG_HELDOUT_ROW_LANGUAGE = key("languages.{who}.heldout.rows.{i}.language", always=False)
LANG_HELDOUT_ROW_PREMIUM = key("languages.{who}.heldout.rows.{i}.premium", always=False)
LANG_HELDOUT_MIN_LANGUAGE = key("languages.{who}.heldout.summary.min_language", always=False)
LANG_HELDOUT_GINI = key("languages.{who}.heldout.summary.gini", always=False)
LANG_HELDOUT_MAX_PREMIUM = key("languages.{who}.heldout.summary.max_premium", always=False)
LANG_HELDOUT_MAX_LANGUAGE = key("languages.{who}.heldout.summary.max_language", always=False)
LANG_HELDOUT_MIN_PREMIUM = key("languages.{who}.heldout.summary.min_premium", always=False)
LANG_HELDOUT_BYTES_PER_TOKEN = key("languages.{who}.heldout.summary.bytes_per_token", always=False)
LANGUAGES_GINI = LANG_GINI.at(who="ours")
LANGUAGES_HELDOUT_GINI = LANG_HELDOUT_GINI.at(who="ours")
LANGUAGES_HELDOUT_MAX_PREMIUM = LANG_HELDOUT_MAX_PREMIUM.at(who="ours")
LANGUAGES_HELDOUT_BYTES_PER_TOKEN = LANG_HELDOUT_BYTES_PER_TOKEN.at(who="ours")
LANGUAGES_MAX_PREMIUM = LANG_MAX_PREMIUM.at(who="ours")

# -- read by ANALYSIS.md, the MLflow view and COMPARE.md, section by section -----------------------
BITS_PER_BYTE_OF = key("bits_per_byte.{side}", always=False)
BPB_DATASET = key("bits_per_byte.{side}.dataset")
BPB_DOCS = key("bits_per_byte.{side}.docs")
BPB_TOKENS = key("bits_per_byte.{side}.tokens")
BPB_BITS_PER_BYTE = key("bits_per_byte.{side}.bits_per_byte")
BPB_SPLITS_MIN = key("bits_per_byte.{side}.splits.min")
BPB_SPLITS_MAX = key("bits_per_byte.{side}.splits.max")
BPB_UNIGRAM = key("bits_per_byte.{side}.unigram_bits_per_byte")
BPB_BITS_PER_TOKEN = key("bits_per_byte.{side}.bits_per_token")
BITS_PER_BYTE_MODEL_DISCOUNTS = key("bits_per_byte.model.discounts")
BITS_PER_BYTE_MODEL_SPLITS = key("bits_per_byte.model.splits")
BITS_PER_BYTE_MODEL_TRAIN_BYTES = key("bits_per_byte.model.train.bytes")
BITS_PER_BYTE_MODEL_TRAIN_FILE = key("bits_per_byte.model.train.file")
BITS_PER_BYTE_MODEL_TRAIN_TOKENS = key("bits_per_byte.model.train.tokens")
BITS_PER_BYTE_MODEL_TRAIN_WHOLE_FILE = key("bits_per_byte.model.train.whole_file")
COMPRESSION_OWN = key("compression.own")
COMPRESSION_OF = key("compression.{side}", always=False)
COMPRESSION_RATIO_OF = key("compression.{side}.ratio")
COMPRESSION_GPT2_RATIO_OF = key("compression.{side}.gpt2_ratio")
COMPRESSION_DATASET = key("compression.{side}.dataset")
COMPRESSION_DOCS = key("compression.{side}.docs")
COMPRESSION_BYTES = key("compression.{side}.bytes")
COUNTS_BYTES = key("counts.bytes")
COUNTS_CHUNKS = key("counts.chunks")
# the held-out sets a measure ran on: .at(side="own") the dataset's own, "other" the other one
EFFICIENCY_OF = key("efficiency.{side}", always=False)
EFFICIENCY_DATASET = key("efficiency.{side}.dataset")
EFFICIENCY_DOCS = key("efficiency.{side}.docs")
EFFICIENCY_TOKENS = key("efficiency.{side}.tokens")
EFFICIENCY_FERTILITY = key("efficiency.{side}.fertility")
EFFICIENCY_SHANNON = key("efficiency.{side}.shannon_efficiency")
EFFICIENCY_RENYI = key("efficiency.{side}.renyi_efficiency")
EFFICIENCY_RENYI_ALPHA = key("efficiency.{side}.renyi_alpha")
EFFICIENCY_VOCAB_USED = key("efficiency.{side}.vocab_used")
EFFICIENCY_VOCAB_USED_SHARE = key("efficiency.{side}.vocab_used_share")
ERROR = key("error", always=False)
ERROR_STAGE = key("error.stage", always=False)
ERROR_TYPE = key("error.type", always=False)
INIT_FROM = key("init_from", always=False)
INIT_FROM_HELDOUT = key("init_from.heldout", always=False)
INIT_FROM_HELDOUT_DATASET = key("init_from.heldout.dataset", always=False)
INIT_FROM_HELDOUT_DOCS = key("init_from.heldout.docs", always=False)
INIT_FROM_HELDOUT_NEW_TOKEN_SHARE = key("init_from.heldout.new_token_share", always=False)
INIT_FROM_HELDOUT_PARENT_RATIO = key("init_from.heldout.parent_ratio", always=False)
INIT_FROM_HELDOUT_RATIO = key("init_from.heldout.ratio", always=False)
INIT_FROM_MERGES = key("init_from.merges", always=False)
INIT_FROM_MERGES_SHA256 = key("init_from.merges_sha256", always=False)
INIT_FROM_NEW_TOKENS = key("init_from.new_tokens", always=False)
INIT_FROM_VOCAB_SIZE = key("init_from.vocab_size", always=False)
LEADING_SPACE_SHARE = key("leading_space_share")
LEARNED_TOKENS = key("learned_tokens")
LINEAGE_HELDOUT = key("lineage.heldout")
MEMORY = key("memory")
MEMORY_BEFORE_REPORT = key("memory.before_report")
MEMORY_INTERVAL_S = key("memory.interval_s")
MEMORY_MEASURE = key("memory.measure")
#: its values (allocated pages' PSS; older runs: all of PSS) and how a label says them
ALLOCATED_PSS, ALL_PSS = "allocated_pss", "pss"
MEASURE_LABELS = {ALLOCATED_PSS: "allocated PSS", ALL_PSS: "PSS"}
MEMORY_TIMELINE = key("memory.timeline")
MERGE_SUPPORT_COUNT_1 = key("merge_support.count_1")
MERGE_SUPPORT_MERGES = key("merge_support.merges")
MERGE_SUPPORT_RARE = key("merge_support.rare")
MERGE_SUPPORT_RARE_SHARE = key("merge_support.rare_share")
MERGE_SUPPORT_SUPPORTED_VOCAB = key("merge_support.supported_vocab")
MERGE_SUPPORT_UNIQUE_PRETOKENS = key("merge_support.unique_pretokens")
PATTERN = key("pattern")
PATTERN_REGEX = key("pattern.regex")
PRETOKEN_CACHE_HASH_SECONDS = key("pretoken_cache.hash_seconds")
PRETOKEN_CACHE_KEY = key("pretoken_cache.key")
PRETOKEN_CACHE_SAVE_SECONDS = key("pretoken_cache.save_seconds")
RUN = key("run")
STATUS_REASON = key("status_reason", always=False)
THROUGHPUT = key("throughput")
THROUGHPUT_FIRST_PASS_BYTES_PER_SECOND = key("throughput.first_pass_bytes_per_second")
THROUGHPUT_GPT2_BYTES_PER_SECOND = key("throughput.gpt2_bytes_per_second")
TIKTOKEN = key("tiktoken")
TOKEN_LENGTHS = key("token_lengths")
UNDERTRAINED_EXAMPLES = key("undertrained.examples")
UNDERTRAINED_EXAMPLE_TOKEN = key("undertrained.examples.{i}.gpt2", always=False)
UNDERTRAINED_EXAMPLE_MERGE_COUNT = key("undertrained.examples.{i}.merge_count", always=False)
UNDERTRAINED_EXAMPLE_MERGED_INTO = key("undertrained.examples.{i}.merged_into", always=False)
UNDERTRAINED_HELDOUT_DOCS = key("undertrained.heldout_docs")
UNDERTRAINED_INTERMEDIATE_ONLY = key("undertrained.intermediate_only")
UNDERTRAINED_INTERMEDIATE_ONLY_IN_HELDOUT = key("undertrained.intermediate_only_in_heldout")
UNDERTRAINED_INTERMEDIATE_ONLY_SHARE = key("undertrained.intermediate_only_share")
UNDERTRAINED_LEARNED = key("undertrained.learned")
UNDERTRAINED_NEVER_PRODUCED = key("undertrained.never_produced")
UNDERTRAINED_NEVER_PRODUCED_SHARE = key("undertrained.never_produced_share")
UNDERTRAINED_SAMPLE_BYTES = key("undertrained.sample.bytes")
UNDERTRAINED_SAMPLE_FILE = key("undertrained.sample.file")
UNDERTRAINED_SAMPLE_FILE_BYTES = key("undertrained.sample.file_bytes")
UNDERTRAINED_SAMPLE_WHOLE_FILE = key("undertrained.sample.whole_file")
UNDERTRAINED_SELF_UNREACHABLE = key("undertrained.self_unreachable")
UNDERTRAINED_SELF_UNREACHABLE_SHARE = key("undertrained.self_unreachable_share")
UNDERTRAINED_UNUSED_BYTES = key("undertrained.unused_bytes")
UNDERTRAINED_VOCAB_SIZE = key("undertrained.vocab_size")
VARIANT_STAGE_TWO_COUNTS_MB = key("variant.stage_two.counts_mb", always=False)
VARIANT_STAGE_TWO_LONGEST = key("variant.stage_two.longest_pretoken_bytes", always=False)
VARIANT_STAGE_TWO_MERGES = key("variant.stage_two.merges", always=False)
VARIANT_STAGE_TWO_UNIQUE_PRETOKENS = key("variant.stage_two.unique_pretokens", always=False)
VARIANT_STAGE_TWO_UNIQUE_RATIO = key("variant.stage_two.unique_ratio", always=False)

#: Every key above, for the contract test.
KEYS: dict[str, Key] = {n: v for n, v in globals().items() if isinstance(v, Key)}


def measure(dotted: str) -> Key:
    """The measurement at a dotted metrics.json path, as a `Key`: what a search optimizes
    (`search.metric`). Any declared key of a measurement section, its `{side}`-like parts
    filled in, e.g. `compression.own.ratio` or `bits_per_byte.own.bits_per_byte`.

    >>> measure("compression.own.ratio").column
    'metrics.compression.own.ratio'
    >>> measure("compresion.own.ratio")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: search.metric='compresion.own.ratio' is not a measurement of metrics.json; ...

    Raises:
        ValueError: the path names no declared measurement (the message lists close ones).
    """
    import difflib

    path = tuple(str(dotted).split("."))
    for k in KEYS.values():
        if k.path[0] not in MEASURE_SECTIONS or len(k.path) != len(path):
            continue
        if all(p == q or (q.startswith("{") and q.endswith("}")) for p, q in zip(path, k.path)):
            return Key(path, always=False)
    known = sorted(k.dotted for k in KEYS.values() if k.path[0] in MEASURE_SECTIONS)
    close = difflib.get_close_matches(str(dotted), known, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise ValueError(
        f"search.metric={dotted!r} is not a measurement of metrics.json; {hint}name a number "
        "a run measures, e.g. bits_per_byte.own.bits_per_byte (minimize) or "
        "compression.own.ratio (maximize); a {side} part is own or other"
    )


def objective(metrics: Mapping[str, Any] | None, dotted: str) -> float | None:
    """The value a search reads from a run's metrics.json: the number at `measure(dotted)`,
    or None when the run did not measure it (a failed run, an analysis switched off).

    >>> objective({"compression": {"own": {"ratio": 4.25}}}, "compression.own.ratio")
    4.25
    >>> objective({"status": "failed"}, "compression.own.ratio") is None
    True
    """
    value = get(metrics, measure(dotted))
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
