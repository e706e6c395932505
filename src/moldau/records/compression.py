"""Kafka's batch compression codecs, backed by cramjam.

Formats follow what Kafka clients put on the wire: gzip streams, raw snappy blocks
(librdkafka, Java) or xerial-framed snappy (kafka-python, aiokafka), LZ4 *frames* with
independent blocks (the Java client rejects linked blocks) and zstd frames.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from enum import IntEnum
from typing import Any

import cramjam

from moldau.protocol.errors import CorruptRecordError

Buffer = bytes | bytearray | memoryview


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = len(XERIAL_MAGIC) + 8  # magic, version int32, compatible version int32
_INT32 = struct.Struct(">i")


# Kafka's ``compression.type`` names (topic and broker config) for the codec they select.
CODEC_BY_NAME = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
GZIP_DEFAULT_LEVEL = -1  # zlib's default (6), Kafka's compression.gzip.level default


def _lz4_compress(data: Buffer, level: int | None = None) -> bytes:
    compressor = cramjam.lz4.Compressor(level=level, block_linked=False, content_checksum=False)
    compressor.compress(data)
    return bytes(compressor.finish())


def _gzip_compress(data: Buffer, level: int | None = None) -> Any:
    if level == GZIP_DEFAULT_LEVEL:
        level = None
    return cramjam.gzip.compress(data, level=level)


def _snappy_compress(data: Buffer, level: int | None = None) -> Any:
    """Snappy has no levels."""
    return cramjam.snappy.compress_raw(data)


def _zstd_compress(data: Buffer, level: int | None = None) -> Any:
    return cramjam.zstd.compress(data, level=level)


def _snappy_decompress(data: Buffer) -> bytes:
    """Raw snappy, or xerial framing: header then [int32 length, raw block]* chunks."""
    mv = memoryview(data)
    if mv[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(mv))
    out = bytearray()
    pos, end = _XERIAL_HEADER_SIZE, len(mv)
    while pos < end:
        if end - pos < _INT32.size:
            raise CorruptRecordError("truncated xerial snappy chunk header")
        (length,) = _INT32.unpack_from(mv, pos)
        pos += _INT32.size
        if length < 0 or pos + length > end:
            raise CorruptRecordError("truncated xerial snappy chunk")
        out += cramjam.snappy.decompress_raw(mv[pos : pos + length])
        pos += length
    return bytes(out)


_COMPRESS: dict[int, Callable[[Buffer, int | None], Any]] = {
    Compression.GZIP: _gzip_compress,
    Compression.SNAPPY: _snappy_compress,
    Compression.LZ4: _lz4_compress,
    Compression.ZSTD: _zstd_compress,
}

_DECOMPRESS: dict[int, Callable[[Buffer], Any]] = {
    Compression.GZIP: cramjam.gzip.decompress,
    Compression.SNAPPY: _snappy_decompress,
    Compression.LZ4: cramjam.lz4.decompress,
    Compression.ZSTD: cramjam.zstd.decompress,
}


def _codec(table: dict[int, Any], codec: int) -> Any:
    try:
        return table[codec]
    except KeyError:
        raise CorruptRecordError(f"unknown compression codec {codec}") from None


def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress with ``level`` (KIP-390's ``compression.<codec>.level``; None = default)."""
    if codec == Compression.NONE:
        return bytes(data)
    return bytes(_codec(_COMPRESS, codec)(data, level))


def decompress(codec: int, data: Buffer) -> bytes:
    """Decompress a batch's records section; malformed input raises CorruptRecordError."""
    if codec == Compression.NONE:
        return bytes(data)
    fn = _codec(_DECOMPRESS, codec)
    try:
        return bytes(fn(data))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(
            f"cannot decompress {Compression(codec).name} batch: {exc}"
        ) from None
