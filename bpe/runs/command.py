"""The command that reruns a run, built from what its metrics.json records.

One rule, used by the runner (it stores the command in `run.command` and logs it when the run
starts) and by every report that prints it (ANALYSIS.md), so the two cannot disagree. A
reader of an older run rebuilds it from the recorded fields, so older runs get the full form
too.

What it does not do: rebuild a sweep's `bpe-train -m` command (`bpe.analysis.sweep.report`), or run
anything.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Keys every rerun command names, whatever the run's overrides said.
_PINNED = ("dataset", "trainer", "profiler", "vocab_size", "num_workers")
#: Keys a rerun leaves to the user: where runs go and whether a bar is drawn change no result.
_UNSHAPING = ("experiments_dir", "progress")


def rerun_command(run: Mapping) -> str:
    """`bpe-train` with every group choice and key that shapes the result of `run`.

    `run` is metrics.json's `run` section: the pinned choices first, then the run's own
    overrides and `extra_overrides` (such as a `dataset.path=` that differs from the named
    dataset's) that do not repeat a pinned key.

    >>> rerun_command({"dataset": "owt_sample", "trainer": "heap", "profiler": "none",
    ...                "vocab_size": 500, "num_workers": None, "overrides": ["seed=3"]})
    'bpe-train dataset=owt_sample trainer=heap profiler=none vocab_size=500 num_workers=null seed=3'
    """
    parts = [f"{k}={_value(run.get(k))}" for k in _PINNED]
    covered = {*_PINNED, *_UNSHAPING}
    for item in [*(run.get("overrides") or []), *(run.get("extra_overrides") or [])]:
        key = item.split("=", 1)[0].lstrip("+~")
        if key not in covered:
            parts.append(item)
            covered.add(key)
    return "bpe-train " + " ".join(parts)


def _value(x: object) -> str:
    return "null" if x is None else str(x)
