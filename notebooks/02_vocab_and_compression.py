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
# # 02 · Vocabularies and compression
#
# What does a TinyStories vocabulary look like next to an OpenWebText one, and how many bytes
# does each token carry on held-out text of the same and of the other domain, against GPT-2?
# Make runs first, e.g. `bpe-train -m experiment=compare_datasets`.

# %%
import os
from pathlib import Path

import pandas as pd
from IPython.display import display

from bpe.analysis import figures, load_runs, pairwise_overlap
from bpe.analysis.loader import comparable_measures, complete, tidy
from bpe.cli.show import show
from bpe.util.io import DATA_DIR, PROJECT_ROOT

EXPERIMENTS = Path(os.environ.get("BPE_EXPERIMENTS", PROJECT_ROOT / "experiments"))
frame = load_runs(EXPERIMENTS)
runs = tidy(frame)
# runs measured on another number of held-out documents than most of their dataset's (a
# `debug=fast` run measures 10, a full run 128) are kept off the curves: they do not compare
done, apart = comparable_measures(complete(runs))
print(f"{len(done)} complete runs on {sorted(set(done['dataset']))}")
if len(apart):
    print(f"left out (measured on other held-out documents): {sorted(apart['run_dir'])}")

# %% [markdown]
# ## Compression (bytes per token on held-out documents)

# %%
cols = [
    "dataset",
    "vocab_size",
    "trainer",
    "compression",
    "gpt2_compression",
    "other_dataset",
    "other_compression",
]
done[cols].sort_values(["dataset", "vocab_size"]).drop_duplicates(["dataset", "vocab_size"])

# %%
if done["vocab_size"].nunique() > 1:
    gpt2 = done.groupby("dataset")["gpt2_compression"].median().dropna().to_dict()
    display(figures.compression_vs_vocab(done, gpt2=gpt2))

# %% [markdown]
# ## Longest tokens of the largest vocab per dataset

# %%
for dataset, group in done.groupby("dataset"):
    run_dir = group.loc[group["vocab_size"].idxmax(), "run_dir"]
    longest = frame.loc[frame["run_dir"] == run_dir, "metrics.longest_tokens"].iloc[0]
    print(f"== {dataset} ({Path(run_dir).name})")
    display(pd.DataFrame(longest)[["bytes", "gpt2", "text"]].head(10))

# %% [markdown]
# ## Token lengths

# %%
for dataset, group in done.groupby("dataset"):
    run_dir = group.loc[group["vocab_size"].idxmax(), "run_dir"]
    row = frame.loc[frame["run_dir"] == run_dir].iloc[0]
    lengths = {
        int(c.rsplit(".", 1)[1]): int(row[c])
        for c in frame.columns
        if c.startswith("metrics.token_lengths.") and pd.notna(row[c])
    }
    display(figures.token_lengths(lengths, title=f"Token lengths: {dataset}"))

# %% [markdown]
# ## One sentence under each tokenizer
#
# The largest complete run per dataset and GPT-2 (`bpe.cli.show`; `bpe-show RUN_DIR "text"` does
# the same in a terminal). Hover a token to see its id.

# %%
SENTENCE = "Once upon a time, the government announced a surprisingly unexpected policy."
sides = []
for dataset, group in done.groupby("dataset"):
    largest = group.loc[group["vocab_size"].idxmax()]
    sides.append((f"{dataset} v{int(largest['vocab_size'])}", largest["run_dir"]))
sides = [(label, d) for label, d in sides if (Path(d) / "merges.txt").is_file()]
for label, run_dir in [*sides, ("gpt2", DATA_DIR / "gpt2")]:
    display(show(run_dir, SENTENCE, label=label))

# %% [markdown]
# ## How much the vocabularies overlap (Jaccard of the vocabs, by bytes)

# %%
overlap = pairwise_overlap(done)
if len(overlap) > 1:
    display(figures.heatmap(overlap, label="Jaccard", title="Vocab overlap (Jaccard, by bytes)"))
overlap.round(3)
