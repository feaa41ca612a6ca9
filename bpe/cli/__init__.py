"""The console scripts, one module each (see `[project.scripts]` in pyproject.toml).

    train    bpe-train    the Hydra app: one run, or a sweep with -m
    report   bpe-report   regenerate ANALYSIS.md / SWEEP.md / reports/ from run directories
    show     bpe-show     how a tokenizer splits a text, token by token
    encode   bpe-encode   a corpus as a .npy array of ids (`bpe.encode.npy` does the work)
    compare  bpe-compare  COMPARE.md for two or more tokenizers (`bpe.analysis.compare`)

Each module is the command line only: arguments, logging, exit status. The CLIs sit on top of
every layer: nothing in `bpe` imports them.
"""
