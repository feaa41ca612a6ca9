"""COMPARE.md and the other documents that set tokenizers side by side.

`sides` opens what is compared (run directories, GPT-2 style files); `measures` compares them;
`report` renders and writes COMPARE.md. `parity_report` (PARITY.md, `bpe-parity`) and
`prune_report` (PRUNE.md, `bpe-prune`) render the comparisons those commands record.
"""
