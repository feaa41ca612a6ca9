"""The experiment harness: run directories, metrics.json, environment, memory and profiling.

`bpe.experiment.runner.train(cfg)` runs one training job from a Hydra config and leaves a
self-describing run directory (layout in experiments/README.md). The modules here each own one
artifact; none of them formats Markdown (reports are built afterwards by `bpe.analysis`).
"""
