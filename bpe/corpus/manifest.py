"""A corpus's identity: every file's sha256, format and size, and one digest over them
(`corpus_manifest`), for the pretoken cache key and the lineage of runs and arrays.

What it does not do: read text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from bpe.corpus.files import Corpus, InputFile
from bpe.util.io import sha256_file


def _file_sha256(f: InputFile) -> str:
    """A file's sha256; for a streamed Hub dataset, that of what pins its bytes (the repo, the
    commit, config, split and data files: a commit's files never change)."""
    if f.hub is None:
        return sha256_file(f.path)
    return hashlib.sha256(json.dumps(f.hub.as_dict(), sort_keys=True).encode()).hexdigest()


def corpus_manifest(corpus: Corpus, *, hashes: Sequence[str] | None = None) -> dict:
    """What a corpus is, for lineage and the pretoken cache key.

    Returns `{"sha256", "files": [{path, bytes, sha256, format}], "format", "text_field"}`.
    `sha256` is the one file's own sha256 for a plain text file (as runs before corpus readers
    recorded it), else the sha256 of the manifest (each file's sha256, format and the text
    field, in order): one changed byte in any shard, another order or another field is another
    digest. `hashes` are the files' sha256 when the caller has them.
    """
    shas = list(hashes) if hashes is not None else [_file_sha256(f) for f in corpus.files]
    files = [
        {
            "path": f.path,
            "bytes": f.size,
            "sha256": s,
            "format": f.kind,
            **({"hub": f.hub.as_dict()} if f.hub is not None else {}),
        }
        for f, s in zip(corpus.files, shas, strict=True)
    ]
    if corpus.is_plain_text_file:
        digest = shas[0]
    else:
        record = {
            "files": [[x["sha256"], x["format"]] for x in files],
            "text_field": corpus.text_field if corpus.has_records else None,
        }
        digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
    return {
        "sha256": digest,
        "files": files,
        "format": "+".join(corpus.kinds),
        "text_field": corpus.text_field if corpus.has_records else None,
    }
