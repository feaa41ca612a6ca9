"""Analysis of experiment runs: loading them, figures, and the generated Markdown reports.

Everything here reads run directories after the fact, and never imports `bpe.experiment`:
training code never formats Markdown, and `bpe.cli.train` hands `run_report.write_run_report` to the
run as its report writer. `pairwise_overlap` turns a `load_runs` frame into a square frame of
vocabulary overlaps (a heat map across a sweep).
"""

from bpe.analysis.compare import pairwise_overlap
from bpe.analysis.loader import load_runs

__all__ = ["load_runs", "pairwise_overlap"]
