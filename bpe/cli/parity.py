"""`bpe-parity TOKENIZER... --out DIR`: token premiums across languages, per tokenizer.

Each TOKENIZER is a run directory, a tokenizer directory (vocab.json + merges.txt), or `gpt2`
for the bundled GPT-2. `bpe.measures.languages` encodes the bundled FLORES-200 languages by
Petrov et al.'s protocol; DIR receives parity.csv (tokenizer, language, tokens, bytes,
bytes_per_token, premium), parity.json (the rows and each tokenizer's Gini coefficient and
max/min premium) and PARITY.md (`bpe.analysis.compare.parity_report`). Files in DIR that bpe-parity
did not write are never replaced unless `--force`. Exit status 0, or 2 with one error line.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import sys
from pathlib import Path

from bpe.analysis.compare.parity_report import write_parity_report
from bpe.cli import new_parser, run_command
from bpe.measures import GPT2_DIR
from bpe.measures.languages import LANGUAGES, language_costs, summary
from bpe.runs.layout import PARITY_CSV, PARITY_FILE, PARITY_RECORD
from bpe.tokenizer import Tokenizer
from bpe.util.io import atomic_write_text, check_writable, files_in

logger = logging.getLogger(__name__)

#: What bpe-parity writes in its --out directory, and the columns of parity.csv.
WRITTEN = (PARITY_CSV, PARITY_RECORD, PARITY_FILE)
COLUMNS = ("tokenizer", "language", "tokens", "bytes", "bytes_per_token", "premium")


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        prog="bpe-parity",
        description="What the same sentences cost in each language (FLORES-200, Petrov et "
        "al.'s protocol), per tokenizer; writes parity.csv, parity.json and PARITY.md",
    )
    parser.add_argument(
        "tokenizers", nargs="+", help="run directories, tokenizer directories, or gpt2"
    )
    parser.add_argument("--out", type=Path, required=True, help="the output directory")
    parser.add_argument(
        "--languages",
        nargs="+",
        choices=list(LANGUAGES),
        default=list(LANGUAGES),
        help="FLORES-200 codes (default: all bundled; English is always measured)",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace files in --out bpe-parity did not write"
    )
    return parser


def open_tokenizer(name: str) -> tuple[str, Tokenizer]:
    """A label and the tokenizer for a command-line name (`gpt2`: the bundled GPT-2)."""
    if name == "gpt2":
        return "gpt2", Tokenizer.from_pretrained(GPT2_DIR)
    path = Path(name)
    if not path.is_dir():
        raise FileNotFoundError(f"tokenizer {name!r} is neither a directory nor 'gpt2'")
    return path.resolve().name, Tokenizer.from_pretrained(path)


def parity_record(named: list[tuple[str, Tokenizer]], languages: list[str]) -> dict:
    """parity.json: per tokenizer, its rows (`bpe.measures.languages.language_costs`) and
    their summary."""
    sides = []
    for name, tok in named:
        rows = language_costs(tok.encode, languages)
        sides.append({"name": name, "rows": rows, "summary": summary(rows)})
        logger.info(
            "%s: Gini %.3f over %d languages", name, sides[-1]["summary"]["gini"], len(rows)
        )
    return {
        "protocol": "Petrov et al. (2023): dev + devtest lines joined by a space",
        "tokenizers": sides,
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def work() -> None:
        named = [open_tokenizer(t) for t in args.tokenizers]
        inputs = [p for t in args.tokenizers if t != "gpt2" for p in files_in(t)]
        ours = (args.out / PARITY_RECORD).is_file()
        for name in WRITTEN:
            check_writable(
                args.out / name, what="--out", inputs=inputs, ours=ours, force=args.force
            )
        record = parity_record(named, list(args.languages))
        args.out.mkdir(parents=True, exist_ok=True)
        table = io.StringIO()
        writer = csv.writer(table, lineterminator="\n")
        writer.writerow(COLUMNS)
        for side in record["tokenizers"]:
            for row in side["rows"]:
                writer.writerow([side["name"], *(row[c] for c in COLUMNS[1:])])
        atomic_write_text(args.out / PARITY_CSV, table.getvalue())
        atomic_write_text(
            args.out / PARITY_RECORD, json.dumps(record, indent=1, ensure_ascii=False) + "\n"
        )
        logger.info("wrote %s", write_parity_report(args.out))

    return run_command(work, logger)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
