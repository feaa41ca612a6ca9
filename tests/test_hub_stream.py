"""Hub datasets streamed with `datasets` (`hf-stream:owner/name[:config[:split]][@revision]`).

Against a real HTTP server on localhost playing the Hub (`tests.fake_hub`, named by
`HF_ENDPOINT`): `datasets.load_dataset(..., streaming=True)` and `huggingface_hub` talk to it as
to the Hub. One repository holds the bundled OWT sample's first documents as two JSON lines
shards, another as parquet. Every case runs in a fresh interpreter, since `huggingface_hub` reads
`HF_ENDPOINT` when it is imported.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bpe.formats.gpt2_format import merges_sha256
from bpe.pipeline import train_bpe
from bpe.text.specials import EOT
from tests.conftest import ROOT
from tests.fake_hub import COMMIT, DatasetHub
from tests.test_readers import sample_docs, write_text

pytest.importorskip("datasets")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

REPO = "lab/owt-tiny"
PARQUET_REPO = "lab/owt-tiny-parquet"
DOCS = 80


def hub_repos() -> dict[str, dict[str, bytes]]:
    """Two repositories: the documents as two JSON lines shards, and as parquet."""
    docs = sample_docs(DOCS)
    lines = [json.dumps({"id": i, "text": d}) + "\n" for i, d in enumerate(docs)]
    half = DOCS // 2
    buf = io.BytesIO()
    pq.write_table(pa.table({"text": docs}), buf, row_group_size=16)
    return {
        REPO: {
            "data/train-00000.jsonl": "".join(lines[:half]).encode(),
            "data/train-00001.jsonl": "".join(lines[half:]).encode(),
        },
        PARQUET_REPO: {"data/train-00000-of-00001.parquet": buf.getvalue()},
    }


def env_for(endpoint: str, tmp_path: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(tmp_path / "hf_home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_XET": "1",
    }
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        env.pop(key, None)
    return env


READ = """
import json, sys
from bpe.corpus.documents import iter_documents
from bpe.corpus.manifest import corpus_manifest
from bpe.corpus.sources import resolve_source
out = {}
for name, source, max_files, max_bytes in json.loads(sys.argv[1]):
    corpus = resolve_source(source, max_files=max_files, max_bytes=max_bytes)
    out[name] = {"docs": list(iter_documents(corpus, "<|endoftext|>")),
                 "manifest": corpus_manifest(corpus), "describe": corpus.describe()}
print(json.dumps(out))
"""


def test_a_streamed_dataset_reads_its_documents_in_order_with_lineage(tmp_path):
    docs = sample_docs(DOCS)
    cases = [
        ["default", f"hf-stream:{REPO}", None, None],
        ["parquet", f"hf-stream:{PARQUET_REPO}::train", None, None],
        ["first file", f"hf-stream:{REPO}:default@main", 1, None],
        ["first bytes", f"hf-stream:{REPO}", None, 1],  # whole files: the first one
    ]
    with DatasetHub(hub_repos()) as hub:
        proc = subprocess.run(
            [sys.executable, "-c", READ, json.dumps(cases)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env_for(hub.endpoint, tmp_path),
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    assert got["default"]["docs"] == docs
    assert got["parquet"]["docs"] == docs
    assert got["first file"]["docs"] == got["first bytes"]["docs"] == docs[: DOCS // 2]
    (entry,) = got["first file"]["manifest"]["files"]
    assert entry["format"] == "hf-stream"
    assert entry["hub"] == {
        "repo": REPO,
        "config": "default",
        "split": "train",
        "revision": COMMIT,
        "files": ["data/train-00000.jsonl"],
    }
    assert entry["path"] == f"hf-stream:{REPO}:default:train@{COMMIT}"
    assert got["default"]["manifest"]["files"][0]["hub"]["files"] == [
        "data/train-00000.jsonl",
        "data/train-00001.jsonl",
    ]
    assert got["default"]["describe"].endswith("hf-stream")


def test_bpe_train_on_a_streamed_dataset_holds_out_its_last_documents(tmp_path):
    docs = sample_docs(DOCS)
    with DatasetHub(hub_repos()) as hub:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "bpe.cli.train",
                "debug=fast",
                "vocab_size=300",
                f"dataset.path=hf-stream:{REPO}",
                "dataset.heldout_fraction=0.1",
                f"experiments_dir={tmp_path / 'exp'}",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env_for(hub.endpoint, tmp_path),
            timeout=600,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((tmp_path / "exp" / "latest" / "metrics.json").read_text("utf-8"))
    assert metrics["run"]["input_name"] == "custom-owt-tiny"
    source = metrics["lineage"]["input"]
    assert source["files"][0]["hub"]["revision"] == COMMIT
    own = metrics["compression"]["own"]
    n = own["heldout_docs"]
    assert (
        own["offset_unit"] == "rows" and own["offset"] == DOCS - n and not own["seen_in_training"]
    )
    assert source["records"] == DOCS - n
    first = write_text(tmp_path / "first.txt", docs[:-n])
    assert metrics["merges_sha256"] == merges_sha256(train_bpe(first, 300, [EOT], num_workers=1)[1])


def test_an_unreachable_hub_fails_fast_naming_the_fixes(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = f"from bpe.corpus.sources import resolve_source; resolve_source('hf-stream:{REPO}')"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env_for(f"http://127.0.0.1:{port}", tmp_path),
        timeout=120,
    )
    assert time.perf_counter() - t0 < 30
    assert proc.returncode != 0
    assert f"ConnectionError: cannot stream split 'train' of the Hub dataset '{REPO}'" in (
        proc.stderr
    )
    assert "HF_ENDPOINT" in proc.stderr and "dataset.path" in proc.stderr


def test_stream_sources_parse_and_name_runs():
    from bpe.corpus.datasets import input_name
    from bpe.corpus.hub import parse_stream_source

    assert parse_stream_source("hf-stream:a/b") == ("a/b", None, "train", None)
    assert parse_stream_source("hf-stream:a/b:c:test@v2") == ("a/b", "c", "test", "v2")
    with pytest.raises(ValueError, match="must read hf-stream:owner/name"):
        parse_stream_source("hf-stream:nothing")
    assert input_name("owt_sample", "hf-stream:HuggingFaceFW/fineweb-edu:sample-10BT") == (
        "custom-fineweb-edu"
    )


class _StallingHub:
    """A Hub on localhost that answers the probe, then stalls (mode "stall") or trickles one
    header line every second (mode "trickle") on every request: no socket read ever times out."""

    def __init__(self, mode: str) -> None:
        import http.server
        import threading

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                if outer.mode == "trickle" or outer.answered:
                    self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                    for k in range(120):
                        if outer.stop.is_set():
                            return
                        if outer.mode == "trickle":
                            self.wfile.write(f"X-Slow-{k}: 1\r\n".encode())
                            self.wfile.flush()
                        time.sleep(1)
                    return
                outer.answered = True
                body = json.dumps({"id": REPO, "sha": COMMIT, "siblings": []}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.mode, self.answered, self.stop = mode, False, threading.Event()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()


@pytest.mark.parametrize("mode", ["stall", "trickle"])
@pytest.mark.parametrize("source", [f"hf:{REPO}/data/*.txt", f"hf-stream:{REPO}"])
def test_a_hub_that_stalls_or_trickles_ends_within_the_deadline(tmp_path, mode, source):
    hub = _StallingHub(mode)
    try:
        call = "hub_files" if source.startswith("hf:") else "stream_file"
        code = f"import bpe.corpus.hub as r\nr.{call}({source!r}, timeout=2)\n"
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env_for(hub.endpoint, tmp_path),
            timeout=120,
        )
        elapsed = time.perf_counter() - t0
    finally:
        hub.close()
    assert proc.returncode != 0
    assert "ConnectionError" in proc.stderr and "did not end within" in proc.stderr, proc.stderr[
        -2000:
    ]
    assert elapsed < 30, elapsed  # the deadline is 3 x 2 s, whatever the server does
