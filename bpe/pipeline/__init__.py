"""The training pipeline, `train_bpe`: plan, pretokenize a corpus once, run a trainer (and a
variant's hooks around it), and time the stages. (`bpe.trainers` holds the merge loops this
runs; this folder is the call that strings the stages together.)

What it does: validates every argument before any work (a bad trainer name or vocab size fails
in milliseconds, not after stage 1), counts pretokens in parallel (`bpe.pretokenize`), then
counts pairs and merges with a trainer (`bpe.trainers.run_merges`), and returns the vocab
and merges, or a `TrainResult` with stage timings and counts for the experiment harness.

What it does not do: write files (see `bpe.formats.gpt2_format`) or format reports.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bpe.corpus.files import DEFAULT_TEXT_FIELD, Corpus
from bpe.formats.gpt2_format import merges_sha256
from bpe.formats.init_from import Parent, parent_record
from bpe.formats.removals_json import as_removals
from bpe.pipeline.plan import RunPlan, TrainSpec, plan_run
from bpe.pretokenize import count_stage_one, log_stage_one
from bpe.pretokenize.cache import CacheInfo
from bpe.pretokenize.counting import PretokenCounts
from bpe.pretokenize.engines import ScannerInfo, load_scanner
from bpe.runs.stages import COMPILE, STAGE_TIMINGS, stage_label
from bpe.text.patterns import GPT2_PATTERN
from bpe.text.protect import protect_pattern
from bpe.tokenizer import Tokenizer
from bpe.trainers import VariantLoop, compile_trainer, run_merges
from bpe.trainers.common import Limits, TrainerOutput
from bpe.util.cputime import StageTimes, cpu_seconds
from bpe.util.progress import LOG_INTERVAL_S
from bpe.variants import MEMBERS, RunContext, Variant

logger = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """Everything one training call produced and measured.

    Stage timings (seconds), keyed as in `STAGE_TIMINGS`: `pretokenize` is stage 1, count
    pretokens (find the chunks, then read, decode and count them in workers); `merge` is
    stages 2 and 3, count pairs and select and merge (the trainer, from pretoken counts to
    merges). A compiling trainer (`compiled`) also records `compile` (`COMPILE`) between
    them: its machine code compiled, or loaded from Numba's cache (`compile_cached` says which);
    so does a run whose stage 1 uses the compiled pre-tokenizer (loaded before stage 1).
    """

    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    trainer: str
    vocab_size: int
    special_tokens: list[str]
    #: stage 1's facts (bytes, pretokens, unique pretokens, chunks, workers, start method,
    #: backend, scheduler), its counts already handed to the trainer
    pretokenized: PretokenCounts
    timings: dict[str, float] = field(default_factory=dict)
    #: CPU seconds of the same stages (this process's threads and its ended workers:
    #: `bpe.util.cputime`); over the wall time, the cores a stage kept busy
    cpu_timings: dict[str, float] = field(default_factory=dict)
    #: how often each merged pair occurred when it was merged (non-increasing in practice;
    #: a continued run's replayed parent merges count their pairs on this corpus)
    merge_counts: list[int] = field(default_factory=list)
    #: the split pattern (a regex string; `bpe.text.patterns.pattern_name` names it)
    pattern: str = GPT2_PATTERN
    #: the protected characters' regex (`bpe.text.protect`), or None
    protect: str | None = None
    #: the tokenizer this run continued from: path, merges sha256, vocab size, merges
    init_from: dict | None = None
    #: what the pretoken cache did (`bpe.pretokenize.cache.CacheInfo.as_dict`): status "hit",
    #: "miss", "rebuilt" or "off", key, path, hash/load/save seconds, file size. On a hit,
    #: `timings["pretokenize"]` is hashing plus loading, not a pre-tokenization speed.
    pretoken_cache: dict = field(default_factory=lambda: CacheInfo().as_dict())
    #: the input's sha256 when training hashed it (the cache key needs it), else None; the
    #: run's lineage reuses it instead of hashing the file again (for a corpus of several
    #: files or of records, the digest of its manifest)
    input_sha256: str | None = None
    #: the member of the BPE family trained, its defaults resolved (`bpe.variants`)
    variant: Variant = field(default_factory=Variant)
    #: what the variant measured about itself (metrics.json's `variant` section adds these to
    #: the parameters): empty for plain BPE
    variant_facts: dict = field(default_factory=dict)
    #: the input's files, formats and sha256 (`bpe.corpus.manifest.corpus_manifest`) when
    #: training hashed them, else None
    input_manifest: dict | None = None
    #: a compiling trainer or the compiled pre-tokenizer only: whether all their machine code
    #: came from the cache (True) or some was compiled in this call (False: the first run after
    #: an install or a change); else None
    compile_cached: bool | None = None
    #: PickyBPE's removals (`bpe.trainers.common.TrainerOutput.removals`); empty otherwise
    removals: list = field(default_factory=list)
    #: BoundlessBPE's supermerges (indices into `merges`); empty otherwise
    supermerges: list[int] = field(default_factory=list)
    #: the vocab ladder (`rungs=`): for each rung's vocab size, the seconds from the start of
    #: the merge stage (stages 2-3) to the merge that reached it; empty otherwise
    rung_seconds: dict[int, float] = field(default_factory=dict)
    #: a run cut from a ladder (`bpe.experiment.ladder`): metrics.json's `ladder` section
    ladder: dict | None = None
    #: the limits training ran under (`bpe.trainers.common.Limits.as_dict`: null is none)
    limits: dict = field(default_factory=lambda: Limits().as_dict())
    #: why training stopped short of `vocab_size` ("no_pairs_left", "min_frequency"), or None
    stopped_by: str | None = None

    def tokenizer(self) -> Tokenizer:
        """The trained tokenizer (its pattern, PickyBPE's removals, BoundlessBPE's
        supermerges)."""
        return Tokenizer(
            self.vocab,
            self.merges,
            list(self.special_tokens),
            pattern=self.pattern,
            removals=as_removals(self.removals),
            protect=self.protect,
            supermerges=self.supermerges,
        )

    @property
    def num_merges(self) -> int:
        return len(self.merges)

    @property
    def merges_sha256(self) -> str:
        return merges_sha256(self.merges)


def train_bpe_detailed(
    input_path: str | os.PathLike | Sequence[str | os.PathLike] | Corpus,
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    trainer: str = "heap",
    num_workers: int | None = None,
    progress: bool = False,
    pattern: str | None = None,
    init_from: str | os.PathLike | Parent | None = None,
    cache_dir: str | os.PathLike | None = None,
    backend: str = "processes",
    scheduler: str | None = None,
    log_interval: float = LOG_INTERVAL_S,
    variant: Variant | str | None = None,
    format: str = "auto",  # noqa: A002 - the config key's name
    text_field: str = DEFAULT_TEXT_FIELD,
    max_files: int | None = None,
    max_bytes: int | None = None,
    rungs: Sequence[int] = (),
    engine: str = "auto",
    max_token_length: int | None = None,
    min_frequency: int | None = None,
    seed_tokens: Sequence[str] = (),
    protect: Sequence[str] = (),
) -> TrainResult:
    """Train a byte-level BPE tokenizer on a corpus and report how it went.

    Args:
        input_path: the corpus: a UTF-8 text file (its bytes are used exactly as stored), a
            compressed one, JSON lines, parquet, a `datasets` save_to_disk directory, a
            directory, a glob, a list of these, or a resolved `Corpus`
            (`bpe.corpus.sources.resolve_source`; one with a `stop` is read up to it,
            as runs do to hold out an input's last documents). Each record is one document: the
            merges equal those of one text file holding the documents joined by a special
            token.
        vocab_size: total vocab size: special tokens + 256 bytes + merges.
        special_tokens: strings kept whole and never merged (e.g. ["<|endoftext|>"]).
        trainer: "naive", "indexed", "heap" or "compiled" (identical output, different
            speed; "compiled" needs the `compiled` extra).
        num_workers: pre-tokenization processes; None uses every available CPU.
        progress: show progress bars (pre-tokenization in MB with MB/s, merges with merges/s).
        pattern: the split pattern: "gpt2" (default, None), "cl100k", "o200k" or a regex.
        init_from: continue from this tokenizer (a run directory or GPT-2 style
            vocab.json/merges.txt directory, or a loaded `bpe.formats.init_from.Parent`): its merges
            are applied first and its ids kept, then merging goes on to `vocab_size`.
        cache_dir: keep pretoken counts here (`bpe.pretokenize.cache`): the first call on a
            corpus counts and saves them, later calls with the same bytes, pattern and
            specials load them. None (the default) caches nothing and writes no file.
        backend: pre-tokenization on "processes" (this machine, default) or "dask" (tasks on
            a dask.distributed cluster; identical merges; needs the `dask` extra).
        scheduler: dask only: a scheduler address such as "tcp://host:8786" (the input path
            must be visible to every worker); None starts a LocalCluster of `num_workers`.
        log_interval: seconds between INFO progress lines in every stage (MB done, MB/s and
            ETA; merges done, merges/s and ETA; a heartbeat where a stage has no ticks).
        variant: the member of the BPE family (`bpe.variants`): "bpe" (default,
            None), or a `Variant` with its parameters.
        format: "auto" (by suffix, then content), "text", "jsonl", "parquet" or "arrow".
        text_field: the JSON field or parquet/Arrow column holding each document's text.
        max_files: train on the first this many files of the corpus only.
        max_bytes: train on the corpus's first whole files, up to this many bytes on disk.
        rungs: smaller vocab sizes to time on the way (the vocab ladder): the result's
            `rung_seconds` says when the merge stage reached each (plain BPE from scratch).
        engine: how stage 1 splits text (`bpe.pretokenize.engines`): "auto" (the compiled
            scanner for trainer "compiled" with GPT-2's pattern when Numba is installed, else
            `regex`), "regex", or "compiled" (GPT-2's pattern only; needs Numba). The counts,
            and so the merges, are the same; Numba's load time moves to `timings["compile"]`.
        max_token_length: the longest token (in bytes) a merge may make: a longer one is
            never made and the next best pair is merged instead (1: no merge at all). None:
            no limit (`bpe.trainers.common.Limits`; every trainer makes the same merges).
        min_frequency: stop once the best pair that may be merged occurs fewer times (an
            early stop, logged and recorded as such). None: no limit.
        seed_tokens: strings placed in the vocab before the first merge (`bpe.pipeline.seeds`):
            the merges that build each come first, and later merges may build on them.
        protect: classes of characters that never merge with anything (`bpe.text.protect`),
            e.g. ["\\p{N}"]: each digit stays its own token.

    Raises:
        FileNotFoundError: input_path does not exist.
        ValueError: empty or non-UTF-8 file, vocab_size too small, bad special tokens,
            unknown trainer or backend.
        ImportError: the trainer needs a package that is not installed ("compiled" without
            Numba: the message says `pip install 'bpe-lab[compiled]'`).
        ConnectionError: the Dask scheduler could not be reached.
    """
    return train_planned(
        plan_run(
            TrainSpec(
                input_path,
                vocab_size,
                special_tokens,
                trainer=trainer,
                num_workers=num_workers,
                progress=progress,
                pattern=pattern,
                init_from=init_from,
                cache_dir=cache_dir,
                backend=backend,
                scheduler=scheduler,
                log_interval=log_interval,
                variant=variant,
                format=format,
                text_field=text_field,
                max_files=max_files,
                max_bytes=max_bytes,
                rungs=tuple(rungs),
                engine=engine,
                seed_tokens=tuple(seed_tokens),
                protect=tuple(protect),
                limits=Limits(max_token_length=max_token_length, min_frequency=min_frequency),
            )
        )
    )


def train_planned(run: RunPlan) -> TrainResult:
    """Train what `plan_run` checked and resolved (`train_bpe_detailed` is this with the
    plan made from its keywords); nothing is checked or loaded again."""
    spec = run.spec
    timings = StageTimes()
    scanner = _load_scanner(run.engine, timings)
    counted, cache, manifest = _stage_one(run, timings)
    compile_cached = _compile_stage(spec.trainer, timings, scanner)
    reached: dict[int, float] = {}
    member = MEMBERS[run.variant.name]
    context = RunContext(
        corpus=run.corpus,
        specials=run.specials,
        pattern=run.pattern,
        trainer=spec.trainer,
        vocab_size=spec.vocab_size,
        cache_dir=spec.cache_dir,
        stage_one_options=spec.stage_one_options(),
        timings=timings,
        merge_options={
            "progress": spec.progress,
            "log_interval": spec.log_interval,
            "limits": spec.limits,
        },
    )
    # the variant's hooks around the trainer's merge stage (`bpe.variants.Member`)
    prepared = None if member.prepare is None else member.prepare(run.variant, context, counted)
    loop = None if member.loop is None else member.loop(run.variant, prepared)
    output = _merge_stage(run, counted, timings, reached=reached, context=context, variant=loop)
    facts, final_pattern = {}, run.pattern
    if member.after is not None:
        output, facts, final_pattern = member.after(run.variant, context, output, counted, prepared)
    return _result(
        run,
        output,
        facts,
        pattern=final_pattern,
        counted=counted,
        timings=timings,
        cache=cache,
        manifest=manifest,
        compile_cached=compile_cached,
        rung_seconds={
            int(v): reached.get(m, timings["merge"])
            for v, m in zip(spec.rungs, run.marks, strict=True)
        },
    )


def _result(
    run: RunPlan,
    output: TrainerOutput,
    facts: dict,
    *,
    pattern: str,
    counted: PretokenCounts,
    timings: StageTimes,
    cache: CacheInfo,
    manifest: dict | None,
    compile_cached: bool | None,
    rung_seconds: dict[int, float],
) -> TrainResult:
    """The `TrainResult` of a finished training: its output, and what each stage measured."""
    logger.info(
        "%s with %s: %d merges in %.3f s",
        stage_label(*STAGE_TIMINGS["merge"]),
        run.spec.trainer,
        len(output.merges),
        timings["merge"],
    )
    return TrainResult(
        vocab=output.vocab,
        merges=output.merges,
        trainer=run.spec.trainer,
        vocab_size=run.spec.vocab_size,
        special_tokens=run.specials,
        pretokenized=counted,
        timings=dict(timings),
        cpu_timings=dict(timings.cpu),
        merge_counts=output.merge_counts,
        pattern=pattern,
        protect=protect_pattern(run.spec.protect),
        # a seeded run's parent is its seeds' merges, no tokenizer it continued
        init_from=None if run.spec.init_from is None else parent_record(run.parent),
        pretoken_cache=cache.as_dict(),
        input_sha256=None if manifest is None else manifest["sha256"],
        input_manifest=manifest,
        variant=run.variant,
        removals=output.removals,
        supermerges=output.supermerges,
        limits=run.spec.limits.as_dict(),
        stopped_by=output.stopped_by,
        variant_facts=facts,
        compile_cached=compile_cached,
        rung_seconds=rung_seconds,
    )


def _merge_stage(
    run: RunPlan,
    counted: PretokenCounts,
    timings: StageTimes,
    *,
    reached: dict[int, float],
    context: RunContext,
    variant: VariantLoop | None,
) -> TrainerOutput:
    """Stages 2-3 to the stage-one vocab size, timed as "merge" (with the variant's own loop
    when it has one); `reached` gets the time each ladder mark was reached."""
    with timings.timed("merge"):
        # the counts are handed over, not kept: the trainer frees them once it has built its words
        return run_merges(
            run.spec.trainer,
            counted.take_counts(),
            run.stage_one_size,
            run.specials,
            parent=run.parent,
            variant=variant,
            marks=run.marks,
            reached=reached,
            **context.merge_options,
        )


def _stage_one(run: RunPlan, timings: StageTimes) -> tuple[PretokenCounts, CacheInfo, dict | None]:
    """Stage 1, timed and logged: the corpus's pretoken counts (through the cache when there
    is one), what the cache did, and the manifest when the cache key needed it."""
    with timings.timed("pretokenize"):
        counted, cache, manifest = count_stage_one(
            run.corpus,
            run.specials,
            pattern=run.pattern,
            cache_dir=run.spec.cache_dir,
            engine=run.engine,
            **run.spec.stage_one_options(),
        )
    log_stage_one(counted, cache, run.pattern, timings["pretokenize"], run.corpus)
    if not counted.counts:  # one rule for every container: an all-empty parquet fails alike
        raise ValueError(
            f"the corpus {run.corpus.source!r} holds no text outside its special tokens, so BPE "
            "has nothing to learn merges from; check dataset.path (and dataset.text_field)"
        )
    return counted, cache, manifest


def _load_scanner(engine: str, timings: StageTimes) -> ScannerInfo | None:
    """The compiled pre-tokenizer, loaded before stage 1 so that its load is timed as
    `COMPILE`: importing Numba and loading (or compiling) its machine code is the fixed cost
    of a compiled run, not counting speed. None with the regex engine, or when this process
    loaded it before."""
    cpu = cpu_seconds()
    info = load_scanner() if engine == "compiled" else None
    if info is None or not info.now:
        return None
    timings.add(COMPILE, info.seconds, cpu_seconds() - cpu)
    logger.info(
        "compiled pre-tokenizer: %s in %.3f s (timed as compile, not as stage 1)",
        "Numba imported and the scanner loaded from its cache"
        if info.cached
        else "scanner compiled (the first run after an install or a change)",
        info.seconds,
    )
    return info


def _compile_stage(trainer: str, timings: StageTimes, scanner: ScannerInfo | None) -> bool | None:
    """A compiling trainer's compile step, logged, and timed as `COMPILE` with the scanner's
    load (after stage 1, the order stages run). Returns whether every compiled piece came from
    Numba's cache; None if nothing was compiled."""
    if scanner is not None:  # timed when it was loaded; listed here, in the order stages run
        timings[COMPILE] = timings.pop(COMPILE)
    t0, cpu = time.perf_counter(), cpu_seconds()
    info = compile_trainer(trainer)
    if info is not None:
        timings.add(COMPILE, time.perf_counter() - t0, cpu_seconds() - cpu)
        logger.info(
            "%s: %s in %.3f s (timed apart from the merge stage)",
            trainer,
            "machine code loaded from Numba's cache"
            if info.cached
            else "merge loop compiled (the first run after an install or a change: later runs "
            "load it from the cache)",
            time.perf_counter() - t0,
        )
    known = [c.cached for c in (scanner, info) if c is not None]
    return all(known) if known else None


def train_bpe(
    input_path: str | os.PathLike | Sequence[str | os.PathLike] | Corpus,
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    **options: Any,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train byte-level BPE on a corpus (a file, folder, glob, list...); returns `(vocab, merges)`.

    The `(vocab, merges)` view of `train_bpe_detailed`, which takes the same arguments: the
    keyword options (trainer, num_workers, progress, pattern, init_from, cache_dir, backend,
    scheduler, log_interval, variant, format, text_field, max_files, max_bytes, rungs, engine,
    max_token_length, min_frequency, seed_tokens, protect) are forwarded as given
    (tests/test_docs.py checks this list against train_bpe_detailed's keywords).

    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "corpus.txt"
    ...     _ = path.write_text("low lower<|endoftext|>lowest low", encoding="utf-8")
    ...     vocab, merges = train_bpe(path, 260, ["<|endoftext|>"], num_workers=1)
    >>> merges
    [(b'o', b'w'), (b'l', b'ow'), (b'low', b'e')]
    >>> vocab[0], vocab[257], len(vocab)
    (b'<|endoftext|>', b'ow', 260)
    """
    result = train_bpe_detailed(input_path, vocab_size, special_tokens, **options)
    return result.vocab, result.merges
