"""Typed `value` columns through the schema registry: Confluent-framed Avro and JSON Schema.

A framed value is magic byte 0, the 4-byte big-endian schema id, then the encoded data. On
read, the driver fetches the subject's latest schema once and derives the column's type
from it; tasks decode each value with its writer's schema (fetched once per id and task
process) resolved to that latest schema, so records of older versions get the fields added
since with their defaults. On write, values are encoded with the latest schema and framed
with its id.
"""

from __future__ import annotations

import io
import json
import struct
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import fastavro
import pyarrow as pa

FORMATS = ("avro", "json")
MAGIC = 0
_HEADER = struct.Struct(">bI")
_TIMEOUT_S = 30.0

_AVRO_PRIMITIVES = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_AVRO_LOGICAL = {
    "date": pa.date32(),
    "timestamp-millis": pa.timestamp("us", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
}
_JSON_PRIMITIVES = {
    "string": pa.string(),
    "integer": pa.int64(),
    "number": pa.float64(),
    "boolean": pa.bool_(),
}


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as answer:
        return json.loads(answer.read())


def latest_schema(registry_url: str, subject: str) -> tuple[int, str, str]:
    """(id, schema text, schema type) of the subject's latest version."""
    path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/latest"
    got = _get(registry_url.rstrip("/") + path)
    return got["id"], got["schema"], got.get("schemaType", "AVRO")


@lru_cache(maxsize=256)
def _writer_schema(registry_url: str, schema_id: int) -> Any:
    """A writer's parsed Avro schema, fetched once per id (ids never change meaning)."""
    got = _get(f"{registry_url.rstrip('/')}/schemas/ids/{schema_id}")
    return fastavro.parse_schema(json.loads(got["schema"]))


def _avro_type(schema: Any, named: dict[str, pa.DataType]) -> tuple[pa.DataType, bool]:
    """Arrow type of an Avro schema and whether it is nullable (a union with null)."""
    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        if len(branches) != 1:
            raise ValueError(f"Avro unions other than [null, T] have no column type: {schema}")
        return _avro_type(branches[0], named)[0], len(branches) < len(schema)
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[schema], False
        return named[schema], False
    kind, logical = schema["type"], schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return pa.decimal128(schema["precision"], schema.get("scale", 0)), False
    if logical in _AVRO_LOGICAL:
        return _AVRO_LOGICAL[logical], False
    if kind == "record":
        fields = [pa.field(f["name"], *_avro_type(f["type"], named)) for f in schema["fields"]]
        named[schema["name"]] = pa.struct(fields)  # parse_schema made the name full
        return named[schema["name"]], False
    if kind == "array":
        return pa.list_(pa.field("element", *_avro_type(schema["items"], named))), False
    if kind == "map":
        return pa.map_(pa.string(), pa.field("value", *_avro_type(schema["values"], named))), False
    if kind == "enum":
        return pa.string(), False
    if kind == "fixed":
        return pa.binary(), False
    return _avro_type(kind, named)


def _json_type(schema: dict[str, Any]) -> tuple[pa.DataType, bool]:
    """Arrow type of a JSON Schema: `properties` become struct fields, every one nullable."""
    kinds = schema.get("type", "object")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    nullable = "null" in kinds
    kinds = [k for k in kinds if k != "null"]
    if len(kinds) != 1:
        raise ValueError(f"JSON Schema types other than [null, T] have no column type: {kinds}")
    kind = kinds[0]
    if kind == "object":
        props = schema.get("properties", {})
        return pa.struct([pa.field(n, _json_type(s)[0]) for n, s in props.items()]), nullable
    if kind == "array":
        return pa.list_(_json_type(schema.get("items", {"type": "string"}))[0]), nullable
    if kind not in _JSON_PRIMITIVES:
        raise ValueError(f"JSON Schema type {kind!r} has no column type")
    return _JSON_PRIMITIVES[kind], nullable


@dataclass(frozen=True)
class ValueFormat:
    """The `valueFormat`, `schemaRegistryUrl` and `subject` options, resolved on the driver.

    Holds the latest schema (pickled into tasks), so every task decodes to the same type.
    """

    kind: str
    registry_url: str
    subject: str
    schema_id: int
    schema_text: str

    @classmethod
    def resolve(cls, kind: str, registry_url: str, subject: str) -> ValueFormat:
        if kind not in FORMATS:
            raise ValueError(f"option valueFormat must be one of {FORMATS}, got {kind!r}")
        schema_id, text, schema_type = latest_schema(registry_url, subject)
        if schema_type != ("AVRO" if kind == "avro" else "JSON"):
            raise ValueError(f"subject {subject} holds {schema_type} schemas, not {kind}")
        return cls(kind, registry_url, subject, schema_id, text)

    @property
    def arrow_type(self) -> pa.DataType:
        schema = json.loads(self.schema_text)
        if self.kind == "avro":
            return _avro_type(fastavro.parse_schema(schema), {})[0]
        return _json_type(schema)[0]

    def decode(self, values: pa.Array, offsets: pa.Array, where: str) -> pa.Array:
        """The framed values of one batch as a column of `arrow_type` (null stays null)."""
        reader = (
            fastavro.parse_schema(json.loads(self.schema_text)) if self.kind == "avro" else None
        )
        rows: list[Any] = []
        for value, offset in zip(values.to_pylist(), offsets.to_pylist(), strict=True):
            if value is None:
                rows.append(None)
                continue
            if len(value) < _HEADER.size or value[0] != MAGIC:
                raise ValueError(f"{where} offset {offset}: value lacks the registry's framing")
            schema_id = _HEADER.unpack_from(value)[1]
            if reader is None:
                rows.append(json.loads(value[_HEADER.size :]))
            else:
                writer = _writer_schema(self.registry_url, schema_id)
                body = io.BytesIO(value[_HEADER.size :])
                rows.append(fastavro.schemaless_reader(body, writer, reader))
        return pa.array(rows, self.arrow_type)

    def encode(self, values: pa.Array) -> pa.Array:
        """Rows of a struct column as framed values of the latest schema."""
        header = _HEADER.pack(MAGIC, self.schema_id)
        rows = values.to_pylist(maps_as_pydicts="strict")
        if self.kind == "json":
            return pa.array(
                [None if v is None else header + json.dumps(v, default=str).encode() for v in rows],
                pa.binary(),
            )
        schema = fastavro.parse_schema(json.loads(self.schema_text))
        out: list[bytes | None] = []
        for row in rows:
            if row is None:
                out.append(None)
                continue
            buf = io.BytesIO(header)
            buf.seek(0, io.SEEK_END)
            fastavro.schemaless_writer(buf, schema, row)
            out.append(buf.getvalue())
        return pa.array(out, pa.binary())


def value_format(options: dict[str, str], topic: str | None) -> ValueFormat | None:
    """From lower-cased options: None unless `valueFormat` is given."""
    kind = options.get("valueformat")
    if kind is None:
        return None
    url = options.get("schemaregistryurl")
    if not url:
        raise ValueError("option valueFormat needs schemaRegistryUrl")
    subject = options.get("subject") or (f"{topic}-value" if topic else None)
    if subject is None:
        raise ValueError("option valueFormat needs subject unless one topic is named")
    return ValueFormat.resolve(kind.strip().lower(), url, subject)


def decode_batches(
    batches: Iterator[pa.RecordBatch], fmt: ValueFormat, where: str
) -> Iterator[pa.RecordBatch]:
    """The batches with their `value` column decoded."""
    for batch in batches:
        i = batch.schema.get_field_index("value")
        column = fmt.decode(batch.column(i), batch.column("offset"), where)
        yield batch.set_column(i, pa.field("value", column.type), column)


def encode_batches(batches: Iterator[pa.RecordBatch], fmt: ValueFormat) -> Iterator[pa.RecordBatch]:
    """The batches with their struct `value` column encoded and framed."""
    for batch in batches:
        i = batch.schema.get_field_index("value")
        if i < 0:
            raise ValueError("the DataFrame to write needs a value column")
        yield batch.set_column(i, pa.field("value", pa.binary()), fmt.encode(batch.column(i)))
