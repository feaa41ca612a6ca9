"""Analysis of experiment runs: loading them, figures, and the generated Markdown reports.

Everything here reads run directories after the fact, and never imports `bpe.experiment`:
training code never formats Markdown, and `bpe.train` hands `run_report.write_run_report` to the
run as its report writer.
"""

from bpe.analysis.loader import load_runs

__all__ = ["load_runs"]
