"""SWEEP.md: one report over the jobs of a Hydra multirun, from the job directories only.

`report` writes it; `facts` loads and groups the jobs; `sections` renders it; `search` is the
report of a hyper-parameter search (its trials ranked).
"""
