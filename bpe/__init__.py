"""bpe-lab: byte-level BPE training (GPT-2 style) with three comparable trainers.

Where each stage lives (stages numbered in `bpe.trainers.STAGES`):

    stage 1  count pretokens    bpe.pretokenize   split pattern, counting pretokens
                                bpe.patterns      the named split patterns (gpt2, cl100k, o200k)
                                bpe.chunks        the chunk pipeline: plan chunks, map over them
                                bpe.pretoken_cache  counts saved by input sha256 + pattern +
                                                  specials, loaded by later runs (cache_dir=)
                                bpe.dask_backend  the same chunks as tasks on a Dask cluster
    stage 2  count pairs        bpe.trainers      registry (TRAINERS) and train(): prepare ->
    stage 3  select and merge                     merge_loop -> finish
                                  .naive / .indexed / .heap   one merge_loop each
                                  .common         merge state, THE candidate order
                                  .parent         continue from a parent: its merges replayed
    all three, timed            bpe.training      train_bpe, train_bpe_detailed, TrainResult
                                bpe.init_from     load the tokenizer a run continues from
    using the result            bpe.tokenizer     Tokenizer: encode, decode
                                bpe.gpt2_format   vocab.json and merges.txt (GPT-2 format)
                                bpe.tokenizer_json  special tokens and pattern of a tokenizer.json
    shared                      bpe._io           atomic writes, project paths
    configuring runs            bpe.config        typed schema of bpe-train's config (values:
                                                  bpe/conf/; bundled samples: bpe/data/)
                                bpe.train         the bpe-train command line
    measuring, running          bpe.measures      compression, throughput, token kinds
                                bpe.experiment    run directories, metrics, profilers
    reading runs                bpe.analysis      ANALYSIS.md, SWEEP.md, reports

Public API (see README.md):

    from bpe import train_bpe, Tokenizer
    vocab, merges = train_bpe(path, vocab_size, ["<|endoftext|>"], trainer="heap")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bpe.tokenizer import Tokenizer
    from bpe.training import TrainResult, train_bpe, train_bpe_detailed

__all__ = ["Tokenizer", "TrainResult", "train_bpe", "train_bpe_detailed"]
__version__ = "0.1.0"

# The public names load on first use (PEP 562), not with the package: a pre-tokenization
# worker imports `bpe.pretokenize`, hence this file, and would otherwise also load the trainers,
# the tokenizer and numpy it never uses. Measured: a worker started by forkserver or spawn
# held 40 MB after its imports with them, 18 MB without; a 2-worker run's stage-1 memory
# (proportional set size of the process tree) drops by about twice the difference.
_PUBLIC = {
    "Tokenizer": "bpe.tokenizer",
    "TrainResult": "bpe.training",
    "train_bpe": "bpe.training",
    "train_bpe_detailed": "bpe.training",
}


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'bpe' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
