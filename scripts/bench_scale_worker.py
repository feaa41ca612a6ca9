"""One training run of the benchmarks, in the fresh interpreter the benchmark starts.

`python scripts/bench_scale_worker.py '{"impl": IMPL, "path": ..., "vocab_size": ...}'` trains
once and prints one JSON line: wall seconds (the training call only), CPU seconds, the
process's own peak RSS, the merge count and a fingerprint of the merged tokens in order, and
for ours the stage split and unique pretokens. IMPL is one of `SYSTEMS`:

* `ours` (the heap trainer; `"trainer": NAME` picks another of ours, e.g. `compiled`, and
  `"engine": "auto" | "regex" | "compiled"` stage 1's engine, `bpe.pretokenize.engines`);
* `hf`: Hugging Face `tokenizers`' BpeTrainer set up as GPT-2 (`hf_gpt2_trainer`);
* `rustbpe`: karpathy's rustbpe, `Tokenizer.train_from_iterator` with GPT-2's pattern;
* `bpeasy`: `bpeasy.train_bpe` with GPT-2's pattern and no token length limit.

Every system gets the same documents (the file split on `<|endoftext|>`, streamed) and the same
number of merges: `vocab_size` counts the special token and the 256 bytes, as ours does, so
rustbpe and bpeasy (which count the 256 bytes but no special token) are asked for one less.
Each system breaks ties between equally frequent pairs its own way (`TIE_BREAKS`), so their
merges may differ from ours; the fingerprint (`tokens_sha256`) shows whether they do.

It imports only what the run needs (ours: `bpe`; the others: their library), so no run carries
another's libraries or the benchmark's (numpy, pandas, matplotlib) in its memory.

What it does not do: sample memory (the parent samples the whole process tree) or decide
anything about the results.
"""

from __future__ import annotations

import functools
import hashlib
import json
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path

#: GPT-2's end-of-text token and split pattern, as `bpe.text.specials.EOT` and
#: `bpe.text.patterns.GPT2_PATTERN` (a test checks they are equal; written out so that the
#: anchors' runs do not import bpe)
EOT = "<|endoftext|>"
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
#: bpeasy's cap on a token's bytes, set beyond any token so that it changes no merge
BPEASY_MAX_TOKEN_LENGTH = 1 << 20
#: what each system is, and how it breaks ties between equally frequent pairs
SYSTEMS = {
    "ours": "bpe-lab, trainer heap (pure Python)",
    "compiled": "bpe-lab, trainer compiled (heap's algorithm, Numba)",
    "hf": "Hugging Face tokenizers BpeTrainer (Rust)",
    "rustbpe": "karpathy rustbpe (Rust)",
    "bpeasy": "bpeasy (Rust)",
    "gigatoken": "gigatoken train_bpe (Rust)",
}
TIE_BREAKS = {
    "ours": "CS336: the lexicographically greatest (left bytes, right bytes)",
    "compiled": "CS336: the lexicographically greatest (left bytes, right bytes)",
    "hf": "its own: the pair of smaller ids, in its own id order (not CS336's)",
    "rustbpe": "its own: the pair of smaller ids (not CS336's)",
    "bpeasy": "its own (not CS336's; the same merges as rustbpe's on every corpus we tried)",
    "gigatoken": "its default ('huggingface'; none of its three modes is CS336's)",
}


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


def tokens_sha256(tokens) -> str:
    """A fingerprint of the merged tokens (bytes) in creation order: equal iff same merges.

    >>> tokens_sha256([b"ab", b"abc"]) == tokens_sha256([b"ab", b"abc"])
    True
    """
    digest = hashlib.sha256()
    for token in tokens:
        digest.update(len(token).to_bytes(4, "little") + token)
    return digest.hexdigest()


def _result(seconds: float, tokens: list[bytes], **extra) -> dict:
    return {
        "seconds": seconds,
        "cpu_s": _cpu_seconds(),
        "ru_maxrss_mb": _ru_maxrss_mb(),
        "merges": len(tokens),
        "tokens_sha256": tokens_sha256(tokens),
        **extra,
    }


def run_ours(path: str, vocab_size: int, trainer: str = "heap", engine: str = "auto") -> dict:
    from bpe import train_bpe_detailed

    start = time.perf_counter()
    # no cache directory: every run pre-tokenizes (a cache hit is not training)
    result = train_bpe_detailed(path, vocab_size, [EOT], trainer=trainer, engine=engine)
    seconds = time.perf_counter() - start
    return _result(
        seconds,
        [a + b for a, b in result.merges],
        trainer=trainer,
        merges_sha256=result.merges_sha256,
        pretokenize_s=result.timings["pretokenize"],
        merge_s=result.timings["merge"],
        timings=result.timings,
        unique_pretokens=result.pretokenized.num_unique,
        num_workers=result.pretokenized.num_workers,
        engine=result.pretokenized.engine,
    )


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
    merges = json.loads(tok.to_str())["model"]["merges"]
    return _result(
        seconds, [_hf_bytes(left) + _hf_bytes(right) for left, right in map(_hf_pair, merges)]
    )


def _hf_pair(merge) -> tuple[str, str]:
    """A merge of tokenizer.json: ["a", "b"] (tokenizers >= 0.20) or "a b" (older)."""
    if isinstance(merge, str):
        left, right = merge.split(" ")
        return left, right
    return merge[0], merge[1]


def _hf_bytes(symbol: str) -> bytes:
    """The bytes of a byte-level symbol (GPT-2's printable stand-ins for the 256 bytes)."""
    table = hf_byte_table()
    return bytes(table[c] for c in symbol)


@functools.cache
def hf_byte_table() -> dict[str, int]:
    """Stand-in character -> byte, as GPT-2 (and so HF's ByteLevel) maps them.

    A byte whose character is printable and not a space stands for itself; the others, in byte
    order, take chr(256), chr(257), ... (a test checks this against `bpe`'s table, which this
    child does not import).
    """
    printable = [b for b in range(256) if chr(b).isprintable() and not chr(b).isspace()]
    others = [b for b in range(256) if b not in set(printable)]
    return {chr(b): b for b in printable} | {chr(256 + k): b for k, b in enumerate(others)}


def _ranked_tokens(ranks: dict[bytes, int]) -> list[bytes]:
    """The tokens a rank table (bytes -> rank) adds beyond the 256 bytes, in rank order."""
    return [
        bytes(token) for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]) if rank >= 256
    ]


def run_rustbpe(path: str, vocab_size: int) -> dict:
    import rustbpe

    start = time.perf_counter()
    tok = rustbpe.Tokenizer()
    # its vocab_size counts the 256 bytes and the merges, no special token
    tok.train_from_iterator(iter_documents(path), vocab_size - 1, pattern=GPT2_PATTERN)
    seconds = time.perf_counter() - start
    return _result(seconds, _ranked_tokens(dict(tok.get_mergeable_ranks())))


def run_bpeasy(path: str, vocab_size: int) -> dict:
    import bpeasy

    start = time.perf_counter()
    ranks = bpeasy.train_bpe(
        iter_documents(path), GPT2_PATTERN, BPEASY_MAX_TOKEN_LENGTH, vocab_size - 1
    )
    seconds = time.perf_counter() - start
    return _result(seconds, _ranked_tokens(ranks))


def run_gigatoken(path: str, vocab_size: int) -> dict:
    import gigatoken

    start = time.perf_counter()
    # its vocab_size counts the 256 bytes, the special token and the merges, as ours does; it
    # reads the file itself, cuts it at the special token and splits GPT-2's pattern by hand
    _, merges = gigatoken.train_bpe(path, vocab_size, [EOT])
    seconds = time.perf_counter() - start
    return _result(seconds, [bytes(a) + bytes(b) for a, b in merges])


# --------------------------------------------------------------------------------------------


def run(spec: dict) -> dict:
    """One training run as `spec` says: impl (one of SYSTEMS), path, vocab_size."""
    impl, path, vocab_size = spec["impl"], spec["path"], spec["vocab_size"]
    if impl == "ours":
        return run_ours(path, vocab_size, spec.get("trainer", "heap"), spec.get("engine", "auto"))
    if impl == "compiled":
        return run_ours(path, vocab_size, "compiled")
    runs = {"hf": run_hf, "rustbpe": run_rustbpe, "bpeasy": run_bpeasy, "gigatoken": run_gigatoken}
    if impl not in runs:
        raise ValueError(f"impl={impl!r} is not one of {sorted(SYSTEMS)}")
    return runs[impl](path, vocab_size)


def main() -> None:
    print(json.dumps(run(json.loads(sys.argv[1]))))


if __name__ == "__main__":
    main()
