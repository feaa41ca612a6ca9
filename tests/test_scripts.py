"""Every script in scripts/ runs, so a moved function breaks a test instead of a user.

Two guards:

* imports, statically: each script is parsed and every `from bpe.x import y` (at any depth,
  also inside functions, where a missing name only fails when that function runs), every
  `import bpe.x` and every use of an imported module's attribute (`mod.y`) is checked against
  the library; imports of sibling scripts are checked against the names the sibling defines;
* runs: each script runs as a real process of this interpreter with its smallest settings
  (`SMALLEST`), its outputs in tmp_path, and must exit 0, print or write what it promises and
  leave the checkout untouched. A script covered by another test file names that test instead.

Scripts are discovered by globbing scripts/*.py: a new script without an entry in `SMALLEST`
fails here until its smallest run is added.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import FIXTURES, ROOT, console_env

SCRIPTS = ROOT / "scripts"
# where scripts write by default: a run under test must leave these as they were
GUARDED = ("reports", "tests/fixtures", "data")


@dataclass(frozen=True)
class Smallest:
    """How a script runs in seconds. `{tmp}` and `{fixtures}` in arguments are filled in."""

    runs: tuple[tuple[str, ...], ...] = ()  # one argument list per process
    prints: tuple[str, ...] = ()  # text the output (stdout + stderr) must contain
    writes: tuple[str, ...] = ()  # glob patterns under tmp_path that must match a file
    covered_by: tuple[str, ...] = ()  # "tests/<file>.py::<test>" that runs the script instead
    slow: bool = False


SMALLEST: dict[str, Smallest] = {
    "bench_encode.py": Smallest(
        runs=(("--quick",),),
        prints=(
            "| TinyStories | 0.30 |",
            "| OWT | 0.30 |",
            "| tiktoken GPT-2 | - |",
            "PickyBPE's removals (vocab 1,000",
        ),
    ),
    "bench_full_size.py": Smallest(
        covered_by=(
            "tests/test_scale_bench.py::"
            "test_the_full_size_benchmark_measures_every_step_on_a_small_corpus",
        ),
    ),
    "bench_pretokenize.py": Smallest(
        runs=(("--smoke",),), prints=("| regex |", "| compiled |", "compiled / regex:")
    ),
    "bench_readers.py": Smallest(  # no timing asserted: the formats must read the same text
        runs=(("--smoke", "--out", "{tmp}/readers.md"),),
        prints=("| txt.gz |", "| jsonl.zst |", "| parquet |", "## count (0.5 MB of text)"),
        writes=("readers.md",),
    ),
    "bench_scale.py": Smallest(
        covered_by=("tests/test_scale_bench.py::test_quick_benchmark_writes_results_and_report",),
    ),
    "bench_scale_worker.py": Smallest(
        runs=(
            ('{"impl": "ours", "path": "{fixtures}/corpus.en", "vocab_size": 300}',),
            ('{"impl": "hf", "path": "{fixtures}/corpus.en", "vocab_size": 300}',),
        ),
        prints=('"merges": 43',),
    ),
    "bench_train.py": Smallest(
        runs=(("--smoke",),), prints=("TinyStories @ 500: heap / HF", "OWT @ 500: heap / HF")
    ),
    "download_data.py": Smallest(  # needs the Hub: tested against a local one, and offline
        covered_by=(
            "tests/test_download_data.py::test_download_lands_at_dataset_path_and_cache_serves_a_rerun",
            "tests/test_download_data.py::test_offline_error_says_what_failed_and_how_to_fix_it",
        ),
    ),
    "make_fixture_experiments.py": Smallest(
        runs=(("--quick", "--dest", "{tmp}/experiments"),),
        writes=(
            "experiments/sweeps/*/*_indexed_v300/metrics.json",
            "experiments/sweeps/*/*_heap_v300/merges.txt",
            "experiments/2000-01-01_00-00-00_000000_corrupt_heap_v300/metrics.json",
        ),
        slow=True,
    ),
    "make_scale_corpus.py": Smallest(
        runs=(("--size", "300K", "--out", "{tmp}/owt_300K.txt"),), writes=("owt_300K.txt",)
    ),
}


def _scripts() -> list[str]:
    return sorted(p.name for p in SCRIPTS.glob("*.py"))


# ---------------------------------------------------------------------------------------------
# Imports, statically
# ---------------------------------------------------------------------------------------------


def _top_level_names(path: Path) -> set[str]:
    """Names a sibling script binds at module level (defs, classes, assignments, imports)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text("utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _has(module: ModuleType, name: str) -> bool:
    """`name` is an attribute of the module or one of its submodules (a package's `from p import
    sub` works without `sub` imported yet)."""
    return hasattr(module, name) or _is_submodule(module, name)


def _is_submodule(module: ModuleType, name: str) -> bool:
    if not hasattr(module, "__path__"):
        return False
    return importlib.util.find_spec(f"{module.__name__}.{name}") is not None


def broken_imports(source: str, *, siblings: Path = SCRIPTS) -> list[str]:
    """What in `source` names a library (`bpe`) or sibling-script name that does not exist.

    >>> broken_imports("def f():\\n    from bpe.pretokenize import no_such_name\\n")
    ["line 2: 'bpe.pretokenize' has no 'no_such_name'"]
    >>> broken_imports("from bpe.corpus.chunks import find_chunk_boundaries")
    []
    """
    problems: list[str] = []
    modules: dict[str, ModuleType | set[str]] = {}  # local name -> bpe module | sibling's names
    tree = ast.parse(source)

    def load(name: str, line: int) -> ModuleType | set[str] | None:
        if name == "bpe" or name.startswith("bpe."):
            try:
                return importlib.import_module(name)
            except ImportError as err:
                problems.append(f"line {line}: cannot import {name!r} ({err})")
                return None
        sibling = siblings / f"{name}.py"
        return _top_level_names(sibling) if sibling.is_file() else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                module = load(alias.name, node.lineno)
                if module is None:
                    continue
                if alias.asname:
                    modules[alias.asname] = module
                else:  # `import a.b` binds `a`
                    top = load(alias.name.split(".")[0], node.lineno)
                    if top is not None:
                        modules[alias.name.split(".")[0]] = top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            module = load(node.module, node.lineno)
            if module is None:
                continue
            for alias in node.names:
                if alias.name == "*":
                    continue
                if isinstance(module, set):
                    found = alias.name in module
                elif hasattr(module, alias.name):
                    found, value = True, getattr(module, alias.name)
                    if isinstance(value, ModuleType):  # `from bpe import chunks`
                        modules[alias.asname or alias.name] = value
                elif found := _is_submodule(module, alias.name):  # not imported by the package
                    value = importlib.import_module(f"{node.module}.{alias.name}")
                    modules[alias.asname or alias.name] = value
                if not found:
                    problems.append(f"line {node.lineno}: {node.module!r} has no {alias.name!r}")
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
            continue
        module = modules.get(node.value.id)
        if module is None:
            continue
        found = node.attr in module if isinstance(module, set) else _has(module, node.attr)
        if not found:
            problems.append(f"line {node.lineno}: {node.value.id}.{node.attr} does not exist")
    return problems


@pytest.mark.parametrize("script", _scripts())
def test_every_import_of_the_library_resolves(script):
    problems = broken_imports((SCRIPTS / script).read_text("utf-8"))
    assert not problems, f"scripts/{script}: " + "; ".join(problems)


@pytest.mark.parametrize(
    "source, problem",
    [
        # the bug this guards against: chunk planning moved out of bpe.pretokenize, and the
        # import inside a function failed only when a user reached that function
        (
            "def f():\n    from bpe.pretokenize import find_chunk_boundaries\n",
            "line 2: 'bpe.pretokenize' has no 'find_chunk_boundaries'",
        ),
        ("import bpe.no_such_module\n", "line 1: cannot import 'bpe.no_such_module'"),
        (
            "from bpe.corpus import chunks\nchunks.no_such_name\n",
            "line 2: chunks.no_such_name does",
        ),
        (
            "import bpe.corpus.chunks as c\nc.plan_chunks\nc.gone\n",
            "line 3: c.gone does not exist",
        ),
        ("from make_scale_corpus import no_such_name\n", "line 1: 'make_scale_corpus' has no"),
        ("import make_scale_corpus as corpus\ncorpus.gone\n", "line 2: corpus.gone does"),
    ],
)
def test_the_import_check_catches_a_moved_name(source, problem):
    problems = broken_imports(source)
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_the_import_check_accepts_what_exists():
    source = (
        "import bpe.corpus.chunks as c\nfrom bpe import train_bpe\n"
        "from bpe.corpus import chunks\n"
        "from make_scale_corpus import make_corpus\nimport make_scale_corpus as corpus\n"
        "def f():\n    from bpe.encode.npy import encode_to_npy\n"
        "c.plan_chunks, chunks.plan_chunks, corpus.make_corpus\n"
    )
    assert broken_imports(source) == []


# ---------------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------------


def test_every_script_has_its_smallest_run():
    missing = [s for s in _scripts() if s not in SMALLEST]
    assert not missing, (
        f"no smallest run for {missing}: add each to SMALLEST in tests/test_scripts.py with the "
        "arguments that make it finish in seconds (add a --quick flag to the script if it has "
        "none), or the test that already runs it (covered_by)"
    )
    stale = sorted(set(SMALLEST) - set(_scripts()))
    assert not stale, f"SMALLEST names scripts that no longer exist: {stale}; remove them"


def _snapshot() -> dict[str, int]:
    """Modification times of the files scripts write to by default."""
    return {
        str(p.relative_to(ROOT)): p.stat().st_mtime_ns
        for top in GUARDED
        for p in (ROOT / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def _params() -> list:
    """Every script, marked slow where its smallest run still takes a while."""
    slow = {name for name, spec in SMALLEST.items() if spec.slow}
    return [pytest.param(s, marks=[pytest.mark.slow] * (s in slow), id=s) for s in _scripts()]


@pytest.mark.parametrize("script", _params())
def test_script_runs_with_its_smallest_settings(script, tmp_path):
    if script not in SMALLEST:
        pytest.fail(f"add scripts/{script} to SMALLEST in tests/test_scripts.py")
    spec = SMALLEST[script]
    for ref in spec.covered_by:  # the test named there exists and runs this script
        path, _, name = ref.partition("::")
        text = (ROOT / path).read_text("utf-8")
        tests = {n.name for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)}
        assert name in tests, f"{script}: covered_by names {ref!r}, which does not exist"
        assert script in text or f'"{script.removesuffix(".py")}"' in text, (
            f"{path} does not name scripts/{script}"
        )
    assert spec.runs or spec.covered_by, f"{script}: SMALLEST has neither runs nor covered_by"
    if not spec.runs:
        return
    env = {**console_env(), "PYTHONDONTWRITEBYTECODE": "1"}  # no __pycache__ in scripts/
    before = _snapshot()
    output = ""
    for args in spec.runs:
        argv = [
            a.replace("{tmp}", str(tmp_path)).replace("{fixtures}", str(FIXTURES)) for a in args
        ]
        proc = subprocess.run(
            [sys.executable, str(SCRIPTS / script), *argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, (
            f"{script} {argv}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
        )
        output += proc.stdout + proc.stderr
    for text in spec.prints:
        assert text in output, f"{script}: {text!r} not in its output:\n{output[-3000:]}"
    for pattern in spec.writes:
        assert list(tmp_path.glob(pattern)), f"{script} wrote nothing matching {pattern!r}"
    after = _snapshot()
    changed = sorted(k for k in after if before.get(k) != after[k])
    assert not changed, f"{script} wrote into the checkout: {changed[:10]}"
