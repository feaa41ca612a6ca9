"""bpe-lab: byte-level BPE training (GPT-2 style) with three comparable trainers.

Public API (see README.md):

    from bpe import train_bpe, Tokenizer
    vocab, merges = train_bpe(path, vocab_size, ["<|endoftext|>"], trainer="heap")
"""

from bpe.tokenizer import Tokenizer
from bpe.training import TrainResult, train_bpe, train_bpe_detailed

__all__ = ["Tokenizer", "TrainResult", "train_bpe", "train_bpe_detailed"]
__version__ = "0.1.0"
