"""Numba's cache across modules (`bpe.util.jit_cache`): the stale caller it serves without the
check, the fresh one with it, and every kernel module under the check."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("numba")

from bpe.util import jit_cache  # noqa: E402
from tests.conftest import ROOT  # noqa: E402

CALLEE = """
from numba import njit

@njit(cache=True)
def value():
    return {value}
"""
CALLER = """
from numba import njit
from kernels.callee import value

@njit(cache=True)
def twice():
    return 2 * value()
"""
RUN = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
if {check}:
    from bpe.util.jit_cache import fresh_cache
    fresh_cache(Path({root!r}) / "kernels", ["callee.py", "caller.py"])
from kernels.caller import twice
print(twice())
"""


def _write_callee(pkg: Path, value: int) -> None:
    path = pkg / "callee.py"
    path.write_text(CALLEE.format(value=value), encoding="utf-8")
    stamp = path.stat().st_mtime + 10  # a later edit, whatever the clock's resolution
    os.utime(path, (stamp, stamp))


def _twice(tmp_path: Path, *, check: bool) -> int:
    code = RUN.format(root=str(tmp_path), check=check)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    return int(out.stdout.strip())


def test_a_callee_edited_in_another_module_is_stale_without_the_check_and_fresh_with_it(
    tmp_path,
):
    pkg = tmp_path / "kernels"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "caller.py").write_text(CALLER, encoding="utf-8")
    _write_callee(pkg, 1)
    assert _twice(tmp_path, check=False) == 2  # compiled, and cached
    _write_callee(pkg, 5)
    # Numba's own rule: the caller's file did not change, so its machine code (the old
    # callee inside) loads. This is the trap the check exists for.
    assert _twice(tmp_path, check=False) == 2
    assert _twice(tmp_path, check=True) == 10
    assert jit_cache.fresh_cache(pkg, ["callee.py", "caller.py"]) == 0  # checked already
    assert (pkg / "__pycache__" / "kernel_sources.sha256").is_file()


def test_a_read_only_cache_folder_is_skipped_not_fatal(tmp_path):
    pkg = tmp_path / "kernels"
    pkg.mkdir()
    (pkg / "a.py").write_text("x = 1\n", encoding="utf-8")
    (pkg / "__pycache__").write_text("a file where the folder would be", encoding="utf-8")
    assert jit_cache.fresh_cache(pkg, ["a.py"]) == 0


def test_every_module_with_cached_kernels_imports_njit_through_the_check():
    package = ROOT / "bpe"
    cached = {
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if "@njit" in (text := path.read_text(encoding="utf-8"))
        and re.search(r"cache[\"']?\s*[:=]\s*True", text)
        and path.name not in ("jit_cache.py", "kernel_sources.py")  # they name the modules
    }
    assert cached == set(jit_cache.KERNEL_MODULES)
    for name in cached:
        source = (package / name).read_text(encoding="utf-8")
        assert "from bpe.util.jit_cache import njit" in source, name
        assert not re.search(r"^from numba import .*njit", source, re.M), name


def test_the_guard_runs_before_a_kernel_is_loaded():
    """Importing a kernel module runs the check (the stamp is the kernels' current sources)."""
    code = textwrap.dedent(
        """
        import bpe.trainers.compiled_kernels
        from bpe.util import jit_cache
        stamp = jit_cache.PACKAGE / jit_cache.STAMP
        digest = jit_cache.sources_hash(jit_cache.PACKAGE, jit_cache.KERNEL_MODULES)
        print(stamp.read_text() == digest)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "True", out.stderr
