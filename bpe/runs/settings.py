"""The defaults of a run's settings, once: what bpe-train uses when a key is not given, and what
readers fall back on for a run whose saved config lacks the key (it predates it).

`bpe/conf/config.yaml` shows these values to users, the typed schema
(`bpe.experiment.config`) takes them as its defaults, and `tests/test_config.py` checks that
the three agree.

What it does not do: read or validate a config (`bpe.experiment.config`). It imports nothing.

    >>> analysis_setting({"max_docs": 5}, "max_docs"), analysis_setting({}, "max_docs")
    (5, 200)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: `analysis:` what the analysis stage measures after training.
ANALYSIS_DEFAULTS: dict[str, Any] = {
    "max_docs": 200,
    "throughput_seconds": 1.0,
    "longest_tokens": 20,
    "gpt2_baseline": True,
    "train_sample_bytes": 4_000_000,
    "bpb_train_bytes": 4_000_000,
    "bpb_order": 3,
    # each held-out side encoded by each way to cut pretokens (`bpe.tokenizer.segmentation`)
    "segmentations": ["merges", "longest_prefix", "fewest"],
    # FLORES-200 lines per split for the languages section (null: all of them, the protocol)
    "language_lines": None,
    # each figure is a PNG (what the reports link); these formats are written beside it
    "figure_formats": ["png"],
}
#: What `analysis.figure_formats` (and `bpe-report --figure-formats`) may name.
FIGURE_FORMATS = ("png", "svg", "pdf")
#: `pretokenize:` where and how stage 1 runs.
PRETOKENIZE_DEFAULTS: dict[str, Any] = {"backend": "processes", "scheduler": None, "engine": "auto"}


def analysis_setting(analysis: Mapping[str, Any] | None, name: str) -> Any:
    """`analysis.<name>` of a config (a mapping), or its default when the key is missing or
    null (`train_sample_bytes` null means: no cap)."""
    if analysis is not None and name in analysis:
        value = analysis[name]
        if value is not None or name in ("train_sample_bytes", "language_lines"):
            return value
    return ANALYSIS_DEFAULTS[name]


def pretokenize_setting(pretokenize: Mapping[str, Any] | None, name: str) -> Any:
    """`pretokenize.<name>` of a config, or its default when the key is missing."""
    if pretokenize is not None and pretokenize.get(name) is not None:
        return pretokenize[name]
    return PRETOKENIZE_DEFAULTS[name]
