"""The README's first command: `bpe-train` with no arguments is a complete run.

The default config (dataset, vocab size, workers: nothing overridden but where runs go) must
reach its vocab size on the bundled data; a corpus too small for the vocab still stops early
and says so.
"""

from __future__ import annotations

import json
import logging
import subprocess

import pytest
from hydra import compose, initialize_config_dir

import bpe.experiment.config  # noqa: F401  (importing it registers the schema the config composes with)
from bpe import train_bpe
from bpe.util.io import CONF_DIR
from tests.conftest import DATA, EOT, FAST_ANALYSIS, console_env

EARLY_STOP = "no pair is left to merge"


def _check_numbers_are_of_bpe(run) -> None:
    """The default run on the bundled sample: stage 1 in this process (workers would cost more
    than the counting), and Numba's first compile announced and timed apart from analysis."""
    import importlib.util
    import re
    from datetime import datetime

    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    assert metrics["counts"]["workers"] == 1
    assert metrics["counts"]["start_method"] == "in-process"
    assert metrics["counts"]["worker_startup_s"] is None
    log = (run / "train.log").read_text("utf-8")
    stamps = [
        datetime.strptime(m, "%Y-%m-%d %H:%M:%S,%f")
        for m in re.findall(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)\]", log, re.M)
    ]
    gaps = [(b - a).total_seconds() for a, b in zip(stamps, stamps[1:])]
    assert max(gaps) < 10, f"the run was silent for {max(gaps):.1f} s:\n{log}"
    if importlib.util.find_spec("numba") is not None:
        # the encoder's kernels compile in a helper process while training runs (announced),
        # never in the run's own process, and the wait for them is timed apart from analysis
        assert "(merges, cut) in a helper process while training runs" in log
        assert metrics["timings"]["kernel_compile"] > 0
        assert metrics["cpu_timings"]["kernel_compile"] > 5  # the helper's CPU, not the wait's
        helper = "kernel compile helper: "
        assert any(helper + "compil" in line for line in log.splitlines()), log
        own = [ln for ln in log.splitlines() if "compil" in ln and "bpe.tokenizer" in ln]
        assert all(helper in ln for ln in own), own  # nothing compiled in the run's process
        # the helper lives outside the run's process tree: training's memory is the data's
        assert metrics["memory"]["training"]["added_mb"] < 100, metrics["memory"]["training"]


def _check_second_run_compiles_nothing(run) -> None:
    """The second run on the machine finds every kernel cached: no helper, no compile."""
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    log = (run / "train.log").read_text("utf-8")
    assert "kernel_compile" not in metrics["timings"], metrics["timings"]
    assert "helper" not in log and "compiling bpe." not in log, log


@pytest.mark.slow
def test_bpe_train_with_no_arguments_reaches_the_configured_vocab(tmp_path):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config")
    vocab_size = int(cfg.vocab_size)
    # a fresh clone: no kernel's machine code is cached yet (Numba then caches it here)
    env = {**console_env(), "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    command = ["bpe-train", f"experiments_dir={tmp_path / 'experiments'}"]
    run_it = dict(cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    proc = subprocess.run(command, **run_it)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert EARLY_STOP not in proc.stderr
    runs = [p.parent for p in (tmp_path / "experiments").glob("*/metrics.json")]
    (run,) = [r for r in runs if not r.is_symlink()]  # `latest` links to it
    metrics_path = run / "metrics.json"
    _check_numbers_are_of_bpe(run)
    again = subprocess.run(command, **run_it)
    assert again.returncode == 0, again.stderr[-3000:]
    _check_second_run_compiles_nothing((tmp_path / "experiments" / "latest").resolve())
    assert run.name.endswith(f"_{cfg.dataset.name}_{cfg.trainer.name}_v{vocab_size}")
    metrics = json.loads(metrics_path.read_text("utf-8"))
    assert metrics["status"] == "complete" and metrics["stopped_early"] is False
    num_specials = len(cfg.dataset.special_tokens)
    assert metrics["counts"]["vocab"] == vocab_size
    assert metrics["counts"]["merges"] == vocab_size - num_specials - 256
    assert len(json.loads((run / "vocab.json").read_text("utf-8"))) == vocab_size
    # the default is a vocab the bundled sample supports, not one that memorises its words
    support = metrics["merge_support"]
    assert support["outgrown"] is False and support["rare"] == 0, support
    assert "outgrown" not in proc.stderr
    analysis = (run / "ANALYSIS.md").read_text("utf-8")
    assert "The corpus supports this vocab" in analysis


def test_a_vocab_larger_than_its_corpus_supports_is_said_with_the_remedy(tmp_path):
    """The default run of before: vocab 10,000 on the 3 MB sample, 25% of merges seen <= 2x."""
    proc = subprocess.run(
        [
            "bpe-train",
            f"experiments_dir={tmp_path}",
            "vocab_size=10000",
            "num_workers=1",
            "progress=false",
            *FAST_ANALYSIS,
            "analysis.train_sample_bytes=100000",
        ],
        cwd=tmp_path,
        env=console_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (metrics_path,) = [p for p in tmp_path.glob("2*/metrics.json")]
    support = json.loads(metrics_path.read_text("utf-8"))["merge_support"]
    assert support["outgrown"] is True and support["count_1"] > 1000, support
    line = next(ln for ln in proc.stderr.splitlines() if "outgrown its corpus" in ln)
    assert f"{support['rare']} of {support['merges']} merges" in line
    assert f"vocab_size={support['supported_vocab']} or less" in line
    analysis = (metrics_path.parent / "ANALYSIS.md").read_text("utf-8")
    assert "**This vocab has outgrown its corpus**" in analysis
    # the longest token is the mojibake seen once: never called frequent
    assert (
        "seen only once in training" in analysis
        and "frequent unit"
        not in analysis.split("## Longest tokens")[1].split("##")[0].split("not a frequent unit")[0]
    )


def test_the_v2_stories_alone_stop_early_and_say_so(caplog):
    """Why the default dataset trains on more than data/tinystories_sample.txt (1.3 MB)."""
    with caplog.at_level(logging.INFO, logger="bpe"):
        vocab, merges = train_bpe(DATA / "tinystories_sample.txt", 10_000, [EOT], num_workers=1)
    assert len(merges) == 7568 and len(vocab) == 1 + 256 + 7568
    assert any(EARLY_STOP in r.getMessage() for r in caplog.records)
