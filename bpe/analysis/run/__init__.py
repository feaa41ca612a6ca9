"""ANALYSIS.md: one run's report, computed from its run directory only.

`report` gathers, renders and writes it; `facts` reads the run's files into `RunFacts`;
`summary` and the `*sections` modules are its sections, pure functions of the metrics (the
run itself: header, time, memory, profile; the tokenizer: tokens, compression, bits per byte;
what a variant did; the siblings on the same input; how the vocab is used).
"""
