"""The experiment harness: run directories, metrics.json, environment, memory and profiling.

`bpe.experiment.runner.run_experiment(cfg, report=...)` runs one training job from a Hydra config
and leaves a self-describing run directory (layout in experiments/README.md);
`bpe.experiment.evaluate` measures the trained tokenizer. The modules here each own one artifact;
none of them formats Markdown or imports `bpe.analysis` (the CLI hands the report writer in).
"""
