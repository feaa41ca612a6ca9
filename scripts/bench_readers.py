"""Benchmark: throughput of each corpus reader against plain text, measured in the same run.

One corpus (the bundled OWT and TinyStories samples' documents, repeated to `--mb` MB of text)
is written in four formats: plain text joined by `<|endoftext|>` (the reference), `.txt.gz`,
`.jsonl.zst` and parquet shards (`--shards` files, 8,192 rows per row group). Two measures, each
format in a fresh process, the formats alternating round after round (`--repeats` rounds, the
best kept: the least disturbed by other load on a shared machine):

    * read:  every part of the corpus read through `bpe.corpus.parts.read_part` in one
             process (decompressing, parsing JSON, reading row groups, decoding UTF-8): the
             reader's own cost, MB of text per second;
    * count: `bpe.pretokenize.pretokenize` with `--workers` workers on the first
             `--count-mb` MB of the same documents (stage 1 as training runs it, the reader
             and the split pattern together).

Every format must give the same bytes of text (read) and the same pretoken counts (count), or
the exit status is 1. MB of text are those of the text file holding the same documents (the
separators between records counted as that file has them). Timings are ratios to plain text
measured in the same rounds; nothing is asserted about speed. Prints a Markdown report (and
writes it to `--out`). Usage:

    python scripts/bench_readers.py                       # 256 MB read, 32 MB counted, 3 rounds
    python scripts/bench_readers.py --mb 16 --count-mb 4 --repeats 2 --out readers.md
    python scripts/bench_readers.py --smoke               # seconds: 1 MB, 1 round
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bpe.text.specials import EOT  # noqa: E402
from bpe.util.io import DATA_DIR  # noqa: E402
from bpe.util.machine import host, host_line  # noqa: E402

FORMATS = ("text", "txt.gz", "jsonl.zst", "parquet")
ROWS_PER_GROUP = 8192


def base_documents() -> list[str]:
    docs: list[str] = []
    for name in ("owt_sample.txt", "tinystories_train_sample.txt"):
        docs += [d for d in (DATA_DIR / name).read_text("utf-8").split(EOT) if d]
    return docs


def corpus_documents(mb: float) -> list[str]:
    """The sample documents repeated in order until they hold `mb` MB of text."""
    base = base_documents()
    sizes = [len(d.encode("utf-8")) for d in base]
    out: list[str] = []
    total, want, i = 0, int(mb * 1e6), 0
    while total < want:
        out.append(base[i % len(base)])
        total += sizes[i % len(base)]
        i += 1
    return out


def write_formats(docs: list[str], folder: Path, shards: int) -> dict[str, str]:
    """The documents in every format; returns format -> source (a file or a folder)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    folder.mkdir(parents=True, exist_ok=True)
    text = EOT.join(docs).encode("utf-8")
    (folder / "corpus.txt").write_bytes(text)
    with gzip.open(folder / "corpus.txt.gz", "wb", compresslevel=6) as f:
        f.write(text)
    del text
    cctx = zstandard.ZstdCompressor(level=3)
    with open(folder / "corpus.jsonl.zst", "wb") as raw, cctx.stream_writer(raw) as f:
        for d in docs:
            f.write((json.dumps({"text": d}) + "\n").encode("utf-8"))
    shard_dir = folder / "parquet"
    shard_dir.mkdir(exist_ok=True)
    per = -(-len(docs) // shards)
    for k in range(shards):
        part = docs[k * per : (k + 1) * per]
        if part:
            table = pa.table({"text": part})
            pq.write_table(
                table, shard_dir / f"shard-{k:03d}.parquet", row_group_size=ROWS_PER_GROUP
            )
    return {
        "text": str(folder / "corpus.txt"),
        "txt.gz": str(folder / "corpus.txt.gz"),
        "jsonl.zst": str(folder / "corpus.jsonl.zst"),
        "parquet": str(shard_dir),
    }


# -- one measurement, in its own process ---------------------------------------------------------


def measure(mode: str, source: str, workers: int) -> dict:
    """Time reading (or counting) a source here; returns seconds, text bytes and a digest."""
    import hashlib

    import pyarrow.parquet  # noqa: F401 - imported before the clock starts, whatever the format
    import zstandard  # noqa: F401

    from bpe.corpus.files import DEFAULT_BLOCK_BYTES
    from bpe.corpus.parts import plan_parts, read_part
    from bpe.corpus.sources import resolve_source

    corpus = resolve_source(source)
    if mode == "read":
        parts = plan_parts(corpus, [EOT], max_chunk_bytes=DEFAULT_BLOCK_BYTES)
        t0 = time.perf_counter()
        num_bytes = records = 0
        for part in parts:
            for piece in read_part(corpus, part, [EOT]):
                num_bytes += piece.num_bytes
                records += piece.is_record
        seconds = time.perf_counter() - t0
        return {"seconds": seconds, "bytes": num_bytes, "records": records, "digest": ""}
    from bpe.pretokenize import pretokenize

    t0 = time.perf_counter()
    counted = pretokenize(corpus, [EOT], num_workers=workers)
    seconds = time.perf_counter() - t0
    digest = hashlib.sha256(repr(sorted(counted.counts.items())).encode()).hexdigest()
    return {
        "seconds": seconds,
        "bytes": counted.num_bytes,
        "records": counted.records or 0,
        "digest": digest,
    }


def run_fresh(mode: str, source: str, workers: int) -> dict:
    """`measure` in a fresh interpreter (no warm imports, no shared caches)."""
    proc = subprocess.run(
        [sys.executable, __file__, "--measure", mode, source, "--workers", str(workers)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"measuring {mode} of {source} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rounds(mode: str, sources: dict[str, str], repeats: int, workers: int) -> dict[str, list]:
    """Every format once per round, the order rotating each round; all results kept."""
    results: dict[str, list] = {f: [] for f in sources}
    names = list(sources)
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            results[name].append(run_fresh(mode, sources[name], workers))
            print(
                f"  {mode} round {r + 1}: {name} {results[name][-1]['seconds']:.2f} s",
                file=sys.stderr,
                flush=True,
            )
    return results


def table(mode: str, results: dict[str, list], sources: dict[str, str]) -> tuple[list[str], bool]:
    """Markdown rows (best time per format, MB/s of text, ratio to text) and whether every
    format read the same text (and, counting, the same counts)."""
    ref = min(r["seconds"] for r in results["text"])
    sep = len(EOT.encode("utf-8"))

    def as_text(run: dict) -> int:  # the bytes of the text file holding the same documents
        return run["bytes"] + sep * max(run["records"] - 1, 0)

    lines = [
        "| format | on disk | text | best of rounds | MB/s of text | speed vs plain text |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    same = True
    ref_run = results["text"][0]
    for name, runs in results.items():
        best = min(r["seconds"] for r in runs)
        first = runs[0]
        same &= as_text(first) == as_text(ref_run) and first["digest"] == ref_run["digest"]
        disk, text = _disk_bytes(sources[name]), as_text(first)
        lines.append(
            f"| {name} | {disk / 1e6:.1f} MB | {text / 1e6:.1f} MB | {best:.2f} s | "
            f"{text / best / 1e6:.1f} | {ref / best:.2f}x |"
        )
    return lines, same


def _disk_bytes(source: str) -> int:
    p = Path(source)
    return (
        sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
        if p.is_dir()
        else p.stat().st_size
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=256.0, help="MB of text read per format")
    parser.add_argument("--count-mb", type=float, default=32.0, help="MB of text counted")
    parser.add_argument("--repeats", type=int, default=3, help="rounds (best kept)")
    parser.add_argument("--workers", type=int, default=None, help="counting workers (all CPUs)")
    parser.add_argument("--shards", type=int, default=4, help="parquet files")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    parser.add_argument("--smoke", action="store_true", help="1 MB, 0.5 MB counted, 1 round")
    parser.add_argument("--measure", nargs=2, metavar=("MODE", "SOURCE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    workers = args.workers or len(os.sched_getaffinity(0))
    if args.measure:
        print(json.dumps(measure(args.measure[0], args.measure[1], workers)))
        return 0
    if args.smoke:
        args.mb, args.count_mb, args.repeats = 1.0, 0.5, 1
    report = [
        "# Corpus readers: throughput against plain text",
        "",
        f"Machine: {host_line(host())}. Each measurement a fresh process, formats "
        f"alternating, best of {args.repeats} round(s). Documents: the bundled OWT and "
        "TinyStories samples, repeated.",
        "",
    ]
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench_readers_") as tmp:
        for mode, mb in (("read", args.mb), ("count", args.count_mb)):
            t0 = time.perf_counter()
            sources = write_formats(corpus_documents(mb), Path(tmp) / mode, args.shards)
            print(
                f"{mode}: wrote {mb:g} MB in every format in {time.perf_counter() - t0:.1f} s",
                file=sys.stderr,
                flush=True,
            )
            results = rounds(mode, sources, args.repeats, workers)
            lines, same = table(mode, results, sources)
            ok &= same
            what = (
                "Reading only (`read_part` over every part, one process): the reader's own cost."
                if mode == "read"
                else f"Counting pretokens (`pretokenize`, {workers} worker(s), GPT-2 "
                "pattern): stage 1 as training runs it."
            )
            report += [f"## {mode} ({mb:g} MB of text)", "", what, "", *lines, ""]
            if not same:
                report += ["**The formats did NOT read the same text or counts.**", ""]
    text = "\n".join(report)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
