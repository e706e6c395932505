"""``__transaction_state`` records, byte-compatible with Kafka's TransactionLog.

Key: record type 0, TransactionLogKey {transactional id}. Value: TransactionLogValue
version 0 (what Kafka writes until transaction.version 2), with the partitions grouped by
topic and null in the Empty state; versions 0 and 1 are read. A tombstone (no value) is
an expired transactional id.
"""

from __future__ import annotations

from collections import defaultdict

from moldau.protocol import coordinator_record_serde as serde
from moldau.protocol.coordinator_records import TRANSACTION_RECORD_TYPES
from moldau.protocol.coordinator_records import transaction_log_key as tlk
from moldau.protocol.coordinator_records import transaction_log_value as tlv

from .state import TransactionMetadata, TxnState

KEY_VERSION = 0
VALUE_VERSION = 0


def encode_key(transactional_id: str) -> bytes:
    return serde.serialize_key(tlk.TransactionLogKey(transactional_id), KEY_VERSION)


def decode_key(data: bytes) -> str:
    """The transactional id; raises ValueError (UnknownRecordTypeError included)."""
    _, key = serde.deserialize_key(TRANSACTION_RECORD_TYPES, data)
    transactional_id: str = key.transactional_id
    return transactional_id


def encode_value(txn: TransactionMetadata) -> bytes:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(txn.partitions):
        by_topic[topic].append(partition)
    value = tlv.TransactionLogValue(
        producer_id=txn.producer_id,
        producer_epoch=txn.producer_epoch,
        transaction_timeout_ms=txn.timeout_ms,
        transaction_status=txn.state.id,
        transaction_partitions=None
        if txn.state is TxnState.EMPTY
        else [tlv.PartitionsSchema(topic=t, partition_ids=ps) for t, ps in by_topic.items()],
        transaction_last_update_timestamp_ms=txn.last_update_ms,
        transaction_start_timestamp_ms=txn.start_ms,
    )
    return serde.serialize_value(value, VALUE_VERSION)


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    """Raises ValueError if the value does not decode."""
    _, value = serde.deserialize_value(TRANSACTION_RECORD_TYPES, KEY_VERSION, data)
    state = TxnState.from_id(value.transaction_status)
    partitions: set[tuple[str, int]] = set()
    if state is not TxnState.EMPTY:
        for p in value.transaction_partitions or []:
            partitions.update((p.topic, i) for i in p.partition_ids)
    return TransactionMetadata(
        transactional_id,
        value.producer_id,
        producer_epoch=value.producer_epoch,
        previous_producer_id=value.previous_producer_id,
        timeout_ms=value.transaction_timeout_ms,
        state=state,
        partitions=partitions,
        start_ms=value.transaction_start_timestamp_ms,
        last_update_ms=value.transaction_last_update_timestamp_ms,
    )
