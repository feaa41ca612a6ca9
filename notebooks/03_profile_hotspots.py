# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · Where does the time (and memory) go?
#
# Profiled runs (`profiler=cprofile` or `profiler=scalene`) leave `profile/summary.json` in
# their run directory; every run records a memory timeline of its whole process tree.
# Make one with e.g. `bpe-train experiment=profile_owt`.

# %%
import json
import os
from pathlib import Path

import pandas as pd
from IPython.display import display

from bpe.analysis import figures, load_runs
from bpe.analysis.loader import complete, shown_stages, tidy
from bpe.util.io import PROJECT_ROOT

EXPERIMENTS = Path(os.environ.get("BPE_EXPERIMENTS", PROJECT_ROOT / "experiments"))
frame = load_runs(EXPERIMENTS)
runs = tidy(frame)
profiled = [Path(p) for p in runs["run_dir"] if (Path(p) / "profile" / "summary.json").is_file()]
print(f"{len(profiled)} profiled run(s)")
if not profiled:
    print("make one with: bpe-train experiment=profile_owt (scalene), or profiler=cprofile")

# %% [markdown]
# ## Stage times of every complete run (seconds)
#
# In the order the runs recorded them (stages older runs had and reports leave out are dropped).
# A run whose pretoken cache was a `hit` loaded its counts: its `pretokenize` time is hashing
# plus loading, not pre-tokenization, so compare that column only between runs that counted.
# `timed alone` is False for a profiled run (its times include the profiler's overhead) and for
# a sweep's job that ran beside others (they shared the CPUs): compare times among True rows.

# %%
prefix = "metrics.timings."
stages = shown_stages(c[len(prefix) :] for c in frame.columns if c.startswith(prefix))
cache = [c for c in ["metrics.pretoken_cache.status"] if c in frame]
columns = ["run_name", *(prefix + s for s in stages), *cache]
times = frame.loc[frame["status"] == "complete", columns]
times = times.set_index("run_name")
times.columns = [*stages, *(["pretoken cache"] if cache else [])]
alone = set(complete(runs, unprofiled=True)["run_name"])
times["timed alone"] = [name in alone for name in times.index]
times.round(3)

# %% [markdown]
# ## Hot spots of the profiled runs

# %%
for run_dir in profiled:
    summary = json.loads((run_dir / "profile" / "summary.json").read_text("utf-8"))
    print(f"== {run_dir.name} ({summary['profiler']})")
    rows = summary.get("lines") or summary["functions"]
    display(pd.DataFrame(rows).head(10))

# %% [markdown]
# ## Memory timeline of the most recent complete run

# %%
done = frame[frame["status"] == "complete"]
if not done.empty and "metrics.memory.timeline" in done:
    row = done.sort_values("run_dir").iloc[-1]
    timeline = row["metrics.memory.timeline"]
    display(figures.memory_timeline({row["run_name"]: [(t, mb) for t, mb, _ in timeline]}))
