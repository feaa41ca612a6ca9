"""The evaluation layer: how a trained tokenizer is measured, between `bpe.measures` (functions of
a tokenizer and text) and `bpe.experiment` (which writes run directories).

    evaluate       measures a trained tokenizer for metrics.json: compression, throughput, the
                   export checks, bits per byte, languages, segmentations, usage
    measured       the documents each side of a run is measured on (held-out, training tail)
    segmentations  the vocab cut three ways on held-out text, each measured
    usage          token usage and under-trained tokens of a run

What it does not do: write files (`bpe.experiment` records what it returns in metrics.json) or
read run directories (`bpe.analysis`).
"""
