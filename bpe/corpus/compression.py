"""Opening and decoding: compressed streams (`.gz`, `.zst`, `.xz`, `.bz2`) read in bounded
blocks whose errors name the real decompressed offset, and strict UTF-8 decoding whose errors
name the file and the byte offset.

What it does not do: decide a file's format (`bpe.corpus.sources`) or split text into
documents (`bpe.corpus.formats`).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from typing import Any, BinaryIO

from bpe.corpus.files import InputFile, require

#: Compression suffixes and the name each is recorded under.
COMPRESSIONS = {".gz": "gz", ".zst": "zst", ".zstd": "zst", ".xz": "xz", ".bz2": "bz2"}


def open_stream(f: InputFile) -> BinaryIO:
    """A binary stream of the file's decompressed bytes."""
    if f.compression is None:
        return open(f.path, "rb")
    if f.compression == "gz":
        return gzip.open(f.path, "rb")
    if f.compression == "xz":
        return lzma.open(f.path, "rb")
    if f.compression == "bz2":
        return bz2.open(f.path, "rb")
    zstd = require("zstandard", for_what=f"{f.path!r} (zstd)")
    return io.BufferedReader(_ZstdReader(f.path, zstd), buffer_size=1 << 20)


class _ZstdReader(io.RawIOBase):
    """The decompressed bytes of a zstd file (frames read one after another).

    Why not zstandard's own `stream_reader`: it ends quietly at the end of a truncated file;
    here a frame that stops before its end mark raises EOFError, as gzip and lzma do.
    """

    def __init__(self, path: str, zstd: Any) -> None:
        self._raw = open(path, "rb")
        self._zstd = zstd
        self._d = zstd.ZstdDecompressor().decompressobj()
        self._in_frame = False
        self._buf = b""
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while self._pos >= len(self._buf):
            data = self._raw.read(1 << 17)
            if not data:
                if self._in_frame:
                    raise EOFError("the zstd stream ends inside a frame")
                return 0
            self._buf, self._pos = self._decompress(data), 0
        n = min(len(b), len(self._buf) - self._pos)
        b[:n] = self._buf[self._pos : self._pos + n]
        self._pos += n
        return n

    def _decompress(self, data: bytes) -> bytes:
        out = []
        while data:
            if self._d.eof:  # the previous frame ended: the next one starts here
                self._d = self._zstd.ZstdDecompressor().decompressobj()
            out.append(self._d.decompress(data))
            self._in_frame = not self._d.eof
            data = self._d.unused_data if self._d.eof else b""
        return b"".join(out)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _Corrupt(ValueError):
    """A compressed file that ends early or does not decompress."""


#: `read_block` reads in steps of this many bytes, so a decompressor's error is placed
#: within a step of where it happened (one read of a whole block placed it at the block start).
READ_STEP = 64 * 1024


def read_block(stream: BinaryIO, n: int, f: InputFile, offset: int) -> bytes:
    """Read up to n decompressed bytes, turning a decompressor's error into a clear one that
    says how many decompressed bytes were read before it (to within `READ_STEP`)."""
    parts: list[bytes] = []
    got = 0
    try:
        while got < n:
            part = stream.read(min(READ_STEP, n - got))
            if not part:
                break
            parts.append(part)
            got += len(part)
    except decompression_errors() as err:
        raise corrupt(f, offset + got, err) from None
    return b"".join(parts)


def corrupt(f: InputFile, read: int, err: Exception) -> ValueError:
    """The error for a compressed file that failed after `read` decompressed bytes."""
    return _Corrupt(
        f"input file {f.path!r} ({f.kind}) is truncated or corrupt after {read} "
        f"decompressed bytes ({type(err).__name__}: {err}); download or compress it again"
    )


def decompression_errors() -> tuple[type[BaseException], ...]:
    """What a decompressor raises on a truncated or damaged file, for every compression."""
    return (EOFError, OSError, lzma.LZMAError, _zlib_error(), _zstd_error())


def _zlib_error() -> type[Exception]:
    import zlib

    return zlib.error


def _zstd_error() -> type[Exception]:
    try:
        import zstandard
    except ImportError:  # pragma: no cover - not reading zstd then
        return OSError
    return zstandard.ZstdError


def decode_utf8(data: bytes, f: InputFile, offset: int, *, decompressed: bool = False) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        where = "decompressed byte offset" if decompressed else "byte offset"
        raise ValueError(
            f"input file {f.path!r} is not valid UTF-8: bad byte(s) "
            f"{data[err.start : err.start + 4]!r} at {where} {offset + err.start}; re-encode "
            "the text as UTF-8 (e.g. iconv -t UTF-8) before training"
        ) from None
