"""`bpe-show`: how a text splits into tokens, in the terminal (colours) or in Jupyter (HTML).

    bpe-show RUN_DIR "Once upon a time"        alternating colours on a terminal
    bpe-show data/gpt2 "Once upon a time" --plain --ids
    echo "text" | bpe-show RUN_DIR             reads stdin without a text argument

What it does: `TokenView` holds the tokens of one text and renders them as ANSI colours
(`ansi`), plain brackets (`plain`, the fallback when stdout is not a terminal) or HTML
(`_repr_html_`, so a view is the last expression of a notebook cell); `show` builds one from a
run directory or a GPT-2 style vocab.json + merges.txt directory.

What it does not do: measure anything (see `bpe.measures`), or change the text: the pieces
concatenate back to the input's bytes. Bytes that are not whole UTF-8 characters (a character
split between tokens) are shown as `\\xNN` escapes.
"""

from __future__ import annotations

import argparse
import html
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from bpe.analysis.compare.sides import load_side
from bpe.cli import new_parser, setup_logging
from bpe.tokenizer import Tokenizer

logger = logging.getLogger(__name__)

#: Background colours the pieces alternate between (ANSI 256-colour codes and HTML colours).
ANSI_COLOURS = (153, 223, 194, 225)
HTML_COLOURS = ("#cfe2ff", "#ffe5b4", "#d1f2d9", "#f8d7f0")


def _visible(text: str) -> str:
    # whitespace that would vanish in a rendering gets a visible sign
    return text.replace("\n", "↵").replace("\t", "→")


@dataclass(frozen=True)
class TokenView:
    """The tokens of one text under one tokenizer, ready to render.

    >>> tok = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"hi"}, [(b"h", b"i")])
    >>> view = TokenView.of(tok, "hi!")
    >>> view.plain(), view.ids
    ('[hi][!]', [256, 33])
    """

    ids: list[int]
    pieces: list[bytes]
    label: str = ""

    @classmethod
    def of(cls, tokenizer: Tokenizer, text: str, *, label: str = "") -> TokenView:
        ids = tokenizer.encode(text)
        return cls(ids, [tokenizer.vocab[i] for i in ids], label)

    @property
    def texts(self) -> list[str]:
        """Each piece as text (partial UTF-8 sequences as `\\xNN` escapes)."""
        return [p.decode("utf-8", errors="backslashreplace") for p in self.pieces]

    def summary(self) -> str:
        """`N tokens, B bytes (R bytes/token)`."""
        n, b = len(self.ids), sum(map(len, self.pieces))
        ratio = f"{b / n:.2f}" if n else "n/a"
        head = f"{self.label}: " if self.label else ""
        return f"{head}{n} tokens, {b} bytes ({ratio} bytes/token)"

    def plain(self, *, ids: bool = False) -> str:
        """Every piece in brackets, with its id after a colon when `ids`."""
        return "".join(
            f"[{_visible(t)}{f':{i}' if ids else ''}]" for t, i in zip(self.texts, self.ids)
        )

    def ansi(self, *, ids: bool = False) -> str:
        """Pieces on alternating ANSI background colours (black text), ids as subscripts."""
        out = []
        for k, (t, i) in enumerate(zip(self.texts, self.ids)):
            colour = ANSI_COLOURS[k % len(ANSI_COLOURS)]
            tag = f"\033[2m{i}\033[22m" if ids else ""
            out.append(f"\033[30;48;5;{colour}m{_visible(t)}{tag}\033[0m")
        return "".join(out)

    def _repr_html_(self) -> str:
        spans = []
        for k, (t, i) in enumerate(zip(self.texts, self.ids)):
            colour = HTML_COLOURS[k % len(HTML_COLOURS)]
            spans.append(
                f'<span title="id {i}" style="background:{colour};color:#000;'
                f'white-space:pre">{html.escape(_visible(t))}</span>'
            )
        return (
            f'<div style="font-family:monospace;line-height:1.8">'
            f"<div><b>{html.escape(self.summary())}</b></div>{''.join(spans)}</div>"
        )

    def __str__(self) -> str:
        return self.plain()


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """The tokenizer of a run directory or of a GPT-2 style vocab.json + merges.txt directory.

    Raises:
        FileNotFoundError: the directory is neither.
    """
    return load_side(path, heldout=False).tokenizer


def show(path: str | os.PathLike, text: str, *, label: str | None = None) -> TokenView:
    """The `TokenView` of text under the tokenizer at path (a notebook cell shows it as HTML)."""
    return TokenView.of(load_tokenizer(path), text, label=label or Path(path).name)


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(prog="bpe-show", description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="a run dir or a vocab.json + merges.txt dir")
    parser.add_argument("text", nargs="?", help="the text (default: read stdin)")
    parser.add_argument("--plain", action="store_true", help="brackets instead of colours")
    parser.add_argument("--ids", action="store_true", help="show each token's id")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(logging.WARNING)
    text = sys.stdin.read() if args.text is None else args.text
    try:
        view = show(args.dir, text)
    except (FileNotFoundError, ValueError) as err:
        logger.error("%s", err)
        return 2
    colour = sys.stdout.isatty() and not args.plain and os.environ.get("NO_COLOR") is None
    body = view.ansi(ids=args.ids) if colour else view.plain(ids=args.ids)
    sys.stdout.write(f"{body}\n{view.summary()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
