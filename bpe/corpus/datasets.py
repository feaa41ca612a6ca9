"""Named corpora: where each dataset's training input and held-out documents live.

What it does: turns a dataset config (`bpe/conf/dataset/*.yaml`) into a `Dataset` with absolute
paths, resolving relative paths against the cwd, then the bundled data inside the package, then
the repository root (so runs work from any directory, installed or not), and
fails with a message that says how to get a missing file: the bundled samples ship with the
repository, the full datasets come from `scripts/download_data.py`.

A config whose `path` is not its named dataset's own training file (`dataset.path=my.txt`) is a
*custom input*: it is filed under `input_name` (`custom-<file stem>`, also in run directory
names), and it keeps the named dataset's held-out file only if that was overridden too; without
one, runs hold the input's last documents out of training and measure them (`Dataset.holdout`,
`dataset.heldout_fraction` and `dataset.heldout_max_bytes`; see `bpe.evaluation.evaluate`).

The input may be any corpus `bpe.corpus` reads (a file of any format, a folder, a
glob, `hf:owner/name/pattern`, a Hub dataset streamed with `datasets`:
`hf-stream:owner/name[:config[:split]][@revision]`), read with the config's `format`,
`text_field` and `max_files` (`Dataset.corpus`).

What it does not do: download anything (see `scripts/download_data.py`; `hf:` sources are
fetched by the readers) or read text (see `bpe.corpus`).
"""

from __future__ import annotations

import dataclasses
import glob
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bpe.corpus.documents import Holdout, find_holdout, find_prefix
from bpe.corpus.files import DEFAULT_TEXT_FIELD, HUB_PREFIX, HUB_PREFIXES, STREAM_PREFIX, Corpus
from bpe.corpus.parts import check_record_files
from bpe.corpus.sources import resolve_source
from bpe.runs import schema
from bpe.text.specials import EOT
from bpe.util.io import CONF_DIR, DATA_DIR, IN_CHECKOUT, PACKAGE_DIR, PROJECT_ROOT, safe_name

logger = logging.getLogger(__name__)

#: Prefix of `input_name` for a file that is not a named dataset's training file.
CUSTOM_PREFIX = "custom-"
#: An input without held-out file holds out its last documents, up to this share of its size
#: (`dataset.heldout_fraction`) ...
HELDOUT_FRACTION = 0.05
#: ... and at most this many bytes of them (`dataset.heldout_max_bytes`): about the size of the
#: bundled held-out files (110 and 250 KB), and a bounded evaluation (a cold encode of 256 KB of
#: one repeated letter, one pretoken, takes ~1.3 s).
HELDOUT_MAX_BYTES = 256 << 10
# characters kept from a file stem in a run name (the rest become "-")


@dataclass(frozen=True)
class Dataset:
    """One named corpus: training file, held-out file, special tokens.

    `cross_domain` names the dataset whose held-out documents measure how well a tokenizer
    trained here compresses text of another domain.
    """

    name: str  # `input_name`: the dataset's name, or custom-<stem> for another file
    path: Path
    heldout_path: Path | None
    special_tokens: list[str] = field(default_factory=list)
    document_separator: str = EOT
    cross_domain: str | None = None
    download: str | None = None
    #: the path is not the named dataset's own training file (`dataset.path=` was overridden)
    custom: bool = False
    #: how the corpus is read (`bpe.corpus.sources.resolve_source`)
    format: str = "auto"
    text_field: str = DEFAULT_TEXT_FIELD
    max_files: int | None = None
    max_bytes: int | None = None
    #: without a held-out file: the share of the input's text (not its size on disk) and the
    #: bytes at most of its last documents that runs hold out of training (`holdout`)
    heldout_fraction: float = HELDOUT_FRACTION
    heldout_max_bytes: int = HELDOUT_MAX_BYTES
    #: the share of the trainable text (whole documents, from the start) training reads: a
    #: data curve's point (`find_prefix`); 1 reads all of it
    train_fraction: float = 1.0

    def check(self) -> None:
        """Raise FileNotFoundError, saying how to get it, when the training input is missing
        (a file, folder or glob that names nothing); ValueError when it cannot be read."""
        if not is_pattern(self.path):
            _check_file(self.path, self, "training file", allow_dir=True)
        check_record_files(self.corpus())
        held = self.heldout_path
        if held is not None and held.is_file() and held.stat().st_size == 0:
            raise ValueError(
                f"held-out file of dataset {self.name!r} at {str(held)!r} is empty, so nothing "
                "can be measured on it; point dataset.heldout_path at held-out text, or set it "
                "to null to hold out the input's last documents"
            )
        if held is not None and not str(held).startswith(("hf:", "hf-stream:")):
            # before training, not after it: a held-out input is read only by analysis
            self.check_heldout()
            check_record_files(self.heldout_corpus())

    def check_heldout(self) -> None:
        if self.heldout_path is not None:
            _check_file(
                self.heldout_path, self, "held-out file", allow_dir=True, key="dataset.heldout_path"
            )

    def corpus(self) -> Corpus:
        """The training input as a `Corpus` (its files listed, each format decided)."""
        return self._resolve(self.path, max_files=self.max_files, max_bytes=self.max_bytes)

    def holdout(self) -> Holdout | None:
        """The input's last documents that a run holds out of training, and where they start.

        None with a held-out file (`heldout_path`: nothing of the input is held out), with
        `heldout_fraction=0`, or when nothing can be held out (`find_holdout`: one document,
        or a last document larger than the budget).
        """
        if self.heldout_path is not None:
            return None
        return find_holdout(
            self.corpus(),
            self.document_separator,
            fraction=self.heldout_fraction,
            max_bytes=self.heldout_max_bytes,
        )

    def training_corpus(self, holdout: Holdout | None) -> Corpus:
        """What training reads: the corpus up to its held-out documents (`holdout`), then
        only its first `train_fraction` of that text (`find_prefix`)."""
        corpus = self.corpus()
        if holdout is not None:
            corpus = dataclasses.replace(corpus, stop=holdout.stop)
        prefix = find_prefix(corpus, self.document_separator, fraction=self.train_fraction)
        return corpus if prefix is None else dataclasses.replace(corpus, stop=prefix)

    def heldout_corpus(self) -> Corpus | None:
        """The held-out input as a `Corpus`, or None without one."""
        return None if self.heldout_path is None else self._resolve(self.heldout_path)

    def _resolve(
        self, path: Path, *, max_files: int | None = None, max_bytes: int | None = None
    ) -> Corpus:
        return resolve_source(
            str(path),
            format=self.format,
            text_field=self.text_field,
            max_files=max_files,
            max_bytes=max_bytes,
        )

    @property
    def is_pattern(self) -> bool:
        """Whether the input is a glob or a Hub source (no single path to look at)."""
        return is_pattern(self.path)

    @property
    def is_plain_text(self) -> bool:
        """Whether the training input is one plain UTF-8 text file (read as before readers)."""
        if is_pattern(self.path) or not self.path.is_file():
            return False
        return self.corpus().is_plain_text_file


def resolve(path: str | os.PathLike) -> Path:
    """Absolute path of a dataset file named in a config.

    In order: as given if absolute or existing from the cwd; the bundled copy (`data/x` is
    `bpe/data/x`, shipped inside the package, so an installed `bpe-train` finds the samples
    from any directory); in a checkout, under the repository root (where
    `scripts/download_data.py` puts the full datasets); else from the cwd.

    >>> resolve("data/owt_sample.txt").relative_to(PACKAGE_DIR).as_posix()
    'data/owt_sample.txt'
    """
    if str(path).startswith(HUB_PREFIXES):
        return Path(str(path))  # a Hub source, not a local path
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists() or glob.has_magic(str(path)):
        return p.absolute() if glob.has_magic(str(path)) else p.resolve()
    bundled = PACKAGE_DIR / p
    if bundled.exists():
        return bundled.resolve()
    return ((PROJECT_ROOT if IN_CHECKOUT else Path.cwd()) / p).resolve()


def from_config(cfg: Mapping) -> Dataset:
    """Build a Dataset from a dataset config mapping (a `cfg.dataset` node or a plain dict).

    A custom input (a `path` other than the named dataset's file) is named `custom-<stem>` and
    drops the named dataset's held-out file unless `heldout_path` was overridden as well.

    >>> from_config({"name": "old", "path": "data/owt_sample.txt", "other": "x"}).cross_domain
    'x'
    >>> ds = from_config({"name": "owt_sample", "path": "elsewhere/notes.txt",
    ...                   "heldout_path": "data/owt_heldout.txt"})
    >>> ds.name, ds.custom, ds.heldout_path
    ('custom-notes', True, None)
    """
    missing = [k for k in ("name", "path") if not cfg.get(k)]
    if missing:
        raise ValueError(f"dataset config {dict(cfg)!r} lacks {missing}; see bpe/conf/dataset/")
    path = resolve(cfg["path"])
    heldout = resolve(cfg["heldout_path"]) if cfg.get("heldout_path") else None
    named = _named_config(str(cfg["name"]))
    custom = named is not None and path != resolve(named["path"])
    if custom and heldout is not None and named.get("heldout_path"):
        if heldout == resolve(named["heldout_path"]):
            heldout = None  # the named dataset's held-out text says nothing about this input
    return Dataset(
        name=input_name(str(cfg["name"]), path),
        path=path,
        heldout_path=heldout,
        special_tokens=list(cfg.get("special_tokens") or []),
        document_separator=str(cfg.get("document_separator") or EOT),
        # runs made before the key was renamed recorded it as `other`
        cross_domain=cfg.get("cross_domain", cfg.get("other")),
        download=None if custom else cfg.get("download"),
        custom=custom,
        format=str(cfg.get("format") or "auto"),
        text_field=str(cfg.get("text_field") or DEFAULT_TEXT_FIELD),
        max_files=cfg.get("max_files"),
        max_bytes=cfg.get("max_bytes"),
        heldout_fraction=float(cfg.get("heldout_fraction", HELDOUT_FRACTION)),
        heldout_max_bytes=int(cfg.get("heldout_max_bytes") or HELDOUT_MAX_BYTES),
        train_fraction=float(cfg.get("train_fraction", 1.0)),
    )


def input_name(name: str, path: str | os.PathLike) -> str:
    """What runs on this input are filed under: `name` for the named dataset's own file,
    `custom-<file stem>` for any other file (`dataset.path=...`); `name` when it names no
    config in bpe/conf/dataset/. Run directory names use it too (the `input_name` resolver).

    >>> input_name("owt_sample", "data/owt_sample.txt"), input_name("owt_sample", "/x/My notes.txt")
    ('owt_sample', 'custom-My-notes')
    """
    named = _named_config(name)
    if named is None or resolve(path) == resolve(named["path"]):
        return safe_name(name)  # part of a path: a name like "../x" must not climb out
    return f"{CUSTOM_PREFIX}{safe_name(_stem(path), max_chars=40)}"


def _stem(path: str | os.PathLike) -> str:
    """What names an input: a file's stem, a folder's name, a glob's folder, a Hub repo's name.

    >>> _stem("shards/*.parquet"), _stem("hf:HuggingFaceFW/fineweb-edu/sample/*.parquet")
    ('shards', 'fineweb-edu')
    """
    text = str(path)
    if text.startswith(STREAM_PREFIX):
        return text[len(STREAM_PREFIX) :].split(":")[0].split("@")[0].strip("/").split("/")[-1]
    if text.startswith(HUB_PREFIX):
        return text[len(HUB_PREFIX) :].strip("/").split("/")[1:2][0] if "/" in text else text
    p = Path(text)
    while glob.has_magic(p.name) and p.parent != p:
        p = p.parent
    return p.stem if p.suffix and not glob.has_magic(text) else p.name


def _named_config(name: str) -> dict | None:
    if safe_name(name) != name:
        return None  # "../x" names no config: never read a file outside bpe/conf/dataset
    path = CONF_DIR / "dataset" / f"{name}.yaml"
    if not path.is_file():
        return None
    cfg = yaml.safe_load(path.read_text("utf-8"))
    return cfg if isinstance(cfg, dict) and cfg.get("path") else None


def run_dataset(config: Mapping, metrics: Mapping) -> Dataset:
    """The dataset a run trained on: its saved config's `dataset` (`bpe.runs.saved_config`),
    else, for a run saved without one, the dataset its metrics.json names."""
    if config.get("dataset"):
        return from_config(config["dataset"])
    return load_named(schema.get(metrics, schema.DATASET))


def load_named(name: str) -> Dataset:
    """The Dataset of `bpe/conf/dataset/<name>.yaml` (used for the cross-domain measurement)."""
    path = CONF_DIR / "dataset" / f"{name}.yaml"
    if safe_name(name) != name or not path.is_file():
        choices = sorted(p.stem for p in (CONF_DIR / "dataset").glob("*.yaml"))
        raise ValueError(f"unknown dataset {name!r}; choose one of {choices}")
    return from_config(yaml.safe_load(path.read_text("utf-8")))


def measured_sides(ds: Dataset) -> list[tuple[str, Dataset]]:
    """The datasets a run is measured on: ("own", ds), then ("other", its cross-domain dataset).

    A cross-domain dataset that cannot be loaded is left out with a log line, so every
    measurement skips the same side.
    """
    sides = [("own", ds)]
    if ds.cross_domain:
        try:
            sides.append(("other", load_named(ds.cross_domain)))
        except ValueError as err:
            logger.warning("cross-domain dataset unavailable: %s", err)
    return sides


def is_pattern(path: Path) -> bool:
    """A glob or a Hub source: checked by resolving it, not by looking for one file."""
    return glob.has_magic(str(path)) or str(path).startswith(HUB_PREFIXES)


def _check_file(
    path: Path, ds: Dataset, what: str, *, allow_dir: bool = False, key: str = "dataset.path"
) -> None:
    if path.is_file() or (allow_dir and path.is_dir()):
        return
    if path.exists():  # a FIFO, a socket, a device such as /dev/zero: it exists, but is no file
        raise ValueError(
            f"{what} of dataset {ds.name!r} at {str(path)!r} is not a regular file (a FIFO, "
            "socket or device); pass a corpus file, a folder or a glob"
        )
    if ds.custom or key != "dataset.path" and not path.resolve().is_relative_to(DATA_DIR):
        hint = f"check {key} (relative paths are tried from the current directory first)"
    elif ds.download:
        hint = (
            f"download it with `python scripts/download_data.py {ds.download}` "
            "(from the Hugging Face Hub, or a mirror named by HF_ENDPOINT), "
            "or point dataset.path at your copy"
        )
    else:
        hint = (
            "it ships inside the package (bpe/data/): reinstall bpe-lab, or in a checkout "
            "restore it with `git checkout -- bpe/data/`"
        )
    raise FileNotFoundError(f"{what} of dataset {ds.name!r} not found at {str(path)!r}; {hint}")
