"""The documents a run is measured on, per side: its own held-out documents (a held-out file,
the input's held-out tail, or, when nothing was held out, the input's last documents, which
training saw), and those of its cross-domain dataset, each with where they come from.

What it does not do: measure anything (`bpe.evaluation.evaluate`).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from bpe.corpus.datasets import (
    HELDOUT_MAX_BYTES,
    Dataset,
    is_pattern,
    measured_sides,
)
from bpe.corpus.documents import Holdout, iter_documents, load_documents, tail_documents
from bpe.runs.schema import HeldOutTail

logger = logging.getLogger(__name__)


#: When nothing of an input without held-out file is held out (`heldout_fraction=0`, one
#: document), compression is measured on its last documents, seen in training: at most this
#: many bytes of them (the same budget as a held-out tail's).
TAIL_MAX_BYTES = HELDOUT_MAX_BYTES
#: A held-out file's documents are looked for in the training input (`held_out_overlap`): all
#: of an input up to this many characters (the bundled samples, 3 MB, take ~0.1 s), the head of
#: a larger one.
OVERLAP_SCAN_CHARS = 64 << 20


@dataclass(frozen=True)
class MeasuredSide:
    """One measured side of a run: `own` or `other` (cross-domain), its documents and origin."""

    side: str
    dataset: Dataset
    #: None when the dataset has nothing to measure (a missing file: logged)
    docs: list[str] | None
    #: where the documents come from, for metrics.json: `source` (`heldout` or `input_tail`),
    #: `seen_in_training`, and where the tail starts (`offset`; `file`); a tail held out of
    #: training also says how much was held out (`heldout_docs`, `heldout_bytes`)
    origin: dict

    @property
    def label(self) -> str:
        """The dataset's name, marked when its documents are the input's tail."""
        if self.origin.get("source") != "input_tail":
            return self.dataset.name
        seen = self.origin.get("seen_in_training", True)
        return f"{self.dataset.name} ({'input tail' if seen else 'held-out tail'})"


def measured_docs(
    ds: Dataset, *, max_docs: int, holdout: Holdout | None = None
) -> list[MeasuredSide]:
    """The documents every measure of a run reads, read once: own side first, then `other`.

    The own side of a dataset without held-out file is `holdout`'s documents (the input's
    last ones, which training did not read) when given.
    """
    sides = [
        MeasuredSide(side, dataset, *_docs(dataset, max_docs, holdout if side == "own" else None))
        for side, dataset in measured_sides(ds)
    ]
    from_files = [m for m in sides if m.origin.get("source") == "heldout" and m.docs]
    if from_files:  # one scan of the training input for every side's held-out file
        found = held_out_overlap(ds, [d for m in from_files for d in m.docs])
        for m in from_files:
            mine = {_doc_key(d) for d in m.docs} & found.keys
            m.origin.update(
                seen_in_training=bool(mine),
                docs_in_training=len(mine),
                training_scanned=found.scanned,
            )
            if mine:
                logger.warning(
                    "%d of the %d held-out documents of %s also occur in the training input "
                    "(%s): their measures are not of unseen text; point heldout_path at "
                    "documents training did not read",
                    len(mine),
                    len(m.docs),
                    m.dataset.name,
                    ds.path,
                )
    return sides


def _held_out_tail(ds: Dataset, holdout: Holdout, max_docs: int) -> tuple[list[str], dict]:
    """The held-out documents of an input without held-out file (the last `max_docs`)."""
    stop = holdout.stop
    docs = list(holdout.docs[max(0, len(holdout.docs) - max_docs) :])
    logger.info(
        "dataset %s has no held-out file: measuring %d of its last %d documents, held out of "
        "training (from %s %d of %s)",
        ds.name,
        len(docs),
        stop.docs,
        "byte" if stop.unit == "bytes" else "row",
        stop.offset,
        holdout.file,
    )
    origin = HeldOutTail(
        source="input_tail",
        seen_in_training=False,
        file=holdout.file,
        offset=stop.offset,
        offset_unit=stop.unit,
        heldout_docs=stop.docs,
        heldout_bytes=stop.bytes,
    )
    return docs, dict(origin)


def _docs(
    ds: Dataset, max_docs: int, holdout: Holdout | None = None
) -> tuple[list[str] | None, dict]:
    """The documents a dataset is measured on, and where they come from (for metrics.json)."""
    path = ds.heldout_path
    if path is None and holdout is not None:
        return _held_out_tail(ds, holdout, max_docs)
    if path is None:
        if not ds.path.exists() and not ds.is_pattern:
            logger.warning("dataset %s has no input at %s: skipping it", ds.name, ds.path)
            return None, {}
        return _input_tail(ds, max_docs)
    if not path.exists() and not is_pattern(path):
        logger.warning("dataset %s has no held-out file at %s: skipping it", ds.name, path)
        return None, {}
    heldout = ds.heldout_corpus()
    assert heldout is not None  # invariant: heldout_path is set
    docs = load_documents(heldout, ds.document_separator, max_docs=max_docs)
    return docs, {"source": "heldout", "seen_in_training": False}


@dataclass(frozen=True)
class Overlap:
    """Which of some documents a training input holds (`held_out_overlap`)."""

    #: the keys (`_doc_key`) of the documents found in it
    keys: frozenset[bytes]
    #: "all" (the whole input was read), or the characters read of its head
    scanned: str | int


def held_out_overlap(
    ds: Dataset, docs: list[str], *, max_chars: int = OVERLAP_SCAN_CHARS
) -> Overlap:
    """Which documents also occur in the training input of `ds` (exact, outer whitespace
    aside): a held-out file that is the training file, or its documents in another form
    (compressed, copied), is not unseen text. An input larger than `max_chars` is read up to
    there (its head), which `scanned` says.

    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "train.txt"
    >>> _ = path.write_text("one<|endoftext|>two<|endoftext|>three", encoding="utf-8")
    >>> found = held_out_overlap(Dataset(name="d", path=path, heldout_path=None), ["two", "four"])
    >>> len(found.keys), found.scanned
    (1, 'all')
    """
    wanted = {_doc_key(d) for d in docs if d.strip()}
    found: set[bytes] = set()
    read = 0
    scanned: str | int = "all"
    if not ds.path.exists() and not ds.is_pattern:
        return Overlap(frozenset(), 0)
    for doc in iter_documents(ds.corpus(), ds.document_separator):
        key = _doc_key(doc)
        if key in wanted:
            found.add(key)
        read += len(doc)
        if read >= max_chars:
            scanned = read
            break
    return Overlap(frozenset(found), scanned)


def _doc_key(doc: str) -> bytes:
    """A document's identity for the overlap check (its text without outer whitespace)."""
    return hashlib.blake2b(doc.strip().encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _input_tail(ds: Dataset, max_docs: int) -> tuple[list[str], dict]:
    """The last documents of the training input, which training saw (nothing was held out)."""
    docs, file = tail_documents(
        ds.corpus(), ds.document_separator, max_bytes=TAIL_MAX_BYTES, max_docs=max_docs
    )
    logger.info(
        "dataset %s has no held-out file: measuring its last %d documents (from %s; seen in "
        "training)",
        ds.name,
        len(docs),
        file,
    )
    return docs, {"source": "input_tail", "file": file, "seen_in_training": True}
