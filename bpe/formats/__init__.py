"""What a trained tokenizer is saved as, beside GPT-2's own files (`bpe.tokenizer.gpt2_format`).

    exports          tokenizer.json + Hugging Face configs, the tiktoken ranks file, and
                     `save_pretrained` / `from_pretrained` for a tokenizer directory
    pretrained       opening a tokenizer directory (run, save_pretrained output, GPT-2 files):
                     one rule for its special tokens, used by every reader
    tokenizer_json   the special tokens and split pattern a tokenizer.json records
    init_from        the tokenizer a run continues training from (`init_from=`)

Formats import the tokenizer, never the reverse: `Tokenizer`'s format methods import this
package inside the method, so `import bpe.tokenizer` loads no format writer.
"""
