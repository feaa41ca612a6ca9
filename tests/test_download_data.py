"""scripts/download_data.py against a small Hub on localhost (`HF_ENDPOINT`): a download lands at
the dataset path, a connection dropped midway resumes with a Range request, the cache serves a
second run with the Hub gone, `.gz` files are decompressed, and no Hub at all gives the clear
offline error. The script runs as a real process; the Hub is a real HTTP server.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from huggingface_hub import constants

from bpe.corpus.documents import iter_documents
from bpe.corpus.sources import resolve_source
from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "download_data.py"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
TINY = {
    "TinyStoriesV2-GPT4-train.txt": b"Once upon a time there was a cat.<|endoftext|>\n" * 4000,
    "TinyStoriesV2-GPT4-valid.txt": b"The dog ran home.<|endoftext|>\n" * 50,
}


class FakeHub(ThreadingHTTPServer):
    """Serves files as the Hub's `resolve` endpoint does, and records every request."""

    daemon_threads = True

    def __init__(self, files: dict[str, bytes], *, drop_after: int | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files = files  # "/datasets/<repo>/resolve/main/<file>" -> bytes
        self.drop_after = drop_after  # first full GET: send this many bytes, then hang up
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: FakeHub

    def log_message(self, *args) -> None:  # keep the test output clean
        pass

    def _meta(self) -> bytes | None:
        self.server.requests.append((self.command, self.path, self.headers.get("Range")))
        body = self.server.files.get(self.path)
        if body is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
        return body

    def _headers(self, status: int, length: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("X-Repo-Commit", COMMIT)  # the Hub client refuses files without it
        self.send_header("ETag", f'"{hashlib.sha256(body).hexdigest()}"')
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(length))

    def do_HEAD(self) -> None:
        body = self._meta()
        if body is not None:
            self._headers(200, len(body), body)
            self.end_headers()

    def do_GET(self) -> None:
        body = self._meta()
        if body is None:
            return
        start = 0
        if spec := self.headers.get("Range"):
            start = int(spec.removeprefix("bytes=").split("-")[0])
            self._headers(206, len(body) - start, body)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self._headers(200, len(body), body)
        self.end_headers()
        if self.server.drop_after is not None and start == 0:
            cut, self.server.drop_after = self.server.drop_after, None
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)  # the peer sees a truncated body
            return
        self.wfile.write(body[start:])


def _hub_files(repo: str, files: dict[str, bytes]) -> dict[str, bytes]:
    return {f"/datasets/{repo}/resolve/main/{name}": body for name, body in files.items()}


def _run(tmp_path: Path, endpoint: str, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(tmp_path / "hf_home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_XET": "1",
    }
    env.pop("HF_HUB_OFFLINE", None)
    return subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            *args,
            "--dest",
            str(tmp_path / "full"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--timeout",
            "3",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_download_lands_at_dataset_path_and_cache_serves_a_rerun(tmp_path):
    with FakeHub(_hub_files("roneneldan/TinyStories", TINY)) as hub:
        proc = _run(tmp_path, hub.endpoint, "tinystories")
        assert proc.returncode == 0, proc.stderr
    for name, body in TINY.items():
        assert (tmp_path / "full" / name).read_bytes() == body
    assert {m for m, _, _ in hub.requests} == {"HEAD", "GET"}
    assert "TinyStoriesV2-GPT4-train.txt" in proc.stderr  # tqdm's progress bar names the file
    assert list((tmp_path / "cache").glob("datasets--roneneldan--TinyStories/blobs/*"))
    assert not list((tmp_path / "full").glob(".*.part")), "no temporary file left behind"

    # the Hub is gone now: the cache alone rebuilds a deleted dataset file
    (tmp_path / "full" / "TinyStoriesV2-GPT4-train.txt").unlink()
    proc = _run(tmp_path, hub.endpoint, "tinystories")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "full" / "TinyStoriesV2-GPT4-train.txt").read_bytes() == TINY[
        "TinyStoriesV2-GPT4-train.txt"
    ]


def test_dropped_connection_resumes_with_a_range_request(tmp_path):
    # subtle: the client writes in DOWNLOAD_CHUNK_SIZE pieces (10 MiB), so resuming can only
    # start after a whole piece: the file must be larger than one and the cut come after it.
    piece = constants.DOWNLOAD_CHUNK_SIZE
    train = bytes(range(256)) * (piece // 256 + 8000)
    cut = piece + 1_000_000
    files = {**TINY, "TinyStoriesV2-GPT4-train.txt": train}
    with FakeHub(_hub_files("roneneldan/TinyStories", files), drop_after=cut) as hub:
        proc = _run(tmp_path, hub.endpoint, "tinystories")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "full" / "TinyStoriesV2-GPT4-train.txt").read_bytes() == train
    gets = [(path.rsplit("/", 1)[1], rng) for m, path, rng in hub.requests if m == "GET"]
    assert gets[0] == ("TinyStoriesV2-GPT4-train.txt", None)
    name, resumed = gets[1]
    assert name == "TinyStoriesV2-GPT4-train.txt" and resumed is not None, gets
    start = int(resumed.removeprefix("bytes=").removesuffix("-"))
    assert 0 < start <= cut, "the second request asks only for what is missing"
    assert "resume" in proc.stderr.lower()


def test_gz_files_stay_compressed_and_read_as_text(tmp_path):
    text = {"owt_train.txt": b"web text <|endoftext|>\n" * 300, "owt_valid.txt": b"valid\n"}
    served = {f"{name}.gz": gzip.compress(body) for name, body in text.items()}
    with FakeHub(_hub_files("stanford-cs336/owt-sample", served)) as hub:
        proc = _run(tmp_path, hub.endpoint, "owt")
    assert proc.returncode == 0, proc.stderr
    for name, body in text.items():
        placed = tmp_path / "full" / f"{name}.gz"
        assert placed.read_bytes() == served[f"{name}.gz"]
        docs = list(iter_documents(resolve_source(placed), "<|endoftext|>"))
        assert "".join(docs) == body.decode().replace("<|endoftext|>", "")


def test_offline_error_says_what_failed_and_how_to_fix_it(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _run(tmp_path, f"http://127.0.0.1:{port}", "owt")
    assert proc.returncode == 2
    error = proc.stderr
    assert f"cannot download http://127.0.0.1:{port}/datasets/stanford-cs336/owt-sample" in error
    assert "HF_ENDPOINT" in error
    assert repr(str(tmp_path / "full" / "owt_train.txt.gz")) in error
    assert "dataset.path=" in error
    assert not (tmp_path / "full").exists() or not any((tmp_path / "full").iterdir())


@pytest.mark.parametrize("dataset", ["tinystories", "owt"])
def test_downloads_land_where_the_dataset_config_looks(dataset):
    spec = importlib.util.spec_from_file_location("download_data", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    conf = yaml.safe_load((ROOT / "conf" / "dataset" / f"{dataset}.yaml").read_text("utf-8"))
    assert conf["download"] == dataset
    targets = {script.FULL_DIR / name for _, _, name in script.SOURCES[dataset]}
    assert targets == {ROOT / conf["path"], ROOT / conf["heldout_path"]}
