"""Writing a zip on the fly: zipfile writes into a sink that the generator drains after each
piece (data descriptors, no seeking), so a large export streams instead of sitting in memory.
Entries carry a fixed time (`zip_entry`), so an export's bytes depend only on what it holds."""

from __future__ import annotations

import io
import zipfile


class StreamSink(io.RawIOBase):
    """A write-only, non-seekable file for zipfile; the generator drains what was written."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._buf += data
        self._pos += len(data)
        return len(data)

    def tell(self) -> int:
        return self._pos

    def pending(self) -> int:
        """Bytes written since the last drain."""
        return len(self._buf)

    def drain(self) -> bytes:
        out = bytes(self._buf)
        self._buf.clear()
        return out


# Every entry of an export carries this time, not the time of the export: the same release then
# exports the same bytes whenever it is downloaded.
ENTRY_TIME = (2020, 1, 1, 0, 0, 0)


def zip_entry(name: str, *, stored: bool = False, level: int = 1) -> zipfile.ZipInfo:
    """A zip entry named `name` with the fixed ENTRY_TIME, deflated at `level` (fast: exports are
    mostly JSON written once) or stored (media, which are compressed already)."""
    info = zipfile.ZipInfo(name, date_time=ENTRY_TIME)
    info.external_attr = 0o644 << 16  # a plain file readable by all, as unzip tools expect
    if not stored:
        info.compress_type = zipfile.ZIP_DEFLATED
        info._compresslevel = level  # what ZipFile(compresslevel=...) sets on the entries it names
    return info
