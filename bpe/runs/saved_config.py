"""A run's saved config (`.hydra/config.yaml`), read in one place for every reader.

What it does: `run_config` parses the resolved config a run saved beside its metrics, as a
plain dict ({} for a directory without one: a library run, or GPT-2's files), and names the
file when it is not valid YAML.

What it does not do: compose, validate or default a config (`bpe.experiment.config`;
`bpe.runs.settings` holds the defaults readers fall back on).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from bpe.runs.layout import HYDRA_CONFIG, HYDRA_DIR

#: the C parser when PyYAML has it (a sweep's report reads hundreds of configs)
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def run_config(run_dir: str | Path) -> dict:
    """The config `run_dir` saved ({}: none, or not a mapping).

    Raises:
        ValueError: the file is not valid YAML; the message names it.

    >>> run_config("no/such/run")
    {}
    """
    path = Path(run_dir) / HYDRA_DIR / HYDRA_CONFIG
    try:
        config = yaml.load(path.read_text("utf-8"), Loader=_YAML_LOADER) if path.is_file() else {}
    except yaml.YAMLError as err:
        raise ValueError(f"{path} is not valid YAML: {err}") from None
    return config if isinstance(config, dict) else {}
