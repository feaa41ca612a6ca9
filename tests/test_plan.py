"""The training call's spec and plan (`bpe.pipeline.plan`): one typed object from the config to
the trainer, checked once per run, its parent loaded once, and metrics.json recording what the
plan used and what the trainer said."""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys

import pytest

import bpe.cli.train
from bpe.experiment import inputs
from bpe.pipeline import plan as plan_module
from bpe.pipeline import train_bpe_detailed
from bpe.pipeline.plan import TrainSpec, plan_run
from bpe.runs import schema
from tests.conftest import FIXTURES, ROOT

PARENT = FIXTURES / "runs" / "2026-01-01_00-00-00_000000_tinystories_sample_heap_v300"


def test_the_spec_holds_every_keyword_of_train_bpe_detailed_and_nothing_else():
    keywords = set(inspect.signature(train_bpe_detailed).parameters)
    fields = {f.name for f in dataclasses.fields(TrainSpec)}
    # the two limits travel as one `Limits`
    assert fields == keywords - {"max_token_length", "min_frequency"} | {"limits"}


def test_a_bad_option_fails_in_the_plan_naming_itself(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("low lower", encoding="utf-8")
    with pytest.raises(ValueError, match="vocab_size=100 is too small"):
        plan_run(TrainSpec(str(corpus), 100))
    with pytest.raises(ValueError, match="trainer"):
        plan_run(TrainSpec(str(corpus), 300, trainer="fast"))


def _count_vocab_size_checks(monkeypatch) -> list[int]:
    """Every call of `check_vocab_size`, under each name a module imported it by."""
    import bpe.trainers
    import bpe.trainers.common

    calls: list[int] = []
    real = bpe.trainers.common.check_vocab_size

    def counting(vocab_size, *args, **kw):
        calls.append(vocab_size)
        return real(vocab_size, *args, **kw)

    for module in (bpe.trainers.common, bpe.trainers, plan_module):
        monkeypatch.setattr(module, "check_vocab_size", counting)
    return calls


@pytest.mark.parametrize("variant", ["bpe", "superbpe", "picky"])
def test_vocab_size_is_checked_once_per_training_call(tmp_path, monkeypatch, variant):
    """One check of vocab_size per call, whichever way in: `train_bpe` (its plan; SuperBPE's
    two stages included) and the trainers' own entry, `learn_merges`."""
    from bpe.pipeline import train_bpe
    from bpe.trainers import learn_merges

    corpus = tmp_path / "c.txt"
    corpus.write_text("low lower lowest newer wider " * 50, encoding="utf-8")
    checks = _count_vocab_size_checks(monkeypatch)
    trainer = "heap" if variant != "picky" else "indexed"
    train_bpe(corpus, 300, ["<|endoftext|>"], trainer=trainer, variant=variant, num_workers=1)
    assert checks == [300], checks
    checks.clear()
    learn_merges("heap", {b"low": 5, b"lower": 2}, 260)
    assert checks == [260], checks


def test_bpe_train_plans_each_run_once_loads_its_parent_once_and_records_the_plan(
    tmp_path, monkeypatch
):
    """`bpe-train` checks its job before any run directory exists, and the run trains that
    plan: one `plan_run`, one read of the parent, however many layers the value crosses."""
    planned, loaded = [], []
    real_plan, real_load = inputs.plan_run, plan_module.load_parent

    def counting_plan(spec, **kw):
        planned.append(spec)
        return real_plan(spec, **kw)

    def counting_load(path):
        loaded.append(path)
        return real_load(path)

    monkeypatch.setattr(inputs, "plan_run", counting_plan)
    monkeypatch.setattr(plan_module, "load_parent", counting_load)
    checks = _count_vocab_size_checks(monkeypatch)
    monkeypatch.chdir(tmp_path)
    argv = [
        "debug=fast",
        f"dataset.path={ROOT / 'tests' / 'fixtures' / 'tinystories_sample.txt'}",
        f"init_from={PARENT}",
        "vocab_size=330",
        "max_token_length=6",
        "analysis.segmentations=[]",
        f"experiments_dir={tmp_path / 'experiments'}",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    monkeypatch.setattr(sys, "argv", ["bpe-train", *argv])
    bpe.cli.train.main()
    assert len(planned) == 1, planned
    assert len(loaded) == 1, loaded
    assert checks == [330], checks  # vocab_size: checked once, with the parent it continues
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text("utf-8"))
    assert schema.get(metrics, schema.STATUS) == "complete"
    spec = planned[0]
    assert schema.get(metrics, schema.VOCAB_SIZE) == spec.vocab_size == 330
    assert metrics["run"]["max_token_length"] == spec.limits.max_token_length == 6
    assert metrics["run"]["init_from"] == str(PARENT)
    # the trainer's own word on its stop: none here, the vocab was reached
    assert metrics["stopped_early"] is False and metrics["stopped_by"] is None
