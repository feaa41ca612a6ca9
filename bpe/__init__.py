"""bpe-lab: byte-level BPE training (GPT-2 style) with comparable trainers.

The tree is the pipeline: one folder per layer, imports pointing down the table in
`tests/test_layers.py` (`LAYERS`). Where each stage lives (stages numbered in
`bpe.trainers.STAGES`):

    stage 1  count pretokens    bpe.pretokenize   split pattern, special tokens, counting
                                  .patterns       the named split patterns (gpt2, cl100k, o200k)
                                  .chunks         plan chunks at safe cuts, map over them
                                  .cache          counts saved by input sha256 + settings
                                  .dask_backend   the same chunks as tasks on a Dask cluster
                                  .datasets       named datasets (bpe/conf/dataset) and files
    stage 2  count pairs        bpe.trainers      registry (TRAINERS) and train(): prepare ->
    stage 3  select and merge                     merge_loop -> finish
                                  .naive / .indexed / .heap   one merge_loop each
                                  .pair_index     pair counts + pair -> words (indexed, heap)
                                  .common         merge state, THE candidate order
                                  .parent         continue from a parent: its merges replayed
    all three, timed            bpe.training      train_bpe, train_bpe_detailed, TrainResult
    using the result            bpe.tokenizer     Tokenizer: encode, decode
                                  .gpt2_format    vocab.json and merges.txt (GPT-2 format)
                                bpe.formats       tokenizer.json, tiktoken, tokenizer dirs,
                                                  the parent of a continued run (init_from)
                                bpe.encode        corpus -> .npy of ids, with lineage sidecars
    measuring                   bpe.measures      compression, throughput, efficiency, token
                                                  kinds; .vocab_stats: under-trained tokens
    running                     bpe.experiment    run directories, config schema, metrics,
                                                  memory, profilers
                                bpe.runs          the run directory's contract (liveness)
    reading runs                bpe.analysis      ANALYSIS.md, SWEEP.md, COMPARE.md, reports
    commands                    bpe.cli           bpe-train, bpe-report, bpe-show
    shared                      bpe.util          atomic writes, project paths, progress

Public API (see README.md):

    from bpe import train_bpe, Tokenizer
    vocab, merges = train_bpe(path, vocab_size, ["<|endoftext|>"], trainer="heap")

Modules that moved into the folders above still import under their old names
(`bpe.gpt2_format`, `bpe.chunks`, ...: `MOVED`), as the same module objects.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
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


#: Old module paths (before the layers became folders) -> where the module lives now.
MOVED = {
    "bpe._io": "bpe.util.io",
    "bpe.progress": "bpe.util.progress",
    "bpe.chunks": "bpe.pretokenize.chunks",
    "bpe.patterns": "bpe.pretokenize.patterns",
    "bpe.pretoken_cache": "bpe.pretokenize.cache",
    "bpe.dask_backend": "bpe.pretokenize.dask_backend",
    "bpe.datasets": "bpe.pretokenize.datasets",
    "bpe.gpt2_format": "bpe.tokenizer.gpt2_format",
    "bpe.tokenizer_json": "bpe.formats.tokenizer_json",
    "bpe.exports": "bpe.formats.exports",
    "bpe.init_from": "bpe.formats.init_from",
    "bpe.encode_dataset": "bpe.encode.npy",
    "bpe.lineage": "bpe.encode.lineage",
    "bpe.vocab_stats": "bpe.measures.vocab_stats",
    "bpe.liveness": "bpe.runs.liveness",
    "bpe.config": "bpe.experiment.config",
    "bpe.train": "bpe.cli.train",
    "bpe.show": "bpe.cli.show",
    "bpe.analysis.cli": "bpe.cli.report",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path as the module that now lives elsewhere (`MOVED`).

    subtle: `exec_module` puts the real module under the old name in `sys.modules`; the import
    system returns whatever that entry holds, so `bpe.gpt2_format is bpe.tokenizer.gpt2_format`.
    """

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return None  # the default module, replaced in exec_module

    def exec_module(self, module) -> None:
        sys.modules[module.__name__] = importlib.import_module(MOVED[module.__name__])


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())
