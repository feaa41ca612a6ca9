"""The BPE family as config: the `variant` group, its parameters, run names and metrics."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir

import bpe.experiment.config  # noqa: F401  (registers the schema)
from bpe import train_bpe_detailed
from bpe.experiment.inputs import variant_of
from bpe.util.io import CONF_DIR
from bpe.variants import VARIANTS, Variant, as_variant, check_variant
from tests.conftest import EOT, FIXTURES, ROOT


def _compose(*overrides: str):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=["debug=fast", *overrides])


def test_the_default_variant_is_plain_bpe():
    cfg = _compose()
    assert cfg.variant.name == "bpe"
    assert variant_of(cfg) == Variant("bpe")


def test_every_variant_has_a_config_file():
    assert sorted(p.stem for p in (CONF_DIR / "variant").glob("*.yaml")) == sorted(
        v for v in VARIANTS if (CONF_DIR / "variant" / f"{v}.yaml").is_file()
    )
    assert (CONF_DIR / "variant" / "bpe.yaml").is_file()


def test_unknown_variant_names_the_choices():
    with pytest.raises(ValueError, match=r"unknown variant 'supper'.*'bpe', 'superbpe', 'picky'"):
        check_variant("supper")
    with pytest.raises(ValueError, match="unknown variant"):
        as_variant("supper")


def test_bpe_variant_changes_nothing():
    plain = train_bpe_detailed(FIXTURES / "corpus.en", 400, [EOT], num_workers=1)
    named = train_bpe_detailed(FIXTURES / "corpus.en", 400, [EOT], num_workers=1, variant="bpe")
    assert named.merges == plain.merges and named.vocab == plain.vocab
    assert named.variant == Variant("bpe") and named.variant_facts == {}


def test_a_variant_the_trainer_cannot_run_fails_before_anything_is_created(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "variant=picky",
            "debug=fast",
            f"experiments_dir={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "variant=picky runs on the naive and indexed trainers only" in proc.stderr
    assert not any(tmp_path.iterdir())


def test_every_variant_is_a_member_and_training_names_none_of_them():
    """Adding a variant is its module and one registry line: training calls the members'
    hooks and the trainers run the loop they are given, neither names a variant."""
    import re

    from bpe.variants import MEMBERS, VARIANTS

    assert tuple(MEMBERS) == tuple(VARIANTS)
    root = ROOT / "bpe"
    others = "|".join(v for v in VARIANTS if v != "bpe")
    named = re.compile(rf"""["'](?:{others})["']""")
    found = [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for folder in ("training", "trainers")
        for path in sorted((root / folder).glob("*.py"))
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if named.search(line) and not line.lstrip().startswith(("#", ">>>"))
    ]
    assert not found, "\n".join(found)
