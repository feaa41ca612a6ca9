"""The layers import one way: neither `bpe.experiment` nor `bpe.analysis` imports the other.

Every module of both packages is parsed with `ast` and every import statement is checked, at
any nesting level (module top, functions, try blocks), so a lazy import cannot hide a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGES = {"bpe.experiment": "bpe.analysis", "bpe.analysis": "bpe.experiment"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, module: str) -> set[str]:
    """Every module an import statement anywhere in the file names (relative ones resolved)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), filename=str(path))):
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


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package.replace(".", "/")).rglob("*.py"))


def _imports_package(names: set[str], package: str) -> list[str]:
    return sorted(n for n in names if n == package or n.startswith(package + "."))


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_experiment_and_analysis_do_not_import_each_other(package):
    forbidden = PACKAGES[package]
    modules = _modules(package)
    assert modules, f"no modules found under {package}"
    offenders = {
        _module_name(path): hits
        for path in modules
        if (hits := _imports_package(imported_modules(path, _module_name(path)), forbidden))
    }
    assert not offenders, f"{package} imports {forbidden}: {offenders}"


def test_the_checker_sees_nested_and_relative_imports(tmp_path):
    module = tmp_path / "sneaky.py"
    module.write_text(
        "def f():\n"
        "    try:\n"
        "        from bpe.analysis.run_report import write_run_report\n"
        "    except ImportError:\n"
        "        import bpe.analysis\n"
        "    from ..analysis import loader\n",
        "utf-8",
    )
    names = imported_modules(module, "bpe.experiment.sneaky")
    assert "bpe.analysis.run_report" in names and "bpe.analysis" in names
    assert "bpe.analysis.loader" in names
