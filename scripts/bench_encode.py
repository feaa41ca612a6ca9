"""Benchmark: encoding throughput of our Tokenizer against tiktoken and HF tokenizers (GPT-2).

All three tokenizers are built from the same files (data/gpt2) and encode the same text in the
same run, single-threaded, so the ratios compare like with like on this machine at this moment:

    * ours, cold: a freshly built Tokenizer's first pass (its pretoken cache starts empty),
      once with each cold path: `merge_backend="python"` (every new pretoken merged in the
      interpreter) and `merge_backend="compiled"` (a text's new pretokens merged in one call
      of the Numba kernel, its tables built inside the timed pass; skipped without Numba).
      The compiled path's one-time cost in a process (importing NumPy and Numba, loading the
      cached machine code, building the tables), measured in fresh interpreters, is printed on
      its own line, outside the timings;
    * ours, warm: later passes (the steady state when encoding a large corpus);
    * tiktoken:   `Encoding.encode` (single thread), built offline from data/gpt2;
    * HF:         `tokenizers` byte-level BPE with `<|endoftext|>` added, RAYON_NUM_THREADS=1,
                  given the documents through `encode_batch` (its faster mode here: one
                  2.5 MB string is ~30% slower); its ids are rejoined with 50256 to compare.

Ours and tiktoken encode each sample file whole (documents joined by `<|endoftext|>`). Runs are
interleaved and the best of `--repeats` is kept, which is the least disturbed by other load.
This first table times CPU seconds of this process (`time.process_time`, every thread): all
four encoders run on one thread here, and on a machine shared with other work wall time also
measures the neighbours (`--wall` times wall seconds instead).
Ids are checked against tiktoken's (the exit status is 1 if they differ).

A second table (`peers`) times the same cold encode beside other projects' encoders, each
loaded from GPT-2's tokenizer.json (`PEERS`: gigatoken, tokie and splintr-rs, from their wheels in
the `bench` extra; one left out is named with the reason), ids checked against tiktoken's.

A third table times whole-file encoding with `bpe-encode`'s two backends
(`encode_to_npy(backend="python")`: processes; `backend="tiktoken"`: the tiktoken export on
threads, after its first-chunk check), next to tiktoken's own GPT-2 `Encoding` on the same
chunks and as many threads (`encode_ordinary_batch`, specials cut out first), in the same run.
The parts and the worker count are the ones `encode_to_npy` itself plans
(`bpe.corpus.parts.plan_work`: parts of about 1 MiB, every usable CPU, capped at the number
of parts, and in-process below 256 KiB), so the three rows share them. The tokenizer is GPT-2's
(data/gpt2) unless `--tokenizer RUN_DIR` names a run; the input is the OWT sample repeated
`--copies` times (a temp file, removed at the end), so later copies hit the python backend's
pretoken cache as a long corpus mostly would. Wall time includes reading and writing the `.npy` and
its sidecar, and for the tiktoken backend building the Encoding and its check of the first 1 MB
chunk against the python encoder (about 0.4 s). With GPT-2's vocab, gigatoken's whole-file
encoder (`encode_files` of the file's documents, split at `<|endoftext|>`, on every thread; a
fresh tokenizer each time, as ours starts cold) is timed on the same file, its ids compared
with ours less the separators'.

A fourth table times BPE-dropout (p = 0.1, a fixed seed) on each sample: the compiled kernel
(`bpe.tokenizer.compiled_dropout`) and the Python path (on the sample's first 100 KB: it runs
at a fraction of a MB/s), their ids compared, and the kernel's speed over the plain compiled
encoder's cold speed on the same text in the same run (both in ranges over the repeats).

A fifth table times the segmentation methods (`Tokenizer.encode(segmentation=...)`: merges,
longest_prefix, fewest) cold and warm on each sample with GPT-2's vocab, on the python and the
compiled cold path, the tokens each gives, each method's cold speed over its path's merges', and
tiktoken's speed beside them.

A sixth table times PickyBPE's removals (`bpe.tokenizer.compiled_replay`): a PickyBPE
tokenizer of vocab 8,000 trained on the OWT sample against a plain BPE one of the same size
trained on the same text, both compiled and cold, and the Python replay on each sample's first
100 KB, its ids compared with the kernel's.

It asserts nothing about speed: it names the machine, the versions and the load it runs under,
then prints Markdown tables to paste into a note. Usage:

    python scripts/bench_encode.py               # TinyStories and OWT samples, 5 repeats
    python scripts/bench_encode.py --repeats 9 --copies 8 --tokenizer experiments/<run_dir>
    python scripts/bench_encode.py --quick       # 1 repeat, 1 copy, each sample's first ~300 KB
    python scripts/bench_encode.py --tables dropout picky   # only those tables
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

# Single-threaded references: set before tokenizers / tiktoken start any thread pool.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bpe.text.specials import EOT  # noqa: E402 - after the thread settings above
from bpe.util.machine import host, host_line, versions  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = {"TinyStories": "tinystories_sample.txt", "OWT": "owt_sample.txt"}
# --quick: each sample's head, cut after a document; above workers.DEFAULT_MIN_PARALLEL_BYTES
# (256 KiB), so the backends table still starts its worker processes and threads.
QUICK_BYTES = 300_000


#: the tables main can print (`--tables`), in the order it prints them
TABLES = ("speed", "peers", "profile", "backends", "dropout", "segmentation", "picky")

#: encoders of other projects (the `bench` extra), each loaded from GPT-2's tokenizer.json as
#: written by HF tokenizers from data/gpt2, and how each encodes a text with its special tokens
PEERS = {
    "gigatoken": "gigatoken (Rust): `Tokenizer(tokenizer.json).encode`",
    "tokie": "tokie (Rust): `Tokenizer.from_json(tokenizer.json).encode(text).ids`",
    "splintr": "splintr-rs (Rust): `from_json(tokenizer.json).encode_with_special`",
}

#: the clock of the first table: CPU seconds unless --wall (main sets it)
_clock = time.process_time


def sample_text(filename: str, limit: int | None = None) -> str:
    """A bundled sample's text; with `limit`, only its documents that end within `limit` bytes."""
    data = (ROOT / "data" / filename).read_bytes()
    if limit is not None and len(data) > limit:
        end = data.rfind(EOT.encode("utf-8"), 0, limit - len(EOT) + 1)
        if end < 0:
            raise ValueError(f"{filename!r} has no document end in its first {limit} bytes")
        data = data[: end + len(EOT)]
    return data.decode("utf-8")


def _hf_tokenizer():
    from tokenizers import ByteLevelBPETokenizer

    gpt2 = ROOT / "data" / "gpt2"
    tok = ByteLevelBPETokenizer(str(gpt2 / "vocab.json"), str(gpt2 / "merges.txt"))
    tok.add_special_tokens([EOT])
    return tok


def bench(repeats: int, limit: int | None = None) -> list[dict]:
    from bpe import Tokenizer
    from bpe.measures import GPT2_DIR, pile_projection, tiktoken_gpt2_encoding

    vocab_path, merges_path = GPT2_DIR / "vocab.json", GPT2_DIR / "merges.txt"
    t0 = time.perf_counter()
    Tokenizer.from_files(vocab_path, merges_path, [EOT])
    build_seconds = time.perf_counter() - t0
    print(f"our Tokenizer.from_files(GPT-2): {build_seconds:.2f} s (not in the timings below)")

    enc = tiktoken_gpt2_encoding()
    hf = _hf_tokenizer()
    compiled = compiled_path_first_use(vocab_path, merges_path)
    backends = ["python"] + (["compiled"] if compiled else [])
    rows = []
    for name, filename in SAMPLES.items():
        text = sample_text(filename, limit)
        num_bytes = len(text.encode("utf-8"))

        docs = text.split(EOT)

        # Cold: a fresh tokenizer per run, so every run starts with an empty cache; the two
        # cold paths alternate, so a burst of load hits both alike.
        cold = dict.fromkeys(backends, float("inf"))
        cold_all: dict[str, list[float]] = {b: [] for b in backends}
        cold_ids = {}
        for _ in range(repeats):
            for backend in backends:
                tok = Tokenizer.from_files(vocab_path, merges_path, [EOT], merge_backend=backend)
                t0 = _clock()
                cold_ids[backend] = tok.encode(text)
                cold_all[backend].append(_clock() - t0)
                cold[backend] = min(cold[backend], cold_all[backend][-1])
        ours_ids = cold_ids[backends[-1]]
        warm = tik = hft = float("inf")
        tik_all = []
        for _ in range(repeats):  # interleaved, so a burst of load hits all three alike
            t0 = _clock()
            ours_ids = tok.encode(text)
            t1 = _clock()
            tik_ids = enc.encode(text, allowed_special={EOT})
            t2 = _clock()
            hf_docs = hf.encode_batch(docs)
            t3 = _clock()
            warm, tik, hft = min(warm, t1 - t0), min(tik, t2 - t1), min(hft, t3 - t2)
            tik_all.append(t2 - t1)
        hf_ids = [i for k, e in enumerate(hf_docs) for i in ([50256] if k else []) + e.ids]
        t0 = _clock()
        streamed = sum(1 for _ in tok.encode_iterable(text.splitlines(keepends=True)))
        stream = _clock() - t0
        assert streamed == len(ours_ids)
        rows.append(
            {
                "sample": name,
                "bytes": num_bytes,
                "ours_cold": num_bytes / cold["python"],
                "ours_cold_compiled": num_bytes / cold["compiled"] if compiled else None,
                "ours_cold_compiled_range": _range(num_bytes, cold_all["compiled"])
                if compiled
                else None,
                "tiktoken_range": _range(num_bytes, tik_all),
                "ours_warm": num_bytes / warm,
                "ours_stream": num_bytes / stream,
                "tiktoken": num_bytes / tik,
                "hf": num_bytes / hft,
                "same_as_tiktoken": all(ids == tik_ids for ids in cold_ids.values())
                and ours_ids == tik_ids,
                "hf_same_as_tiktoken": hf_ids == tik_ids,
                "pile_days_warm": pile_projection(num_bytes / warm)["days"],
            }
        )
    return rows


#: A fresh interpreter's first compiled encode, timed in parts (printed as JSON).
_FIRST_USE = """
import json, sys, time
from bpe import Tokenizer
from bpe.text.specials import EOT
tok = Tokenizer.from_files(sys.argv[1], sys.argv[2], [EOT], merge_backend="compiled")
t0 = time.perf_counter()
import numpy, numba
t1 = time.perf_counter()
tok.encode("Numba loads, and its kernels are read from its cache, once.")
t2 = time.perf_counter()
tok.encode("A second call pays none of that.")
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "second": t3 - t2}))
"""


def compiled_path_first_use(vocab_path: Path, merges_path: Path) -> bool:
    """The compiled path's one-time cost in a process, measured in fresh interpreters (the
    best of 3, each after a first run that fills Numba's cache) and printed apart: importing
    NumPy and Numba, then the first encode (loading the cached machine code, building the
    merge tables and the character classes). Also pays it here, outside the timings.

    Returns whether the compiled path is available (Numba installed).
    """
    import json
    import subprocess

    from bpe import Tokenizer

    try:
        tok = Tokenizer.from_files(vocab_path, merges_path, [EOT], merge_backend="compiled")
    except ValueError as err:
        print(f"compiled cold path: not available ({err})")
        return False
    command = [sys.executable, "-c", _FIRST_USE, str(vocab_path), str(merges_path)]
    runs = []
    for _ in range(4):  # the first fills Numba's cache if it was empty
        proc = subprocess.run(command, capture_output=True, text=True, check=True)
        runs.append(json.loads(proc.stdout))
    best = min(runs[1:], key=lambda r: r["import"] + r["first"])
    print(
        f"compiled path, first use in a fresh process (best of 3, the cache warm): "
        f"{best['import'] + best['first']:.2f} s = import NumPy and Numba {best['import']:.2f} s "
        f"+ first encode {best['first']:.2f} s (cached machine code, merge tables, character "
        f"classes); the next encode {best['second'] * 1000:.1f} ms (not in the timings)"
    )
    tok.encode("Numba loads, and its kernels are read from its cache, once.")
    return True


def bench_backends(
    tokenizer_dir: Path | None, copies: int, repeats: int, limit: int | None = None
) -> list[dict]:
    """MB/s of bpe-encode's backends and of tiktoken's GPT-2 on the same file, chunks, workers."""
    from bpe import Tokenizer
    from bpe.corpus.chunks import read_chunk_text
    from bpe.corpus.parts import plan_work
    from bpe.corpus.sources import resolve_source
    from bpe.encode.npy import DEFAULT_CHUNK_BYTES, encode_to_npy
    from bpe.formats.exports import encode_with_tiktoken
    from bpe.measures import GPT2_DIR, tiktoken_gpt2_encoding

    tok = (
        Tokenizer.from_pretrained(tokenizer_dir)
        if tokenizer_dir is not None
        else Tokenizer.from_files(GPT2_DIR / "vocab.json", GPT2_DIR / "merges.txt", [EOT])
    )
    gpt2 = Tokenizer.from_files(GPT2_DIR / "vocab.json", GPT2_DIR / "merges.txt", [EOT])
    enc = tiktoken_gpt2_encoding()
    dtype = "uint16" if tok.max_token_id < 2**16 else "uint32"
    text = sample_text(SAMPLES["OWT"], limit).encode("utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "corpus.txt"
        src.write_bytes(text * copies)
        size = src.stat().st_size
        best = {"python": float("inf"), "tiktoken": float("inf"), "tiktoken GPT-2": float("inf")}
        used = {}
        # the chunks and workers encode_to_npy plans for this file (same call, same values)
        chunks, worker_plan = plan_work(
            resolve_source(src),
            list(tok.special_tokens),
            num_workers=None,
            max_chunk_bytes=DEFAULT_CHUNK_BYTES,
            pattern=tok.pattern,
        )
        workers = worker_plan.workers
        for _ in range(repeats):
            for backend in ("python", "tiktoken"):
                tok.clear_cache()  # python workers fork with this cache: start each run cold
                out = encode_to_npy(
                    src, tok, Path(tmp) / f"{backend}.npy", backend=backend, dtype=dtype
                )
                best[backend] = min(best[backend], out["seconds"])
                used[backend] = out["backend"]
                assert out["num_chunks"] == len(chunks) and out["num_workers"] == workers
            # tiktoken's GPT-2 on the same chunks and threads (reading included, no .npy).
            t0 = time.perf_counter()
            with ThreadPoolExecutor(workers) as pool:
                n = sum(
                    map(
                        len,
                        pool.map(
                            lambda c: encode_with_tiktoken(enc, gpt2, read_chunk_text(src, *c)),
                            [(c.start, c.end) for c in chunks],
                        ),
                    )
                )
            best["tiktoken GPT-2"] = min(best["tiktoken GPT-2"], time.perf_counter() - t0)
            assert n > 0
        ours = np.load(Path(tmp) / "python.npy")
        # tiktoken's own GPT-2 keeps no ids here (None: not compared)
        same = {"python": True, "tiktoken GPT-2": None}
        same["tiktoken"] = np.array_equal(ours, np.load(Path(tmp) / "tiktoken.npy"))
        if tokenizer_dir is None:  # a peer's whole-file encoder, on GPT-2's vocab only
            seconds, ids = _gigatoken_files(src, workers, repeats, Path(tmp))
            if seconds is not None:
                best[GIGATOKEN_FILES] = seconds
                # its documents' ids, end to end: ours without the separators' ids
                same[GIGATOKEN_FILES] = np.array_equal(ours[ours != gpt2.encode(EOT)[0]], ids)
    return [
        {
            "encoder": name,
            "backend_used": used.get(name, "-"),
            "workers": workers,
            "mb": size / 1e6,
            "mb_s": size / sec / 1e6,
            "same_ids": same[name],
        }
        for name, sec in best.items()
    ]


#: the backends table's row for gigatoken's own whole-file encoder (the `bench` extra)
GIGATOKEN_FILES = "gigatoken encode_files"


def _gigatoken_files(src: Path, workers: int, repeats: int, tmp: Path):
    """(best wall seconds, ids) of gigatoken's `encode_files` on `src` (documents split at
    EOT, every thread), or (None, None) when it is not installed."""
    try:
        import awkward as ak
        import gigatoken
    except ImportError:
        return None, None
    json_path = tmp / "tokenizer.json"
    _hf_tokenizer().save(str(json_path))
    source = gigatoken.TextFileSource([str(src)], separator=EOT)
    best, ids = float("inf"), None
    for _ in range(repeats):
        tok = gigatoken.Tokenizer(str(json_path))  # cold, as ours: no pretoken seen before
        t0 = time.perf_counter()
        out = tok.encode_files(source, parallel=workers > 1)
        best = min(best, time.perf_counter() - t0)
        ids = ak.flatten(out).to_numpy()
    return best, ids


def bench_segmentations(repeats: int, limit: int | None = None) -> list[dict]:
    """Each segmentation method (`Tokenizer.encode(segmentation=...)`) on each sample with
    GPT-2's vocab, on each cold path (`merge_backend` "python", and "compiled" when Numba is
    installed): cold (a fresh tokenizer, empty caches, Numba's machine code already loaded in
    this process by a first untimed call) and warm MB/s, and the tokens each method gives;
    tiktoken's MB/s beside them, in the same run."""
    from bpe import Tokenizer
    from bpe.measures import GPT2_DIR, tiktoken_gpt2_encoding
    from bpe.tokenizer.segmentation import SEGMENTATIONS
    from bpe.util.machine import numba_installed

    vocab_path, merges_path = GPT2_DIR / "vocab.json", GPT2_DIR / "merges.txt"
    enc = tiktoken_gpt2_encoding()
    backends = ("python", "compiled") if numba_installed() else ("python",)
    paths = [(b, m) for b in backends for m in SEGMENTATIONS]
    for backend, method in paths[len(SEGMENTATIONS) :]:  # load each kernel once, untimed
        tok = Tokenizer.from_files(vocab_path, merges_path, [EOT], merge_backend=backend)
        tok.encode("warm the kernel up " * 64, segmentation=method)
    rows = []
    for name, filename in SAMPLES.items():
        text = sample_text(filename, limit)
        num_bytes = len(text.encode("utf-8"))
        cold = dict.fromkeys(paths, float("inf"))
        warm = dict.fromkeys(paths, float("inf"))
        tokens = {}
        tik = float("inf")
        for _ in range(repeats):  # interleaved, so a burst of load hits every path alike
            for backend, method in paths:
                tok = Tokenizer.from_files(vocab_path, merges_path, [EOT], merge_backend=backend)
                t0 = _clock()
                tokens[method] = len(tok.encode(text, segmentation=method))
                t1 = _clock()
                tok.encode(text, segmentation=method)
                t2 = _clock()
                path = (backend, method)
                cold[path], warm[path] = min(cold[path], t1 - t0), min(warm[path], t2 - t1)
            t0 = _clock()
            enc.encode(text, allowed_special={EOT})
            tik = min(tik, _clock() - t0)
        for backend, method in paths:
            rows.append(
                {
                    "sample": name,
                    "backend": backend,
                    "method": method,
                    "tokens": tokens[method],
                    "vs_merges": tokens[method] / tokens["merges"],
                    "cold": num_bytes / cold[(backend, method)],
                    "warm": num_bytes / warm[(backend, method)],
                    "vs_own_merges": cold[(backend, "merges")] / cold[(backend, method)],
                    "tiktoken": num_bytes / tik,
                }
            )
    return rows


def peer_encoders(json_path: Path) -> dict[str, object]:
    """Each peer of `PEERS` as a function that builds a fresh encoder (text -> ids), or the
    reason it cannot run here (its wheel is not installed)."""
    import importlib

    def build(name: str):
        if name == "gigatoken":
            module = importlib.import_module("gigatoken")
            return lambda: module.Tokenizer(str(json_path)).encode
        if name == "tokie":
            module = importlib.import_module("tokie")

            def tokie_encoder():
                tok = module.Tokenizer.from_json(str(json_path))
                return lambda text: tok.encode(text).ids

            return tokie_encoder
        module = importlib.import_module("splintr")
        return lambda: module.from_json(str(json_path)).encode_with_special

    out: dict[str, object] = {}
    for name in PEERS:
        try:
            out[name] = build(name)
        except ImportError as err:
            out[name] = f"not installed ({err.name}; `pip install -e '.[bench]'`)"
    return out


def bench_peers(repeats: int, limit: int | None = None) -> tuple[list[dict], dict[str, str]]:
    """Cold encoding of each sample by ours (compiled, else python), tiktoken and each peer of
    `PEERS` that is installed: a fresh encoder per repeat, turns interleaved, CPU seconds of
    this process (every thread), ids compared with tiktoken's. Returns the rows and, for each
    peer left out, why."""
    from bpe import Tokenizer
    from bpe.measures import GPT2_DIR, tiktoken_gpt2_encoding
    from bpe.util.machine import numba_installed

    vocab_path, merges_path = GPT2_DIR / "vocab.json", GPT2_DIR / "merges.txt"
    backend = "compiled" if numba_installed() else "python"
    with tempfile.TemporaryDirectory(prefix="bench_peers_") as tmp:
        json_path = Path(tmp) / "tokenizer.json"
        _hf_tokenizer().save(str(json_path))
        built = peer_encoders(json_path)
        missing = {n: why for n, why in built.items() if isinstance(why, str)}
        makers = {
            f"ours ({backend})": lambda: (
                Tokenizer.from_files(vocab_path, merges_path, [EOT], merge_backend=backend).encode
            ),
            "tiktoken": lambda: (lambda e: lambda text: e.encode(text, allowed_special={EOT}))(
                tiktoken_gpt2_encoding()
            ),
            **{n: make for n, make in built.items() if not isinstance(make, str)},
        }
        for make in makers.values():  # load every library and kernel once, untimed
            make()("warm up the libraries once")
        rows = []
        for name, filename in SAMPLES.items():
            text = sample_text(filename, limit)
            num_bytes = len(text.encode("utf-8"))
            seconds: dict[str, list[float]] = {n: [] for n in makers}
            ids: dict[str, list[int]] = {}
            for _ in range(repeats):  # interleaved: a burst of load hits every encoder alike
                for encoder, make in makers.items():
                    encode = make()
                    t0 = _clock()
                    ids[encoder] = list(encode(text))
                    seconds[encoder].append(_clock() - t0)
            reference = ids["tiktoken"]
            rows.append(
                {
                    "sample": name,
                    "bytes": num_bytes,
                    "mb_s": {n: num_bytes / min(t) / 1e6 for n, t in seconds.items()},
                    "range": {n: _range(num_bytes, t) for n, t in seconds.items()},
                    "same_ids": {n: v == reference for n, v in ids.items()},
                }
            )
    return rows, missing


def bench_profile(repeats: int, limit: int | None = None) -> list[dict]:
    """Where the compiled cold path's time goes on each sample (GPT-2's vocab, CPU seconds,
    best of `repeats`): the whole cold encode, the same text again on the now-warm tokenizer
    (every pretoken a cache hit), and the parts measured alone: the UTF-32 copy, the split on
    special tokens, the scanner's walk with each pretoken's key (no lookup) and turning the ids
    into a Python list. What is left of the warm pass is the cache's lookups and copies; the
    cold pass's excess over the warm one is the misses' merges and stores."""
    import numba
    import regex

    from bpe import Tokenizer
    from bpe.measures import GPT2_DIR
    from bpe.pretokenize.counting import count_pretokens
    from bpe.text.gpt2_scanner import char_classes, pretoken_end, pretoken_key

    @numba.njit(cache=False)
    def walk(cps, cls):  # the scanner and the key of every pretoken, nothing else
        i, n, count, mixed = 0, len(cps), 0, np.uint64(0)
        while i < n:
            j = pretoken_end(cps, cls, i, n)
            mixed ^= pretoken_key(cps, i, j)
            i, count = j, count + 1
        return count, mixed

    classes = char_classes()
    walk(np.zeros(4, np.uint32), classes)
    special = regex.compile(regex.escape(EOT))
    vocab_path, merges_path = GPT2_DIR / "vocab.json", GPT2_DIR / "merges.txt"
    rows = []
    for name, filename in SAMPLES.items():
        text = sample_text(filename, limit)
        best, ids, pretokens = _profile_parts(
            text,
            repeats,
            lambda: Tokenizer.from_files(vocab_path, merges_path, [EOT], merge_backend="compiled"),
            walk,
            classes,
            special,
        )
        parts = ("UTF-32 copy", "split on special tokens", "scan + pretoken keys")
        warm = best["warm encode (every pretoken a hit)"]
        lookups = warm - sum(best[p] for p in parts) - best["ids to a Python list"]
        misses = best["cold encode"] - warm
        unique = len(count_pretokens(text, [EOT]))
        ms = {k: 1e3 * v for k, v in best.items()}
        ms["lookups and copies (warm rest)"] = 1e3 * lookups
        ms["misses (cold - warm)"] = 1e3 * misses
        rows.append(
            {
                "sample": name,
                "bytes": len(text.encode("utf-8")),
                "ids": ids,
                "pretokens": pretokens,
                "unique": unique,
                "ms": ms,
                "ns_per_lookup": 1e9 * lookups / pretokens,
                "us_per_miss": 1e6 * misses / unique,
            }
        )
    return rows


def _profile_parts(text: str, repeats: int, make, walk, classes, special):
    """`bench_profile`'s timings of one text: (best seconds per part, ids, pretokens)."""
    from bpe.tokenizer.compiled import id_list

    best: dict[str, float] = {}

    def timed(part: str, fn):
        t0 = _clock()
        out = fn()
        best[part] = min(best.get(part, float("inf")), _clock() - t0)
        return out

    for _ in range(repeats):
        tok = make()
        tok.encode("load the kernels " * 8)
        ids = timed("cold encode", lambda: tok.encode(text))  # noqa: B023 - called at once
        timed("warm encode (every pretoken a hit)", lambda: tok.encode(text))  # noqa: B023
        cps = timed("UTF-32 copy", lambda: np.frombuffer(text.encode("utf-32-le"), np.uint32))
        timed("split on special tokens", lambda: [m.span() for m in special.finditer(text)])
        pretokens, _ = timed("scan + pretoken keys", lambda: walk(cps, classes))  # noqa: B023
        array = np.asarray(ids, np.int32)
        timed("ids to a Python list", lambda: id_list(array))  # noqa: B023 - as the encoder
    return best, len(ids), int(pretokens)


def _range(num_bytes: int, seconds: list[float]) -> str:
    """MB/s over repeated timings as `slowest-fastest`."""
    return f"{num_bytes / max(seconds) / 1e6:.1f}-{num_bytes / min(seconds) / 1e6:.1f}"


def bench_dropout(repeats: int, limit: int | None = None, *, p: float = 0.1) -> list[dict]:
    """BPE-dropout on each sample with GPT-2's vocab: the compiled kernel against the plain
    compiled encoder (cold) on the same text, and the Python path on the first 100 KB; the
    ids of both paths compared (`bpe.tokenizer.compiled_dropout` must draw Python's coins)."""
    from bpe import Tokenizer
    from bpe.measures import GPT2_DIR

    files = (GPT2_DIR / "vocab.json", GPT2_DIR / "merges.txt")
    python = Tokenizer.from_files(*files, [EOT], merge_backend="python")
    compiled = Tokenizer.from_files(*files, [EOT], merge_backend="compiled")
    compiled.encode("load the kernels " * 8, dropout=p, seed=0)
    rows = []
    for name, filename in SAMPLES.items():
        text = sample_text(filename, limit)
        head = text[:100_000]
        num_bytes, head_bytes = len(text.encode("utf-8")), len(head.encode("utf-8"))
        plain, drop = [], []
        for seed in range(repeats):  # interleaved: a burst of load hits both alike
            compiled.clear_cache()
            t0 = _clock()
            compiled.encode(text)
            t1 = _clock()
            compiled.encode(text, dropout=p, seed=seed)
            t2 = _clock()
            plain.append(t1 - t0)
            drop.append(t2 - t1)
        t0 = _clock()
        expected = python.encode(head, dropout=p, seed=0)
        python_s = _clock() - t0
        rows.append(
            {
                "sample": name,
                "plain": _range(num_bytes, plain),
                "dropout": _range(num_bytes, drop),
                "ratio": min(plain) / min(drop),
                "python": head_bytes / python_s / 1e6,
                "same_ids": compiled.encode(head, dropout=p, seed=0) == expected,
            }
        )
    return rows


def bench_picky(
    repeats: int, limit: int | None = None, *, vocab_size: int = 8000, threshold: float = 0.9
) -> list[dict]:
    """PickyBPE's replay (`bpe.tokenizer.compiled_replay`) on each sample: a PickyBPE
    tokenizer trained on the OWT sample (trainer indexed, `threshold`) against a plain BPE one of
    the same size trained on the same text (trainer heap), both compiled and cold, in the same
    run; the Python replay on each sample's first 100 KB, its ids compared with the kernel's."""
    from bpe import Tokenizer, train_bpe_detailed
    from bpe.formats.removals_json import as_removals
    from bpe.variants import Variant

    source = ROOT / "bpe" / "data" / SAMPLES["OWT"]
    if limit is not None:  # --quick: train on the sample's first documents only
        head = source.read_text("utf-8")[:limit]
        source = Path(tempfile.mkdtemp()) / "owt_head.txt"
        source.write_text(head[: head.rfind(EOT)] if EOT in head else head, "utf-8")
    picky = train_bpe_detailed(
        source, vocab_size, [EOT], trainer="indexed", variant=Variant("picky", threshold=threshold)
    )
    plain = train_bpe_detailed(source, vocab_size, [EOT], trainer="heap")
    removals = as_removals(picky.removals)
    made = {
        "picky": Tokenizer(
            picky.vocab, picky.merges, [EOT], removals=removals, merge_backend="compiled"
        ),
        "plain": Tokenizer(plain.vocab, plain.merges, [EOT], merge_backend="compiled"),
    }
    python = Tokenizer(picky.vocab, picky.merges, [EOT], removals=removals, merge_backend="python")
    for tok in made.values():  # load each kernel once, untimed
        tok.encode("load the kernels " * 8)
    rows = []
    for name, filename in SAMPLES.items():
        text = sample_text(filename, limit)
        head = text[:100_000]
        num_bytes, head_bytes = len(text.encode("utf-8")), len(head.encode("utf-8"))
        seconds: dict[str, list[float]] = {k: [] for k in made}
        for _ in range(repeats):  # interleaved: a burst of load hits both alike
            for kind, tok in made.items():
                tok.clear_cache()
                t0 = _clock()
                tok.encode(text)
                seconds[kind].append(_clock() - t0)
        t0 = _clock()
        expected = python.encode(head)
        python_s = _clock() - t0
        made["picky"].clear_cache()
        rows.append(
            {
                "sample": name,
                "removals": len(removals),
                "plain": _range(num_bytes, seconds["plain"]),
                "picky": _range(num_bytes, seconds["picky"]),
                "ratio": min(seconds["plain"]) / min(seconds["picky"]),
                "python": head_bytes / python_s / 1e6,
                "same_ids": made["picky"].encode(head) == expected,
            }
        )
    return rows


def _or_na(value: float | None, spec: str) -> str:
    return "n/a" if value is None else f"{value:{spec}}"


def main(argv: list[str] | None = None) -> int:
    from bpe.util.machine import numba_installed

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per measurement")
    parser.add_argument("--copies", type=int, default=4, help="OWT sample copies to encode")
    parser.add_argument("--tokenizer", type=Path, default=None, help="run dir (default GPT-2)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a plumbing check: 1 repeat, 1 copy, each sample's first ~{QUICK_BYTES:,} bytes",
    )
    parser.add_argument(
        "--wall", action="store_true", help="time the first table in wall seconds, not CPU"
    )
    parser.add_argument(
        "--tables",
        nargs="+",
        choices=TABLES,
        default=TABLES,
        help="the tables to measure (default: all, in this order)",
    )
    args = parser.parse_args(argv)
    if args.wall:
        global _clock
        _clock = time.perf_counter
    limit = QUICK_BYTES if args.quick else None
    if args.quick:
        args.repeats, args.copies = 1, 1
    ok = True
    mb = 1e6
    names = ("numba", "tiktoken", "tokenizers", "gigatoken", "tokie", "splintr-rs")
    installed = ", ".join(f"{n} {v or 'not installed'}" for n, v in versions(names).items())
    print(f"Machine: {host_line(host())}. {installed}.")
    print(f"Command: python scripts/bench_encode.py {' '.join(argv or sys.argv[1:])}".rstrip())
    if "speed" in args.tables:
        rows = bench(max(1, args.repeats), limit)
        print()
        columns = [
            "sample",
            "MB",
            "ours cold (python) MB/s",
            "ours cold (compiled) MB/s",
            "ours warm MB/s",
            "ours stream MB/s",
            "tiktoken MB/s",
            "HF MB/s",
            "ours/tiktoken cold (python)",
            "ours/tiktoken cold (compiled)",
            "ours/tiktoken warm",
            "ours cold (compiled) range",
            "tiktoken range",
            "ids == tiktoken",
            "HF ids == tiktoken",
        ]
        print("| " + " | ".join(columns) + " |")
        print("| --- " * len(columns) + "|")
        for r in rows:
            compiled = r["ours_cold_compiled"]
            print(
                f"| {r['sample']} | {r['bytes'] / mb:.2f} | {r['ours_cold'] / mb:.1f} "
                f"| {_or_na(compiled and compiled / mb, '.1f')} "
                f"| {r['ours_warm'] / mb:.1f} | {r['ours_stream'] / mb:.1f} "
                f"| {r['tiktoken'] / mb:.1f} "
                f"| {r['hf'] / mb:.1f} | {r['ours_cold'] / r['tiktoken']:.2f} "
                f"| {_or_na(compiled and compiled / r['tiktoken'], '.2f')} "
                f"| {r['ours_warm'] / r['tiktoken']:.2f} "
                f"| {r['ours_cold_compiled_range'] or 'n/a'} "
                f"| {r['tiktoken_range']} | {r['same_as_tiktoken']} "
                f"| {r['hf_same_as_tiktoken']} |"
            )
        print()
        for r in rows:
            print(
                f"{r['sample']}: tokenizing The Pile (825 GB) at our warm single-thread rate takes "
                f"{r['pile_days_warm']:.1f} days"
            )
        ok = all(r["same_as_tiktoken"] for r in rows)
    if "backends" in args.tables:
        backends = bench_backends(args.tokenizer, max(1, args.copies), max(1, args.repeats), limit)
        print()
        print(
            f"Whole-file encoding ({backends[0]['mb']:.1f} MB, {backends[0]['workers']} workers):"
        )
        print()
        print("| encoder | backend used | MB/s | ids equal the python backend's |")
        print("| --- | --- | --- | --- |")
        for r in backends:
            same = "-" if r["same_ids"] is None else r["same_ids"]
            print(f"| {r['encoder']} | {r['backend_used']} | {r['mb_s']:.1f} | {same} |")
        ok = ok and all(r["same_ids"] is not False for r in backends)
    if "dropout" in args.tables:
        print()
        print("BPE-dropout, p = 0.1 (GPT-2's vocab, one thread; MB/s slowest-fastest):")
        print()
        heads = ["sample", "compiled plain cold", "compiled dropout", "dropout / plain (best)"]
        heads += ["python dropout (100 KB)", "ids equal"]
        print("| " + " | ".join(heads) + " |")
        print("| " + " | ".join(["---"] * len(heads)) + " |")
        for r in bench_dropout(max(1, args.repeats), limit) if numba_installed() else []:
            print(
                f"| {r['sample']} | {r['plain']} | {r['dropout']} | {r['ratio']:.2f} "
                f"| {r['python']:.2f} | {r['same_ids']} |"
            )
    if "segmentation" in args.tables:
        print()
        print("Segmentation methods (GPT-2's vocab, each cold path, one thread):")
        print()
        heads = ["sample", "cold path", "segmentation", "tokens", "tokens / merges'", "cold MB/s"]
        heads += ["warm MB/s", "cold / its merges'", "cold / tiktoken"]
        print("| " + " | ".join(heads) + " |")
        print("| " + " | ".join(["---"] * len(heads)) + " |")
        for r in bench_segmentations(max(1, args.repeats), limit):
            print(
                f"| {r['sample']} | {r['backend']} | {r['method']} | {r['tokens']} "
                f"| {r['vs_merges']:.4f} | {r['cold'] / mb:.2f} | {r['warm'] / mb:.1f} "
                f"| {r['vs_own_merges']:.2f} | {r['cold'] / r['tiktoken']:.2f} |"
            )
    if "peers" in args.tables:
        peers, missing = bench_peers(max(1, args.repeats), limit)
        names = list(peers[0]["mb_s"]) if peers else []
        print()
        print(
            f"Cold encode beside other projects' encoders (GPT-2's vocab; CPU MB/s of this "
            f"process, every thread counted, best of {max(1, args.repeats)}; slowest-fastest "
            "below; ids compared with tiktoken's):"
        )
        print()
        heads = ["sample", *names, f"{names[0]} / fastest peer" if names else "", "ids equal"]
        print("| " + " | ".join(heads) + " |")
        print("| " + " | ".join(["---"] * len(heads)) + " |")
        for r in peers:
            others = [r["mb_s"][n] for n in names[1:]]
            ratio = r["mb_s"][names[0]] / max(others) if others else float("nan")
            cells = [f"{r['mb_s'][n]:.1f} ({r['range'][n]})" for n in names]
            same = (
                "all"
                if all(r["same_ids"].values())
                else ", ".join(n for n, ok_ in r["same_ids"].items() if not ok_) + " differ"
            )
            print(f"| {r['sample']} | " + " | ".join(cells) + f" | {ratio:.2f}x | {same} |")
        for name, why in missing.items():
            print(f"- {name}: {why}")
        ok = ok and all(all(r["same_ids"].values()) for r in peers)
    if "profile" in args.tables:
        profile = bench_profile(max(1, args.repeats), limit) if numba_installed() else []
        print()
        print(
            "Where the compiled cold path's time goes (GPT-2's vocab, CPU ms, best of "
            f"{max(1, args.repeats)}; the last two rows are what is left):"
        )
        print()
        for r in profile:
            print(
                f"{r['sample']}: {r['bytes'] / 1e6:.2f} MB, {r['pretokens']:,} pretokens, "
                f"{r['unique']:,} distinct, {r['ids']:,} ids; {r['ns_per_lookup']:.0f} ns a "
                f"lookup, {r['us_per_miss']:.2f} us a miss"
            )
            print()
            print("| part | ms | MB/s |")
            print("| --- | --- | --- |")
            for part, ms in r["ms"].items():
                print(f"| {part} | {ms:.1f} | {r['bytes'] / ms / 1e3:.1f} |")
            print()
    if "picky" in args.tables:
        picky_vocab = 1000 if args.quick else 8000
        picky = (
            bench_picky(max(1, args.repeats), limit, vocab_size=picky_vocab)
            if numba_installed()
            else []
        )
        print()
        print(
            f"PickyBPE's removals (vocab {picky_vocab:,} trained on the OWT sample"
            f"{f' (its first {limit:,} bytes)' if limit else ''}, threshold 0.9; one thread; "
            "MB/s slowest-fastest):"
        )
        print()
        heads = ["sample", "removals", "plain BPE compiled cold", "PickyBPE compiled cold"]
        heads += ["picky / plain (best)", "python replay (100 KB)", "ids equal"]
        print("| " + " | ".join(heads) + " |")
        print("| " + " | ".join(["---"] * len(heads)) + " |")
        for r in picky:
            print(
                f"| {r['sample']} | {r['removals']} | {r['plain']} | {r['picky']} "
                f"| {r['ratio']:.2f} | {r['python']:.2f} | {r['same_ids']} |"
            )
        ok = ok and all(r["same_ids"] for r in picky)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
