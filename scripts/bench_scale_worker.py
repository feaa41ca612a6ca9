"""One training run of `scripts/bench_scale.py`, in the fresh interpreter the benchmark starts.

`python scripts/bench_scale_worker.py '{"impl": "ours"|"hf", "path": ..., "vocab_size": ...}'`
trains once and prints one JSON line: wall seconds (the training call only), CPU seconds, the
process's own peak RSS and, for ours, the stage split and unique pretokens.

It imports only what the run needs (ours: `bpe`; HF: `tokenizers`), so neither run carries the
other's libraries or the benchmark's (numpy, pandas, matplotlib) in its memory.

What it does not do: sample memory (the parent samples the whole process tree) or decide
anything about the results.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path

EOT = "<|endoftext|>"


def _ru_maxrss_mb() -> float:
    """The larger of this process's and its workers' peak RSS (MB).

    Subtle: this process's `ru_maxrss` would include the parent's peak (a forked child keeps
    it across exec), so its own peak is read as VmHWM, which starts afresh at exec.
    """
    own = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            own = int(line.split()[1])
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024  # both in KiB


def _cpu_seconds() -> float:
    """User + system CPU time of this process and its finished workers (threads included)."""
    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_ours(path: str, vocab_size: int) -> dict:
    from bpe import train_bpe_detailed

    start = time.perf_counter()
    # no cache directory: every run pre-tokenizes (a cache hit is not training)
    result = train_bpe_detailed(path, vocab_size, [EOT], trainer="heap")
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "cpu_s": _cpu_seconds(),
        "ru_maxrss_mb": _ru_maxrss_mb(),
        "merges": result.num_merges,
        "pretokenize_s": result.timings["pretokenize"],
        "merge_s": result.timings["merge"],
        "unique_pretokens": result.pretokenized.num_unique,
        "num_workers": result.pretokenized.num_workers,
    }


def iter_documents(path: str, *, block_chars: int = 1 << 20) -> Iterator[str]:
    """The file's documents (split on `<|endoftext|>`), read a block at a time."""
    rest = ""
    with open(path, encoding="utf-8") as f:
        while block := f.read(block_chars):
            parts = (rest + block).split(EOT)
            rest = parts.pop()
            yield from (p for p in parts if p)
    if rest:
        yield rest


def hf_gpt2_trainer(vocab_size: int):
    """HF's tokenizer and BpeTrainer set up as GPT-2's: byte-level, its 256-symbol alphabet.

    The one HF setup both benchmarks use (`bench_train.py` imports it): `vocab_size` counts the
    special token and the 256 symbols, as ours does, so the same number means the same merges.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    return tok, trainer


def run_hf(path: str, vocab_size: int) -> dict:
    start = time.perf_counter()
    tok, trainer = hf_gpt2_trainer(vocab_size)
    tok.train_from_iterator(iter_documents(path), trainer=trainer)
    seconds = time.perf_counter() - start
    merges = len(json.loads(tok.to_str())["model"]["merges"])
    return {
        "seconds": seconds,
        "cpu_s": _cpu_seconds(),
        "ru_maxrss_mb": _ru_maxrss_mb(),
        "merges": merges,
    }


# --------------------------------------------------------------------------------------------


def main() -> None:
    spec = json.loads(sys.argv[1])
    run = run_hf if spec["impl"] == "hf" else run_ours
    print(json.dumps(run(spec["path"], spec["vocab_size"])))


if __name__ == "__main__":
    main()
