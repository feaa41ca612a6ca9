"""The manual and the front door: the MkDocs site builds with `--strict` (so a broken link or
anchor, a page left out of the nav, or an API reference to a name that moved fails), README.md
stays short with every relative link pointing at a file, its test command is the one CI runs,
and the architecture page names every layer of the direction table.
"""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_layers import LAYERS

README = ROOT / "README.md"
#: Markdown links and images: the target of `[text](target)`.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _build_strict(config: Path, site: Path, cwd: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` as the test runs it. Never with `--quiet`: it hides the warnings
    that strict mode counts, and the build then cannot fail on one."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", config, "-d", site],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    site = tmp_path / "site"
    proc = _build_strict(ROOT / "mkdocs.yml", site, ROOT)
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-5000:]
    for page in (
        "index.html",
        "api/training/index.html",
        "reports/trainers/index.html",
        "run-directory/index.html",
    ):
        assert (site / page).is_file(), page
    assert "train_bpe" in (site / "api" / "training" / "index.html").read_text("utf-8")


def test_the_strict_build_fails_on_a_planted_warning(tmp_path):
    """The check above can fail: the same command on a site with a page left out of the nav
    and a broken link exits non-zero and names both."""
    pytest.importorskip("mkdocs")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[gone](missing.md)\n", "utf-8")
    (docs / "orphan.md").write_text("# Orphan\n", "utf-8")
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        "site_name: planted\nvalidation:\n  omitted_files: warn\n  links:\n"
        "    not_found: warn\nnav:\n  - Home: index.md\n",
        "utf-8",
    )
    proc = _build_strict(config, tmp_path / "site", tmp_path)
    assert proc.returncode != 0
    assert "missing.md" in proc.stderr and "orphan.md" in proc.stderr, proc.stderr


def test_doctests_render_as_code():
    pytest.importorskip("griffe")
    spec = importlib.util.spec_from_file_location(
        "griffe_doctests", ROOT / "docs" / "griffe_doctests.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert doctest.testmod(module).failed == 0
    fenced = module.fence_doctests("Args:\n    x: one.\n\n    >>> f(1)\n    [1]\nEnd.")
    assert fenced.splitlines()[3:7] == ["    ```pycon", "    >>> f(1)", "    [1]", "    ```"]


def test_the_readme_is_a_short_front_door():
    lines = README.read_text("utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail to docs/"


def test_every_relative_link_of_the_readme_points_at_a_file():
    targets = LINK.findall(README.read_text("utf-8"))
    assert targets, "no links found: the pattern is wrong"
    relative = [t for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    missing = [t for t in relative if not (ROOT / t.split("#", 1)[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_readme_test_command_is_the_one_ci_runs():
    readme = README.read_text("utf-8")
    (command,) = [
        ln for ln in readme.splitlines() if ln.startswith("python3 -m venv") and "pytest" in ln
    ]
    ci = (ROOT / ".ci" / "run").read_text("utf-8").splitlines()
    assert command in ci, f"README.md's test command differs from .ci/run's: {command!r}"


def test_the_architecture_page_names_every_layer():
    page = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    for layer in LAYERS:
        path = f"bpe/{layer}/"
        assert f"| `{path}` |" in page, f"docs/architecture.md has no row for {path}"
    named = set(re.findall(r"^\| `bpe/(\w+)/` \|", page, re.M))
    assert named <= set(LAYERS), (
        f"docs/architecture.md names folders that are not layers: {named - set(LAYERS)}"
    )


def _section_code(page: Path, heading: str) -> str:
    """The Python code blocks of one section of a docs page, joined."""
    text = page.read_text("utf-8")
    section = text.split(heading, 1)[1].split("\n#", 1)[0]
    return "\n".join(re.findall(r"```python\n(.*?)```", section, re.S))


def test_the_pad_token_recipe_for_transformers_works_as_written(tmp_path):
    """docs/using-a-tokenizer.md's batching recipe, run as written on a saved tokenizer: the
    error it quotes is what padding without a pad token raises, and its fix pads with the
    end-of-text id under a zero attention mask."""
    pytest.importorskip("transformers")
    from bpe import Tokenizer, train_bpe
    from tests.conftest import EOT, FIXTURES

    vocab, merges = train_bpe(FIXTURES / "corpus.en", 300, [EOT])
    run_dir = str(tmp_path / "tok")
    Tokenizer(vocab, merges, [EOT]).save_pretrained(run_dir)
    page = ROOT / "docs" / "using-a-tokenizer.md"
    code = _section_code(page, "### Batches in transformers: set a pad token")
    assert "pad_token = hf.eos_token" in code
    namespace: dict = {"run_dir": run_dir}
    exec(compile(code, str(page), "exec"), namespace)  # noqa: S102 - the docs' own code
    hf, batch = namespace["hf"], namespace["batch"]
    eot = hf.convert_tokens_to_ids(EOT)
    short = batch["input_ids"][1]
    assert batch["attention_mask"][1][-1] == 0 and short[-1] == eot
    from transformers import AutoTokenizer

    bare = AutoTokenizer.from_pretrained(run_dir)
    with pytest.raises(ValueError, match="Asking to pad but the tokenizer does not have a pad"):
        bare(["Once upon a time", "Hi"], padding=True)
    assert "Asking to pad but the tokenizer does not have a padding" in page.read_text("utf-8")


def _first_command(text: str) -> str:
    (command,) = [
        ln for ln in text.splitlines() if ln.startswith("python3 -m venv") and "bpe-train" in ln
    ]
    return command


def test_the_first_command_installs_what_the_first_run_uses_and_names_the_other_extras():
    """README's first command installs the notebooks and the compiled encoder, not every extra
    (`dev` built a 1.4 GB environment to train one tokenizer); each other extra of
    pyproject.toml is named in README's table with what it adds; the manual's home page gives
    the same command."""
    import tomllib

    readme = README.read_text("utf-8")
    command = _first_command(readme)
    (extras,) = re.findall(r'-e "\.\[([^\]]*)\]"', command)
    assert set(extras.split(",")) == {"notebooks", "compiled"}, command
    assert _first_command((ROOT / "docs" / "index.md").read_text("utf-8")) == command
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"
    ]
    table = {m for m in re.findall(r"^\| `([a-z]+)` \|", readme, re.M)}
    assert set(declared) - {"dev", "notebooks", "compiled"} <= table, sorted(declared)


# ---------------------------------------------------------------------------------------------
# Lists in the docs that describe a registry: each checked against the registry itself
# ---------------------------------------------------------------------------------------------


def test_the_config_comments_name_every_option_of_their_group():
    """config.yaml's defaults list is the table of contents: a comment that lists a group's
    options (`trainer: heap  # naive | indexed | ...`) lists all of them."""
    from bpe.util.io import CONF_DIR

    listed = 0
    for line in (CONF_DIR / "config.yaml").read_text("utf-8").splitlines():
        m = re.match(r"\s*- (\w+): \w+\s+# ((?:\w+ \| )+\w+)", line)
        if m is None:
            continue
        group, names = m.group(1), set(m.group(2).split(" | "))
        options = {p.stem for p in (CONF_DIR / group).glob("*.yaml")}
        assert names == options, f"config.yaml's {group} comment lists {names}, not {options}"
        listed += 1
    assert listed >= 4, "the defaults list's option comments were not found: the pattern drifted"


def test_the_package_description_names_every_trainer():
    import tomllib

    from bpe.trainers import TRAINERS

    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    missing = [name for name in TRAINERS if name not in project["description"]]
    assert not missing, f"pyproject.toml's description leaves out the trainers {missing}"


def test_the_architecture_page_names_every_console_script():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["scripts"]
    (row,) = [
        ln
        for ln in (ROOT / "docs" / "architecture.md").read_text("utf-8").splitlines()
        if ln.startswith("| `bpe/cli/` |")
    ]
    missing = [name for name in scripts if f"`{name}`" not in row]
    assert not missing, f"docs/architecture.md's bpe/cli/ row leaves out {missing}"


def test_the_readme_results_name_every_page_of_the_reports_index():
    index = (ROOT / "reports" / "README.md").read_text("utf-8")
    pages = re.findall(r"\| \[([\w.]+\.md)\]\(", index)
    assert len(pages) >= 5, "reports/README.md's table was not found: the pattern drifted"
    results = README.read_text("utf-8").split("## Results", 1)[1].split("\n## ", 1)[0]
    missing = [p for p in pages if f"(reports/{p})" not in results]
    assert not missing, f"README.md's Results leave out the reports {missing}"


def test_train_bpe_lists_every_option_it_forwards():
    """train_bpe's docstring names the keyword options it forwards to train_bpe_detailed."""
    import inspect

    from bpe.pipeline import train_bpe, train_bpe_detailed

    keywords = [
        name
        for name, p in inspect.signature(train_bpe_detailed).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    doc = " ".join(inspect.getdoc(train_bpe).split())
    (listed,) = re.findall(r"keyword options \(([^)]*)\)", doc)
    assert [w.strip() for w in listed.split(",")] == keywords


def test_the_adding_sections_name_only_paths_that_exist():
    page = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    sections = re.findall(r"^## Adding .*?(?=^## |\Z)", page, re.M | re.S)
    assert len(sections) >= 4
    paths = {
        p
        for s in sections
        for p in re.findall(r"`((?:bpe|tests|scripts)/[\w/.]+)`", s)
        if "<" not in p
    }
    assert len(paths) >= 10, "no paths found: the pattern drifted"
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md's Adding sections name missing paths {missing}"


#: Pages of the manual whose home is elsewhere in the tree (mkdocs.yml says so): each is a
#: symbolic link there, so the page and its home are one file and cannot drift apart.
LINKED_PAGES = {
    "docs/reports": "../reports",
    "docs/run-directory.md": "../experiments/README.md",
    "docs/notebooks.md": "../notebooks/README.md",
    "docs/data-sources.md": "../data/SOURCES.md",
}


@pytest.mark.parametrize(("page", "home"), sorted(LINKED_PAGES.items()))
def test_a_page_whose_home_is_elsewhere_is_a_link_to_it(page, home):
    path = ROOT / page
    assert path.is_symlink(), f"{page} is a copy; make it a link: ln -sf {home} {page}"
    assert os.readlink(path) == home
    assert path.resolve().exists()
