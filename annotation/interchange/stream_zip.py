"""Writing a zip on the fly: zipfile writes into a sink that the generator drains after each
piece (data descriptors, no seeking), so a large export streams instead of sitting in memory."""

from __future__ import annotations

import io


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
