"""Sizes that read: no module in bpe/ over 500 lines and no function over 80 (docstring
included), Numba kernel modules aside (a kernel may be long where splitting it would cost
speed: `bpe/trainers/compiled_kernels.py` and `bpe/tokenizer/compiled.py` say so at the top).

The modules and functions still over the limits are listed below with their size today: a
ratchet. A listed one may shrink (then lower or drop its entry), never grow, and nothing new
may join the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
#: Numba kernel modules: their kernels may be long (see the module docstring).
KERNEL_MODULES = {"bpe/trainers/compiled_kernels.py", "bpe/tokenizer/compiled.py"}
#: Still over the module limit: path -> lines today (a ceiling, never to rise). None now.
OVERSIZED_MODULES: dict[str, int] = {}
#: Still over the function limit: "path:function" -> lines today (a ceiling).
LONG_FUNCTIONS = {
    "bpe/analysis/report_pages.py:render_trainers": 101,
    "bpe/analysis/report_pages.py:render_datasets": 94,
    "bpe/cli/encode.py:build_parser": 86,
    "bpe/encode/npy.py:encode_to_npy": 157,
    "bpe/experiment/evaluate.py:evaluate": 81,
    "bpe/measures/vocab_stats.py:undertrained_tokens": 96,
    "bpe/pretokenize/__init__.py:pretokenize": 103,
    "bpe/pretokenize/cache.py:pretokenize_cached": 103,
    "bpe/tokenizer/__init__.py:__init__": 83,
    "bpe/trainers/__init__.py:learn_merges": 96,
    "bpe/trainers/compiled.py:_run": 104,
    "bpe/trainers/parent.py:prepare_from_parent": 81,
    "bpe/training.py:train_bpe_detailed": 151,
}


def sizes(root: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Lines of every module of `root/bpe`, and of every function in them, by name."""
    modules: dict[str, int] = {}
    functions: dict[str, int] = {}
    for path in sorted((root / "bpe").rglob("*.py")):
        rel = str(path.relative_to(root))
        text = path.read_text("utf-8")
        modules[rel] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions[f"{rel}:{node.name}"] = node.end_lineno - node.lineno + 1
    return modules, functions


def over_limits(root: Path) -> list[str]:
    modules, functions = sizes(root)
    found = [
        f"{name}: {n} lines (limit {OVERSIZED_MODULES.get(name, MAX_MODULE_LINES)})"
        for name, n in modules.items()
        if name not in KERNEL_MODULES and n > OVERSIZED_MODULES.get(name, MAX_MODULE_LINES)
    ]
    found += [
        f"{name}: {n} lines (limit {LONG_FUNCTIONS.get(name, MAX_FUNCTION_LINES)})"
        for name, n in functions.items()
        if name.split(":")[0] not in KERNEL_MODULES
        and n > LONG_FUNCTIONS.get(name, MAX_FUNCTION_LINES)
    ]
    return found


def test_no_module_or_function_grows_past_its_limit():
    found = over_limits(ROOT)
    assert not found, f"split these (or shrink them): {found}"


def test_the_ratchet_lists_only_what_is_still_over():
    """An entry whose module or function shrank below the limit goes (or lowers its ceiling)."""
    modules, functions = sizes(ROOT)
    stale = [name for name in OVERSIZED_MODULES if modules.get(name, 0) <= MAX_MODULE_LINES]
    stale += [name for name in LONG_FUNCTIONS if functions.get(name, 0) <= MAX_FUNCTION_LINES]
    assert not stale, f"under the limit now: drop them from the lists: {stale}"


def test_the_size_check_sees_a_long_module(tmp_path):
    (tmp_path / "bpe").mkdir()
    (tmp_path / "bpe" / "big.py").write_text("x = 1\n" * 501, "utf-8")
    assert over_limits(tmp_path) == ["bpe/big.py: 501 lines (limit 500)"]
