"""`bpe-prune RUN_DIR --vocab-size N --out DIR`: a run's vocabulary without its least-used tokens.

The command line only: `bpe.experiment.pruning.prune_run` prunes and measures,
`bpe.analysis.compare.prune_report` writes PRUNE.md. DIR receives vocab.json, merges.txt,
removals.json (what `Tokenizer.from_pretrained` loads), prune.json and PRUNE.md. Nothing is
written over the run's own files, nor over files in DIR that bpe-prune did not write unless
`--force`. Exit status 0, or 2 with one error line on bad input.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from bpe.analysis.compare.prune_report import write_prune_report
from bpe.cli import new_parser, run_command
from bpe.experiment.pruning import prune_run, write_pruned
from bpe.runs.layout import MERGES_FILE, PRUNE_FILE, PRUNE_RECORD, REMOVALS_FILE, VOCAB_FILE
from bpe.util.io import check_writable, files_in

logger = logging.getLogger(__name__)

#: What bpe-prune writes in its --out directory.
WRITTEN = (VOCAB_FILE, MERGES_FILE, REMOVALS_FILE, PRUNE_RECORD, PRUNE_FILE)


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        prog="bpe-prune",
        description="Remove the learned tokens a run's text uses least as themselves, down to "
        "--vocab-size entries; writes a tokenizer directory with prune.json and PRUNE.md",
    )
    parser.add_argument("run_dir", type=Path, help="a run directory (plain BPE)")
    parser.add_argument("--vocab-size", type=int, required=True, help="entries to keep")
    parser.add_argument("--out", type=Path, required=True, help="the output directory")
    parser.add_argument(
        "--train-bytes",
        type=int,
        default=None,
        help="bytes of the training input to count usage on and fit the bits-per-byte model "
        "(default: the analysis default)",
    )
    parser.add_argument(
        "--max-docs", type=int, default=None, help="held-out documents (default: 200)"
    )
    parser.add_argument(
        "--force", action="store_true", help="replace files in --out bpe-prune did not write"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def work() -> None:
        if not args.run_dir.is_dir():
            raise FileNotFoundError(f"run directory {str(args.run_dir)!r} does not exist")
        ours = (args.out / PRUNE_RECORD).is_file()
        for name in WRITTEN:
            check_writable(
                args.out / name,
                what="--out",
                inputs=files_in(args.run_dir),
                ours=ours,
                force=args.force,
            )
        pruned, record = prune_run(
            args.run_dir, args.vocab_size, train_bytes=args.train_bytes, max_docs=args.max_docs
        )
        write_pruned(pruned, record, args.out)
        logger.info("wrote %s", write_prune_report(args.out))

    return run_command(work, logger)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
