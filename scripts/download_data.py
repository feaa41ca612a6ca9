"""Download the full datasets into data/full/ (the bundled samples need no download).

    python scripts/download_data.py tinystories     TinyStoriesV2-GPT4 train (2.1 GB) + valid
    python scripts/download_data.py owt             CS336 OpenWebText sample train (.txt.gz) + valid
    python scripts/download_data.py all

Files come from the Hugging Face Hub through `huggingface_hub` (the `download` extra): a
progress bar per file, a dropped connection resumes where it stopped (an HTTP Range request),
and downloads land in the Hub cache (`HF_HUB_CACHE`, or `--cache-dir`), so a second run, or a
run after deleting data/full/, needs no network. `HF_ENDPOINT` points it at a mirror. Each file
is then placed at its dataset path (a hard link to the cached copy when the filesystem allows,
else a copy; a `.gz` file is decompressed only when its target is not `.gz`: OWT stays compressed,
as training reads it directly), written under a temporary name and renamed, so a
broken step never looks finished. Without network access it stops, after a short timeout, with
a message saying what failed and how to get the file another way.

What it does not do: verify the text (a run's metrics.json records each input's sha256) or
resume a download after the process itself was killed (that file starts over).
"""

from __future__ import annotations

import argparse
import gzip
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

from huggingface_hub import (
    constants,
    get_hf_file_metadata,
    hf_hub_download,
    hf_hub_url,
    try_to_load_from_cache,
)

ROOT = Path(__file__).resolve().parent.parent
FULL_DIR = ROOT / "data" / "full"
# dataset -> [(Hub dataset repo, file in the repo, file name under --dest)]
SOURCES = {
    "tinystories": [
        ("roneneldan/TinyStories", "TinyStoriesV2-GPT4-train.txt", "TinyStoriesV2-GPT4-train.txt"),
        ("roneneldan/TinyStories", "TinyStoriesV2-GPT4-valid.txt", "TinyStoriesV2-GPT4-valid.txt"),
    ],
    "owt": [
        # kept compressed: training and bpe-encode read .gz directly (bpe.corpus)
        ("stanford-cs336/owt-sample", "owt_train.txt.gz", "owt_train.txt.gz"),
        ("stanford-cs336/owt-sample", "owt_valid.txt.gz", "owt_valid.txt.gz"),
    ],
}

logger = logging.getLogger("download_data")


class OfflineError(RuntimeError):
    """The Hub cannot be reached and the file is not in the cache."""


def download(
    repo_id: str,
    filename: str,
    target: Path,
    *,
    timeout: float,
    cache_dir: Path | None = None,
    revision: str = "main",
) -> Path:
    """Fetch one file of a Hub dataset repo (cached) and place it at target atomically.

    Raises:
        OfflineError: the Hub cannot be reached and the cache does not hold the file.
    """
    if target.is_file():
        logger.info("%s already present, skipping", target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    url = hf_hub_url(repo_id, filename, repo_type="dataset", revision=revision)
    try:
        if (
            try_to_load_from_cache(
                repo_id, filename, cache_dir=cache_dir, revision=revision, repo_type="dataset"
            )
            is None
        ):
            # One HEAD request with our timeout: offline, this fails in seconds, where the
            # download call would retry with backoff for half a minute before giving up.
            get_hf_file_metadata(url, timeout=timeout)
        cached = Path(
            hf_hub_download(
                repo_id,
                filename,
                repo_type="dataset",
                revision=revision,
                cache_dir=cache_dir,
                etag_timeout=timeout,
            )
        )
    # the client's own connection errors differ between huggingface_hub versions
    except Exception as err:  # noqa: BLE001 - reported with its type, never swallowed
        raise OfflineError(
            f"cannot download {url} ({type(err).__name__}: {_first_line(err)}). "
            f"If this machine is offline or cannot reach {constants.ENDPOINT}: set HF_ENDPOINT "
            "to a Hub mirror you can reach and rerun; or fetch the file elsewhere and copy it "
            "to "
            f"{str(target)!r}; or point dataset.path at your copy "
            "(e.g. bpe-train dataset=tinystories dataset.path=/path/to/file.txt)"
        ) from None
    _place(cached, target, gunzip=filename.endswith(".gz") and target.suffix != ".gz")
    logger.info("%s -> %s", url, target)
    return target


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else "no detail"


def _place(cached: Path, target: Path, *, gunzip: bool) -> None:
    """Put the cached file at target: a hard link if possible, else a copy (or gunzip)."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    os.close(fd)
    try:
        if gunzip:
            with gzip.open(cached, "rb") as src, open(tmp, "wb") as out:
                shutil.copyfileobj(src, out, length=1 << 20)
        else:
            os.unlink(tmp)
            try:
                # no second copy of a multi-gigabyte file when the cache is on the same disk
                os.link(cached.resolve(), tmp)
            except OSError:
                shutil.copyfile(cached, tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=[*SOURCES, "all"])
    parser.add_argument("--dest", type=Path, default=FULL_DIR)
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="Hub cache (default: HF_HUB_CACHE, usually ~/.cache/huggingface/hub)",
    )
    parser.add_argument("--timeout", type=float, default=15.0, help="seconds to reach the Hub")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    logging.getLogger("huggingface_hub").propagate = False  # it prints its own warnings
    names = list(SOURCES) if args.dataset == "all" else [args.dataset]
    try:
        for name in names:
            for repo_id, filename, target in SOURCES[name]:
                download(
                    repo_id,
                    filename,
                    args.dest / target,
                    timeout=args.timeout,
                    cache_dir=args.cache_dir,
                )
    except OfflineError as err:
        logger.error("%s", err)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
