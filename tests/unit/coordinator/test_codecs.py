"""`__consumer_offsets` record codecs, consumer protocol topics and group partitioning."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.coordinator.group import partition_for_group
from moldau.coordinator.group.consumer_protocol import assignment_partitions, subscription_topics
from moldau.coordinator.group.offsets_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetAndMetadata,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from moldau.coordinator.group.partitioning import java_string_hash

from .conftest import subscription


def s16(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(text.encode())) + text.encode()


def b32(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def test_keys_are_kafka_bytes():
    assert encode_offset_key("g", "t", 3) == b"\x00\x01" + s16("g") + s16("t") + b"\x00\x00\x00\x03"
    assert encode_group_key("g") == b"\x00\x02" + s16("g")
    assert decode_key(b"\x00\x00" + s16("g") + s16("t") + b"\x00\x00\x00\x07") == OffsetKey(
        "g", "t", 7
    )
    assert decode_key(encode_group_key("grp")) == GroupMetadataKey("grp")
    assert decode_key(b"\x00\x03" + s16("g")) is None  # not a classic group record


def test_offset_values_round_trip():
    v3 = OffsetAndMetadata(42, 7, "meta", 1_700_000_000_000)
    assert encode_offset_value(v3) == (
        b"\x00\x03"
        + struct.pack(">qi", 42, 7)
        + s16("meta")
        + struct.pack(">q", v3.commit_timestamp)
    )
    assert decode_offset_value(encode_offset_value(v3)) == v3
    v1 = OffsetAndMetadata(1, -1, "", 10, 20)
    assert encode_offset_value(v1)[:2] == b"\x00\x01"
    assert decode_offset_value(encode_offset_value(v1)) == v1


def test_decode_old_and_flexible_offset_values():
    v0 = b"\x00\x00" + struct.pack(">q", 5) + s16("m") + struct.pack(">q", 99)
    assert decode_offset_value(v0) == OffsetAndMetadata(5, -1, "m", 99)
    v4 = b"\x00\x04" + struct.pack(">qi", 5, 2) + b"\x02m" + struct.pack(">q", 99) + b"\x00"
    assert decode_offset_value(v4) == OffsetAndMetadata(5, 2, "m", 99)
    with pytest.raises(ValueError):
        decode_offset_value(v0[:-1])


def test_group_values_round_trip():
    value = GroupMetadataValue(
        "consumer",
        3,
        "range",
        "m1",
        123,
        (
            MemberMetadataValue("m1", "i1", "c1", "/h1", 30_000, 10_000, b"sub", b"asg"),
            MemberMetadataValue("m2", None, "c2", "/h2", 60_000, 45_000, b"", b""),
        ),
    )
    assert decode_group_value(encode_group_value(value)) == value
    empty = GroupMetadataValue("consumer", 4, None, None, 456, ())
    assert decode_group_value(encode_group_value(empty)) == empty


def test_decode_group_value_v0():
    data = (
        b"\x00\x00"
        + s16("consumer")
        + struct.pack(">i", 5)
        + s16("range")
        + s16("m1")
        + struct.pack(">i", 1)
        + s16("m1")
        + s16("c1")
        + s16("/h")
        + struct.pack(">i", 10_000)
        + b32(b"sub")
        + b32(b"asg")
    )
    assert decode_group_value(data) == GroupMetadataValue(
        "consumer",
        5,
        "range",
        "m1",
        -1,
        (MemberMetadataValue("m1", None, "c1", "/h", 10_000, 10_000, b"sub", b"asg"),),
    )


def test_decode_flexible_and_future_group_values():
    # member: id "m1", null instance id, client "c1", host "/h", timeouts, blobs, no tags
    member = b"\x03m1\x00\x03c1\x03/h" + struct.pack(">ii", 30_000, 10_000) + b"\x04sub\x04asg\x00"
    unknown_tag = b"\x01\x05\x01z"  # one tagged field this version does not know: skipped
    v4 = (
        b"\x00\x04\x09consumer"
        + struct.pack(">i", 2)
        + b"\x06range\x03m1"
        + struct.pack(">q", 77)
        + b"\x02"  # one member
        + member
        + unknown_tag
    )
    expected = GroupMetadataValue(
        "consumer",
        2,
        "range",
        "m1",
        77,
        (MemberMetadataValue("m1", None, "c1", "/h", 30_000, 10_000, b"sub", b"asg"),),
    )
    assert decode_group_value(v4) == expected
    # KIP-915: a later version only adds tagged fields, so it is read as the newest we know
    assert decode_group_value(b"\x00\x05" + v4[2:]) == expected
    v5 = b"\x00\x05" + struct.pack(">qi", 5, 2) + b"\x02m" + struct.pack(">q", 99) + b"\x00"
    assert decode_offset_value(v5) == OffsetAndMetadata(5, 2, "m", 99)
    with pytest.raises(ValueError):
        decode_group_value(b"\xff\xff" + v4[2:])


def test_subscription_and_assignment_topics():
    assert subscription_topics(subscription("a", "b")) == ["a", "b"]
    assert subscription_topics(subscription("a", version=1)) == ["a"]
    v3 = (
        struct.pack(">hi", 3, 1)
        + s16("x")
        + b32(b"ud")
        + struct.pack(">i", 1)
        + s16("x")
        + struct.pack(">ii", 1, 0)
        + struct.pack(">i", 4)
        + s16("rack")
    )
    assert subscription_topics(v3) == ["x"]
    assignment = (
        struct.pack(">hi", 0, 2)
        + s16("a")
        + struct.pack(">iii", 2, 0, 1)
        + s16("b")
        + struct.pack(">ii", 1, 5)
        + struct.pack(">i", -1)
    )
    assert assignment_partitions(assignment) == {"a": [0, 1], "b": [5]}
    with pytest.raises(ValueError):
        subscription_topics(b"\x00\x00\x7f\xff\xff\xff")


def java_hash_closed_form(text: str) -> int:
    """s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as a signed 32-bit int."""
    units = struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be"))
    total = sum(u * 31 ** (len(units) - 1 - i) for i, u in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


def test_partition_for_group_matches_java():
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("ab") == 97 * 31 + 98
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # a surrogate pair
    assert partition_for_group("a") == 97 % 50
    assert partition_for_group("hello") == 22
    assert partition_for_group("polygenelubricants") == 0  # Kafka's abs: MIN_VALUE & 0x7fffffff
    assert partition_for_group("hello", 7) == 99162322 % 7


@given(st.text(max_size=40))
def test_java_hash_matches_closed_form(text):
    assert java_string_hash(text) == java_hash_closed_form(text)
    assert partition_for_group(text) == (java_hash_closed_form(text) & 0x7FFFFFFF) % 50


def test_newer_consumer_protocol_versions_are_read_with_the_newest_layout():
    v9 = (
        struct.pack(">hi", 9, 1)
        + s16("x")
        + b32(b"")
        + struct.pack(">i", 0)  # no owned partitions
        + struct.pack(">i", 3)  # generation
        + s16("rack")
        + b"fields of v4-v9"
    )
    assert subscription_topics(v9) == ["x"]
    with pytest.raises(ValueError):
        subscription_topics(b"\xff\xff" + v9[2:])
