"""`bpe-compare DIR DIR ... --out OUT`: COMPARE.md for two or more tokenizers.

The command line only: `bpe.analysis.compare.report.write_compare` does the work (and its docstring
says what the report holds). Exit status 0, or 2 with one error line on bad input.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from bpe.analysis.compare.report import write_compare
from bpe.cli import new_parser, run_command

logger = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        prog="bpe-compare",
        description="Compare vocabularies (run dirs or GPT-2 style vocab.json + merges.txt "
        "dirs); writes OUT/COMPARE.md and OUT/figures/compare_topk_overlap.png",
    )
    parser.add_argument("dirs", nargs="+", type=Path, help="two or more directories")
    parser.add_argument("--out", type=Path, default=Path("."), help="output dir (default: .)")
    parser.add_argument("--labels", nargs="+", help="names for the sides, one per directory")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace a COMPARE.md in --out that bpe-compare did not write (a previous "
        "comparison is replaced without it; a compared directory's files never are)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def work() -> None:
        written = write_compare(args.dirs, args.out, labels=args.labels, force=args.force)
        logger.info("wrote %s", written)

    return run_command(work, logger)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
