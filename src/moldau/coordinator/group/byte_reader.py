"""Bounds-checked reader for the classic and flexible Kafka encodings of stored records.

`__consumer_offsets` records and the consumer protocol blobs are not RPC messages, so they
are decoded here; truncated or malformed input raises ValueError instead of struct.error.
"""

from __future__ import annotations

import struct

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class ByteReader:
    """Reads big-endian primitives; `flexible` selects compact (varint length + 1) forms."""

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self._data = data
        self._pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        end = self._pos + n
        if n < 0 or end > len(self._data):
            raise ValueError("truncated record")
        chunk = self._data[self._pos : end]
        self._pos = end
        return chunk

    def int16(self) -> int:
        return _INT16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _INT32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _INT64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 35:
                raise ValueError("varint too long")

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        return None if n < 0 else self._take(n).decode()

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise ValueError("null string")
        return value

    def nullable_bytes(self) -> bytes | None:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        return None if n < 0 else self._take(n)

    def bytes(self) -> bytes:
        return self.nullable_bytes() or b""

    def array_length(self) -> int:
        """Element count (null arrays read as empty), bounded by the bytes left."""
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n > len(self._data) - self._pos:
            raise ValueError("array length exceeds record")
        return max(n, 0)

    def skip_tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self._take(self.uvarint())
