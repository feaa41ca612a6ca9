"""bpe-lab: byte-level BPE training (GPT-2 style) with comparable trainers.

The tree is the pipeline: one folder per layer, imports pointing one way (the table `LAYERS` in
`tests/test_layers.py`). Every module, once (`tests/test_layers.py` checks this map against the
tree); stages are numbered in `bpe.runs.stages.STAGES`:

    bpe.text                    text rules, pure: no file, process or corpus
      .patterns                 the named split patterns (gpt2, cl100k, o200k), custom ones checked
      .specials                 special tokens: the validity rule, the regex, splitting on them
      .pretokens                the pretokens of a text (an exact `re` translation when it can)
      .cuts                     where a text may be cut: no pretoken spans it (proved per pattern)
      .gpt2_scanner             GPT-2's pattern as a Numba state machine; a pretoken's hash key
      .protect                  protected characters: each its own pretoken, never merged
    bpe.corpus                  corpora of any format: files, folders, globs, the Hub
      .files                    InputFile, Corpus, Stop, Part, Piece: what a corpus is
      .sources                  resolve_source: what a user names, as typed files
      .listing                  the files a folder or glob names: each real file once, skips said
      .hub                      hf: and hf-stream: sources, every network step with a deadline
      .compression              compressed streams and strict UTF-8, errors naming offsets
      .chunks                   a plain text file cut at safe places
      .formats                  the format registry FORMATS: one module per format
      .formats.base             what a format provides (Format), shared defaults
      .formats.records          what record formats share: a record's text, a column
      .formats.text             text, documents separated by a special token
      .formats.jsonl            JSON lines
      .formats.parquet          parquet, by runs of row groups
      .formats.arrow            Arrow IPC files (datasets' save_to_disk)
      .formats.stream           a Hub dataset streamed with datasets
      .parts                    plan_parts, plan_work (the workers, once), read_part
      .documents                all documents, the first, the last, the held-out tail
      .manifest                 a corpus's identity: every file's sha256
      .datasets                 named datasets (bpe/conf/dataset) and input files
      .flores                   FLORES-200 as bundled: its languages, splits and the parts we use
    bpe.pretokenize             stage 1, one pipeline: a corpus's parts counted in processes or Dask
      .counting                 pretoken counts of a text or a part's pieces; PretokenCounts
      .engines                  regex or the compiled scanner (GPT-2's pattern, Numba extra)
      .scan_kernels             the scanner's Numba kernel: pretoken counts in a hash table
      .cache                    counts saved by input sha256 + settings, loaded by later runs
      .dask_backend             the same parts as tasks on a Dask cluster
    bpe.trainers                stages 2-3: the registry TRAINERS and learn_merges (prepare, loop)
      .naive                    full recount per merge: the readable reference
      .indexed                  incremental pair counts, a scan for the best pair
      .heap                     the same counts, a lazily invalidated priority queue
      .compiled                 heap's algorithm over flat arrays, compiled (the Numba extra)
      .compiled_kernels         its Numba kernels: stages 2-3 in machine code
      .pair_index               pair counts + pair -> words, shared by indexed and heap
      .common                   the merge state and THE candidate order
      .parent                   continued training: a parent's merges replayed first
    bpe.variants                the BPE family: MEMBERS, each variant's hooks around a trainer
      .base                     Variant (name, parameters, checks), Member, RunContext
      .picky                    PickyBPE: merges that remove the parents they used up
      .superbpe                 SuperBPE's stage two: merges across words, after stage one
      .parity                   parity-aware BPE: each merge serves the worst-compressed language
      .languages                parity-aware BPE's inputs: counts per language, development text
      .boundless                BoundlessBPE: PickyBPE plus supermerges of whole pretokens
    bpe.pipeline                train_bpe, train_bpe_detailed, TrainResult: stages 1-3, timed
      .plan                     TrainSpec (one call's options, typed) and plan_run, its one check
      .seeds                    seed tokens: their merges first, as the parent of a run
    bpe.tokenizer               Tokenizer: encode, decode, streaming
      .merging                  BPE of one pretoken: the list scan and the linked list
      .linked                   a pretoken's tokens as a linked list: merge, split, in order
      .segmentation             other cuts of a pretoken: the longest token first, the fewest tokens
      .compiled_segments        those cuts of a batch of pretokens, Numba-compiled (a trie)
      .cold_path                the pretoken cache, and which misses the compiled kernel merges
      .streaming                encode_iterable: a stream of text encoded in bounded memory
      .dropout                  BPE-dropout: merging with candidates skipped at random
      .compiled                 the cold path: BPE of a batch of new pretokens, Numba-compiled
      .compiled_encode          a whole text in one kernel call: split, cache and merge (GPT-2's)
      .compiled_dropout         BPE-dropout of a whole text in one kernel call, Python's coins
      .removals                 PickyBPE's removals at encode time: replaying the history
      .compiled_replay          that replay inside the whole-text kernel, Numba-compiled
      .superwords               BoundlessBPE's supermerges at encode time: whole pretokens joined
      .pruning                  a vocab without the tokens text uses least as themselves
      .warm                     each way of encoding run once, tiny: its kernels compiled
    bpe.formats                 the files a tokenizer is read from and saved as
      .gpt2_format              vocab.json and merges.txt (GPT-2 format), merges_sha256
      .removals_json            removals.json (PickyBPE, BoundlessBPE): the record and its check
      .pretrained               opening a tokenizer directory: one rule for its specials
      .manifest                 a tokenizer directory as one whole: its files' sha256, checked
      .exports                  tokenizer.json + HF configs, tiktoken, save_pretrained
      .tokenizer_json           the special tokens and pattern a tokenizer.json records
      .init_from                the tokenizer a run continues from (init_from=)
    bpe.encode                  corpus -> .npy of ids (bpe-encode's library)
      .npy                      parallel encoding of a corpus into a .npy of ids
      .npy_file                 the .npy written atomically; where it may go (check_output)
      .lineage                  the .npy.json sidecar: tokenizer, input, code version
    bpe.measures                compression, throughput, efficiency, token kinds
      .vocab_stats              token counts on text, under-trained tokens
      .ngram                    bits per byte: a Kneser-Ney n-gram model over token ids
      .languages                token premiums on FLORES-200 (Petrov et al.'s protocol), Gini
    bpe.runs                    the run directory's contract, read by writer and readers
      .layout                   every file name in and around a run directory
      .schema                   the metrics.json keys readers use, and how to read them
      .sections                 the metrics.json sections the runner writes as typed records
      .settings                 the defaults of a run's settings, which readers fall back on
      .saved_config             a run's saved config (.hydra/config.yaml), read for every reader
      .upgrade                  read_metrics: older runs' metrics.json in today's schema
      .stages                   stage names and the trainers' order
      .command                  the command that reruns a run
      .liveness                 who writes a run and whether it still lives (crashed)
      .search                   a search's record in its sweep directory (search.json)
    bpe.evaluation              how a trained tokenizer is measured, for runs and comparisons
      .evaluate                 measures a trained tokenizer for metrics.json
      .measured                 the documents each side of a run is measured on
      .segmentations            the vocab cut three ways on held-out text, each measured
      .usage                    token usage and under-trained tokens of a run
    bpe.experiment              writes run directories (bpe-train's work)
      .runner                   run_experiment: open, record, train, save, analyse, report
      .inputs                   train_spec (config -> TrainSpec), validate (planned once), held-out
      .records                  what metrics.json says of the run besides its measures
      .launching                how the run was launched: Hydra's directory, the launcher
      .ladder                   a vocab sweep: one training, every rung cut from its prefix
      .config                   the typed schema of bpe-train's config
      .config_checks            what only the config says: ranges, names, unknown keys
      .rundir                   run directory names, exclusive creation, the latest link
      .metrics                  metrics.json, written atomically, status last
      .pruning                  bpe-prune's work: prune a run's vocab, measure before and after
      .memory                   process-tree memory sampled per stage
      .compile_ahead            the analysis' kernels compiled in a helper while training runs
      .environment              git, packages, host: environment.json
      .profilers                scalene and cProfile around training
      .scalene_target           what a profiled child process runs
    bpe.analysis                reads run directories only: one subpackage per document
      .loader                   load_runs: every run as one pandas row
      .runs_table               the runs' tidy table written as .csv or .parquet
      .figures                  matplotlib figures
      .markdown                 Markdown tables and number formatting
      .vocab_sections           efficiency, under-trained and glossary sections the reports share
      .language_sections        ANALYSIS.md's and COMPARE.md's languages sections
      .run                      ANALYSIS.md of one run
      .run.report               gather, render, write
      .run.facts                what it is made from: a run's files, its siblings
      .run.summary              its first lines: the run's headline numbers
      .run.sections             its sections about the run: time, memory, profile
      .run.variant_sections     its lines on what a BPE-family variant did
      .run.sibling_sections     its section comparing runs on the same input
      .run.token_sections       its sections about the tokenizer: tokens, compression
      .sweep                    SWEEP.md of a sweep
      .sweep.report             gather, render, write
      .sweep.facts              what it is made from: the jobs, grouped, their figures
      .sweep.sections           its sections: jobs, notes, ladder, findings, memory
      .sweep.search             SWEEP.md of a search: its trials ranked best first
      .compare                  COMPARE.md and the documents that set tokenizers side by side
      .compare.measures         two or more tokenizers compared: the measures
      .compare.sides            a comparison's sides: run or GPT-2 directories, their labels
      .compare.report           COMPARE.md: the comparison rendered and written
      .compare.prune_report     PRUNE.md: what bpe-prune removed and changed
      .compare.parity_report    PARITY.md: token premiums per language and tokenizer
      .pages                    the pages of reports/
      .pages.index              reports/: its index, which runs, never over others' reports
      .pages.plain_bpe          the pages on plain BPE: trainers.md, datasets.md
      .pages.registry           the pages of their own sweeps (bpe-report --page): PAGES
      .pages.variants           reports/variants.md: the BPE family side by side
      .pages.languages          reports/languages.md: plain and parity-aware BPE on FLORES-200
      .pages.segmentation       reports/segmentation.md: segmentation, limits, pruning
      .pages.vocabularies       reports/vocabularies.md: vocabulary overlap across runs
      .pages.data_curve         the data curve: runs on prefixes of one input, compared
    bpe.tracking                experiment trackers: run directories logged, never read back
      .to_mlflow                MLflow: a run or a sweep logged to a tracking store
      .to_wandb                 W&B: the same record written as offline runs, synced later
      .callback                 the Hydra callback both trackers share (logs each ended job)
    bpe.cli                     the console scripts
      .train                    bpe-train (a Hydra app)
      .report                   bpe-report
      .show                     bpe-show
      .encode                   bpe-encode
      .compare                  bpe-compare
      .prune                    bpe-prune
      .parity                   bpe-parity
      .sweep_process            a sweep as a process: its outcome, its lock, SWEEP.md's callback
    bpe.util                    shared plumbing, no BPE
      .io                       atomic writes, project paths, safe path names
      .progress                 progress lines and bars
      .workers                  how many worker processes, and how they start
      .pool                     the process pool that maps a function over chunks, never hangs
      .stats                    small statistics: the Gini coefficient
      .cputime                  wall and CPU seconds per stage (threads and ended workers)
      .jit_cache                Numba's njit, its cache cleared when any kernel's source changes
      .kernel_sources           which modules hold cached kernels, and their sources' hash
      .compile_clock            Numba's compiles timed and announced; a compile step's record
      .machine                  the machine, interpreter and load a number was measured on
      .interrupts               SIGTERM raised like Ctrl-C, so cleanup runs

Public API (see README.md):

    from bpe import train_bpe, Tokenizer
    vocab, merges = train_bpe(path, vocab_size, ["<|endoftext|>"], trainer="heap")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bpe.pipeline import TrainResult, train_bpe, train_bpe_detailed
    from bpe.tokenizer import Tokenizer

__all__ = ["Tokenizer", "TrainResult", "train_bpe", "train_bpe_detailed"]
__version__ = "0.1.0"

# The public names load on first use (PEP 562), not with the package: a pre-tokenization
# worker imports `bpe.pretokenize`, hence this file, and would otherwise also load the trainers,
# the tokenizer and numpy it never uses. Measured: a worker started by forkserver or spawn
# held 40 MB after its imports with them, 18 MB without; a 2-worker run's stage-1 memory
# (proportional set size of the process tree) drops by about twice the difference.
_PUBLIC = {
    "Tokenizer": "bpe.tokenizer",
    "TrainResult": "bpe.pipeline",
    "train_bpe": "bpe.pipeline",
    "train_bpe_detailed": "bpe.pipeline",
}


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'bpe' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
