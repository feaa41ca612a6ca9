"""`bpe-encode --tokenizer RUN_DIR --input CORPUS --out IDS.npy`: a corpus as an array of ids.

CORPUS is a text file, or any corpus `bpe.corpus` reads: `.gz`/`.zst`/`.xz`/`.bz2`
text, JSON lines, parquet, a `datasets` save_to_disk directory, a folder or a quoted glob.

The command line only: `bpe.encode.npy.encode_to_npy` does the work (and its docstring
says how). Exit status 0; 2 with one error line on bad input; 1 when a worker process was lost
(no output is written then).
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from collections.abc import Sequence

from bpe.cli import new_parser, setup_logging
from bpe.corpus.files import DEFAULT_TEXT_FIELD
from bpe.corpus.formats import FORMAT_CHOICES
from bpe.encode.npy import (
    DEFAULT_CHUNK_BYTES,
    ENCODE_BACKENDS,
    encode_to_npy,
    open_tokenizer,
    resolve_tokenizer_files,
)
from bpe.encode.npy_file import DTYPES
from bpe.text.specials import EOT
from bpe.tokenizer.segmentation import SEGMENTATIONS
from bpe.util.interrupts import sigterm_raises
from bpe.util.pool import ChunkWorkerError

logger = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        prog="bpe-encode",
        description="Encode a corpus (a text file, compressed text, JSON lines, parquet, a folder "
        "or a glob of them) into a .npy array of token ids (uint16 by default).",
    )
    _input_options(parser.add_argument_group("what to encode"))
    _output_options(parser.add_argument_group("where the ids go"))
    _encoding_options(parser.add_argument_group("how to encode"))
    return parser


def _input_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--tokenizer",
        nargs="+",
        required=True,
        metavar="RUN_DIR_OR_FILES",
        help="a run directory with vocab.json and merges.txt, or the two files",
    )
    group.add_argument(
        "--input",
        required=True,
        help="corpus to encode: a UTF-8 text file, .gz/.zst/.xz/.bz2 text, JSON lines, parquet, "
        "a datasets save_to_disk directory, a folder, or a quoted glob such as 'shards/*.parquet'",
    )
    group.add_argument(
        "--format",
        choices=FORMAT_CHOICES,
        default="auto",
        help="how to read the input (auto: by suffix, then content)",
    )
    group.add_argument(
        "--text-field",
        default=DEFAULT_TEXT_FIELD,
        help="JSON field or parquet/Arrow column holding each document (default: text)",
    )
    group.add_argument(
        "--separator",
        default=None,
        metavar="TOKEN",
        help=f"special token put between documents of records and files (default: {EOT})",
    )
    group.add_argument(
        "--special-tokens",
        nargs="*",
        default=None,
        metavar="TOKEN",
        help="special tokens (default: the tokenizer's own, as bpe.formats.pretrained decides: "
        f"tokenizer.json, a run's metrics.json, else vocab entries no merge makes, e.g. {EOT}; "
        "pass the flag alone for none)",
    )


def _output_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--out",
        required=True,
        help="output .npy path (never the input; an existing file only if bpe-encode wrote it, "
        "unless --force)",
    )
    group.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --out that bpe-encode did not write (never the input)",
    )
    group.add_argument(
        "--dtype",
        choices=DTYPES,
        default="uint16",
        help="the array's integer type (default: uint16, which holds ids below 65,536)",
    )


def _encoding_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--num-workers", type=int, default=None, help="processes (default: all CPUs)"
    )
    group.add_argument(
        "--chunk-mb", type=float, default=DEFAULT_CHUNK_BYTES / 2**20, help="MB of text per job"
    )
    group.add_argument(
        "--backend",
        choices=ENCODE_BACKENDS,
        default="python",
        help="python (readable, processes) or tiktoken (the exported Encoding on threads)",
    )
    group.add_argument(
        "--segmentation",
        choices=SEGMENTATIONS,
        default="merges",
        help="how each pretoken is cut into tokens: merges (BPE's own), longest_prefix (the "
        "longest token first) or fewest (the fewest tokens); python backend only",
    )
    group.add_argument(
        "--dropout",
        type=float,
        default=0.0,
        metavar="P",
        help="BPE-dropout (Provilkov et al., 2020): skip each candidate merge with probability "
        "P in [0, 1) at every merge step (default 0: ordinary BPE; python backend only)",
    )
    group.add_argument(
        "--seed",
        type=int,
        default=0,
        help="dropout's seed: the same file, tokenizer, P and seed give the same ids whatever "
        "the worker count (default 0; recorded in the sidecar)",
    )
    group.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `bpe-encode`: 0 on success, 2 on bad input, 1 on a lost worker (logged)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not logging.getLogger().handlers:
        setup_logging()
    # SIGTERM raises like Ctrl-C, so the output's temp file is removed (`atomic_open`)
    try:
        with sigterm_raises():
            return _encode(args, argv)
    except KeyboardInterrupt as err:
        logger.error("interrupted (%s); no output was written", err or "Ctrl-C")
        return 130


def _encode(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    """`main` after parsing: encode, and map each kind of failure to its exit code."""
    try:
        tokenizer = open_tokenizer(args.tokenizer, special_tokens=args.special_tokens)
        vocab_path, _ = resolve_tokenizer_files(args.tokenizer)
        result = encode_to_npy(
            args.input,
            tokenizer,
            args.out,
            num_workers=args.num_workers,
            dtype=args.dtype,
            chunk_bytes=max(1, int(args.chunk_mb * 2**20)),
            progress=not args.no_progress,
            backend=args.backend,
            tokenizer_dir=args.tokenizer[0] if len(args.tokenizer) == 1 else vocab_path.parent,
            command=shlex.join(["bpe-encode", *(sys.argv[1:] if argv is None else argv)]),
            force=args.force,
            format=args.format,
            text_field=args.text_field,
            separator=args.separator,
            dropout=args.dropout,
            segmentation=args.segmentation,
            seed=args.seed,
        )
    except (
        ConnectionError,
        FileNotFoundError,
        FileExistsError,
        IsADirectoryError,
        PermissionError,
        ValueError,
    ) as err:
        logger.error("%s", err)
        return 2
    except ChunkWorkerError as err:
        logger.error("%s; no output was written", err)
        return 1
    logger.info(
        "%d tokens from %d bytes (%.3f bytes/token) -> %s",
        result["num_tokens"],
        result["num_bytes"],
        result["num_bytes"] / max(result["num_tokens"], 1),
        result["path"],
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
