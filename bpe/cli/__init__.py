"""The console scripts, one module each (see `[project.scripts]` in pyproject.toml).

    train    bpe-train    the Hydra app: one run, or a sweep with -m
    report   bpe-report   regenerate ANALYSIS.md / SWEEP.md / reports/ from run directories
    show     bpe-show     how a tokenizer splits a text, token by token

`bpe-encode` and `bpe-compare` keep their `main` beside their library for now
(`bpe.encode.npy`, `bpe.analysis.compare`). The CLIs sit on top of every layer: nothing in
`bpe` imports them.
"""
