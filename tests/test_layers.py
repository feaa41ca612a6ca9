"""The layers import one way: every module is checked against one direction table.

`LAYERS` is the architecture in one table: each folder of `bpe/` may import only the layers
listed for it, plus `util`, which every layer may use. Every module is parsed with `ast` and
every import statement is checked, at any nesting level (module top, functions, try blocks,
`if TYPE_CHECKING:`), so a lazy import cannot hide a cycle. A second check imports modules in
a fresh interpreter and looks at what got loaded: what `import bpe.tokenizer` and
`import bpe.analysis.*` must not pull in.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

#: layer -> the layers it may import (besides itself and `util`). Read top to bottom: nothing
#: imports a layer listed below it except through this table, and `cli` sits on everything.
LAYERS: dict[str, set[str]] = {
    "util": set(),
    # a run's record names GPT-2's split pattern when an older run did not (`runs.upgrade`)
    "runs": {"text"},
    "text": set(),
    "corpus": {"text", "runs"},
    "pretokenize": {"text", "corpus", "runs"},
    "trainers": {"text", "pretokenize", "runs"},
    "formats": {"text", "runs"},
    "tokenizer": {"text", "formats"},
    "variants": {"text", "corpus", "pretokenize", "trainers", "runs"},
    "pipeline": {
        "text",
        "corpus",
        "pretokenize",
        "trainers",
        "variants",
        "tokenizer",
        "formats",
        "runs",
    },
    "measures": {"text", "corpus", "tokenizer", "formats", "pretokenize", "runs"},
    "encode": {"text", "corpus", "tokenizer", "formats", "pretokenize", "runs"},
    "evaluation": {
        "text",
        "corpus",
        "pretokenize",
        "tokenizer",
        "formats",
        "pipeline",
        "measures",
        "encode",
        "runs",
    },
    "experiment": {
        "text",
        "corpus",
        "pretokenize",
        "trainers",
        "variants",
        "tokenizer",
        "formats",
        "pipeline",
        "measures",
        "encode",
        "evaluation",
        "runs",
    },
    "analysis": {"text", "corpus", "runs", "measures", "tokenizer", "formats", "pretokenize"},
    "tracking": {"runs"},
    "cli": {
        "text",
        "corpus",
        "pretokenize",
        "trainers",
        "variants",
        "tokenizer",
        "formats",
        "pipeline",
        "measures",
        "encode",
        "evaluation",
        "runs",
        "experiment",
        "analysis",
        "tracking",
    },
}
#: What may sit at the top of `bpe/` besides the layer folders (the issue: about six at most).
TOP_LEVEL = {"__init__.py"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _function_level(tree: ast.AST) -> set[int]:
    """ids of the import nodes that sit inside a function body."""
    inner: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            inner.update(id(n) for n in ast.walk(fn) if isinstance(n, ast.Import | ast.ImportFrom))
    return inner


def imported_modules(path: Path, module: str, *, module_level_only: bool = False) -> set[str]:
    """Every module an import statement anywhere in the file names (relative ones resolved)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    skip = _function_level(tree) if module_level_only else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def layer_of(module: str) -> str | None:
    """The layer a `bpe` module belongs to (None for the package root `bpe` itself).

    >>> layer_of("bpe.trainers.heap"), layer_of("bpe.pipeline"), layer_of("bpe")
    ('trainers', 'pipeline', None)
    """
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "bpe" else None


def _package_modules() -> list[Path]:
    return sorted(p for p in (ROOT / "bpe").rglob("*.py") if "conf" not in p.parts)


def _allowed(layer: str, target: str) -> bool:
    return target in (layer, "util") or target in LAYERS[layer]


def test_every_module_belongs_to_a_layer_of_the_table():
    top = {p.name for p in (ROOT / "bpe").iterdir() if p.suffix == ".py"}
    assert top <= TOP_LEVEL, f"modules at the top of bpe/ outside the table: {top - TOP_LEVEL}"
    folders = {
        p.name for p in (ROOT / "bpe").iterdir() if p.is_dir() and (p / "__init__.py").exists()
    }
    assert folders == set(LAYERS) - {p.removesuffix(".py") for p in TOP_LEVEL}, folders


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_each_layer_imports_only_what_the_table_allows(layer):
    offenders: dict[str, list[str]] = {}
    for path in _package_modules():
        module = _module_name(path)
        if layer_of(module) != layer:
            continue
        for name in imported_modules(path, module):
            target = layer_of(name)
            if name.startswith("bpe.") and target in LAYERS and not _allowed(layer, target):
                offenders.setdefault(module, []).append(name)
            if name == "bpe" or (name.startswith("bpe.") and target not in LAYERS):
                # the package root: only its version (its public names load trainers lazily)
                if name not in ("bpe", "bpe.__version__"):
                    offenders.setdefault(module, []).append(name)
    assert not offenders, f"{layer} may import only {sorted(LAYERS[layer])}: {offenders}"


def _loaded_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after running `statement`."""
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return set(json.loads(proc.stdout.splitlines()[-1]))


#: What encode workers must not load (they rebuild a `Tokenizer` from its parts).
HEAVY_FOR_THE_TOKENIZER = ("numpy", "tiktoken", "tokenizers", "bpe.trainers", "bpe.pipeline")


#: Stage 1's machinery, which the tokenizer never needs: the process pool, Dask, the corpus
#: readers and every other module of stage 1 (the text rules it shares live in `bpe.text`).
STAGE_ONE = (
    "bpe.pretokenize",
    "bpe.util.pool",
    "bpe.util.workers",
    "dask",
    "distributed",
    "multiprocessing",
    "pyarrow",
)


def test_the_tokenizer_loads_no_trainer_numpy_exporter_or_stage_one():
    loaded = _loaded_after("import bpe.tokenizer")
    heavy = sorted(
        m
        for m in loaded
        if any(m == h or m.startswith(h + ".") for h in (*HEAVY_FOR_THE_TOKENIZER, *STAGE_ONE))
    )
    assert not heavy, f"import bpe.tokenizer loaded {heavy}"
    assert "bpe.formats.exports" not in loaded  # numpy, tiktoken, tokenizers: on first use


@pytest.mark.parametrize(
    "module",
    sorted(_module_name(p) for p in (ROOT / "bpe" / "analysis").glob("*.py")),
)
def test_reading_runs_loads_no_trainer(module):
    loaded = _loaded_after(f"import {module}")
    trainers = sorted(
        m for m in loaded if m in ("bpe.trainers", "bpe.pipeline") or m.startswith("bpe.trainers.")
    )
    assert not trainers, f"import {module} loaded {trainers}"
    assert not [m for m in loaded if m.startswith("bpe.experiment")], module


def test_the_python_trainers_load_no_numba():
    """Numba is the `compiled` extra: training with naive, indexed or heap never imports it."""
    loaded = _loaded_after(
        "from bpe import train_bpe\n"
        "import bpe.trainers.compiled\n"  # its adapter alone does not load it either
        "from bpe.trainers import check_trainer, learn_merges\n"
        "for name in ('naive', 'indexed', 'heap'):\n"
        "    check_trainer(name)\n"
        "    learn_merges(name, {b'low': 5, b'lowest': 2}, 260)\n"
        # stage 1 too: pretokenize.engine=auto splits with regex for these trainers
        f"train_bpe({str(ROOT / 'tests' / 'fixtures' / 'corpus.en')!r}, 270, ['<|endoftext|>'],"
        " trainer='heap')\n"
    )
    assert not [m for m in loaded if m == "numba" or m.startswith("numba.")]
    assert "bpe.trainers.compiled_kernels" not in loaded
    assert "bpe.pretokenize.scan_kernels" not in loaded


def test_the_checker_sees_nested_and_relative_imports(tmp_path):
    module = tmp_path / "sneaky.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from bpe.pipeline import TrainResult\n"
        "def f():\n"
        "    try:\n"
        "        from bpe.analysis.run.report import write_run_report\n"
        "    except ImportError:\n"
        "        import bpe.analysis\n"
        "    from ..analysis import loader\n",
        "utf-8",
    )
    names = imported_modules(module, "bpe.experiment.sneaky")
    assert "bpe.analysis.run.report" in names and "bpe.analysis" in names
    assert "bpe.analysis.loader" in names and "bpe.pipeline" in names
    assert not _allowed("tokenizer", layer_of("bpe.pipeline"))
    assert imported_modules(module, "bpe.experiment.sneaky", module_level_only=True) == {
        "typing",
        "typing.TYPE_CHECKING",
        "bpe.pipeline",
        "bpe.pipeline.TrainResult",
    }


def test_the_table_has_no_cycle():
    """A layer never reaches itself through the table: the allowed imports form a DAG."""
    order: list[str] = []
    remaining = {layer: set(deps) - {layer} for layer, deps in LAYERS.items()}
    while remaining:
        ready = sorted(layer for layer, deps in remaining.items() if deps <= set(order))
        assert ready, f"cycle among {sorted(remaining)}"
        order += ready
        for layer in ready:
            del remaining[layer]


def map_entries(doc: str) -> list[str]:
    """The modules the map in a docstring names: `bpe.x` lines, and `.y` lines below them.

    >>> map_entries("    bpe.a   the a layer\\n      .b    its b\\n    bpe.c  c\\n")
    ['bpe.a', 'bpe.a.b', 'bpe.c']
    """
    names: list[str] = []
    package = ""
    for line in doc.splitlines():
        first = line.split(maxsplit=1)[0] if line.strip() else ""
        if first.startswith("bpe.") and line.startswith("    bpe."):
            package = first
            names.append(first)
        elif first.startswith(".") and first[1:2].isalpha() and package:
            names.append(package + first)
    return names


def test_the_module_map_names_every_module_once():
    import bpe

    named = map_entries(bpe.__doc__ or "")
    on_disk = {_module_name(p) for p in _package_modules()} - {"bpe"}
    twice = sorted({n for n in named if named.count(n) > 1})
    assert not twice, f"named more than once in bpe/__init__.py's map: {twice}"
    assert set(named) == on_disk, (
        f"missing from the map: {sorted(on_disk - set(named))}; "
        f"named but not on disk: {sorted(set(named) - on_disk)}"
    )
