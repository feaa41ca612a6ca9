"""Every command README.md and docs/ give works as written.

Each line of a shell code block (and each line of a plain block that starts with a command) is
one case. All of them run in one temporary working directory that holds what the docs assume:
the bundled data (`data/`, linked), two real runs in `experiments/` (a `debug=fast` one, then
the default run with the fast analysis, which `experiments/latest` names), a sweep, and the
example inputs the lines name (`shards/` of parquet, `docs.jsonl.zst`, `my_corpus.txt`, ...),
written from the bundled samples.

How each kind of line is checked, within the suite's time:

* `bpe-train ...`: by the command line's own checks (`bpe.cli.train.checked_jobs`): every job
  of the line composed, every key, value, input and output checked, which is where a run that
  would fail stops before it trains. A line that needs a full dataset must fail naming the
  command that downloads it. `--cfg` lines run for real (they train nothing).
* `bpe-report --page NAME` without `--sweep-dir` (it runs the page's sweeps, minutes to an
  hour): each sweep of the page (`bpe.analysis.pages.registry.PAGES`) by `bpe-train`'s
  checks, as above;
* every other console script (`bpe-report`, `bpe-encode`, `bpe-compare`, `bpe-show`,
  `bpe-prune`, `bpe-parity`) runs for real, as written, and must exit 0;
* `python scripts/X.py ...`: the script exists and its `--help` names each argument the line
  gives (the benchmarks take minutes to hours; tests/test_scripts.py runs each one small);
* `pip install -e ".[X]"`: each extra exists in pyproject.toml; `jupytext --execute` lines:
  the notebooks they name exist (tests/test_notebooks.py runs that command);
* the README's first two commands are run by tests/test_first_run.py and by CI itself.

A line that no rule covers fails: a new kind of documented command needs a rule here.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import DATA, FAST_ANALYSIS, FIXTURES, ROOT, console_env

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = {"bash", "sh", "shell", "console"}
#: the console scripts of pyproject.toml, and the commands a line may start with
CONSOLE = tuple(tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["scripts"])
#: a full dataset this machine has not downloaded: the error must name the download command
NEEDS_DOWNLOAD = {"dataset=owt": "python scripts/download_data.py owt"}


@dataclass(frozen=True)
class Line:
    """One documented command: where it is, and its words as the shell splits them."""

    page: str
    number: int
    text: str

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text, comments=True)

    def __str__(self) -> str:
        return f"{self.page}:{self.number}"


def documented_commands(pages: list[Path] = PAGES) -> list[Line]:
    """The command lines of the pages' code blocks (continuation lines joined).

    >>> page = Path(__import__("tempfile").mkdtemp()) / "p.md"
    >>> block = "```bash\\nbpe-train a=1 \\\\\\n  b=2  # why\\n```\\n"
    >>> _ = page.write_text(block + "```\\nrun/\\n```\\n")
    >>> [(str(c), c.argv) for c in documented_commands([page])]
    [('p.md:2', ['bpe-train', 'a=1', 'b=2'])]
    """
    lines: list[Line] = []
    for page in pages:
        lang: str | None = None
        pending, start = "", 0
        for number, raw in enumerate(page.read_text("utf-8").splitlines(), 1):
            if raw.lstrip().startswith("```"):
                lang = raw.strip()[3:].strip() if lang is None else None
                continue
            if lang is None or (lang and lang not in SHELLS):
                continue
            if not pending:
                start = number
            if raw.rstrip().endswith("\\"):
                pending += raw.rstrip()[:-1] + " "
                continue
            text, pending = (pending + raw).strip(), ""
            if not text or text.startswith("#"):
                continue
            first = text.split()[0]
            if lang == "" and not first.startswith(("bpe-", "python", ".venv/", "pip")):
                continue  # a plain block's listing or output, not a command
            if first.endswith(":"):  # an error message a page quotes
                continue
            lines.append(Line(page.name, start, text))
    return lines


COMMANDS = documented_commands()


def _words(line: Line, names: dict[str, str]) -> list[str]:
    """The line's words with the pages' placeholders and shell variables filled in."""
    out = []
    for word in line.argv:
        for placeholder, value in names.items():
            word = word.replace(placeholder, value)
        out.append(word)
    if out and out[0].startswith(".venv/bin/"):
        out[0] = out[0][len(".venv/bin/") :]
    return out


# ---------------------------------------------------------------------------------------------
# The working directory the docs assume
# ---------------------------------------------------------------------------------------------


def _run(argv: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    bin_dir = Path(sys.executable).parent
    command = [str(bin_dir / argv[0]) if argv[0] in CONSOLE else argv[0], *argv[1:]]
    return subprocess.run(
        command, cwd=cwd, env=console_env(), capture_output=True, text=True, timeout=timeout
    )


def _documents(name: str, count: int) -> list[str]:
    docs = (DATA / name).read_text("utf-8").split("<|endoftext|>")
    return [d.strip() for d in docs if d.strip()][:count]


def _write_inputs(here: Path) -> None:
    """The example inputs the pages name, made from the bundled samples."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    zstd = pytest.importorskip("zstandard")
    docs = _documents("tinystories_sample.txt", 600)
    (here / "shards").mkdir()
    for k in range(2):
        pq.write_table(pa.table({"text": docs[k::2]}), here / "shards" / f"part-{k}.parquet")
    records = "".join(json.dumps({"content": d}) + "\n" for d in docs)
    (here / "docs.jsonl.zst").write_bytes(zstd.ZstdCompressor().compress(records.encode()))
    text = "\n<|endoftext|>\n".join(docs)
    for name in ("my_corpus.txt", "notes.txt", "my.txt"):
        (here / name).write_text(text, "utf-8")
    held = "\n<|endoftext|>\n".join(_documents("owt_sample.txt", 20))
    (here / "held_out.txt").write_text(held, "utf-8")
    flores = ROOT / "bpe" / "data" / "flores200"
    for folder, split in (("my_langs", "dev"), ("my_langs_dev", "devtest")):
        (here / folder).mkdir()
        for lang in ("eng_Latn", "deu_Latn"):
            with gzip.open(flores / split / f"{lang}.{split}.gz", "rt", encoding="utf-8") as f:
                (here / folder / f"{lang}.txt").write_text(f.read(), "utf-8")


@pytest.fixture(scope="module")
def place(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The working directory and the values of the pages' placeholders."""
    here = tmp_path_factory.mktemp("docs_as_written")
    (here / "data").symlink_to(DATA, target_is_directory=True)
    (here / "notebooks").symlink_to(ROOT / "notebooks", target_is_directory=True)
    _write_inputs(here)
    runs = []
    for args in (["debug=fast"], list(FAST_ANALYSIS)):  # the second is what `latest` names
        proc = _run(["bpe-train", *args], here)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(os.path.relpath((here / "experiments" / "latest").resolve(), here))
    (sweep,) = (FIXTURES / "experiments" / "sweeps").iterdir()
    shutil.copytree(sweep, here / "experiments" / "sweeps" / sweep.name)
    names = {
        "<run>": Path(runs[0]).name,  # the pages write experiments/<run>
        "RUN_A": runs[0],
        "RUN_B": runs[1],
        "RUN_DIR": runs[1],
        "<timestamp>": sweep.name,
    }
    return here, names


# ---------------------------------------------------------------------------------------------
# The rules
# ---------------------------------------------------------------------------------------------


def _check_train(words: list[str], here: Path) -> None:
    from bpe.cli.train import ConfigError, checked_jobs

    args = words[1:]
    if any(a.startswith("--") for a in args):  # --cfg, --help: Hydra answers, nothing trains
        proc = _run(words, here, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return
    needs = [hint for arg, hint in NEEDS_DOWNLOAD.items() if arg in args]
    cwd = Path.cwd()
    os.chdir(here)
    try:
        if needs:
            with pytest.raises(ConfigError, match=re.escape(needs[0])):
                checked_jobs(args)
        else:
            assert checked_jobs(args)
    finally:
        os.chdir(cwd)


def _check_script(words: list[str], here: Path) -> None:
    script = next(w for w in words if w.startswith("scripts/"))
    assert (ROOT / script).is_file(), f"{script} does not exist"
    proc = subprocess.run(
        [sys.executable, str(ROOT / script), "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    given = words[words.index(script) + 1 :]
    for word in given:
        assert word.split("=")[0] in proc.stdout, f"{script} --help does not name {word!r}"


def _check_pip(words: list[str]) -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"
    ]
    spec = next(w for w in words if "[" in w)
    for extra in spec[spec.index("[") + 1 : spec.index("]")].split(","):
        assert extra in extras, f"no extra {extra!r} in pyproject.toml"


@pytest.mark.slow
@pytest.mark.parametrize("line", COMMANDS, ids=str)
def test_the_command_works_as_written(line, place):
    here, names = place
    text = line.text
    if text.startswith("python3 -m venv"):  # run by tests/test_first_run.py and by CI
        readme = (ROOT / "README.md").read_text("utf-8")
        assert line.page in ("README.md", "index.md") and text in readme
        return
    if re.fullmatch(r"\w+=\S+(\s+#.*)?", text):  # a shell variable the next lines use
        name, value = line.argv[0].split("=", 1)
        names[f'"${name}"'] = names[f"${name}"] = value
        return
    words = _words(line, names)
    if words[0] == "bpe-train":
        _check_train(words, here)
    elif words[:2] == ["bpe-report", "--page"] and "--sweep-dir" not in words:
        from bpe.analysis.pages.registry import PAGES

        for sweep in PAGES[words[2]].sweep_args(quick="--quick" in words):
            _check_train(["bpe-train", "-m", *sweep], here)
    elif words[0] in CONSOLE:
        proc = _run(words, here)
        assert proc.returncode == 0, f"{' '.join(words)}: {proc.stderr[-3000:]}"
    elif words[0] in ("python", "python3") and any(w.startswith("scripts/") for w in words):
        _check_script(words, here)
    elif "pip" in words[0] and "install" in words:
        _check_pip(words)
    elif words[0] == "jupytext":
        assert "--execute" in words and glob.glob(str(here / words[-1]))
    elif words[0] in ("wandb", "mlflow"):
        # `wandb sync` needs an account and `mlflow ui` serves until stopped (test_tracking.py
        # opens it): the installed CLI has the command and every option the line gives
        assert words[1] in ("sync", "ui"), text
        proc = subprocess.run(
            [str(Path(sys.executable).parent / words[0]), words[1], "--help"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        for option in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
            assert option in proc.stdout, f"{text}: {words[0]} {words[1]} has no {option}"
    else:
        pytest.fail(f"{line}: no rule checks `{text}`; add one to {Path(__file__).name}")


def test_every_page_with_commands_is_read():
    """The parser finds the commands of the pages that give them (a broken parser would
    make the test above check nothing)."""
    pages = {c.page for c in COMMANDS}
    assert {"README.md", "experiments.md", "sweeps.md", "datasets.md", "variants.md"} <= pages
    assert sum(c.argv[0] == "bpe-train" for c in COMMANDS) >= 30
