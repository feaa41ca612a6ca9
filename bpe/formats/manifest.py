"""A tokenizer directory as one whole: the manifest its writer leaves, which every loader checks.

What it does:
    * `save_whole(out_dir, write)` is how every writer of a tokenizer directory (a run,
      `Tokenizer.save_pretrained`, `bpe-prune`) saves: it removes the old manifest, lets `write`
      write its files, removes the files of an earlier tokenizer it did not rewrite (an old
      removals.json, tokenizer.json or tiktoken file would change what loads), and writes the
      manifest last, atomically: the name and sha256 of each file of this tokenizer;
    * `check_whole(directory)` is what every loader runs first: a directory with a manifest must
      hold exactly its files with their hashes; an older run without one must hold the merges its
      metrics.json's `merges_sha256` names. A mismatch is an error naming the file and the fix.

A save that is interrupted leaves no manifest (it was removed first), so the loader falls back
to the checks of a bare pair of GPT-2 files (`bpe.formats.pretrained`), never to stale hashes.

What it does not do: read the tokenizer (`bpe.formats.pretrained`), or write the files
themselves (`bpe.formats.exports`, `bpe.formats.gpt2_format`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from bpe.runs import schema
from bpe.runs.layout import LOADED_FILES, MANIFEST_FILE, MERGES_FILE
from bpe.runs.upgrade import read_metrics
from bpe.util.io import atomic_write_text, sha256_file, shown_path

logger = logging.getLogger(__name__)

#: the manifest's format; a loader refuses a later one rather than guess
MANIFEST_VERSION = 1


class TokenizerDirMismatch(ValueError):
    """A tokenizer directory's files are not the ones its writer saved together."""


def save_whole(out_dir: str | os.PathLike, write: Callable[[Path], Iterable[Path]]) -> list[Path]:
    """Save a tokenizer directory as one whole: `write(out_dir)` writes its files (and returns
    their paths); files of an earlier tokenizer it did not rewrite are removed, then the
    manifest is written. Returns the paths written, the manifest last.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "removals.json").write_text("{}")  # an earlier PickyBPE tokenizer's
    >>> def write(out):
    ...     (out / "vocab.json").write_text("{}")
    ...     return [out / "vocab.json"]
    >>> [p.name for p in save_whole(d, write)]
    ['vocab.json', 'tokenizer_manifest.json']
    >>> sorted(p.name for p in d.iterdir())
    ['tokenizer_manifest.json', 'vocab.json']
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # first: a save cut short must not leave a manifest that vouches for the old files
    (out / MANIFEST_FILE).unlink(missing_ok=True)
    written = [Path(p) for p in write(out)]
    names = {p.name for p in written}
    for name in LOADED_FILES:
        stale = out / name
        if name not in names and (stale.is_file() or stale.is_symlink()):
            stale.unlink()
            logger.warning("removed %s: it belonged to the tokenizer saved there before", stale)
    manifest = {
        "format": MANIFEST_VERSION,
        "files": {p.name: sha256_file(p) for p in sorted(written, key=lambda p: p.name)},
    }
    atomic_write_text(out / MANIFEST_FILE, json.dumps(manifest, indent=1) + "\n")
    return [*written, out / MANIFEST_FILE]


def check_whole(directory: str | os.PathLike) -> bool:
    """Check that a tokenizer directory holds the files its writer saved; True if a manifest
    (or an older run's merges hash) vouched for them, False if nothing could.

    Raises:
        TokenizerDirMismatch: a file differs from its manifest's hash, is missing, or is not in
            the manifest though it would change what loads; or an older run's merges.txt is
            not the one its metrics.json records.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> def write(out):
    ...     (out / "vocab.json").write_text("{}")
    ...     return [out / "vocab.json"]
    >>> _ = save_whole(d, write)
    >>> check_whole(d)
    True
    >>> _ = (d / "vocab.json").write_text('{"a": 0}')
    >>> check_whole(d)
    Traceback (most recent call last):
    ...
    bpe.formats.manifest.TokenizerDirMismatch: ...vocab.json was changed after ...
    """
    d = Path(directory)
    path = d / MANIFEST_FILE
    if not path.is_file():
        return _check_old_run(d)
    where = shown_path(d)
    try:
        manifest = json.loads(path.read_text("utf-8"))
        files = manifest["files"]
        version = manifest["format"]
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise TypeError("files must map names to sha256 strings")
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise TokenizerDirMismatch(
            f"{shown_path(path)} is not a tokenizer manifest ({err}); delete it to load the files "
            "without their hashes, or save the tokenizer again"
        ) from None
    if version != MANIFEST_VERSION:
        raise TokenizerDirMismatch(
            f"{shown_path(path)} has format {version!r}, newer than this bpe-lab reads "
            f"({MANIFEST_VERSION}); upgrade bpe-lab"
        )
    for name, digest in files.items():
        if name not in LOADED_FILES:
            raise TokenizerDirMismatch(
                f"{shown_path(path)} lists {name!r}, which is not a tokenizer file; save the "
                "tokenizer again"
            )
        f = d / name
        if not f.is_file():
            raise TokenizerDirMismatch(
                f"{where} is missing {name}, which was saved with its tokenizer (an incomplete "
                "copy?); copy the whole directory again, or save the tokenizer again"
            )
        if sha256_file(f) != digest:
            raise TokenizerDirMismatch(
                f"{shown_path(f)} was changed after its tokenizer was saved (its sha256 is not "
                f"the one {MANIFEST_FILE} records: cut short, or replaced); copy the whole "
                "directory again, or save the tokenizer again"
            )
    extra = [n for n in LOADED_FILES if n not in files and (d / n).is_file()]
    if extra:
        raise TokenizerDirMismatch(
            f"{where} holds {', '.join(extra)}, which its tokenizer was not saved with and which "
            "would change what loads; remove them, or save the tokenizer again"
        )
    return True


def _check_old_run(d: Path) -> bool:
    """A run written before manifests: its merges.txt against metrics.json's `merges_sha256`."""
    from bpe.formats.gpt2_format import load_merges, merges_sha256

    try:
        recorded = schema.get(read_metrics(d), schema.MERGES_SHA256)
    except (OSError, ValueError):
        return False
    if not isinstance(recorded, str) or not (d / MERGES_FILE).is_file():
        return False
    if merges_sha256(load_merges(d / MERGES_FILE)) != recorded:
        raise TokenizerDirMismatch(
            f"{shown_path(d / MERGES_FILE)} is not the merges its run learned (metrics.json "
            "records another merges_sha256: cut short, or replaced); copy the run again"
        )
    return True
