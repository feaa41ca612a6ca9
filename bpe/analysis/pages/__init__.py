"""The pages of `reports/`: each a question answered from run directories.

`index` writes `bpe-report --all` (the README index and the plain-BPE pages of `plain_bpe`);
`registry` holds the pages made from sweeps of their own (`bpe-report --page NAME`), each in
its module: `variants`, `languages`, `segmentation`, `vocabularies`, `data_curve`.
"""
