"""`bpe-report`: regenerate reports from run directories.

    bpe-report RUN_DIR                 ANALYSIS.md (+ figures) of one run
    bpe-report SWEEP_DIR               SWEEP.md (+ figures) of a sweep (a dir of job run dirs)
    bpe-report --all [--experiments-dir experiments] [--out reports] [--force]
                                       every report in reports/ (refuses to replace reports
                                       made from other runs unless --force)
    bpe-report --page NAME [--sweep-dir DIR...] [--quick] [--out reports]
                                       one page of reports/ from the sweeps it runs (into
                                       --experiments-dir) or reads: variants, segmentation,
                                       languages, vocabularies, data_curve
                                       (`bpe.analysis.pages.registry.PAGES`)
    bpe-report --table runs.csv        the runs' table (one row per run, the columns the
                                       reports use) as .csv or .parquet, for pandas or a sheet

A small dispatcher: the work lives in `bpe.analysis.run.report`, `.sweep`, `.reports` and
`.pages`; for a page it runs `bpe-train -m` (and `bpe-prune`) as a user would.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
from pathlib import Path

from bpe.analysis.figures import also_as
from bpe.analysis.loader import read_run
from bpe.analysis.pages.index import write_all_reports
from bpe.analysis.pages.registry import PAGES, page_command
from bpe.analysis.run.report import write_run_report
from bpe.analysis.runs_table import export_table
from bpe.analysis.sweep.report import write_sweep_report
from bpe.cli import new_parser, setup_logging
from bpe.runs import schema
from bpe.runs.layout import METRICS_FILE, PRUNE_RECORD, PRUNED_DIR, SWEEPS_DIR
from bpe.runs.settings import FIGURE_FORMATS
from bpe.util.io import git_sha, shown_path

logger = logging.getLogger("bpe.report")


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(prog="bpe-report", description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, help="a run directory or a sweep directory")
    parser.add_argument("--all", action="store_true", help="regenerate every report in --out")
    parser.add_argument(
        "--experiments-dir",
        type=Path,
        default=Path("experiments"),
        help="where the runs are, for --all and --table (default: experiments)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="with --all: the reports' directory (default: reports; never inside "
        "--experiments-dir)",
    )
    parser.add_argument(
        "--table",
        type=Path,
        default=None,
        metavar="FILE",
        help="write the table of every run in --experiments-dir (one row per run, the "
        "loader's tidy columns) to FILE, .csv or .parquet",
    )
    parser.add_argument(
        "--page",
        choices=sorted(PAGES),
        default=None,
        help="write one page of --out (default: reports) from the sweeps it runs into "
        "--experiments-dir, or from --sweep-dir",
    )
    parser.add_argument(
        "--sweep-dir",
        nargs="+",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --page: the sweeps to read instead of running them",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="with --page: its sweeps at a tiny size with debug=fast (a plumbing check, not "
        "the page)",
    )
    parser.add_argument(
        "--figure-formats",
        nargs="+",
        default=[],
        metavar="FMT",
        choices=FIGURE_FORMATS,
        help="also save every figure drawn as svg and/or pdf beside its png (for papers)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --all: replace reports in --out even if other runs generated them",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging()
    with also_as(args.figure_formats):
        return _run(parser, args)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        if args.table is not None:
            if args.all or args.path is not None:
                parser.error("--table writes the runs' table alone; run --all or PATH apart")
            rows = export_table(args.experiments_dir, args.table)
            logger.info("wrote %s (%d runs)", shown_path(args.table), rows)
            return 0
        if args.page is not None:
            if args.all or args.path is not None:
                parser.error("--page writes its page alone; run --all or PATH apart")
            out = args.out if args.out is not None else Path("reports")
            path = make_page(
                args.page, out, sweeps=args.sweep_dir, root=args.experiments_dir, quick=args.quick
            )
            logger.info("wrote %s", shown_path(path))
            return 0
        if args.sweep_dir is not None or args.quick:
            parser.error("--sweep-dir and --quick go with --page")
        if args.all:
            out = args.out if args.out is not None else Path("reports")
            for path in write_all_reports(args.experiments_dir, out_dir=out, force=args.force):
                logger.info("wrote %s", shown_path(path))
            return 0
        if args.path is None:
            parser.error("pass a RUN_DIR or SWEEP_DIR, or --all")
        if args.out is not None or args.force:
            parser.error(
                "--out and --force go with --all; a run's or a sweep's report is written "
                "inside its own directory"
            )
        if not args.path.is_dir():
            raise FileNotFoundError(
                f"{str(args.path)!r} is not a directory; pass a run or sweep dir"
            )
        if (args.path / METRICS_FILE).is_file():
            logger.info("wrote %s", shown_path(write_run_report(args.path)))
            return 0
        write_sweep_report(args.path)  # which logs the path it wrote
        return 0
    except (OSError, ValueError) as err:
        logger.error("%s", err)
        return 2


def make_page(name: str, out: Path, *, sweeps: list[Path] | None, root: Path, quick: bool) -> Path:
    """Page `name` of `PAGES` written into `out`: from `sweeps`, or from the sweeps it runs
    with `bpe-train -m` into `root` (each plain run pruned first when the page says so)."""
    page = PAGES[name]
    given = None if sweeps is None else [shown_path(s) for s in sweeps]
    for sweep in sweeps or ():
        if not Path(sweep).is_dir():
            raise FileNotFoundError(
                f"--sweep-dir {str(sweep)!r} is not a directory; name a sweep directory of "
                f"bpe-train -m, or leave --sweep-dir out and --page {name} runs its sweeps"
            )
    if sweeps is None:
        sweeps = [_run_sweep(args, root) for args in page.sweep_args(quick=quick)]
    if page.prune_to is not None:
        for sweep in sweeps:
            _prune_plain_runs(sweep, page.prune_to)
    command = page_command(name, given, out=shown_path(out), quick=quick and given is None)
    return page.write(list(sweeps), out, command, git_sha())


def _run_sweep(overrides: list[str], root: Path) -> Path:
    """`bpe-train -m OVERRIDES` into `root`, as a user runs it; returns its sweep directory."""
    before = set((root / SWEEPS_DIR).glob("*"))
    cmd = [sys.executable, "-m", "bpe.cli.train", "-m", *overrides]
    logger.info("running %s", " ".join(["bpe-train", "-m", *overrides]))
    subprocess.run([*cmd, f"experiments_dir={root}", "progress=false"], check=True)
    made = sorted(set((root / SWEEPS_DIR).glob("*")) - before)
    if len(made) != 1:
        raise RuntimeError(f"bpe-train -m {' '.join(overrides)} made {len(made)} sweep dirs")
    return made[0]


def _prune_plain_runs(sweep: Path, share: float) -> None:
    """`bpe-prune` each complete run of the sweep without a length limit to `share` of its
    vocab, into `<sweep>/pruned/<run>/` (kept when its record is there)."""
    for run_dir in sorted(p.parent for p in sweep.glob(f"*/{METRICS_FILE}")):
        run = read_run(run_dir)
        metrics = run["metrics"]
        if run["status"] != "complete" or schema.get(metrics, schema.MAX_TOKEN_LENGTH):
            continue
        target = sweep / PRUNED_DIR / run_dir.name
        if (target / PRUNE_RECORD).is_file():
            continue
        size = str(int(share * int(schema.get(metrics, schema.VOCAB))))
        cmd = [sys.executable, "-m", "bpe.cli.prune", str(run_dir), "--vocab-size", size]
        subprocess.run([*cmd, "--out", str(target)], check=True)


if __name__ == "__main__":
    sys.exit(main())
