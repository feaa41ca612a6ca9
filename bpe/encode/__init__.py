"""Using a trained tokenizer on a corpus: `bpe-encode`'s library.

    npy       corpus -> uint16/uint32 `.npy` of ids, in parallel over chunks, atomically
    lineage   the `.npy.json` sidecar: which tokenizer, which input, which code made the ids

What it does not do: train, or define how a tokenizer encodes text (`bpe.tokenizer`).
"""
