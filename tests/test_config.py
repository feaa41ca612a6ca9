"""The typed config: composition rejects wrong types and unknown keys, ranges are checked, and
the real `bpe-train` prints a mistake as one line on stderr before any directory exists."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

from bpe.experiment import config as schema
from bpe.experiment import config_checks, inputs
from bpe.pipeline import train_bpe
from bpe.runs.stages import TRAINER_ORDER
from bpe.text.specials import validate_special_tokens
from bpe.tokenizer import Tokenizer
from bpe.util.io import CONF_DIR
from tests.conftest import FIXTURES, ROOT, console_env

FAST = ["debug=fast", f"dataset.path={FIXTURES / 'corpus.en'}"]


def bpe_train(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    """The real console script, as a user runs it."""
    return subprocess.run(
        ["bpe-train", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env=env or console_env(),
    )


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The single line a user mistake prints: on stderr, exit status 2, nothing on stdout."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("bpe-train: error: ")
    return line


def _compose(*overrides: str):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides))


# --- the schema --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "override",
    [
        "vocab_size=abc",
        "vocab_size=500.5",
        'dataset.special_tokens="[EOS]"',
        "progress=maybe",
        "num_workers=two",
        "analysis.max_docs=1.5",
        "vocab_sze=500",
        "dataset.pth=x.txt",
    ],
)
def test_composition_rejects_wrong_types_and_unknown_keys(override):
    with pytest.raises(ConfigCompositionException):
        _compose(override)


def test_every_group_option_composes_and_passes_the_range_checks():
    for group in ("dataset", "trainer", "profiler", "experiment", "debug"):
        for option in sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml")):
            config_checks.check_config(_compose(f"{group}={option}"))


def test_the_debug_preset_is_tiny_and_skips_the_gpt2_baseline():
    cfg = _compose("debug=fast")
    assert int(cfg.vocab_size) == 400 and cfg.num_workers == 1 and cfg.progress is False
    assert cfg.analysis.gpt2_baseline is False and cfg.analysis.max_docs <= 10


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("vocab_size=100", "vocab_size=100 is too small"),
        ("num_workers=0", "num_workers=0 is out of range: it must be >= 1"),
        ("analysis.throughput_seconds=0", "must be > 0"),
        ("analysis.max_docs=0", "analysis.max_docs=0 is out of range"),
        ("dataset.special_tokens=['<|a|>','<|a|>']", "listed twice"),
        ("dataset.special_tokens=[x]", "single byte"),
        ("pretokenize.backend=ray", "pretokenize.backend='ray' is unknown; choose one of"),
        ("pretokenize.scheduler=tcp://head:8786", "only used by the dask backend"),
        ("pretokenize.engine=fast", "pretokenize.engine='fast' is unknown; choose one of"),
        ("pretokenizer=cl100k pretokenize.engine=compiled", "splits GPT-2's pattern only"),
    ],
)
def test_ranges_are_checked_with_the_key_named(override, message):
    # the run's one validator: the config's own ranges, then the training call's plan
    with pytest.raises(ValueError, match=message.replace("|", r"\|")):
        inputs.validate(_compose(*override.split()))


def test_a_plan_kept_for_a_run_never_skips_the_config_s_checks(monkeypatch):
    """`bpe-train` keeps each job's plan for its run, keyed without the workers; a config that
    differs there (num_workers=0) is still checked, whatever was planned in this process."""
    monkeypatch.setattr(inputs, "_PLANNED", {})  # this test's plans end with it
    inputs.validate(_compose(), keep=True)
    with pytest.raises(ValueError, match="num_workers=0 is out of range"):
        inputs.validate(_compose("num_workers=0"))


def test_every_schema_key_has_a_meaning_and_config_yaml_sets_only_schema_keys():
    keys = {k: m for k, _, m in schema.describe_keys()}
    assert all(keys.values())
    composed = _compose()
    for key in keys:
        assert key.split(".")[0] in composed
    leaves = {f.name for f in dataclasses.fields(schema.TrainConfig)}
    assert set(composed) == leaves


# --- one special-token rule for the library and the command line --------------------------------


@pytest.mark.parametrize("single", ["\n", "a", " "])
def test_a_single_byte_special_token_is_rejected_everywhere(single, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello\nworld\n", "utf-8")
    for call in (
        lambda: validate_special_tokens([single]),
        lambda: train_bpe(corpus, 300, [single]),
        lambda: Tokenizer({i: bytes([i]) for i in range(256)}, [], [single]),
    ):
        with pytest.raises(ValueError, match="single byte.*longer marker"):
            call()


def test_a_multi_byte_special_token_of_one_character_is_fine(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("caf\u00e9 \u00e9 cafe", "utf-8")
    vocab, _ = train_bpe(corpus, 260, ["\u00e9"])
    assert vocab[0] == "\u00e9".encode() and len(set(vocab.values())) == len(vocab)


# --- what a user sees -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("vocab_sze=500", "unknown key 'vocab_sze' (did you mean 'vocab_size'?)"),
        ("+dataset.pth=x.txt", "unknown key 'dataset.pth' (did you mean 'dataset.path'?)"),
        ("vocab_size=abc", "vocab_size=abc: Value 'abc' of type 'str' could not be converted"),
        ("vocab_size=500.5", "vocab_size=500.5: Value '500.5' of type 'float'"),
        ('dataset.special_tokens="[EOS]"', 'dataset.special_tokens="[EOS]": Invalid value'),
        ("dataset.special_tokens=['\n']", "special token '\\n' is a single byte"),
        ("vocab_size=100", "vocab_size=100 is too small"),
        ("trainer=fast", "no option 'trainer/fast'; choose trainer= one of compiled, heap, index"),
        ("vocab_size=300,400", "lists several values: add -m"),
        ("pretokenize.backend=ray", "choose one of ['processes', 'dask']"),
        # checks that used to run only after a whole training (analysis reads these)
        ("analysis.segmentations=[bogus]", "analysis.segmentations has ['bogus']"),
        ("dataset.heldout_path=/dev/zero", "is not a regular file (a FIFO, socket or device)"),
        ("dataset.heldout_path=missing.txt", "missing.txt'; check dataset.heldout_path"),
    ],
)
def test_a_mistake_is_one_line_on_stderr_before_any_directory_exists(tmp_path, override, expected):
    runs = tmp_path / "runs"
    line = one_error_line(bpe_train(f"experiments_dir={runs}", *FAST, override, cwd=tmp_path))
    assert expected in line
    assert list(tmp_path.iterdir()) == []  # no experiments_dir, no run dir, no outputs/


@pytest.mark.parametrize("switch", ["--debug", "HYDRA_FULL_ERROR=1"])
def test_debug_switch_shows_the_traceback(tmp_path, switch):
    env = console_env()
    args = [f"experiments_dir={tmp_path}", "vocab_size=abc"]
    if switch == "--debug":
        args.append(switch)
    else:
        env["HYDRA_FULL_ERROR"] = "1"
    proc = bpe_train(*args, cwd=tmp_path, env=env)
    assert proc.returncode != 0 and "Traceback" in proc.stderr
    assert "could not be converted to Integer" in proc.stderr


@contextlib.contextmanager
def _read_only_mount(path: Path):
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


@pytest.mark.parametrize("how", ["read-only mount", "read-only mode", "a file in the way"])
def test_an_unwritable_experiments_dir_is_one_line_naming_it(tmp_path, how):
    target = tmp_path / "ro"
    with contextlib.ExitStack() as stack:
        if how == "read-only mount":
            stack.enter_context(_read_only_mount(target))
        elif how == "read-only mode":
            if os.geteuid() == 0:
                pytest.skip("root writes through permission bits (the mount case covers it)")
            target.mkdir(mode=0o555)
        else:
            target.write_text("not a directory", "utf-8")
        experiments = target / "experiments"
        line = one_error_line(bpe_train(f"experiments_dir={experiments}", *FAST, cwd=tmp_path))
        assert f"cannot write run directories in {str(experiments)!r}" in line
        assert "pass a writable experiments_dir" in line


def test_help_lists_groups_keys_with_meanings_and_examples(tmp_path):
    proc = bpe_train("--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "powered by Hydra" not in out
    assert "trainer: compiled, heap, indexed, naive" in out and "debug: fast" in out
    for key, _, meaning in schema.describe_keys():
        assert any(key in ln and meaning in ln for ln in out.splitlines()), key
    assert "Examples:" in out and "bpe-train -m trainer=naive,indexed,heap" in out
    # every registered trainer and variant is named, and the Hydra groups a sweep picks from
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("trainer.name"))
    assert all(t in line for t in TRAINER_ORDER), line
    assert "hydra/launcher: basic, joblib" in out and "hydra/callbacks: mlflow" in out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["hydra.job.name=../../evil"], "hydra.job.name='../../evil' names a file outside"),
        (
            ["-m", "hydra.sweep.subdir=../../out${hydra.job.num}"],
            "leads out of the sweep directory",
        ),
    ],
)
def test_hydra_names_cannot_lead_out_of_the_experiments_directory(tmp_path, args, said):
    experiments = tmp_path / "a" / "b" / "experiments"
    line = one_error_line(bpe_train(f"experiments_dir={experiments}", *FAST, *args, cwd=tmp_path))
    assert said in line, line
    assert list(tmp_path.iterdir()) == []  # nothing written anywhere


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["variant=superbpe", "variant.transition_vocab=900"],
            "variant.transition_vocab=900 must lie between 257 (the specials and 256 bytes) and "
            "vocab_size=400",
        ),
        (["variant=superbpe", "variant.stage_two_pattern='(?'"], "is not a valid regex"),
        (
            ["variant=superbpe", "variant.threshold=0.5"],
            "variant.threshold=0.5 is a setting of variant=picky or boundless, not of "
            "variant=superbpe",
        ),
        (["dataset.path=missing.txt"], "not found at"),
        (["dataset.heldout_path=empty.txt"], "is empty, so nothing can be measured on it"),
        (["dataset.path=broken.parquet"], "broken.parquet' is not a readable parquet file"),
    ],
)
def test_input_and_variant_mistakes_stop_before_any_run_directory(tmp_path, args, said):
    (tmp_path / "empty.txt").write_text("", "utf-8")
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    experiments = tmp_path / "experiments"
    fast = ["debug=fast", f"dataset.path={FIXTURES / 'corpus.en'}"]
    line = one_error_line(bpe_train(f"experiments_dir={experiments}", *fast, *args, cwd=tmp_path))
    assert said in line, line
    assert not experiments.exists()  # nothing was written: no run directory, no log


def test_a_corpus_of_special_tokens_only_is_refused_as_an_empty_parquet_is(tmp_path):
    only = tmp_path / "only.txt"
    only.write_text("<|endoftext|><|endoftext|>", "utf-8")
    with pytest.raises(ValueError, match="holds no text outside its special tokens"):
        train_bpe(only, 300, ["<|endoftext|>"], num_workers=1)


def test_the_defaults_have_one_home():
    """bpe/conf/config.yaml shows the defaults of bpe.runs.settings, and the typed schema takes
    them, so a reader's fallback for an older run is what bpe-train would have used."""
    import dataclasses

    import yaml

    from bpe.experiment.config import AnalysisConfig, PretokenizeConfig
    from bpe.runs.settings import ANALYSIS_DEFAULTS, PRETOKENIZE_DEFAULTS
    from bpe.util.io import CONF_DIR

    shown = yaml.safe_load((CONF_DIR / "config.yaml").read_text("utf-8"))
    assert shown["analysis"] == ANALYSIS_DEFAULTS

    def default(f: dataclasses.Field):
        return f.default_factory() if f.default is dataclasses.MISSING else f.default

    assert {f.name: default(f) for f in dataclasses.fields(AnalysisConfig)} == ANALYSIS_DEFAULTS
    typed = {f.name: f.default for f in dataclasses.fields(PretokenizeConfig)}
    assert typed == PRETOKENIZE_DEFAULTS
    assert {k: v for k, v in shown["pretokenize"].items()} == PRETOKENIZE_DEFAULTS
