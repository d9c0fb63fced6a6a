"""Input compressed with gzip, bzip2, xz or zstd, read as if it were not, known by its first bytes.

Crawls and training corpora are kept compressed (``.jsonl.gz``,
``.jsonl.zst``), and a compressed file read as text would make every line a
reject. The first bytes tell, not the name: standard input has none, and a
file renamed or misnamed is still read right. A JSON line starts with ``{``
or white space, never with any of these marks.
"""

import bz2
import gzip
import io
import lzma
from typing import BinaryIO, cast

import zstandard

from stream_dedup.errors import InputError

_GZIP = b"\x1f\x8b"
#: "BZh", the block size (1 to 9 hundred KB), then the first block's own mark (the digits of pi).
_BZIP2 = (b"BZh", b"\x31\x41\x59\x26\x53\x59")
_XZ = b"\xfd7zXZ\x00"
_ZSTD = b"\x28\xb5\x2f\xfd"
#: Bytes of the longest mark.
_MARK_BYTES = 10

#: What reading input can raise part way: damaged or cut compressed data of each format (gzip's and
#: bzip2's are OSErrors, as is a failing disk), a gzip or xz file that ends early (EOFError).
READ_ERRORS = (OSError, EOFError, lzma.LZMAError, zstandard.ZstdError)


def decompressed(raw: io.BufferedReader) -> BinaryIO:
    """``raw`` decompressed if its first bytes mark a compressed format, else ``raw`` itself."""
    start = raw.peek(_MARK_BYTES)[:_MARK_BYTES]
    if start.startswith(_GZIP):
        return cast(BinaryIO, gzip.GzipFile(fileobj=raw))
    if start.startswith(_BZIP2[0]) and start[3:4].isdigit() and start[4:10] == _BZIP2[1]:
        return cast(BinaryIO, bz2.BZ2File(raw))
    if start.startswith(_XZ):
        return cast(BinaryIO, lzma.LZMAFile(raw))
    if start.startswith(_ZSTD):
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        return cast(BinaryIO, io.BufferedReader(cast(io.RawIOBase, reader)))
    return cast(BinaryIO, raw)


def unreadable(name: str, lines_read: int, error: BaseException) -> InputError:
    """The error for input that cannot be read on (:data:`READ_ERRORS`), naming it and how far it was read."""
    return InputError(f"{name} cannot be read past line {lines_read}: {error or type(error).__name__}")
