"""The report pages made from sweeps of their own: the registry `PAGES` behind
`bpe-report --page NAME`.

Each page is a file in reports/, the question it answers (reports/README.md's row), the
`bpe-train -m` overrides of the sweeps it reads (one page may read several), the overrides
`--quick` adds for a plumbing check, and the writer that renders it from the sweeps' run
directories alone. `bpe-report --page NAME` runs the sweeps (or reads `--sweep-dir`) and calls
the writer with its own command and the code version, which every page names under its title.

    >>> sorted(PAGES)
    ['data_curve', 'languages', 'segmentation', 'variants', 'vocabularies']
    >>> PAGES["variants"].sweep_args(quick=True)[0]
    ['experiment=bpe_family', 'debug=fast', 'dataset=tinystories_sample', 'vocab_size=300']

What it does not do: run anything (`bpe.cli.report` runs the sweeps and `bpe-prune`), or the
pages `bpe-report --all` makes from every run at once (`bpe.analysis.pages.index`) and those the
benchmarks write (`bpe.analysis.pages.index.BENCH_REPORTS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bpe.analysis.loader import load_tidy
from bpe.analysis.pages.data_curve import DATA_CURVE_MD, write_data_curve
from bpe.analysis.pages.languages import write_languages
from bpe.analysis.pages.segmentation import write_segmentation
from bpe.analysis.pages.variants import write_variants
from bpe.analysis.pages.vocabularies import pick_runs, write_vocabularies

#: A page's writer: (its sweep directories, the output directory, command, code) -> the page.
Writer = Callable[[list[Path], Path, str, "str | None"], Path]


@dataclass(frozen=True)
class Page:
    """One page of reports/ and how it is made."""

    file: str
    #: what the page answers (its row in reports/README.md)
    answers: str
    #: the `bpe-train -m` overrides of each sweep the page reads, in order
    sweeps: tuple[Mapping[str, str], ...]
    write: Writer
    #: what `--quick` changes in every sweep: a plumbing check, not the page
    quick: Mapping[str, str] = field(default_factory=dict)
    #: a share of the vocab each plain run of the sweeps is pruned to first (`bpe-prune`)
    prune_to: float | None = None

    def sweep_args(self, *, quick: bool = False) -> list[list[str]]:
        """Each sweep's overrides as `bpe-train -m` arguments (`--quick`'s replace a key)."""
        extra = self.quick if quick else {}
        return [[f"{k}={v}" for k, v in {**sweep, **extra}.items()] for sweep in self.sweeps]


def _one(write: Callable[..., Path]) -> Writer:
    """A writer of one sweep's page."""

    def page(sweeps: list[Path], out: Path, command: str, code: str | None) -> Path:
        if len(sweeps) != 1:
            raise ValueError(f"this page reads one sweep, not {len(sweeps)}; pass one --sweep-dir")
        return write(sweeps[0], out, command=command, code=code)

    return page


def _vocabularies(sweep: Path, out: Path, *, command: str, code: str | None) -> Path:
    _, runs = load_tidy(sweep, hint="run bpe-train -m dataset=tinystories_sample,owt_sample")
    path = write_vocabularies(pick_runs(runs), out, root=sweep, command=command, code=code)
    if path is None:
        raise ValueError(
            f"{sweep} holds no two complete runs of different datasets at one vocab size; run "
            "bpe-report --page vocabularies without --sweep-dir"
        )
    return path


def _data_curve(sweeps: list[Path], out: Path, command: str, code: str | None) -> Path:
    return write_data_curve(sweeps, out, command=command, code=code)


PAGES: dict[str, Page] = {
    "variants": Page(
        "variants.md",
        "Plain BPE, SuperBPE, PickyBPE and BoundlessBPE side by side on the bundled samples.",
        ({"experiment": "bpe_family"},),
        _one(write_variants),
        quick={"debug": "fast", "dataset": "tinystories_sample", "vocab_size": "300"},
    ),
    "segmentation": Page(
        "segmentation.md",
        "One vocabulary cut three ways (merges, longest prefix, fewest tokens), a length "
        "limit and a pruned copy, on the bundled samples.",
        ({"experiment": "segmentation"},),
        _one(write_segmentation),
        quick={"debug": "fast", "dataset": "tinystories_sample", "vocab_size": "600"},
        prune_to=0.75,
    ),
    "languages": Page(
        "languages.md",
        "Plain and parity-aware BPE on 12 languages of FLORES-200: token premiums, their Gini "
        "coefficient and compression on held-out parallel text.",
        ({"experiment": "languages"},),
        _one(write_languages),
        quick={"debug": "fast", "vocab_size": "400,600", "analysis.gpt2_baseline": "true"},
    ),
    "vocabularies": Page(
        "vocabularies.md",
        "How much do the datasets' vocabularies overlap, which tokens only one has, how many "
        "are under-trained, and how does each compare with GPT-2's?",
        ({"dataset": "tinystories_sample,owt_sample", "vocab_size": "10000"},),
        _one(_vocabularies),
        quick={"debug": "fast", "vocab_size": "500"},
    ),
    DATA_CURVE_MD.removesuffix(".md"): Page(
        DATA_CURVE_MD,
        "How much data does a tokenizer need? Merge overlap, held-out bytes per token and "
        "bits per byte from 1% to 100% of each bundled sample and a generated 1 GiB owt-like "
        "corpus.",
        (
            {"experiment": "data_curve", "dataset": "tinystories_sample"},
            {"experiment": "data_curve", "dataset": "owt_sample"},
        ),
        _data_curve,
        quick={"debug": "fast", "dataset.train_fraction": "0.2,1.0", "vocab_size": "400"},
    ),
}


def page_command(
    name: str, sweeps: list[str] | None = None, *, out: str = "reports", quick: bool = False
) -> str:
    """The `bpe-report` command that makes page `name` (from `sweeps` when given).

    >>> page_command("variants")
    'bpe-report --page variants --out reports'
    >>> page_command("variants", ["exp/sweeps/a"], out="r")
    'bpe-report --page variants --sweep-dir exp/sweeps/a --out r'
    """
    given = f" --sweep-dir {' '.join(sweeps)}" if sweeps else ""
    return f"bpe-report --page {name}{given}{' --quick' if quick else ''} --out {out}"
