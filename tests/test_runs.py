"""The run-directory contract (`bpe.runs`): a real run holds every key and file readers use.

Readers name metrics.json fields through `bpe.runs.schema` keys and files through
`bpe.runs.layout`; this writes a real run with the real configs and checks each of them
against it, so a field the writer renames fails here first, not in a report, a tracker or a
comparison. A scan of the readers' source keeps them from typing a metrics path by hand.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from bpe.analysis.loader import TIDY_COLUMNS, load_runs
from bpe.runs import layout, schema
from tests.conftest import ROOT

#: Where metrics.json is read: these packages name no metrics path but through `schema`.
READERS = ["bpe/analysis", "bpe/cli"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    exp = tmp_path_factory.mktemp("contract")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "debug=fast",
            "progress=false",
            f"experiments_dir={exp}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return (exp / layout.LATEST).resolve()


def test_every_key_a_reader_uses_is_in_a_real_run(run):
    metrics = json.loads((run / layout.METRICS_FILE).read_text("utf-8"))
    missing = [name for name, k in schema.KEYS.items() if k.always and not schema.has(metrics, k)]
    assert not missing, f"metrics.json of a complete run lacks {missing}"
    assert schema.get(metrics, schema.STATUS) == "complete"
    assert schema.get(metrics, schema.LAUNCHER_NAME) == "basic"  # the key MLflow once lost
    assert schema.get(metrics, schema.PATTERN_ENGINE) == "regex"  # heap, engine=auto


def test_a_compiling_trainers_run_holds_its_compile_keys(tmp_path):
    """The keys only `trainer=compiled` runs have (`always=False`), against a real one."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "debug=fast",
            "progress=false",
            "trainer=compiled",
            f"experiments_dir={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = json.loads((tmp_path / layout.LATEST / layout.METRICS_FILE).read_text("utf-8"))
    for k in (schema.COMPILE_SECONDS, schema.COMPILE_CACHED):
        assert schema.has(metrics, k), k.dotted
    assert set(metrics["compile"]) == set(schema.CompileRecord.__annotations__)
    # `pretokenize.engine=auto`: a compiled run splits GPT-2's pattern with the compiled scanner
    assert schema.get(metrics, schema.PATTERN_ENGINE) == "compiled"


def test_a_vocab_ladder_runs_hold_its_ladder_keys(tmp_path):
    """The keys only runs cut from a vocab ladder have (`always=False`), against real ones;
    and those of an input without held-out file, whose last documents a ladder holds out too
    (its one training reads the first documents only)."""
    from bpe.analysis.loader import load_tidy
    from bpe.formats.gpt2_format import merges_sha256
    from bpe.text.specials import EOT
    from bpe.training import train_bpe

    corpus = ROOT / "tests" / "fixtures" / "tinystories_sample.txt"  # 6 documents
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "-m",
            "debug=fast",
            "progress=false",
            f"dataset.path={corpus}",
            "dataset.heldout_fraction=0.3",
            "vocab_size=270,280",
            f"experiments_dir={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (sweep,) = (tmp_path / "sweeps").iterdir()
    for job in sorted(sweep.glob("*/" + layout.METRICS_FILE)):
        metrics = json.loads(job.read_text("utf-8"))
        ladder_keys = [k for n, k in schema.KEYS.items() if n.startswith("LADDER")]
        for k in ladder_keys:
            assert schema.has(metrics, k), k.dotted
        assert set(metrics["ladder"]) == set(schema.LadderRecord.__annotations__)
        assert schema.get(metrics, schema.LADDER_LARGEST_VOCAB) == 280
        assert schema.get(metrics, schema.LADDER_RUNG_SECONDS) == schema.get(
            metrics, schema.MERGE_SECONDS
        )
        for k in (schema.HELDOUT_DOCS, schema.HELDOUT_BYTES, schema.HELDOUT_FILE):
            assert schema.has(metrics, k), k.dotted
        own = metrics["compression"]["own"]
        assert set(schema.HeldOutTail.__annotations__) <= set(own)
        assert schema.get(metrics, schema.OWN_SOURCE) == "input_tail"
        assert metrics["compression"]["own"]["seen_in_training"] is False
        docs = corpus.read_text("utf-8").split(EOT)
        n = schema.get(metrics, schema.HELDOUT_DOCS)
        first = tmp_path / f"first-{n}.txt"
        first.write_text(EOT.join(docs[:-n]), "utf-8")
        merges = train_bpe(first, int(metrics["run"]["vocab_size"]), [EOT], num_workers=1)[1]
        assert metrics["merges_sha256"] == merges_sha256(merges)
    _, runs = load_tidy(sweep, hint="a sweep directory")
    assert set(runs["ladder_trained_in"]) == {min(runs["run_name"])}  # job 0 trained it


def test_bits_per_byte_is_read_back_as_numbers(run):
    metrics = json.loads((run / layout.METRICS_FILE).read_text("utf-8"))
    for k in (
        schema.BITS_PER_BYTE,
        schema.UNIGRAM_BITS_PER_BYTE,
        schema.OTHER_BITS_PER_BYTE,
        schema.BITS_PER_BYTE_MIN,
        schema.BITS_PER_BYTE_MAX,
    ):
        assert isinstance(schema.get(metrics, k), float) and schema.get(metrics, k) > 0, k
    assert schema.get(metrics, schema.BPB_ORDER) == 3


def test_the_typed_sections_are_what_the_runner_writes(run):
    metrics = json.loads((run / layout.METRICS_FILE).read_text("utf-8"))
    for section, typed in schema.SECTIONS.items():
        assert set(metrics[section]) == set(typed.__annotations__), section


def test_every_file_of_a_complete_run_is_there(run):
    missing = [name for name in layout.COMPLETE_RUN_FILES if not (run / name).is_file()]
    assert not missing, f"a complete run lacks {missing}"
    assert layout.experiments_root(run) == run.parent


def test_the_loader_reads_a_real_run_without_warnings(run):
    """A real run has hundreds of nested keys: loading it must not warn (a fragmented frame)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frame = load_runs(run)
    assert list(frame.columns[:3]) == ["run_dir", "run_name", "status"]
    assert len(frame.columns) > 150 and frame["status"].tolist() == ["complete"]


def test_every_section_of_a_run_is_a_measure_or_a_record(run):
    """The MLflow view charts MEASURE_SECTIONS: a new section is one or the other by decision
    (efficiency, undertrained and variant were once left out of the charts by omission)."""
    measures, records = set(schema.MEASURE_SECTIONS), set(schema.RECORD_SECTIONS)
    assert not measures & records
    sections = set(json.loads((run / layout.METRICS_FILE).read_text("utf-8")))
    assert sections <= measures | records, f"decide: {sorted(sections - measures - records)}"
    assert {"efficiency", "undertrained", "variant"} <= measures


def test_the_tidy_columns_come_from_the_schema():
    columns = {k.column for k in schema.KEYS.values()}
    hand_typed = {
        name: source
        for name, source in TIDY_COLUMNS.items()
        if source is not None and source.startswith("metrics.") and source not in columns
    }
    assert not hand_typed, f"name these through bpe.runs.schema: {hand_typed}"


_METRICS_PATH = re.compile(r"metrics(\.[a-z_0-9]+)+\.?")


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """String constants of a module, docstrings left out (their examples are not reads)."""
    tree = ast.parse(path.read_text("utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


@pytest.mark.parametrize("package", READERS)
def test_readers_type_no_metrics_path_by_hand(package):
    allowed = {k.column for k in schema.KEYS.values()}
    found = [
        f"{path.relative_to(ROOT)}:{line}: {value!r}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, value in _string_constants(path)
        if _METRICS_PATH.fullmatch(value) and value.rstrip(".") not in allowed
    ]
    assert not found, f"add these to bpe.runs.schema and read them through it: {found}"


def test_the_scan_sees_a_hand_typed_path(tmp_path):
    module = tmp_path / "reader.py"
    module.write_text('"""Doc: metrics.run.x"""\ncol = "metrics.run.launcher.nmae"\n', "utf-8")
    values = [v for _, v in _string_constants(module)]
    assert values == ["metrics.run.launcher.nmae"]
    assert "metrics.run.launcher.nmae" not in {k.column for k in schema.KEYS.values()}


def run_file_names() -> set[str]:
    """Every name `bpe.runs.layout` gives a file or folder in or around a run directory.

    >>> {"metrics.json", "ANALYSIS.md", ".hydra", "config.yaml"} <= run_file_names()
    True
    """
    names: set[str] = set()
    for value in vars(layout).values():
        values = value if isinstance(value, tuple | frozenset) else [value]
        if isinstance(value, dict):
            values = value.values()
        names.update(v for v in values if isinstance(v, str))
    return {n for n in names if "." in n or n in {layout.FIGURES_DIR, layout.PROFILE_DIR}}


def _hand_typed_file_names(root: Path) -> list[str]:
    names = run_file_names()
    return [
        f"{path.relative_to(root)}:{line}: {value!r}"
        for path in sorted((root / "bpe").rglob("*.py"))
        if path.name != "layout.py" or path.parent.name != "runs"
        for line, value in _string_constants(path)
        if value in names
    ]


def test_no_module_types_a_run_file_name_by_hand():
    """File names are written once, in bpe.runs.layout: a writer and a reader that typed
    `merges.txt` apart could drift apart; every one reads the name from there."""
    found = _hand_typed_file_names(ROOT)
    assert not found, f"name these through bpe.runs.layout: {found}"


def test_the_file_name_scan_sees_a_hand_typed_name(tmp_path):
    module = tmp_path / "bpe" / "reader.py"
    module.parent.mkdir()
    module.write_text('"""Reads merges.txt."""\npath = "merges.txt"\n', "utf-8")
    assert _hand_typed_file_names(tmp_path) == ["bpe/reader.py:2: 'merges.txt'"]
