"""Hub sources: `hf:owner/name/pattern` (files fetched once into the Hub cache) and
`hf-stream:owner/name[:config[:split]][@revision]` (records streamed by `datasets`, pinned to
the commit it resolved to). Every network step has a deadline (`within`).

What it does not do: read local files (`bpe.corpus.formats`).
"""

from __future__ import annotations

import fnmatch
import functools
import importlib
import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bpe.corpus.files import (
    HUB_PREFIX,
    STREAM_FORMAT,
    STREAM_PREFIX,
    InputFile,
    StreamSource,
    require,
)

logger = logging.getLogger(__name__)

_HUB_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def parse_hub_source(source: str) -> tuple[str, str]:
    """(repo id, file pattern) of `hf:owner/name/pattern`; the pattern defaults to `**`.

    >>> parse_hub_source("hf:HuggingFaceFW/fineweb-edu/sample/10BT/*.parquet")
    ('HuggingFaceFW/fineweb-edu', 'sample/10BT/*.parquet')
    """
    rest = source[len(HUB_PREFIX) :].strip("/")
    parts = rest.split("/")
    repo = "/".join(parts[:2])
    if len(parts) < 2 or not _HUB_RE.match(repo):
        raise ValueError(
            f"Hub source {source!r} must read hf:owner/name[/pattern], e.g. "
            "'hf:HuggingFaceFW/fineweb-edu/sample/10BT/*.parquet'"
        )
    return repo, "/".join(parts[2:]) or "**"


def hub_files(source: str, *, max_files: int | None = None, timeout: float = 10.0) -> list[Path]:
    """The local copies (in the Hub cache) of the files of a Hub dataset repo a pattern names.

    Lists the repository once, keeps the files matching the pattern in sorted order (the first
    `max_files`), and fetches each into the Hub cache with `huggingface_hub` (resumable; cached
    files need no network). `HF_ENDPOINT` names a mirror. The Hub is first asked once, within
    `timeout` seconds: offline, that fails fast, and files already in the cache are used.

    Raises:
        ConnectionError: the Hub cannot be reached and the cache holds no matching file (says
            how to get the files another way).
        FileNotFoundError: no file of the repository matches the pattern.
    """
    repo, pattern = parse_hub_source(source)
    hub = require("huggingface_hub", for_what=f"{source!r}")

    def listed() -> list[str]:
        _probe_hub(hub, repo, timeout)
        return sorted(hub.HfApi().list_repo_files(repo, repo_type="dataset"))

    try:
        names = within(HUB_DEADLINE_FACTOR * timeout, listed, what=f"listing {repo!r}")
    except Exception as err:  # noqa: BLE001 - the client's errors differ between versions
        cached = _cached_hub_files(hub, repo, pattern)
        if not cached:
            raise ConnectionError(offline_message(source, repo, pattern, err)) from None
        logger.warning(
            "the Hub is unreachable (%s): using the %d cached file(s) of %s",
            type(err).__name__,
            len(cached),
            source,
        )
        return cached[:max_files] if max_files is not None else cached
    names = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    if not names:
        raise FileNotFoundError(
            f"no file of the Hub dataset {repo!r} matches {pattern!r}; check the pattern "
            f"(e.g. {HUB_PREFIX}{repo}/data/*.parquet)"
        )
    if max_files is not None:
        names = names[:max_files]
    out = []
    for name in names:
        try:
            path = hub.hf_hub_download(repo, name, repo_type="dataset", etag_timeout=timeout)
        except Exception as err:  # noqa: BLE001 - as above
            raise ConnectionError(offline_message(source, repo, name, err)) from None
        out.append(Path(path))
    return out


#: A Hub step that lists or resolves (not a download) must end within this many times the
#: per-request timeout, however the server answers: a socket timeout is per read, so a server
#: that answers once and then stalls, or trickles header lines, never trips it.
HUB_DEADLINE_FACTOR = 3


def within(seconds: float, fn: Callable[[], Any], *, what: str) -> Any:
    """`fn()`, or TimeoutError when it has not returned within `seconds` (it is left running in
    a daemon thread: a network call that cannot be interrupted is abandoned, not awaited).

    >>> within(5, lambda: 42, what="an answer")
    42
    >>> import time; within(0.05, lambda: time.sleep(1), what="a nap")
    Traceback (most recent call last):
    ...
    TimeoutError: a nap did not end within 0.05 s (the server stalled or answers too slowly)
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - handed to the caller below
            box["error"] = err

    thread = threading.Thread(target=run, name=f"deadline: {what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(
            f"{what} did not end within {seconds:g} s (the server stalled or answers too slowly)"
        )
    if "error" in box:
        raise box["error"]
    return box["value"]


def _probe_hub(hub: Any, repo: str, timeout: float) -> None:
    """One request to the Hub within `timeout` seconds (the client itself retries for half a
    minute before it gives up); raises what the request raised."""
    import urllib.request

    constants = importlib.import_module("huggingface_hub.constants")
    url = f"{constants.ENDPOINT.rstrip('/')}/api/datasets/{repo}"
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - the Hub's URL
        response.read(1)


def _cached_hub_files(hub: Any, repo: str, pattern: str) -> list[Path]:
    """The files of `repo` matching `pattern` that the Hub cache already holds, sorted."""
    try:
        root = hub.snapshot_download(
            repo, repo_type="dataset", allow_patterns=[pattern], local_files_only=True
        )
    except Exception:  # noqa: BLE001 - nothing cached
        return []
    base = Path(root)
    return sorted(
        p
        for p in base.rglob("*")
        if p.is_file() and fnmatch.fnmatchcase(p.relative_to(base).as_posix(), pattern)
    )


def offline_message(source: str, repo: str, what: str, err: Exception, *, stream=False) -> str:
    verb = "stream split" if stream else "fetch"
    return (
        f"cannot {verb} {what!r} of the Hub dataset {repo!r} for {source!r} "
        f"({type(err).__name__}: {str(err)[:200]}); point HF_ENDPOINT at a Hub mirror you can "
        "reach, or download the files elsewhere and pass their directory or a glob as "
        "dataset.path"
    )


def parse_stream_source(source: str) -> tuple[str, str | None, str, str | None]:
    """(repo, config, split, revision) of `hf-stream:owner/name[:config[:split]][@revision]`.

    The split defaults to `train`, the config to the dataset's default, the revision to `main`
    (resolved to its commit when the source is resolved).

    >>> parse_stream_source("hf-stream:HuggingFaceFW/fineweb-edu:sample-10BT")
    ('HuggingFaceFW/fineweb-edu', 'sample-10BT', 'train', None)
    >>> parse_stream_source("hf-stream:owner/name::validation@v1.0")
    ('owner/name', None, 'validation', 'v1.0')
    """
    rest = source[len(STREAM_PREFIX) :].strip()
    rest, _, revision = rest.partition("@")
    repo, _, tail = rest.partition(":")
    config, _, split = tail.partition(":")
    if not _HUB_RE.match(repo.strip("/")) or ":" in split:
        raise ValueError(
            f"Hub stream {source!r} must read {STREAM_PREFIX}owner/name[:config[:split]]"
            f"[@revision], e.g. '{STREAM_PREFIX}HuggingFaceFW/fineweb-edu:sample-10BT:train'"
        )
    return repo.strip("/"), config or None, split or "train", revision or None


def stream_file(
    source: str,
    *,
    max_files: int | None = None,
    max_bytes: int | None = None,
    timeout: float = 10.0,
) -> InputFile:
    """`_resolve_stream`, once per process and arguments: every reader of a run sees the commit
    the first resolution found, even if the branch moves meanwhile (and asks the Hub once)."""
    return _resolve_stream(source, max_files, max_bytes, timeout)


@functools.lru_cache(maxsize=16)
def _resolve_stream(
    source: str, max_files: int | None, max_bytes: int | None, timeout: float
) -> InputFile:
    """The `InputFile` of a Hub dataset streamed with `datasets` (`hf-stream:...`).

    Asks the Hub once within `timeout` seconds (offline, that fails fast), resolves the
    revision to its commit, and lists the split's data files with their sizes, as `datasets`
    resolves them; `max_files` and `max_bytes` keep a prefix of them (whole files, as for local
    files). Nothing is downloaded here: the records are streamed when the file is read.

    Raises:
        ConnectionError: the Hub cannot be reached (says how to get the data another way).
        ValueError: a split the dataset lacks, a malformed source, `datasets` not installed.
    """
    repo, config, split, revision = parse_stream_source(source)
    datasets = require("datasets", for_what=f"{source!r}")
    hub = require("huggingface_hub", for_what=f"{source!r}")

    def resolved() -> tuple[Any, Any]:
        _probe_hub(hub, repo, timeout)
        info = hub.HfApi().dataset_info(repo, revision=revision, files_metadata=True)
        return info, datasets.load_dataset_builder(repo, config, revision=info.sha)

    try:
        info, builder = within(HUB_DEADLINE_FACTOR * timeout, resolved, what=f"resolving {repo!r}")
    except Exception as err:  # noqa: BLE001 - the clients' errors differ between versions
        raise ConnectionError(offline_message(source, repo, split, err, stream=True)) from None
    data_files = builder.config.data_files or {}
    if split not in data_files:
        raise ValueError(
            f"the Hub dataset {repo!r} (config {config!r}) has no split {split!r} (its splits: "
            f"{sorted(data_files)}); name one: {STREAM_PREFIX}{repo}:{config or ''}:<split>"
        )
    marker = f"@{info.sha}/"
    names = [str(u).split(marker, 1)[1] if marker in str(u) else str(u) for u in data_files[split]]
    sizes = {s.rfilename: s.size or 0 for s in info.siblings or []}
    chosen = names[:max_files] if max_files is not None else names
    if max_bytes is not None:
        total, keep = 0, []
        for name in chosen:
            keep.append(name)
            total += sizes.get(name, 0)
            if total >= max_bytes:
                break
        chosen = keep
    stream = StreamSource(
        repo, config, split, info.sha, tuple(chosen), prefix=len(chosen) < len(names)
    )
    label = f"{STREAM_PREFIX}{repo}:{config or ''}:{split}@{info.sha}"
    logger.info(
        "%s: %d data file(s) of %s at commit %s, streamed with datasets",
        source,
        len(chosen),
        repo,
        info.sha[:12],
    )
    return InputFile(label, STREAM_FORMAT, None, sum(sizes.get(n, 0) for n in chosen), stream)
