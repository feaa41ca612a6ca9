"""Download the full datasets into data/full/ (the bundled samples need no download).

    python scripts/download_data.py tinystories     TinyStoriesV2-GPT4 train (2.1 GB) + valid
    python scripts/download_data.py owt             CS336 OpenWebText sample train (11 GB) + valid
    python scripts/download_data.py all

Files are streamed to a temporary name and renamed when complete (a broken download never
looks finished); `.gz` files are decompressed on the fly. Without network access it stops with
a message saying so, after a short timeout.
"""

from __future__ import annotations

import argparse
import gzip
import logging
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FULL_DIR = ROOT / "data" / "full"
HF = "https://huggingface.co/datasets"
SOURCES = {
    "tinystories": [
        (f"{HF}/roneneldan/TinyStories/resolve/main/TinyStoriesV2-GPT4-train.txt",
         "TinyStoriesV2-GPT4-train.txt"),
        (f"{HF}/roneneldan/TinyStories/resolve/main/TinyStoriesV2-GPT4-valid.txt",
         "TinyStoriesV2-GPT4-valid.txt"),
    ],
    "owt": [
        (f"{HF}/stanford-cs336/owt-sample/resolve/main/owt_train.txt.gz", "owt_train.txt"),
        (f"{HF}/stanford-cs336/owt-sample/resolve/main/owt_valid.txt.gz", "owt_valid.txt"),
    ],
}  # fmt: skip

logger = logging.getLogger("download_data")


class OfflineError(RuntimeError):
    """The download host cannot be reached."""


def download(url: str, target: Path, *, timeout: float) -> Path:
    """Stream url to target atomically (gunzip when the url ends in .gz)."""
    if target.is_file():
        logger.info("%s already present, skipping", target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        response = urllib.request.urlopen(url, timeout=timeout)  # noqa: S310 - fixed https URLs
    except (TimeoutError, urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise OfflineError(
            f"cannot download {url} ({reason}). This machine seems to be offline: copy the file "
            f"to {target} by hand, or point dataset.path at your copy "
            "(e.g. bpe-train dataset=tinystories dataset.path=/path/to/file.txt)"
        ) from None
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with response, os.fdopen(fd, "wb") as out:
            stream = gzip.GzipFile(fileobj=response) if url.endswith(".gz") else response
            shutil.copyfileobj(stream, out, length=1 << 20)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    logger.info("downloaded %s -> %s", url, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=[*SOURCES, "all"])
    parser.add_argument("--dest", type=Path, default=FULL_DIR)
    parser.add_argument("--timeout", type=float, default=15.0, help="seconds per connection")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    names = list(SOURCES) if args.dataset == "all" else [args.dataset]
    try:
        for name in names:
            for url, filename in SOURCES[name]:
                download(url, args.dest / filename, timeout=args.timeout)
    except OfflineError as err:
        logger.error("%s", err)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
