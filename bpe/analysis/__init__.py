"""Analysis of experiment runs: loading them, figures, and the generated Markdown reports.

Everything here reads run directories after the fact, and never imports `bpe.experiment`:
training code never formats Markdown, and `bpe.cli.train` hands `run.report.write_run_report` to the
run as its report writer. `pairwise_overlap` turns a `load_runs` frame into a square frame of
vocabulary overlaps (a heat map across a sweep).
"""

import importlib

__all__ = ["load_runs", "pairwise_overlap", "tidy"]

# Loaded on first use (PEP 562): importing one module of this package (`markdown`, say) then
# runs only that module, not `compare` and the tokenizer stack behind it.
_PUBLIC = {
    "load_runs": "bpe.analysis.loader",
    "tidy": "bpe.analysis.loader",
    "pairwise_overlap": "bpe.analysis.compare.measures",
}


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'bpe.analysis' has no attribute {name!r}")
