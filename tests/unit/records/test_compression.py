import struct

import cramjam
import pytest

from moldau.protocol.errors import CorruptRecordError
from moldau.records.compression import XERIAL_MAGIC, Compression, compress, decompress

DATA = b"moldau " * 5_000 + bytes(range(256))


@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip(codec):
    packed = compress(codec, DATA)
    assert isinstance(packed, bytes)
    assert decompress(codec, memoryview(packed)) == DATA
    assert decompress(codec, compress(codec, b"")) == b""


def test_formats_are_the_ones_kafka_uses():
    assert compress(Compression.GZIP, DATA)[:2] == b"\x1f\x8b"
    assert bytes(cramjam.snappy.decompress_raw(compress(Compression.SNAPPY, DATA))) == DATA
    lz4 = compress(Compression.LZ4, DATA)
    assert lz4[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    assert lz4[4] & 0x20, "blocks must be independent for the Java client"
    assert compress(Compression.ZSTD, DATA)[:4] == b"\x28\xb5\x2f\xfd"


def xerial(data: bytes, chunk: int) -> bytes:
    out = bytearray(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    for i in range(0, len(data), chunk):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + chunk]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


@pytest.mark.parametrize("chunk", [1_000, 32 * 1024, 1 << 20])
def test_snappy_xerial_framing_is_detected(chunk):
    assert decompress(Compression.SNAPPY, xerial(DATA, chunk)) == DATA


def test_snappy_xerial_header_only_is_empty():
    assert decompress(Compression.SNAPPY, xerial(b"", 10)) == b""


@pytest.mark.parametrize("cut", [2, 5])
def test_truncated_xerial_is_corrupt(cut):
    with pytest.raises(CorruptRecordError):
        decompress(Compression.SNAPPY, xerial(DATA, 1_000)[:-cut])


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_garbage_is_corrupt(codec):
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\x01\x02\x03garbage" * 3)


@pytest.mark.parametrize("codec", [5, 7, -1])
def test_unknown_codec(codec):
    with pytest.raises(CorruptRecordError):
        compress(codec, DATA)
    with pytest.raises(CorruptRecordError):
        decompress(codec, DATA)
