"""Analysis of experiment runs: loading them, figures, and the generated Markdown reports.

Everything here reads run directories after the fact; training code never formats Markdown.
"""

from bpe.analysis.loader import load_runs

__all__ = ["load_runs"]
