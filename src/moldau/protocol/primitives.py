"""Wire primitives shared by the generated message codecs.

Readers take ``(buf, pos)`` and return ``(value, new_pos)``; writers append to a
``bytearray``. Every reader checks bounds, so a malformed frame surfaces as
:class:`ProtocolDecodeError` instead of a silently short slice.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, TypeVar

ZERO_UUID = bytes(16)

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")


class ProtocolDecodeError(ValueError):
    """The bytes on the wire do not form a valid message of the expected version."""


class RecordsSpill:
    """Records to be sent by reference (e.g. sendfile ranges) rather than copied.

    Encoders place such objects between byte chunks; the network layer writes them.
    """

    __slots__ = ()

    @property
    def size(self) -> int:
        raise NotImplementedError


class Writer:
    """Accumulates encoded bytes; records that are not bytes split the output into parts."""

    __slots__ = ("buf", "parts")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: list[Any] = []

    def records(self, value: Any, compact: bool) -> None:
        if value is None:
            self.buf += b"\x00" if compact else b"\xff\xff\xff\xff"
            return
        inline = isinstance(value, bytes | bytearray | memoryview)
        size = len(value) if inline else value.size
        if compact:
            write_uvarint(self.buf, size + 1)
        else:
            self.buf += INT32.pack(size)
        if inline:
            self.buf += value
        else:  # spilled: the network layer sends it (sendfile) between the byte parts
            self.parts.append(self.buf)
            self.parts.append(value)
            self.buf = bytearray()

    def finish(self) -> list[Any]:
        """Return the parts: bytearrays interleaved with spilled records objects."""
        if self.buf or not self.parts:
            self.parts.append(self.buf)
        return self.parts


def encoded_size(parts: list[Any]) -> int:
    return sum(len(p) if isinstance(p, bytes | bytearray) else p.size for p in parts)


def _short(pos: int, n: int, buf: memoryview) -> ProtocolDecodeError:
    return ProtocolDecodeError(f"need {n} bytes at {pos}, have {len(buf) - pos}")


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    if pos >= len(buf):
        raise _short(pos, 1, buf)
    b = buf[pos]
    if b < 0x80:  # the usual case: lengths, counts and tag sections below 128
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        if shift > 28:  # Kafka's limit: five bytes
            raise ProtocolDecodeError("varint too long")
        if pos >= len(buf):
            raise _short(pos, 1, buf)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def write_uvarint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_nullable_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    (n,) = INT16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    end = pos + n
    if end > len(buf):
        raise _short(pos, n, buf)
    return str(buf[pos:end], "utf-8"), end


def read_nullable_compact_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = pos + n - 1
    if end > len(buf):
        raise _short(pos, n - 1, buf)
    return str(buf[pos:end], "utf-8"), end


def read_nullable_bytes(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    end = pos + n
    if end > len(buf):
        raise _short(pos, n, buf)
    return buf[pos:end], end


def read_nullable_compact_bytes(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = pos + n - 1
    if end > len(buf):
        raise _short(pos, n - 1, buf)
    return buf[pos:end], end


_T = TypeVar("_T")


def _non_null(
    read_nullable: Callable[[memoryview, int], tuple[_T | None, int]],
) -> Callable[[memoryview, int], tuple[_T, int]]:
    """The reader of a field the schema does not let be null: ``read_nullable``, raising
    on null."""

    def read(buf: memoryview, pos: int) -> tuple[_T, int]:
        value, pos = read_nullable(buf, pos)
        if value is None:
            raise ProtocolDecodeError("null where the schema does not allow one")
        return value, pos

    return read


read_string = _non_null(read_nullable_string)
read_compact_string = _non_null(read_nullable_compact_string)
read_bytes = _non_null(read_nullable_bytes)
read_compact_bytes = _non_null(read_nullable_compact_bytes)


def read_array_len(buf: memoryview, pos: int, elem_size: int) -> tuple[int, int]:
    """Array length (-1 for null); refuses counts whose elements, at ``elem_size`` bytes or
    more each, cannot fit in the bytes left, before anything is allocated."""
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n * elem_size > len(buf) - pos:
        raise ProtocolDecodeError(
            f"array of {n} at {pos - 4} exceeds the {len(buf) - pos} bytes left"
        )
    return n, pos


def read_compact_array_len(buf: memoryview, pos: int, elem_size: int) -> tuple[int, int]:
    start = pos
    n, pos = read_uvarint(buf, pos)
    if (n - 1) * elem_size > len(buf) - pos:
        raise ProtocolDecodeError(
            f"array of {n - 1} at {start} exceeds the {len(buf) - pos} bytes left"
        )
    return n - 1, pos


def write_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
        return
    data = value.encode()
    out += INT16.pack(len(data))
    out += data


def write_compact_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    data = value.encode()
    write_uvarint(out, len(data) + 1)
    out += data


def write_bytes(out: bytearray, value: bytes | memoryview | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += INT32.pack(len(value))
    out += value


def write_compact_bytes(out: bytearray, value: bytes | memoryview | None) -> None:
    if value is None:
        out.append(0)
        return
    write_uvarint(out, len(value) + 1)
    out += value


def write_array_len(out: bytearray, value: list[Any] | None) -> None:
    out += INT32.pack(-1 if value is None else len(value))


def write_compact_array_len(out: bytearray, value: list[Any] | None) -> None:
    write_uvarint(out, 0 if value is None else len(value) + 1)


def write_tagged(out: bytearray, tagged: list[tuple[int, bytearray]]) -> None:
    write_uvarint(out, len(tagged))
    for tag, data in tagged:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data
