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
# # 01 · Comparing the trainers
#
# `naive`, `indexed`, `heap` and `compiled` (heap's algorithm compiled by Numba) implement one
# contract and must produce identical merges; they differ only in how they find the next pair.
# This notebook reads every run under the experiments directory (set `BPE_EXPERIMENTS` to point
# elsewhere) and answers:
#
# 1. How long does the merge stage take per trainer and vocab size?
# 2. How much faster is each trainer than `naive`?
# 3. Did every trainer produce the same merges?
# 4. What does `compiled` pay before it merges (compiling or loading its machine code)?
#
# Make runs first, e.g. `bpe-train -m experiment=compare_trainers`.

# %%
import os
from pathlib import Path

from IPython.display import display

from bpe.analysis import figures, load_runs
from bpe.analysis.loader import complete, tidy
from bpe.analysis.sweep.facts import merge_agreement
from bpe.util.io import PROJECT_ROOT

EXPERIMENTS = Path(os.environ.get("BPE_EXPERIMENTS", PROJECT_ROOT / "experiments"))
runs = tidy(load_runs(EXPERIMENTS))
# timed runs only: not profiled, and not run side by side with other jobs (a joblib sweep's
# parallel jobs shared the CPUs: SWEEP.md marks their times "not comparable")
done = complete(runs, unprofiled=True)
apart = len(complete(runs)) - len(done)
print(f"{len(runs)} runs under {EXPERIMENTS.name}/, {len(done)} complete and timed alone")
if apart:
    print(f"{apart} complete run(s) left out of the timings: profiled, or run side by side")

# %% [markdown]
# ## Merge time (median seconds) per trainer and vocab size

# %%
table = done.pivot_table(
    index=["dataset", "vocab_size"], columns="trainer", values="merge_seconds", aggfunc="median"
)
table

# %% [markdown]
# ## Speedup over naive (where naive ran)

# %%
if "naive" in table:
    speedup = table.drop(columns="naive").rdiv(table["naive"], axis=0).dropna(how="all")
    display(speedup.round(1))
else:
    print("no naive runs: run `bpe-train -m experiment=compare_trainers`")

# %% [markdown]
# ## Identical merges?

# %%
for dataset, vocab, trainers, same in merge_agreement(done):
    print(f"{dataset} @ {vocab}: {', '.join(trainers)} ->", "identical" if same else "DIFFERENT")

# %% [markdown]
# ## Time vs vocab size

# %%
for dataset, group in done.groupby("dataset"):
    if group["vocab_size"].nunique() > 1:
        display(figures.time_vs_vocab(group, time_col="merge_seconds", title=dataset))

# %% [markdown]
# ## The compiled trainer's fixed cost
#
# `compiled` times loading (or, on a first run, compiling) its machine code as its own step,
# never inside the merge time above; on small corpora it is as large as the merges.

# %%
compiled = done[done["trainer"] == "compiled"]
if compiled.empty:
    print("no compiled runs: run `bpe-train -m experiment=compare_trainers`")
else:
    display(compiled[["dataset", "vocab_size", "compile_seconds", "merge_seconds"]].round(3))
