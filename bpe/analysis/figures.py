"""Figures for run and sweep reports and notebooks: one matplotlib `Figure` per function.

What it does: small functions that each draw one figure from plain data (a DataFrame of runs
or lists of numbers) and return it as a `Figure`; given a path, they also save it atomically as
PNG, and as SVG or PDF beside it inside `also_as(...)` (for papers). Every figure has axis
labels with units, a title and a legend where there is more than one series, and is saved with
its tight bounding box, so no title, label or legend is cut. Figures are built without pyplot
(`Figure` + the Agg canvas), so importing this module never changes matplotlib's backend: a
notebook's own plots keep rendering inline, and a returned `Figure` shows itself as PNG in
Jupyter.

What it does not do: read run directories (see `bpe.analysis.loader`) or write Markdown.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import logging
import os
import textwrap
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import matplotlib.figure
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg

from bpe.analysis.loader import trainer_order
from bpe.runs.settings import FIGURE_FORMATS
from bpe.runs.stages import TRAINER_ORDER
from bpe.util.io import atomic_write_bytes

logger = logging.getLogger(__name__)

_MARKERS = ("o-", "s-", "^-", "D-", "v-", "P-")
#: At most this many bars in a histogram, however wide the values range (a token of 10 million
#: bytes must not ask for 10 million bars).
MAX_BINS = 50
#: Lengths up to this get linear bins in `length_bins`; longer ones log-spaced bins.
LINEAR_LENGTHS = 10 * MAX_BINS


#: Metadata that would change a file's bytes from one save to the next (dates, the software
#: version), left out so that unchanged data gives unchanged files.
_STABLE_METADATA = {
    "png": {"Software": None},
    "svg": {"Date": None, "Creator": None},
    "pdf": {"CreationDate": None, "Creator": None, "Producer": None},
}


class Figure(matplotlib.figure.Figure):
    """A matplotlib Figure on the Agg canvas that Jupyter displays as PNG (no pyplot needed)."""

    def as_bytes(self, fmt: str = "png") -> bytes:
        """The figure in `fmt` ("png", "svg" or "pdf"), cut to its tight bounding box (so a
        long title or label is never cut off), stable when the data is unchanged."""
        buf = io.BytesIO()
        with (
            warnings.catch_warnings()
        ):  # labels too wide for tight_layout: the tight box holds them
            warnings.simplefilter("ignore", UserWarning)
            self.tight_layout()
        self.savefig(
            buf,
            format=fmt,
            dpi=100,
            bbox_inches="tight",
            pad_inches=0.1,
            metadata=_STABLE_METADATA[fmt],
        )
        return buf.getvalue()

    def png(self) -> bytes:
        """The figure as PNG bytes (`as_bytes("png")`)."""
        return self.as_bytes("png")

    def _repr_png_(self) -> bytes:
        return self.png()


#: The formats saved beside each PNG (`also_as`): none unless asked.
_ALSO: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("also", default=())


def check_figure_formats(formats: Sequence[str]) -> tuple[str, ...]:
    """The formats, checked against `FIGURE_FORMATS` (the error names the bad one).

    >>> check_figure_formats(["png", "svg"])
    ('png', 'svg')
    >>> check_figure_formats(["eps"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: figure format 'eps' is not supported: use any of ['png', 'svg', 'pdf']
    """
    for fmt in formats:
        if fmt not in FIGURE_FORMATS:
            raise ValueError(
                f"figure format {fmt!r} is not supported: use any of {list(FIGURE_FORMATS)}"
            )
    return tuple(dict.fromkeys(formats))


def saved_also() -> tuple[str, ...]:
    """The formats `also_as` asks for here, besides PNG (none outside it)."""
    return _ALSO.get()


@contextlib.contextmanager
def also_as(formats: Sequence[str]) -> Iterator[None]:
    """Inside this block, every figure saved as `x.png` is also saved as `x.svg` / `x.pdf`
    for each of `formats` (a PNG is always written: the reports link it)."""
    token = _ALSO.set(tuple(f for f in check_figure_formats(formats) if f != "png"))
    try:
        yield
    finally:
        _ALSO.reset(token)


def _new(figsize: tuple[float, float]) -> tuple[Figure, object]:
    """A figure and its single axes, on the Agg canvas (pyplot and its backend stay untouched)."""
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _title(ax, title: str) -> None:
    """Set a title wrapped to the axes' width, so a long one (a run's name) is not clipped.

    >>> fig, ax = _new((6, 4)); _title(ax, "x" * 150); ax.get_title().count("\\n")
    2
    """
    width = max(20, int(ax.figure.get_figwidth() * 10))  # ~10 characters an inch at 12 pt
    ax.set_title("\n".join(textwrap.wrap(title, width)) or title)


def _done(fig: Figure, path: str | os.PathLike | None) -> Figure:
    """Write the PNG atomically when a path is given (no half-written figure on failure), and
    the formats `also_as` asks for beside it."""
    if path is not None:
        atomic_write_bytes(path, fig.png())
        for fmt in _ALSO.get():
            atomic_write_bytes(Path(path).with_suffix(f".{fmt}"), fig.as_bytes(fmt))
    return fig


def _style(trainer: str) -> str:
    """A marker by the trainer's place in the registry, so it looks the same in every figure."""
    registered = list(TRAINER_ORDER)
    if trainer not in registered:
        return "x-"
    return _MARKERS[registered.index(trainer) % len(_MARKERS)]


#: At most this many vocab sizes get a tick each on a vs-vocab axis (more: plain-number ticks
#: where matplotlib puts them)
MAX_VOCAB_TICKS = 12


def _vocab_axes(ax, *, ylabel: str, title: str, log_y: bool = False) -> None:
    """Label an axes whose x is the vocab size (log scale), as every vs-vocab figure does: the
    vocab sizes plotted are the ticks, written as plain numbers (1,000, not 10^3), for a paper.

    >>> fig, ax = _new((6, 4)); _ = ax.plot([500, 2000, 32000], [1, 2, 3])
    >>> _vocab_axes(ax, ylabel="s", title="t"); [t.get_text() for t in ax.get_xticklabels()]
    ['500', '2,000', '32,000']
    """
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    sizes = sorted({float(x) for line in ax.get_lines() for x in line.get_xdata() if x > 0})
    ax.set_xscale("log")
    plain = FuncFormatter(lambda x, _: f"{x:,.0f}")
    if 0 < len(sizes) <= MAX_VOCAB_TICKS:
        ax.xaxis.set_major_locator(FixedLocator(sizes))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(plain)
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel("vocab size")
    ax.set_ylabel(ylabel)
    _title(ax, title)
    ax.grid(True, which="both", alpha=0.3)


def time_vs_vocab(
    frame: pd.DataFrame,
    path: str | os.PathLike | None = None,
    *,
    vocab_col: str = "vocab_size",
    time_col: str = "merge_seconds",
    trainer_col: str = "trainer",
    title: str | None = None,
) -> Figure:
    """Log-log time vs vocab size, one line per trainer; the title names the time plotted
    (`merge_seconds`: "Merge time vs vocab size")."""
    if title is None:
        what = {"merge_seconds": "Merge time", "train_seconds": "Training time"}
        title = f"{what.get(time_col, time_col)} vs vocab size"
    fig, ax = _new((6, 4))
    for trainer in trainer_order(frame[trainer_col]):
        sub = frame[frame[trainer_col] == trainer].groupby(vocab_col)[time_col].median()
        ax.plot(sub.index, sub.values, _style(trainer), label=trainer)
    _vocab_axes(ax, ylabel="seconds (log)", title=title, log_y=True)
    ax.legend()
    return _done(fig, path)


def speedup_vs_vocab(
    frame: pd.DataFrame,
    path: str | os.PathLike | None = None,
    *,
    baseline: str = "naive",
    vocab_col: str = "vocab_size",
    time_col: str = "merge_seconds",
    trainer_col: str = "trainer",
) -> Figure:
    """Speedup of each other trainer over `baseline` at every vocab size both ran."""
    med = frame.groupby([trainer_col, vocab_col])[time_col].median().unstack(trainer_col)
    fig, ax = _new((6, 4))
    if baseline in med:
        for trainer in [t for t in trainer_order(frame[trainer_col]) if t != baseline]:
            ratio = (med[baseline] / med[trainer]).dropna()
            ax.plot(ratio.index, ratio.values, _style(trainer), label=trainer)
    ax.axhline(1.0, color="grey", lw=0.8)
    _vocab_axes(ax, ylabel=f"speedup over {baseline} (x)", title=f"Speedup over {baseline}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return _done(fig, path)


def stage_bars(
    values: Mapping[str, Mapping[str, float]],
    path: str | os.PathLike | None = None,
    *,
    ylabel: str,
    title: str,
) -> Figure:
    """Grouped bars: one group per run label, one bar per stage (e.g. peak MB per stage)."""
    labels = list(values)
    stages = list(dict.fromkeys(s for v in values.values() for s in v))
    width = 0.8 / max(len(stages), 1)
    fig, ax = _new((max(6, 1.2 * len(labels)), 4))
    for k, stage in enumerate(stages):
        xs = [i + k * width for i in range(len(labels))]
        ax.bar(xs, [values[lab].get(stage, 0.0) for lab in labels], width, label=stage)
    ax.set_xticks([i + width * (len(stages) - 1) / 2 for i in range(len(labels))])
    ax.set_xticklabels(labels, rotation=20, ha="right")
    ax.set_ylabel(ylabel)
    _title(ax, title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return _done(fig, path)


def memory_timeline(
    series: Mapping[str, Sequence[tuple[float, float]]],
    path: str | os.PathLike | None = None,
    *,
    stages: Sequence[tuple[str, float, float]] = (),
    title: str = "Memory over time",
) -> Figure:
    """RSS/PSS over time (MB vs seconds) for one or more runs; stages shaded when given."""
    fig, ax = _new((7, 4))
    for k, (name, start, end) in enumerate(stages):
        ax.axvspan(start, end, alpha=0.12, color=f"C{k % 10}", label=f"stage: {name}")
    for label, points in series.items():
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, label=label)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("memory (MB)")
    _title(ax, title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return _done(fig, path)


def heatmap(
    frame: pd.DataFrame,
    path: str | os.PathLike | None = None,
    *,
    label: str,
    title: str,
    vmin: float = 0.0,
    vmax: float = 1.0,
) -> Figure:
    """A square frame (rows and columns name the same runs) as a heat map, every label whole
    (a run's long name is never cut: the figure grows with it and is saved tight).

    >>> names = ["a" * 60, "b"]
    >>> frame = pd.DataFrame([[1.0, 0.5], [0.5, 1.0]], index=names, columns=names)
    >>> fig = heatmap(frame, label="Jaccard", title="overlap")
    >>> fig.axes[0].get_xticklabels()[0].get_text() == names[0]
    True
    """
    n = len(frame)
    fig, ax = _new((2.5 + 0.6 * n, 1.5 + 0.5 * n))
    image = ax.imshow(frame.to_numpy(dtype=float), vmin=vmin, vmax=vmax, cmap="viridis")
    ax.set_xticks(range(n), [str(c) for c in frame.columns], rotation=90)
    ax.set_yticks(range(n), [str(i) for i in frame.index])
    fig.colorbar(image, ax=ax, label=label)
    _title(ax, title)
    return _done(fig, path)


def compression_vs_vocab(
    frame: pd.DataFrame,
    path: str | os.PathLike | None = None,
    *,
    vocab_col: str = "vocab_size",
    ratio_col: str = "compression",
    dataset_col: str = "dataset",
    gpt2: Mapping[str, float] | None = None,
) -> Figure:
    """Compression ratio (bytes/token) vs vocab size per dataset, GPT-2 as dashed lines."""
    fig, ax = _new((6, 4))
    for k, dataset in enumerate(sorted(frame[dataset_col].dropna().unique())):
        sub = frame[frame[dataset_col] == dataset].groupby(vocab_col)[ratio_col].median()
        ax.plot(sub.index, sub.values, "o-", color=f"C{k}", label=dataset)
        if gpt2 and dataset in gpt2:
            ax.axhline(gpt2[dataset], ls="--", color=f"C{k}", label=f"GPT-2 on {dataset}")
    _vocab_axes(ax, ylabel="bytes per token", title="Compression vs vocab size")
    ax.legend(fontsize="small")
    return _done(fig, path)


def length_bins(max_length: int, *, max_bins: int = MAX_BINS) -> list[int]:
    """Bin edges for whole-number lengths 1..max_length: at most `max_bins` bins.

    One bin per length when they fit, equal-width bins up to `LINEAR_LENGTHS`, log-spaced beyond
    (so a vocab whose lengths span orders of magnitude still gets a readable, bounded histogram).

    >>> length_bins(3)
    [1, 2, 3, 4]
    >>> len(length_bins(10_000_000)) - 1 <= MAX_BINS, length_bins(10_000_000)[-1]
    (True, 10000001)
    """
    top = max(int(max_length), 1) + 1
    if top - 1 <= max_bins:
        return list(range(1, top + 1))
    if top - 1 <= LINEAR_LENGTHS:
        width = -(-(top - 1) // max_bins)
        return list(range(1, top, width)) + [top]
    ratio = top ** (1 / max_bins)
    edges = sorted({min(top, round(ratio**k)) for k in range(max_bins + 1)} | {1, top})
    return edges


def histogram(
    values: Sequence[float],
    path: str | os.PathLike | None = None,
    *,
    xlabel: str,
    title: str,
    bins: int | Sequence[float] = 30,
    weights: Sequence[float] | None = None,
    log_x: bool = False,
    log_y: bool = False,
) -> Figure:
    """A plain histogram (e.g. token lengths in bytes); `weights` counts each value that often.

    Raises:
        ValueError: more than `MAX_BINS` bins asked for (the cost grows with the bins).
    """
    n_bins = bins if isinstance(bins, int) else len(bins) - 1
    if n_bins > MAX_BINS:
        raise ValueError(f"{n_bins} bins asked for; pass at most {MAX_BINS} (see length_bins)")
    fig, ax = _new((6, 4))
    edges = None if isinstance(bins, int) else list(bins)
    if edges and all(b - a == 1 for a, b in zip(edges, edges[1:])):
        # whole-number values, one per bin: centre each bar on its value's tick, not between
        # two ticks (a bar for length 3 spans 2.5-3.5)
        bins = [e - 0.5 for e in edges]
    ax.hist(values, bins=bins, weights=weights, color="C0", edgecolor="white")
    if log_x:
        ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count" + (" (log)" if log_y else ""))
    _title(ax, title)
    return _done(fig, path)


def token_lengths(
    lengths: Mapping[int | str, int], path: str | os.PathLike | None = None, *, title: str
) -> Figure:
    """Vocab entries by length in bytes (metrics.json's `token_lengths`: length -> entries).

    One value per distinct length, weighted by its count, so the cost is the number of distinct
    lengths whatever they are; bins from `length_bins` (log-spaced past `LINEAR_LENGTHS`).
    """
    values = [int(k) for k in lengths]
    log_x = max(values) > LINEAR_LENGTHS
    return histogram(
        values,
        path,
        xlabel="token length (bytes" + (", log scale)" if log_x else ")"),
        title=title,
        bins=length_bins(max(values)),
        weights=[int(n) for n in lengths.values()],
        log_x=log_x,
        log_y=True,
    )


def line(
    series: Mapping[str, Sequence[float]],
    path: str | os.PathLike | None = None,
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    log_y: bool = False,
) -> Figure:
    """One line per series against its index (e.g. count of the k-th merge). A series equal to
    an earlier one is drawn dashed over it and says so in the legend, so neither hides the
    other."""
    fig, ax = _new((6, 4))
    drawn: dict[str, list[float]] = {}
    for label, ys in series.items():
        twin = next((other for other, seen in drawn.items() if seen == list(ys)), None)
        style = {"ls": "--", "lw": 2.5} if twin is not None else {}
        shown = label if twin is None else f"{label} (= {twin})"
        ax.plot(range(1, len(ys) + 1), ys, label=shown, **style)
        drawn.setdefault(label, list(ys))
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    _title(ax, title)
    ax.grid(True, alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize="small")
    return _done(fig, path)


def data_curve(
    series: Mapping[str, Sequence[tuple[float, float | None, float | None, float | None]]],
    path: str | os.PathLike | None = None,
) -> Figure:
    """The data curve: held-out bytes per token, bits per byte and the merge overlap with the
    largest run, each against training bytes (log scale); one line per curve, whose points are
    (training bytes, bytes/token, bits/byte, overlap)."""
    fig = Figure(figsize=(13, 4))
    FigureCanvasAgg(fig)
    panels = [("held-out bytes per token", 1), ("held-out bits per byte", 2)]
    panels.append(("share of merges the largest run learned", 3))
    for i, (label, column) in enumerate(panels, start=1):
        ax = fig.add_subplot(1, 3, i)
        for name, points in series.items():
            shown = [(p[0], p[column]) for p in points if p[column] is not None]
            if shown:
                ax.plot(*zip(*shown), marker="o", label=name)
        ax.set_xscale("log")
        ax.set_xlabel("training bytes")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        if i == 1 and len(series) > 1:
            ax.legend(fontsize="small")
    fig.suptitle("How the tokenizer changes with its training text")
    return _done(fig, path)
