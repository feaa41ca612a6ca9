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
    # a key with a `{side}` part holds for each held-out side the run measured: both, here
    sides = [s for s in ("own", "other") if schema.has(metrics, schema.COMPRESSION_OF.at(side=s))]
    assert sides == ["own", "other"]
    missing = {
        name
        for name, k in schema.KEYS.items()
        for side in sides
        if k.always and not schema.has(metrics, k.at(side=side, i=0))
    }
    assert not missing, f"metrics.json of a complete run lacks {sorted(missing)}"
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
    from bpe.pipeline import train_bpe
    from bpe.text.specials import EOT

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


def _from_metrics(node: ast.AST, names: set[str]) -> bool:
    """Whether an expression holds metrics.json or a part of it: a name bound to it, a read
    of one, an accessor such as `partial(schema.get, metrics)`, or a choice between them."""
    match node:
        case ast.Name(id=name):
            return name in names
        case ast.Subscript(value=base) | ast.Attribute(value=base):
            return _from_metrics(base, names)
        case ast.Call(func=ast.Attribute(value=ast.Name(id="schema"), attr="get"), args=args):
            return bool(args) and _from_metrics(args[0], names)
        case ast.Call(func=ast.Attribute(value=base, attr="get")):
            return _from_metrics(base, names)
        case ast.Call(func=ast.Name(id="partial"), args=[_, first, *_]):
            return _from_metrics(first, names)
        case ast.Call(func=ast.Name(id=name)):
            return name in names
        case ast.BoolOp(values=values):
            return any(_from_metrics(v, names) for v in values)
        case ast.IfExp(body=body, orelse=orelse):
            return _from_metrics(body, names) or _from_metrics(orelse, names)
    return False


def _bind(target: ast.AST, value: ast.AST, names: set[str]) -> None:
    """Follow an assignment: a name bound to a part of metrics.json joins `names`."""
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
        for t, v in zip(target.elts, value.elts):
            _bind(t, v, names)
    elif isinstance(target, ast.Name) and _from_metrics(value, names):
        names.add(target.id)


def _literal_key(node: ast.AST) -> str | None:
    """The string a subscript or a `.get(...)` reads, where it is typed as a literal."""
    match node:
        case ast.Subscript(slice=ast.Constant(value=str(k)), ctx=ast.Load()):
            return k
        case ast.Call(func=ast.Attribute(attr="get"), args=[ast.Constant(value=str(k)), *_]):
            return k
    return None


def hand_typed_metrics_reads(path: Path) -> list[tuple[int, str]]:
    """Reads of metrics.json by a literal key, anywhere in a module: in each function, names
    bound to metrics.json (a parameter `metrics` or `*_metrics`) or to a part of it are
    followed through assignments, and a literal subscript or `.get` on one is a hand-typed key.
    """
    tree = ast.parse(path.read_text("utf-8"))
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        names = {"metrics"} | {
            a.arg for a in fn.args.args + fn.args.kwonlyargs if a.arg.endswith("_metrics")
        }
        # a name is bound once its assignment has run: reads inside the assignment come first
        events = []
        for node in ast.walk(fn):
            if _literal_key(node) is not None:
                events.append(((node.lineno, node.col_offset), 0, node))
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                events.append(((node.end_lineno, node.end_col_offset), 1, node))
        for _, kind, node in sorted(events, key=lambda e: (e[0], e[1])):
            if kind == 1:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    _bind(target, node.value, names)
            elif _from_metrics(
                node.value if isinstance(node, ast.Subscript) else node.func.value, names
            ):
                found.append((node.lineno, _literal_key(node)))
    return sorted(set(found))


def test_no_module_reads_metrics_by_a_hand_typed_key():
    """Every read of metrics.json outside `bpe.runs` names its field through a schema key, so
    a renamed field fails `test_every_key_a_reader_uses_is_in_a_real_run`, not a report."""
    found = [
        f"{path.relative_to(ROOT)}:{line}: {key!r}"
        for path in sorted((ROOT / "bpe").rglob("*.py"))
        if path.parent.name != "runs"
        for line, key in hand_typed_metrics_reads(path)
    ]
    assert not found, f"read these through bpe.runs.schema keys: {found}"


def test_the_metrics_read_scan_follows_names_and_accessors(tmp_path):
    module = tmp_path / "reader.py"
    module.write_text(
        "from functools import partial\n"
        "def a(metrics):\n"
        "    get = partial(schema.get, metrics)\n"
        "    own, n = get(schema.COMPRESSION_OWN), 3\n"
        "    c = (metrics.get('counts') or {}).get('merges')\n"
        "    return own['ratio'], n, c\n"
        "def b(run_dir, side_metrics):\n"
        "    table = load(run_dir)\n"
        "    key = schema.get(side_metrics, schema.RUN_NAME)\n"
        "    return table['name'], side_metrics['status'], key\n",
        "utf-8",
    )
    assert hand_typed_metrics_reads(module) == [
        (5, "counts"),
        (5, "merges"),
        (6, "ratio"),
        (10, "status"),
    ]


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
