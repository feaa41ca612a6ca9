"""A large shard never sits in memory whole: reading it costs a block, not its size.

Each file below holds 32 MiB of text once decompressed (the bundled OWT sample repeated), 128
times the 256 KiB block it is read in (parquet: row groups of about that size); a fresh
interpreter reads every document of it through `read_part` and reports how far its peak
resident memory rose: `VmHWM`, the high-water mark of its resident set (unlike `ru_maxrss`,
which an exec'd child inherits from the forked test process, it starts afresh), which counts
pyarrow's and the decompressors' own allocations too. The baseline is taken after a first few
pieces paid the readers' fixed costs. Reading the file whole would raise the peak by at least
its decompressed size; reading it block by block leaves the second half of the read flat.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bpe.text.specials import EOT
from bpe.util.io import DATA_DIR
from tests.conftest import ROOT

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
zstd = pytest.importorskip("zstandard")

TEXT_BYTES = 32 << 20
BLOCK = 256 << 10

# Runs in a fresh interpreter: the imports first (their memory is the baseline), then every
# part of the file, every document counted, none kept.
READER = """
import itertools, json, sys
from bpe.corpus.parts import plan_parts, read_part
from bpe.corpus.sources import resolve_source

def peak_kb():
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmHWM:")).split()[1])

path, sep, block = sys.argv[1], sys.argv[2], int(sys.argv[3])
corpus = resolve_source(path)
parts = plan_parts(corpus, [sep], max_chunk_bytes=block)
# warm-up: a few pieces of the first part pay the readers' fixed costs (library code, thread
# pools, allocator arenas), so the baseline leaves them out
for _ in itertools.islice(read_part(corpus, parts[0], [sep], block_bytes=block), 3):
    pass
base = peak_kb()
docs = text = 0
half = None  # the peak once half of the text is read
for part in parts:
    for piece in read_part(corpus, part, [sep], block_bytes=block):
        docs += 1 if piece.is_record else piece.text.count(sep)
        text += piece.num_bytes
        if half is None and 2 * text >= int(sys.argv[4]):
            half = peak_kb()
end = peak_kb()
print(json.dumps({"growth_kb": end - base, "second_half_kb": end - half, "base_kb": base,
                  "text": text, "docs": docs}))
"""


@pytest.fixture(scope="module")
def big_files(tmp_path_factory) -> dict[str, tuple[Path, int]]:
    """64 MiB of documents as txt.gz, jsonl.zst and parquet (row groups of about 1 MiB)."""
    sample = [d for d in (DATA_DIR / "owt_sample.txt").read_text("utf-8").split(EOT) if d]
    docs: list[str] = []
    size = 0
    while size < TEXT_BYTES:
        for d in sample:
            docs.append(d)
            size += len(d.encode("utf-8"))
    d = tmp_path_factory.mktemp("big")
    text = EOT.join(docs).encode("utf-8")
    with gzip.open(d / "big.txt.gz", "wb", compresslevel=1) as f:
        f.write(text)
    lines = "".join(json.dumps({"text": x}) + "\n" for x in docs).encode("utf-8")
    (d / "big.jsonl.zst").write_bytes(zstd.ZstdCompressor(level=1).compress(lines))
    pq.write_table(pa.table({"text": docs}), d / "big.parquet", row_group_size=50)
    return {
        "txt.gz": (d / "big.txt.gz", len(text)),
        "jsonl.zst": (d / "big.jsonl.zst", len(lines)),
        "parquet": (d / "big.parquet", size),
    }


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads Linux's VmHWM")
@pytest.mark.parametrize(
    ("name", "pool"),
    [("txt.gz", None), ("jsonl.zst", None), ("parquet", None), ("parquet", "system")],
)
def test_reading_a_large_shard_stays_within_a_block(big_files, name, pool):
    """Reading the second half of a file adds (almost) nothing to the peak, and the whole read
    raises it by a small share of the file.

    pyarrow's default memory pool (mimalloc) keeps freed pages cached in its arenas: about 20 MB
    after the first parts, flat after that (measured), a fixed cost that says nothing about
    what the reader holds. With the system allocator (`pool="system"`) the total is the reader's.
    """
    path, decompressed = big_files[name]
    env = {**os.environ, **({"ARROW_DEFAULT_MEMORY_POOL": pool} if pool else {})}
    proc = subprocess.run(
        [sys.executable, "-c", READER, str(path), EOT, str(BLOCK), str(decompressed)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    assert got["text"] >= TEXT_BYTES  # every document was read
    # a reader that kept what it read would add half the file in the second half; mimalloc's
    # arenas (pyarrow's default pool) may still step up a few MB there (3.9 MB seen on 33 MB)
    arenas = (name, pool) == ("parquet", None)
    assert got["second_half_kb"] * 1024 < decompressed / (4 if arenas else 16), (name, got)
    bound = decompressed if arenas else decompressed / 4
    assert got["growth_kb"] * 1024 < bound, (name, got, decompressed)


@pytest.mark.slow
def test_one_huge_record_keeps_the_analysis_caps(tmp_path):
    """A 20 MB JSON record: the analysis samples are cut to their caps (it once took the first
    document whole: 1.29 GB for 50 MB; 20 MB here made the analysis add 1.13 GB)."""
    import json

    from bpe.runs import schema
    from tests.conftest import DATA, fast_run

    text = (DATA / "tinystories_train_sample.txt").read_text("utf-8").replace("<|endoftext|>", " ")
    big = tmp_path / "big.jsonl"
    with big.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"text": (text * 8)[:20_000_000]}) + "\n")
        out.write(json.dumps({"text": "a small second document"}) + "\n")
    metrics = fast_run(big, tmp_path / "exp")
    added = schema.get(metrics, schema.ANALYSIS_PEAK_MB) - schema.get(metrics, schema.BASELINE_MB)
    assert added < 400, added  # MB
