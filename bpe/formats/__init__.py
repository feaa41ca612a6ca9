"""The files a tokenizer is read from and saved as: GPT-2's, Hugging Face's, tiktoken's, ours.

    gpt2_format      vocab.json and merges.txt (GPT-2's format), merges_sha256
    removals_json    PickyBPE's removals.json: the record and its check against the merges
    tokenizer_json   the special tokens and split pattern a tokenizer.json records
    pretrained       opening a tokenizer directory (run, save_pretrained output, GPT-2 files):
                     one rule for its special tokens, used by every reader
    exports          tokenizer.json + Hugging Face configs, the tiktoken ranks file, and
                     `save_pretrained` for a tokenizer directory
    init_from        the tokenizer a run continues training from (`init_from=`)

Formats sit below the tokenizer: `bpe.tokenizer` imports them (`Tokenizer.from_pretrained`
opens a directory through `pretrained`; `save_pretrained` and `to_tiktoken` import `exports`
on first use, as it loads numpy, tiktoken and `tokenizers`), and no format imports the
tokenizer: the exports read a tokenizer's shape (`exports.TokenizerLike`).
"""
