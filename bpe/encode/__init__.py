"""Using a trained tokenizer on a corpus: `bpe-encode`'s library.

    npy       corpus -> uint16/uint32 `.npy` of ids, in parallel over its parts
    npy_file  the `.npy` written atomically, its dtype checked, where it may go
    lineage   the `.npy.json` sidecar: which tokenizer, which input, which code made the ids

What it does not do: train, or define how a tokenizer encodes text (`bpe.tokenizer`).
"""
