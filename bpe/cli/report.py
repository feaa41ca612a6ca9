"""`bpe-report`: regenerate reports from run directories.

    bpe-report RUN_DIR                 ANALYSIS.md (+ figures) of one run
    bpe-report SWEEP_DIR               SWEEP.md (+ figures) of a sweep (a dir of job run dirs)
    bpe-report --all [--experiments-dir experiments] [--out reports] [--force]
                                       every report in reports/ (refuses to replace reports
                                       made from other runs unless --force)
    bpe-report --data-curve SWEEP_DIR... [--out reports]
                                       data_curve.md (+ JSON, figure) of data-curve sweeps
    bpe-report --table runs.csv        the runs' table (one row per run, the columns the
                                       reports use) as .csv or .parquet, for pandas or a sheet

A small dispatcher: the work lives in `bpe.analysis.run_report`, `.sweep` and `.reports`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from bpe.analysis.data_curve import write_data_curve
from bpe.analysis.figures import also_as
from bpe.analysis.reports import write_all_reports
from bpe.analysis.run_report import write_run_report
from bpe.analysis.runs_table import export_table
from bpe.analysis.sweep import write_sweep_report
from bpe.cli import new_parser, setup_logging
from bpe.runs.layout import METRICS_FILE
from bpe.runs.settings import FIGURE_FORMATS
from bpe.util.io import shown_path

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
        "--data-curve",
        nargs="+",
        type=Path,
        default=None,
        metavar="SWEEP_DIR",
        help="write data_curve.md, data_curve.json and its figure into --out (default: "
        "reports) from sweeps of bpe-train -m experiment=data_curve",
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
        if args.data_curve is not None:
            if args.all or args.path is not None:
                parser.error("--data-curve writes its page alone; run --all or PATH apart")
            out = args.out if args.out is not None else Path("reports")
            shown = " ".join(shown_path(p) for p in args.data_curve)
            command = f"bpe-report --data-curve {shown} --out {shown_path(out)}"
            path = write_data_curve(args.data_curve, out, command=command)
            logger.info("wrote %s", shown_path(path))
            return 0
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


if __name__ == "__main__":
    sys.exit(main())
