"""`bpe-train`: train a tokenizer on a text file and write `vocab.json` + `merges.txt`.

A thin command line over `bpe.train_bpe_detailed` and `bpe.gpt2_format`; all the work lives in
the library. (The experiment harness turns this entry point into a Hydra app.)
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from bpe.gpt2_format import save_tokenizer_files
from bpe.training import train_bpe_detailed

logger = logging.getLogger("bpe.train")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bpe-train", description=__doc__.splitlines()[0])
    parser.add_argument("input", type=Path, help="UTF-8 text file to train on")
    parser.add_argument("--vocab-size", type=int, default=1000)
    parser.add_argument(
        "--special-token",
        action="append",
        default=None,
        help="special token (repeatable); default: <|endoftext|>",
    )
    parser.add_argument("--trainer", default="heap", help="naive | indexed | heap")
    parser.add_argument("--num-workers", type=int, default=None)
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--no-progress", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    specials = args.special_token if args.special_token is not None else ["<|endoftext|>"]
    try:
        result = train_bpe_detailed(
            args.input,
            args.vocab_size,
            specials,
            trainer=args.trainer,
            num_workers=args.num_workers,
            progress=not args.no_progress,
        )
    except (FileNotFoundError, PermissionError, ValueError) as err:
        logger.error("%s", err)
        return 2
    vocab_path, merges_path = save_tokenizer_files(result.vocab, result.merges, args.out)
    logger.info(
        "wrote %s and %s (%d merges, sha256 %s)",
        vocab_path,
        merges_path,
        result.num_merges,
        result.merges_sha256[:16],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
