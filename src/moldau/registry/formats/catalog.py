"""The formats by Confluent's `schemaType` names (AVRO when a request names none)."""

from __future__ import annotations

from moldau.registry.formats import SchemaFormat
from moldau.registry.formats.avro import AvroFormat
from moldau.registry.formats.json_schema import JsonSchemaFormat
from moldau.registry.formats.protobuf import ProtobufFormat

FORMATS: dict[str, SchemaFormat] = {
    "AVRO": AvroFormat(),
    "JSON": JsonSchemaFormat(),
    "PROTOBUF": ProtobufFormat(),
}
