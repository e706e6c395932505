"""Schema-to-column rules and framing of `valueFormat`: no Spark, no broker."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from moldau.spark.serde import ValueFormat

pytestmark = pytest.mark.spark


def _avro(schema: dict) -> ValueFormat:
    return ValueFormat("avro", "http://unused", "s-value", 7, json.dumps(schema))


def test_avro_schema_maps_to_arrow_types():
    address = {"type": "record", "name": "A", "fields": [{"name": "city", "type": "string"}]}
    schema = {
        "type": "record",
        "name": "R",
        "namespace": "n",
        "fields": [
            {"name": "i", "type": "int"},
            {"name": "l", "type": ["null", "long"]},
            {"name": "a", "type": address},
            {"name": "again", "type": "A"},  # a named type used twice
            {"name": "m", "type": {"type": "map", "values": "double"}},
            {"name": "xs", "type": {"type": "array", "items": "string"}},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
            {"name": "d", "type": {"type": "int", "logicalType": "date"}},
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {
                "name": "dec",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3},
            },
        ],
    }
    got = _avro(schema).arrow_type
    city = pa.struct([pa.field("city", pa.string(), False)])
    assert [(f.name, f.type, f.nullable) for f in got] == [
        ("i", pa.int32(), False),
        ("l", pa.int64(), True),
        ("a", city, False),
        ("again", city, False),
        ("m", pa.map_(pa.string(), pa.field("value", pa.float64(), False)), False),
        ("xs", pa.list_(pa.field("element", pa.string(), False)), False),
        ("e", pa.string(), False),
        ("d", pa.date32(), False),
        ("t", pa.timestamp("us", tz="UTC"), False),
        ("dec", pa.decimal128(9, 3), False),
    ]


def test_avro_union_of_two_types_is_refused_with_a_message():
    schema = {"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "string"]}]}
    with pytest.raises(ValueError, match="unions"):
        _ = _avro(schema).arrow_type


def test_json_values_round_trip_and_bad_framing_names_the_offset():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}
    fmt = ValueFormat("json", "http://unused", "s-value", 3, json.dumps(schema))
    rows = pa.array([{"n": 1, "s": "a"}, None, {"n": None, "s": "b"}], fmt.arrow_type)
    framed = fmt.encode(rows)
    assert framed[0].as_py()[:5] == b"\x00\x00\x00\x00\x03"
    assert fmt.decode(framed, pa.array([0, 1, 2]), "t-0").to_pylist() == rows.to_pylist()
    with pytest.raises(ValueError, match="t-0 offset 9: value lacks"):
        fmt.decode(pa.array([b"{}"]), pa.array([9]), "t-0")
