"""Experiment trackers: a finished run directory logged to MLflow (`to_mlflow`) or to Weights &
Biases offline files (`to_wandb`), by a Hydra callback as each job ends (`callback`) or from the
command line for runs made without one.

What it does not do: train, measure or write a run directory (it reads what the run wrote, as
every reader of runs does); the reports (`bpe.analysis`) never need a tracker.
"""
