"""The console scripts, one module each (see `[project.scripts]` in pyproject.toml).

    train    bpe-train    the Hydra app: one run, or a sweep with -m
    report   bpe-report   regenerate ANALYSIS.md / SWEEP.md / reports/ from run directories
    show     bpe-show     how a tokenizer splits a text, token by token
    encode   bpe-encode   a corpus as a .npy array of ids (`bpe.encode.npy` does the work)
    compare  bpe-compare  COMPARE.md for two or more tokenizers (`bpe.analysis.compare.measures`)
    prune    bpe-prune    a smaller tokenizer: the learned tokens a run's text uses least removed
    parity   bpe-parity   what the same sentences cost in each language, per tokenizer

Every script but bpe-train (a Hydra app) builds its parser with `new_parser`, so each has
`--version`; bpe-train answers `--version` before Hydra does.

Each module is the command line only: arguments, logging, exit status. Every script but
bpe-train logs `LEVEL logger: message` lines on stderr (`setup_logging`), so its stdout holds
only what a user asked for (bpe-show's tokens); bpe-train logs as Hydra does, into the run's
train.log as well. `run_command` ends a script: 0, or 2 with one line naming the problem.
The CLIs sit on top of every layer: nothing in `bpe` imports them.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

from bpe import __version__

#: how every script but bpe-train logs (on stderr)
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


def version_line(prog: str) -> str:
    """What `--version` prints for every console script: the command and bpe-lab's version.

    >>> version_line("bpe-show").startswith("bpe-show (bpe-lab ")
    True
    """
    return f"{prog} (bpe-lab {__version__})"


def new_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The argument parser of a console script: its name, its description and `--version`."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--version", action="version", version=version_line(prog), help="print bpe-lab's version"
    )
    return parser


def setup_logging(level: int = logging.INFO) -> None:
    """Log `LOG_FORMAT` lines on stderr at `level`, as every script but bpe-train does."""
    logging.basicConfig(level=level, format=LOG_FORMAT)


def run_command(work: Callable[[], object], log: logging.Logger) -> int:
    """A script's exit status for `work`, with logging set up first: 0 when it returns; 2,
    after one error line, when it raises OSError or ValueError (a missing or refused input,
    an output it will not overwrite: each message names the file and the fix)."""
    setup_logging()
    try:
        work()
    except (OSError, ValueError) as err:
        log.error("%s", err)
        return 2
    return 0
