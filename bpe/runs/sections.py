"""The sections of metrics.json that the runner writes as typed structures.

`bpe.runs.schema` re-exports them (`schema.SECTIONS`): a type checker and `tests/test_runs.py`
hold the writer to them, and readers read their fields through the schema's keys.

What it does not do: name the keys readers use (`bpe.runs.schema`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import UnionType
from typing import Any, TypedDict, Union, get_args, get_origin, get_type_hints


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
    max_token_length: int | None  # bytes; null: no limit (`bpe.trainers.common.Limits`)
    min_frequency: int | None  # null: no limit
    seed_tokens: list[str]  # placed in the vocab before the first merge (`bpe.pipeline.seeds`)
    protect: list[str]  # classes of characters that never merge (`bpe.text.protect`)
    special_tokens: list[str]
    input_name: str  # the dataset's name, or custom-<stem> for dataset.path=
    input_path: str
    #: the share of the trainable text training read (`dataset.train_fraction`; 1: all)
    train_fraction: float
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
    #: seconds from starting stage 1's first worker process to the last one being ready (None:
    #: counted in-process, on Dask, or loaded from the cache)
    worker_startup_s: float | None


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
    """metrics.json's `variant`: the member of the BPE family (`bpe.variants`), its
    parameters (null where the variant has none) and what it measured about itself."""

    name: str  # bpe | superbpe | picky | parity | boundless
    transition_vocab: int | None  # superbpe: vocab size where stage two started
    stage_two_pattern: str | None  # superbpe: stage two's split pattern (a regex)
    threshold: float | None  # picky, boundless: the intersection-over-self threshold
    removals: int | None  # picky, boundless: tokens removed during training
    stage_two: dict | None  # superbpe: stage two's pretokens (unique, bytes, longest), merges
    global_merges: int | None  # parity: the first merges made as plain BPE
    dev: str | None  # parity: the development text's folder (null: FLORES-200 devtest)
    parity: dict | None  # parity: languages, merges per language, development tokens
    boundless: dict | None  # boundless: supermerges made, phrases (all, distinct)


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


def malformed(metrics: Mapping[str, Any]) -> str | None:
    """What is wrong with a metrics.json's typed sections, or None: a section that is not an
    object, or a field whose value is not of its declared type (a hand edit, a foreign tool).
    Readers skip such a run with one warning, so it cannot break the report of another.

    >>> malformed({"run": {"vocab_size": 500, "init_from": None}})
    >>> malformed({"run": {"vocab_size": "lots"}})
    "run.vocab_size is 'lots', not int"
    >>> malformed({"counts": [1, 2]})
    'counts is a list, not an object'
    """
    for name, section in SECTIONS.items():
        value = metrics.get(name)
        if value is None:
            continue
        if not isinstance(value, dict):
            return f"{name} is a {type(value).__name__}, not an object"
        hints = _hints(section)
        for field, v in value.items():
            hint = hints.get(field)
            if hint is not None and not _is_a(v, hint):
                return f"{name}.{field} is {str(v)[:40]!r}, not {_type_name(hint)}"
    return None


@functools.cache
def _hints(section: type) -> dict[str, Any]:
    """A section's field annotations, resolved once per process (a report reads many runs)."""
    return get_type_hints(section)


def _is_a(value: Any, hint: Any) -> bool:
    """Whether a JSON value fits a field's annotation (int, float, str, bool, list, dict,
    their `| None`); a float field takes an int, and no int field takes a bool."""
    args = get_args(hint)
    if get_origin(hint) in (Union, UnionType):
        return any(_is_a(value, a) for a in args)
    if hint is type(None):
        return value is None
    origin = get_origin(hint) or hint
    if origin is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if origin is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (list, dict, str, bool):
        return isinstance(value, origin)
    return True  # a type JSON cannot hold: nothing to check


def _type_name(hint: Any) -> str:
    """`int`, `int | None`, `list[str]`: the annotation as the message shows it."""
    return (
        getattr(hint, "__name__", None)
        if get_origin(hint) is None
        else str(hint).replace("typing.", "")
    )
