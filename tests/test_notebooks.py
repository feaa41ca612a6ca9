"""Notebooks: every one executes against the fixture experiments, figures render inline, and
JupyterLab itself opens a `.py` notebook as a notebook (jupytext) with its figures as PNG."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import matplotlib.figure
import pytest

from bpe.analysis import figures
from tests.conftest import DATA, FIXTURES, ROOT, console_env, fast_run

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_with_the_documented_command(path: Path, tmp_path):
    """docs/notebooks.md's command (`jupytext --to ipynb --execute`), on a copy of the notebook:
    every cell runs, the tables and figures are kept in the .ipynb it writes."""
    pytest.importorskip("jupytext")
    pytest.importorskip("nbclient")
    docs = (ROOT / "docs" / "notebooks.md").read_text("utf-8")
    assert "jupytext --to ipynb --execute notebooks/0*.py" in docs
    copy = tmp_path / path.name
    copy.write_text(path.read_text("utf-8"), "utf-8")
    env = {**console_env(), "BPE_EXPERIMENTS": str(FIXTURES / "experiments"), "MPLBACKEND": "Agg"}
    jupytext = Path(sys.executable).with_name("jupytext")
    proc = subprocess.run(
        [str(jupytext), "--to", "ipynb", "--execute", str(copy)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    notebook = json.loads(copy.with_suffix(".ipynb").read_text("utf-8"))
    outputs = [o for c in notebook["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    assert any(o["output_type"] in ("display_data", "execute_result") for o in outputs)
    assert any("image/png" in o.get("data", {}) for o in outputs)  # a figure, not its repr
    assert not [o for o in outputs if o["output_type"] == "error"]


def _execute(path: Path, experiments: Path, tmp_path: Path, monkeypatch) -> None:
    jupytext = pytest.importorskip("jupytext")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("BPE_EXPERIMENTS", str(experiments))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = jupytext.read(path)
    client = nbclient.NotebookClient(
        notebook, timeout=180, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell


def test_the_vocab_notebook_runs_on_a_run_with_long_tokens(tmp_path, monkeypatch):
    """A token of 128 bytes (a separator line of dashes) once asked the histogram for 128 bins."""
    corpus = tmp_path / "corpus.txt"
    text = (FIXTURES / "corpus.en").read_text("utf-8")
    corpus.write_text((("-" * 128 + "\n") * 4 + text[:400] + "\n") * 300, "utf-8")
    experiments = tmp_path / "experiments"
    metrics = fast_run(corpus, experiments)
    assert max(int(k) for k in metrics["token_lengths"]) >= 128
    _execute(ROOT / "notebooks" / "02_vocab_and_compression.py", experiments, tmp_path, monkeypatch)


def test_figures_leave_the_matplotlib_backend_alone():
    # A notebook's own plots need the backend Jupyter chose: importing bpe must not switch it.
    code = (
        "import sys, matplotlib; matplotlib.use('pdf'); "
        "import bpe.analysis.figures, bpe.analysis.run.report, bpe.cli.train; "
        "assert matplotlib.get_backend() == 'pdf', matplotlib.get_backend(); "
        "assert 'matplotlib.pyplot' not in sys.modules"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_figure_functions_return_figures_and_save_only_when_given_a_path(tmp_path):
    fig = figures.histogram([1, 2, 2, 3], xlabel="bytes", title="lengths")
    assert isinstance(fig, matplotlib.figure.Figure)
    png = fig._repr_png_()  # what Jupyter shows inline
    assert png.startswith(b"\x89PNG")
    assert list(tmp_path.iterdir()) == []
    saved = figures.histogram([1, 2, 2, 3], tmp_path / "h.png", xlabel="bytes", title="lengths")
    assert isinstance(saved, figures.Figure)
    assert (tmp_path / "h.png").read_bytes() == png


def test_py_notebooks_are_paired_with_git_ignored_ipynb():
    jupytext_config = pytest.importorskip("jupytext.config")
    path = jupytext_config.find_jupytext_configuration_file(str(ROOT / "notebooks"))
    assert path is not None and Path(path).parent == ROOT / "notebooks"
    config = jupytext_config.load_jupytext_configuration_file(path)
    assert config.default_formats(str(NOTEBOOKS[0])) == "ipynb,py:percent"
    for notebook in NOTEBOOKS:
        assert "formats: ipynb,py:percent" in notebook.read_text("utf-8")
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "notebooks/01_compare_trainers.ipynb"], cwd=ROOT
    )
    assert ignored.returncode == 0, "paired .ipynb files must be git-ignored"


def test_progress_bars_are_widgets_in_a_notebook(tmp_path):
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("ipywidgets")
    code = (
        "from bpe.pipeline import train_bpe_detailed\n"
        f"r = train_bpe_detailed({str(FIXTURES / 'corpus.en')!r}, 300, ['<|endoftext|>'],\n"
        "                       num_workers=1, progress=True)\n"
        "r.num_merges"
    )
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nbclient.NotebookClient(
        notebook, timeout=180, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    ).execute()
    outputs = notebook.cells[0].outputs
    widgets = [
        o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    assert len(widgets) >= 2  # pre-tokenization chunks and merges
    stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    assert "IProgress not found" not in stderr
    assert outputs[-1]["data"]["text/plain"] == str(300 - 257)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@pytest.mark.slow
def test_jupyterlab_opens_a_py_notebook_as_a_notebook_with_inline_figures(tmp_path, monkeypatch):
    pytest.importorskip("jupyterlab")
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    root = tmp_path / "lab"
    shutil.copytree(ROOT / "notebooks", root / "notebooks")
    monkeypatch.setenv("BPE_EXPERIMENTS", str(FIXTURES / "experiments"))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's own (inline) backend
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))  # no user settings leak in
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                _get(f"{base}/api/status", token)
                break
            except OSError:
                assert server.poll() is None, (tmp_path / "lab.log").read_text()
                assert time.monotonic() < deadline, "JupyterLab did not start in 120 s"
                time.sleep(0.5)
        model = _get(f"{base}/api/contents/notebooks/01_compare_trainers.py", token)
        assert model["type"] == "notebook", model["type"]  # jupytext's contents manager
        assert model["content"]["metadata"]["jupytext"]["formats"] == "ipynb,py:percent"
        notebook = nbformat.from_dict(model["content"])
        # the user's own plot next to ours: it must render too (the backend is untouched)
        notebook.cells.append(
            nbformat.v4.new_code_cell(
                "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"
            )
        )
        nbclient.NotebookClient(
            notebook,
            timeout=180,
            kernel_name="python3",
            resources={"metadata": {"path": root / "notebooks"}},
        ).execute()
        pngs = [
            k
            for k, cell in enumerate(notebook.cells)
            if cell.cell_type == "code"
            for o in cell.outputs
            if "image/png" in o.get("data", {})
        ]
        assert len(set(pngs)) >= 2, "expected our figure and the user's plot as image/png"
        assert len(notebook.cells) - 1 in pngs  # the user's pyplot cell
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def test_the_vocab_notebook_keeps_runs_measured_on_other_documents_off_its_curves(
    tmp_path, monkeypatch
):
    """A run measured on fewer held-out documents (a `debug=fast` run beside full ones) is
    named as left out, not drawn on the compression curve beside the others."""
    jupytext = pytest.importorskip("jupytext")
    nbclient = pytest.importorskip("nbclient")
    experiments = tmp_path / "experiments"
    for docs, vocab in ((10, "300"), (4, "320")):
        out = tmp_path / f"docs{docs}"
        settings = (f"analysis.max_docs={docs}", f"vocab_size={vocab}")
        fast_run(DATA / "tinystories_sample.txt", out, *settings)
        (run,) = [p for p in out.glob("2*") if not p.is_symlink()]
        experiments.mkdir(exist_ok=True)
        run.rename(experiments / run.name)
    monkeypatch.setenv("BPE_EXPERIMENTS", str(experiments))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = jupytext.read(ROOT / "notebooks" / "02_vocab_and_compression.py")
    client = nbclient.NotebookClient(
        notebook, timeout=180, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    )
    client.execute()
    first = "".join(o.get("text", "") for o in notebook.cells[1].outputs)
    assert "1 complete runs" in first and "left out" in first and "v320" in first, first


def test_a_series_equal_to_an_earlier_one_stays_visible_and_is_named():
    """Two identical curves (two runs with the same merges) would draw one over the other:
    the second is dashed and its legend names its twin."""
    from bpe.analysis import figures

    fig = figures.line(
        {"a / b": [1.0, 0.5], "a / c": [1.0, 0.5], "b / c": [1.0, 1.0]},
        xlabel="k",
        ylabel="share",
        title="t",
    )
    lines = fig.axes[0].get_lines()
    assert [ln.get_label() for ln in lines] == ["a / b", "a / c (= a / b)", "b / c"]
    assert [ln.get_linestyle() for ln in lines] == ["-", "--", "-"]
