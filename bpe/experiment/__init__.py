"""The experiment harness: run directories, metrics.json, environment, memory and profiling.

`bpe.experiment.runner.run_experiment(cfg, report=...)` runs one training job from a Hydra config
and leaves a self-describing run directory (layout in experiments/README.md);
`bpe.evaluation.evaluate` measures the trained tokenizer. `runner` writes every artifact; the
other modules each own one concern (metrics.json, memory, environment, profilers, the config
schema, run-directory names). None of them formats Markdown or imports `bpe.analysis` (the CLI
hands the report writer in).
"""
