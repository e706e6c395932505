"""Transaction markers: the COMMIT/ABORT control batches that end a transaction.

As Kafka's EndTransactionMarker: a control batch (transactional and control flags set,
the producer's id and epoch, no sequence) holding one record whose key is the control
record type (int16 version 0, int16 type: 0 abort, 1 commit) and whose value is the
marker (int16 version 0, int32 coordinator epoch). Markers are the one place the
broker looks inside a batch on the append path, and only at these few bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from moldau.protocol.errors import InvalidRecordError
from moldau.records.batch import NO_SEQUENCE, Buffer
from moldau.records.record import build_batch, decode_records

ABORT = 0
COMMIT = 1
CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0

_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    committed: bool
    coordinator_epoch: int


def build_marker_batch(
    producer_id: int,
    producer_epoch: int,
    *,
    committed: bool,
    coordinator_epoch: int,
    timestamp: int | None = None,
) -> bytearray:
    """One COMMIT or ABORT marker as a control batch, ready to append."""
    key = _KEY.pack(CONTROL_KEY_VERSION, COMMIT if committed else ABORT)
    value = _VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch)
    return bytearray(
        build_batch(
            [(key, value)],
            base_timestamp=timestamp,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=NO_SEQUENCE,
            is_transactional=True,
            is_control=True,
        )
    )


def read_marker(batch: Buffer) -> EndTxnMarker | None:
    """The marker in ``batch`` (the bytes of one control batch); None for an empty control
    batch (the cleaner emptied it) or a control type that is no marker (KRaft's records).
    Raises CorruptRecordError or InvalidRecordError if it does not decode."""
    records = decode_records(batch)
    if not records:
        return None
    key, value = records[0].key, records[0].value
    if key is None or len(key) < _KEY.size:
        raise InvalidRecordError("control record without a valid key")
    _, control_type = _KEY.unpack_from(key)
    if control_type not in (ABORT, COMMIT):
        return None
    if value is None or len(value) < _VALUE.size:
        raise InvalidRecordError("transaction marker without a valid value")
    _, coordinator_epoch = _VALUE.unpack_from(value)
    return EndTxnMarker(control_type == COMMIT, coordinator_epoch)
