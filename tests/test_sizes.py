"""Sizes that read: no module in bpe/ over 500 lines and no function over 80 lines of code
(its docstring not counted: an entry point documents each of its options, and cutting that
text would not make the code read better), Numba kernel modules aside (a kernel may be long
where splitting it would cost speed: `bpe/trainers/compiled_kernels.py` and
`bpe/tokenizer/compiled.py` say so at the top). No function, kernels included, takes more than
`MAX_POSITIONAL` positional parameters: a kernel's state travels as a few named tuples of
arrays (`bpe.trainers.compiled_kernels.Pairs`, ...), not as dozens of arrays in an order
nothing checks; keyword-only options are an entry point's documented API and not counted.

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
#: Still over the function limit: "path:function" -> lines today (a ceiling). None now.
LONG_FUNCTIONS: dict[str, int] = {}
MAX_POSITIONAL = 11
#: Still over the parameter limit: "path:function" -> positional parameters today (a ceiling).
MANY_PARAMETERS: dict[str, int] = {}


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
                functions[f"{rel}:{node.name}"] = function_lines(node)
    return modules, functions


def function_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines from `def` to its end, less its docstring's."""
    lines = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        if isinstance(first.value.value, str):
            lines -= first.end_lineno - first.lineno + 1
    return lines


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


def test_a_docstring_is_not_counted_but_code_is():
    source = 'def f(x):\n    """Doc.\n\n    More.\n    """\n    y = x\n    return y\n'
    assert function_lines(ast.parse(source).body[0]) == 3
    assert function_lines(ast.parse("def g():\n    return 1\n").body[0]) == 2


def positional_parameters(root: Path) -> dict[str, int]:
    """Every function of `root/bpe` by name, with its positional parameters."""
    found: dict[str, int] = {}
    for path in sorted((root / "bpe").rglob("*.py")):
        rel = str(path.relative_to(root))
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found[f"{rel}:{node.name}"] = len(node.args.posonlyargs) + len(node.args.args)
    return found


def test_no_function_takes_more_positional_parameters_than_the_limit():
    over = {
        name: n
        for name, n in positional_parameters(ROOT).items()
        if n > MANY_PARAMETERS.get(name, MAX_POSITIONAL)
    }
    assert not over, f"pass these as named tuples or keyword options: {over}"
    stale = [n for n in MANY_PARAMETERS if positional_parameters(ROOT).get(n, 0) <= MAX_POSITIONAL]
    assert not stale, f"under the limit now: drop them from MANY_PARAMETERS: {stale}"
