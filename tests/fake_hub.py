"""A small Hugging Face Hub on localhost for tests: dataset repositories, as the Hub serves them.

`DatasetHub` answers what `huggingface_hub` and `datasets` ask for when they stream a dataset
(`datasets.load_dataset(repo, streaming=True)` with `HF_ENDPOINT` pointing here): the repo's
info (`/api/datasets/<repo>[/revision/<rev>]`), its file tree (`/api/datasets/<repo>/tree/...`),
the paths-info query, and the files themselves (`/datasets/<repo>/resolve/<rev>/<path>`, with
HTTP range requests). Every request is recorded; anything else is a 404 (recorded too), so a
test can see what the clients asked for.

What it does not do: authentication, branches (every repository is at one commit), uploads.
"""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class DatasetHub(ThreadingHTTPServer):
    """Serves dataset repositories (`owner/name` -> files by path), each at commit `COMMIT`."""

    daemon_threads = True

    def __init__(self, repos: dict[str, dict[str, bytes]]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.repos = {repo: dict(sorted(files.items())) for repo, files in repos.items()}
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> DatasetHub:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    def entry(self, files: dict[str, bytes], path: str) -> dict | None:
        """The tree entry of a file or a folder, as the Hub's tree API lists it."""
        if path in files:
            body = files[path]
            return {
                "type": "file",
                "path": path,
                "size": len(body),
                "oid": hashlib.sha1(body).hexdigest(),
            }  # noqa: S324 - an id, as git's
        if any(name.startswith(path.rstrip("/") + "/") for name in files) or path == "":
            return {"type": "directory", "path": path, "oid": COMMIT, "size": 0}
        return None

    def tree(self, files: dict[str, bytes], folder: str, *, recursive: bool) -> list[dict]:
        """The entries under a folder (its direct children, or all of them)."""
        prefix = folder.strip("/") + "/" if folder.strip("/") else ""
        out: dict[str, dict] = {}
        for name in files:
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix) :].split("/")
            for depth in range(1, len(rest) + 1):
                if not recursive and depth > 1:
                    break
                path = prefix + "/".join(rest[:depth])
                entry = self.entry(files, path)
                if entry is not None:
                    out[path] = entry
        return list(out.values())


class _Handler(BaseHTTPRequestHandler):
    server: DatasetHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # keep the test output clean
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None) -> None:
        self.server.requests.append((self.command, self.path, status))
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value: object) -> None:
        self._send(200, json.dumps(value).encode(), {"Content-Type": "application/json"})

    def _not_found(self) -> None:
        self._send(
            404,
            b'{"error": "not found"}',
            {"X-Error-Code": "EntryNotFound", "Content-Type": "application/json"},
        )

    def do_HEAD(self) -> None:
        self._route()

    def do_GET(self) -> None:
        self._route()

    def _repo(self, path: str) -> tuple[str, dict[str, bytes]] | None:
        """The repository a request path names (`/api/datasets/<repo>...`,
        `/datasets/<repo>/...`), and its files."""
        for repo, files in self.server.repos.items():
            api = f"/api/datasets/{repo}"
            if path == api or path.startswith((api + "/", f"/datasets/{repo}/")):
                return repo, files
        return None

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode()
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        found = self._repo(path)
        if found is None or not path.startswith(f"/api/datasets/{found[0]}/paths-info/"):
            return self._not_found()
        if self.headers.get("Content-Type", "").startswith("application/json"):
            paths = json.loads(raw or "{}").get("paths", [])
        else:
            paths = urllib.parse.parse_qs(raw).get("paths", [])
        files = found[1]
        self._json([e for p in paths if (e := self.server.entry(files, p.strip("/"))) is not None])

    def _route(self) -> None:
        hub = self.server
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        query = urllib.parse.parse_qs(url.query)
        found = self._repo(path)
        if found is None:
            return self._not_found()
        repo, files = found
        api = f"/api/datasets/{repo}"
        if path in (api, f"{api}/revision/main", f"{api}/revision/{COMMIT}"):
            return self._json(
                {
                    "id": repo,
                    "_id": "0" * 24,
                    "sha": COMMIT,
                    "private": False,
                    "disabled": False,
                    "gated": False,
                    "downloads": 0,
                    "likes": 0,
                    "tags": [],
                    "lastModified": "2024-01-01T00:00:00.000Z",
                    "cardData": {},
                    "siblings": [
                        {"rfilename": n, "size": len(b), "blobId": hashlib.sha1(b).hexdigest()}  # noqa: S324 - as git's
                        for n, b in files.items()
                    ],
                }
            )
        for rev in ("main", COMMIT):
            tree = f"{api}/tree/{rev}"
            if path == tree or path.startswith(tree + "/"):
                folder = path[len(tree) :].strip("/")
                recursive = query.get("recursive", ["false"])[0].lower() == "true"
                return self._json(hub.tree(files, folder, recursive=recursive))
            resolve = f"/datasets/{repo}/resolve/{rev}/"
            if path.startswith(resolve):
                return self._file(files.get(path[len(resolve) :]))
        return self._not_found()

    def _file(self, body: bytes | None) -> None:
        if body is None:
            return self._not_found()
        headers = {
            "X-Repo-Commit": COMMIT,  # the Hub client refuses files without it
            "ETag": f'"{hashlib.sha256(body).hexdigest()}"',
            "Accept-Ranges": "bytes",
        }
        spec = self.headers.get("Range")
        if not spec:
            return self._send(200, body, headers)
        first, _, last = spec.removeprefix("bytes=").partition("-")
        start = int(first) if first else max(0, len(body) - int(last))
        end = min(int(last), len(body) - 1) if (first and last) else len(body) - 1
        headers["Content-Range"] = f"bytes {start}-{end}/{len(body)}"
        self._send(206, body[start : end + 1], headers)
