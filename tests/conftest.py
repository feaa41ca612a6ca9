"""Shared paths and fixtures for the test suite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bpe.text.specials import EOT  # noqa: F401  (re-exported for the tests)
from bpe.trainers import TRAINERS

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
DATA = ROOT / "data"


def console_env() -> dict[str, str]:
    """The environment for running console scripts (`bpe-train`) of this interpreter's venv."""
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    env.pop("HYDRA_FULL_ERROR", None)
    return env


#: Compiles every Numba kernel once (the trainer's, the pre-tokenizer's, the encoder's: grouped,
#: whole-text, dropout, segmentation and PickyBPE's replay) into Numba's cache beside the
#: modules; a no-op when Numba is not installed.
_WARM_NUMBA = """
import importlib.util, sys
if importlib.util.find_spec("numba") is None:
    sys.exit(0)
from bpe.experiment.compile_ahead import warm_and_record
from bpe.pretokenize.engines import load_scanner
from bpe.tokenizer.warm import WAYS
from bpe.trainers.compiled import compile_kernels
compile_kernels()
load_scanner()
warm_and_record(sorted(WAYS))  # and recorded: runs of the suite start no compile helper
from bpe import Tokenizer
tok = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")],
                merge_backend="compiled")
tok.encode("ab ab" * 40, dropout=0.1, seed=0)
"""


def pytest_configure(config: pytest.Config) -> None:
    """Under `-n`, fill Numba's cache before the workers start.

    Otherwise each worker, and each subprocess a test starts before the cache is written,
    compiles the same kernels at once (about 20 s of CPU each on a fresh clone). Tests of the
    compile step itself use their own empty cache (`NUMBA_CACHE_DIR`).
    """
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", default=None):
        return
    subprocess.run(
        [sys.executable, "-c", _WARM_NUMBA], cwd=ROOT, capture_output=True, timeout=900, check=False
    )


@pytest.fixture(scope="module")
def gpt2():
    """GPT-2's tokenizer (bpe/data/gpt2), loaded once per process."""
    from bpe.measures import gpt2_tokenizer

    return gpt2_tokenizer()


@pytest.fixture(scope="module")
def trained():
    """A tokenizer trained to vocab 500 on the CS336 fixture corpus."""
    from bpe import Tokenizer, train_bpe

    vocab, merges = train_bpe(FIXTURES / "corpus.en", 500, [EOT])
    return Tokenizer(vocab, merges, [EOT])


@pytest.fixture(params=sorted(TRAINERS))
def trainer_name(request) -> str:
    """Each trainer name in turn."""
    return request.param


def sigint_as_in_a_terminal() -> None:
    """A `preexec_fn`: SIGINT back to its default, as a terminal's foreground command has it.

    A shell starts a background job with SIGINT ignored, children inherit that, and Python then
    never raises KeyboardInterrupt: Ctrl-C tests started from such a job would see nothing.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# -- the suite leaves the checkout as it found it -------------------------------------------------
#: What Python and the test tools themselves leave behind (never the project's own output).
_TOOL_LITTER = (".pytest_cache", "__pycache__", ".hypothesis", ".ruff_cache", ".egg-info", ".venv")


def checkout_state(root: Path = ROOT) -> dict[str, str]:
    """What the suite must not change: untracked and ignored files (experiments/ included),
    the changes to tracked files, and where `experiments/latest` points."""
    import hashlib
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=False
        ).stdout

    listing = git("status", "--porcelain", "--ignored", "--untracked-files=all")
    state = {
        line[3:]: line[:2]
        for line in listing.splitlines()
        if not any(part in line for part in _TOOL_LITTER)
    }
    state["<diff of tracked files>"] = hashlib.sha256(git("diff").encode()).hexdigest()
    latest = root / "experiments" / "latest"
    state["<experiments/latest>"] = os.readlink(latest) if latest.is_symlink() else "absent"
    return state


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput") and (ROOT / ".git").exists():
        session.config.stash[_BEFORE] = checkout_state()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_BEFORE, None)
    if before is None:  # an xdist worker, or not a git checkout (an installed copy)
        return
    after = checkout_state()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        lines = [f"  {k}: {before.get(k, '(none)')} -> {after.get(k, '(none)')}" for k in changed]
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = "the test suite changed the checkout (tests must write to tmp_path):\n"
        if reporter is not None:
            reporter.write_line(message + "\n".join(lines), red=True)


_BEFORE = pytest.StashKey[dict]()


def _fast_analysis() -> tuple[str, ...]:
    """`debug=fast`'s analysis settings as command-line overrides (bpe/conf/debug/fast.yaml is
    their one home), for runs that keep every other default (the workers, the vocab)."""
    from omegaconf import OmegaConf

    from bpe.util.io import CONF_DIR

    analysis = OmegaConf.load(CONF_DIR / "debug" / "fast.yaml")["analysis"]
    shown = {True: "true", False: "false"}
    return tuple(f"analysis.{key}={shown.get(value, value)}" for key, value in analysis.items())


#: The analysis of a `debug=fast` run: a few documents, no GPT-2 baseline, small samples
FAST_ANALYSIS = _fast_analysis()


def fast_run(corpus: Path, experiments: Path, *args: str, timeout: float = 600) -> dict:
    """`bpe-train debug=fast` on corpus (as a user runs it, in a subprocess) into experiments;
    asserts it succeeded and returns the run's metrics.json."""
    import json

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "debug=fast",
            f"dataset.path={corpus}",
            f"experiments_dir={experiments}",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = [p for p in experiments.glob("2*/metrics.json") if not p.parent.is_symlink()]
    return json.loads(path.read_text("utf-8"))


def late_bad_utf8(directory: Path, name: str = "bad.txt") -> Path:
    """A corpus that passes every up-front check (UTF-8 in its first bytes) and fails only when
    stage 1 reads it: a job that fails inside the run, not before it."""
    path = directory / name
    path.write_bytes(b"hello world\n" * 2000 + b"\xff\xfe broken\n")
    return path


def missing_keys(metrics: dict, *prefix: str, **parts: str) -> list[str]:
    """The schema keys under `prefix` (all of them where none) that a real run's metrics.json
    lacks, `{name}` parts filled from `parts`: what a test of a run of one kind (continued,
    SuperBPE, failed) checks for the keys only that kind writes (`always=False`)."""
    from bpe.runs import schema

    return [
        name
        for name, k in schema.KEYS.items()
        if k.path[: len(prefix)] == prefix
        and not (k.parts - parts.keys())
        and not schema.has(metrics, k.at(**parts))
    ]


def _bpe_train(
    experiments_dir: Path, overrides: tuple[str, ...], timeout: int
) -> subprocess.CompletedProcess:
    """`bpe-train OVERRIDES experiments_dir=...` from the repository, as a user starts it."""
    return subprocess.run(
        [sys.executable, "-m", "bpe.cli.train", *overrides, f"experiments_dir={experiments_dir}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def train_run(experiments_dir: Path, *overrides: str, timeout: int = 900) -> Path:
    """A real `bpe-train` run with `overrides` into `experiments_dir`, as a user starts it (a
    subprocess from the repository); returns its run directory (fails with its stderr)."""
    proc = _bpe_train(experiments_dir, overrides, timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from bpe.runs.layout import LATEST

    return (experiments_dir / LATEST).resolve()


_OPENED: dict = {}


def opened_once(run: Path):
    """`Tokenizer.from_pretrained(run)`, opened once per test process (hypothesis tests call
    it per example)."""
    if run not in _OPENED:
        from bpe import Tokenizer

        _OPENED[run] = Tokenizer.from_pretrained(run)
    return _OPENED[run]


def train_refused(experiments_dir: Path, *overrides: str, timeout: int = 300) -> str:
    """A `bpe-train` that must fail (a bad setting): asserts a nonzero exit and returns what
    it printed (stdout and stderr), for the test to find the message it expects."""
    proc = _bpe_train(experiments_dir, overrides, timeout)
    assert proc.returncode != 0, f"bpe-train {' '.join(overrides)} did not fail"
    return proc.stderr + proc.stdout


def _succeeds(argv: list[str], timeout: int) -> subprocess.CompletedProcess:
    """`argv` run from the repository, as a user runs it; asserts it succeeded (failing with
    its stderr)."""
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def report_page(name: str, *args: str, timeout: int = 1200) -> subprocess.CompletedProcess:
    """`bpe-report --page NAME ARGS`, as a user runs it (asserted to succeed)."""
    return _succeeds([sys.executable, "-m", "bpe.cli.report", "--page", name, *args], timeout)


def script_run(script: str, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """`python scripts/<script> ARGS`, as a user runs it (asserted to succeed)."""
    return _succeeds([sys.executable, f"scripts/{script}", *args], timeout)
