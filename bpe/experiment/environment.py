"""environment.json: what produced a run (code version, interpreter, machine, command).

What it does: records the git sha and dirty flag of the project (and saves `git diff HEAD` as
`diff.patch` when dirty), python and platform, usable CPUs, versions of the packages that shape
the results, argv and Hydra overrides, the multiprocessing start method, and the machine with
its load average when the run started (`host`, from `bpe.util.machine.host`, which the reports
name through `host_line`).

What it does not do: fail a run: anything it cannot learn (no git, say) is recorded as null.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import platform
import socket
import sys
from pathlib import Path

from bpe.runs.layout import DIFF_FILE, ENVIRONMENT_FILE
from bpe.util.io import atomic_write_text, git_output, git_sha
from bpe.util.machine import ENV_KEY, host, versions
from bpe.util.workers import default_num_workers

PACKAGES = (
    "bpe-lab",
    "hydra-core",
    "omegaconf",
    "regex",
    "numpy",
    "pandas",
    "matplotlib",
    "scalene",
    "psutil",
    "tqdm",
    "tabulate",
    "tokenizers",
    "tiktoken",
    "distributed",  # the dask backend's (None when the extra is not installed)
    "numba",  # the compiled trainer's and the encoder kernels' (None without the extra)
    "pyarrow",  # parquet corpora's
)


def capture(*, argv: list[str] | None = None, overrides: list[str] | None = None) -> dict:
    """The environment of this process as a JSON-ready dict (git diff under key `_diff`)."""
    sha = git_sha()
    status = git_output("status", "--porcelain", "--untracked-files=no")
    dirty = None if status is None else bool(status.strip())
    diff = git_output("diff", "HEAD") if dirty else None
    return {
        "git": {"sha": sha, "dirty": dirty},
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": default_num_workers(),
        "mp_start_method": mp.get_start_method(allow_none=True) or "fork (default)",
        ENV_KEY: host(),
        "packages": versions(PACKAGES),
        "argv": list(sys.argv if argv is None else argv),
        "overrides": list(overrides or []),
        "_diff": diff,
    }


def write(run_dir: Path, env: dict) -> None:
    """Write environment.json (and diff.patch when the tree was dirty) into run_dir."""
    env = dict(env)
    diff = env.pop("_diff", None)
    if diff:
        atomic_write_text(run_dir / DIFF_FILE, diff)
        env["git"] = {**env["git"], "diff_file": DIFF_FILE}
    atomic_write_text(run_dir / ENVIRONMENT_FILE, json.dumps(env, indent=1) + "\n")
