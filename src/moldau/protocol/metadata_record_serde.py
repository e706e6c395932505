"""KRaft metadata records framed as Kafka writes them in `__cluster_metadata`.

Kafka's MetadataRecordSerde (AbstractApiMessageSerde) stores each record's value as an
unsigned varint frame version (always 1), an unsigned varint api key, an unsigned varint
record version, then the record's body at that version, with nothing after it. The codecs
are generated from Kafka's metadata schemas (`moldau.protocol.metadata_records`). Tiered
storage's `__remote_log_metadata` frames its own records the same way (Kafka's
RemoteLogMetadataSerde), so both functions take the table of record classes by api key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moldau.protocol.metadata_records import RECORDS
from moldau.protocol.primitives import ProtocolDecodeError, read_uvarint, write_uvarint

FRAME_VERSION = 1
_SHORT_MAX = 0x7FFF


class MetadataRecordError(ProtocolDecodeError):
    """The bytes are not a well-formed metadata record."""


class UnknownMetadataRecordError(MetadataRecordError):
    """A frame version, api key or record version this release does not know, e.g. one
    written by a newer release: the loader decides whether to skip or refuse it."""


def encode_metadata_record(
    record: Any, version: int | None = None, records: Mapping[int, Any] = RECORDS
) -> bytes:
    """Frame ``record`` at ``version`` (default: the highest this release knows)."""
    cls = type(record)
    if records.get(getattr(cls, "API_KEY", -1)) is not cls:
        raise TypeError(f"{cls.__name__} is not a metadata record")
    if version is None:
        version = cls.MAX_VERSION
    elif not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
        raise ValueError(f"{cls.__name__} has no version {version}")
    out = bytearray()
    write_uvarint(out, FRAME_VERSION)
    write_uvarint(out, cls.API_KEY)
    write_uvarint(out, version)
    for part in record.encode(version):  # metadata records carry no spilled record sets
        out += part
    return bytes(out)


def _read_short(buf: memoryview, pos: int, what: str) -> tuple[int, int]:
    try:
        value, pos = read_uvarint(buf, pos)
    except ProtocolDecodeError as e:
        raise MetadataRecordError(f"error while reading {what}: {e}") from None
    if value > _SHORT_MAX:
        raise MetadataRecordError(f"value for {what} was too large: {value}")
    return value, pos


def decode_metadata_record(
    buf: bytes | bytearray | memoryview, records: Mapping[int, Any] = RECORDS
) -> Any:
    """The record in one framed value; raises UnknownMetadataRecordError or
    MetadataRecordError (both ProtocolDecodeError, a ValueError)."""
    view = memoryview(buf)
    frame_version, pos = _read_short(view, 0, "frame version")
    if frame_version != FRAME_VERSION:
        raise UnknownMetadataRecordError(
            f"unknown metadata frame version {frame_version} (only {FRAME_VERSION} is supported)"
        )
    api_key, pos = _read_short(view, pos, "type")
    version, pos = _read_short(view, pos, "version")
    cls = records.get(api_key)
    if cls is None:
        raise UnknownMetadataRecordError(f"unknown metadata record type {api_key}")
    if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
        raise UnknownMetadataRecordError(
            f"unknown version {version} of {cls.__name__} "
            f"(this release reads {cls.MIN_VERSION}-{cls.MAX_VERSION})"
        )
    try:
        record, end = cls.decode(view, version, pos)
    except ProtocolDecodeError as e:
        raise MetadataRecordError(f"failed to deserialize {cls.__name__} v{version}: {e}") from e
    if end != len(view):
        raise MetadataRecordError(
            f"found {len(view) - end} byte(s) of garbage after {cls.__name__} v{version}"
        )
    return record
