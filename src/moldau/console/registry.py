"""The console's door to a schema registry (Confluent's REST API, Moldau's or Confluent's),
and the decoding of registry-framed keys and values for the message browser.

Calls block (urllib); the web layer runs them in threads. A framed payload is magic byte 0,
the 4-byte big-endian schema id, then the encoded data (for Protobuf, first the indexes of
the message type in its file). Schemas by id are cached: an id never changes meaning.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fastavro
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

from moldau.console.cluster import ConsoleError
from moldau.console.model import Decoded, SchemaVersion, SubjectInfo

TIMEOUT_S = 15.0
_MAGIC = 0
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def framed_id(data: bytes | None) -> int | None:
    """The schema id of a registry-framed payload, or None when it is not framed."""
    if data is None or len(data) < 5 or data[0] != _MAGIC:
        return None
    return int.from_bytes(data[1:5], "big")


@dataclass(frozen=True)
class _Writer:
    """A schema as the decoder needs it: its type and a function from body to JSON-able."""

    schema_type: str
    subjects: tuple[tuple[str, int], ...]  # (subject, version) pairs that use the id
    parsed: Any


class Registry:
    """One registry URL; `auth` is `user:password` for HTTP basic authentication."""

    def __init__(self, url: str, auth: str | None = None) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Accept": _CONTENT_TYPE}
        if auth:
            token = base64.b64encode(auth.encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self._writers: dict[int, _Writer] = {}
        self._lock = threading.Lock()

    def _get(self, path: str) -> Any:
        request = urllib.request.Request(self.url + path, headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read())["message"]
            except (ValueError, KeyError, TypeError):
                message = exc.reason
            raise ConsoleError(f"schema registry {exc.code}: {message}") from None
        except (OSError, ValueError) as exc:
            raise ConsoleError(f"schema registry at {self.url}: {exc}") from None

    @staticmethod
    def _quote(subject: str) -> str:
        return urllib.parse.quote(subject, safe="")

    # --- subjects and versions ----------------------------------------------------------

    def subjects(self) -> list[SubjectInfo]:
        """Every subject with its latest version and compatibility level."""
        default = self._get("/config").get("compatibilityLevel", "BACKWARD")
        found = []
        for subject in sorted(self._get("/subjects")):
            latest = self.version(subject, "latest")
            level = self._get(f"/config/{self._quote(subject)}?defaultToGlobal=true")
            found.append(SubjectInfo(subject, latest, level.get("compatibilityLevel", default)))
        return found

    def versions(self, subject: str) -> list[int]:
        return sorted(self._get(f"/subjects/{self._quote(subject)}/versions"))

    def version(self, subject: str, version: int | str) -> SchemaVersion:
        got = self._get(f"/subjects/{self._quote(subject)}/versions/{version}")
        return SchemaVersion(
            subject=got["subject"],
            version=got["version"],
            schema_id=got["id"],
            schema_type=got.get("schemaType", "AVRO"),
            schema=got["schema"],
            references=tuple(
                (r["name"], r["subject"], r["version"]) for r in got.get("references") or ()
            ),
        )

    # --- decoding -------------------------------------------------------------------------

    def decode(self, data: bytes | None, preferred_subject: str) -> Decoded | None:
        """The payload decoded with its writer's schema as pretty JSON; None when it is not
        framed. A framed payload that cannot be decoded says why in `error`."""
        schema_id = framed_id(data)
        if schema_id is None or data is None:
            return None
        try:
            writer = self._writer(schema_id)
        except ConsoleError as exc:
            return Decoded(schema_id, None, None, "", str(exc))
        subject = next((s for s in writer.subjects if s[0] == preferred_subject), None)
        subject = subject or (writer.subjects[0] if writer.subjects else None)
        try:
            value = _decode(writer, data[5:])
        except Exception as exc:  # whatever the decoding library raises on bad bytes
            return Decoded(schema_id, subject, writer.schema_type, "", f"cannot decode: {exc}")
        text = json.dumps(value, indent=2, ensure_ascii=False, default=_json_default)
        return Decoded(schema_id, subject, writer.schema_type, text)

    def _writer(self, schema_id: int) -> _Writer:
        with self._lock:
            cached = self._writers.get(schema_id)
        if cached is not None:
            return cached
        got = self._get(f"/schemas/ids/{schema_id}")
        schema_type = got.get("schemaType", "AVRO")
        subjects = tuple(
            (v["subject"], v["version"]) for v in self._get(f"/schemas/ids/{schema_id}/versions")
        )
        references = got.get("references") or []
        if schema_type == "AVRO":
            named: dict[str, Any] = {}
            for ref in references:
                text = self._get(self._ref_path(ref))["schema"]
                fastavro.parse_schema(json.loads(text), named_schemas=named)
            parsed: Any = fastavro.parse_schema(json.loads(got["schema"]), named_schemas=named)
        elif schema_type == "PROTOBUF":
            parsed = self._protobuf_pool(schema_id, references)
        else:
            parsed = None
        writer = _Writer(schema_type, subjects, parsed)
        with self._lock:
            self._writers[schema_id] = writer
        return writer

    def _ref_path(self, ref: Mapping[str, Any], serialized: bool = False) -> str:
        path = f"/subjects/{self._quote(ref['subject'])}/versions/{ref['version']}"
        return path + ("?format=serialized" if serialized else "")

    def _protobuf_pool(
        self, schema_id: int, references: list[Any]
    ) -> tuple[descriptor_pool.DescriptorPool, descriptor_pb2.FileDescriptorProto]:
        """A pool holding the schema's file, its references and the well-known imports."""
        pool = descriptor_pool.DescriptorPool()
        added: set[str] = set()

        def add(file: descriptor_pb2.FileDescriptorProto) -> None:
            for dependency in file.dependency:
                if dependency not in added and dependency.startswith("google/protobuf/"):
                    known = descriptor_pb2.FileDescriptorProto()
                    descriptor_pool.Default().FindFileByName(dependency).CopyToProto(known)
                    add(known)
            if file.name not in added:
                pool.Add(file)
                added.add(file.name)

        for ref in references:
            ref_file = _file(self._get(self._ref_path(ref, serialized=True))["schema"])
            ref_file.name = ref["name"]
            add(ref_file)
        file = _file(self._get(f"/schemas/ids/{schema_id}?format=serialized")["schema"])
        file.name = file.name or f"schema-{schema_id}.proto"
        add(file)
        return pool, file


def _file(serialized: str) -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto()
    file.ParseFromString(base64.b64decode(serialized))
    return file


def _decode(writer: _Writer, body: bytes) -> Any:
    if writer.schema_type == "AVRO":
        return fastavro.schemaless_reader(io.BytesIO(body), writer.parsed, None)
    if writer.schema_type == "PROTOBUF":
        pool, file = writer.parsed
        indexes, body = _message_indexes(body)
        message_type = file.message_type[indexes[0]]
        name = message_type.name
        for index in indexes[1:]:
            message_type = message_type.nested_type[index]
            name += "." + message_type.name
        full_name = f"{file.package}.{name}" if file.package else name
        cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))
        message = cls.FromString(body)
        return json_format.MessageToDict(message, preserving_proto_field_name=True)
    return json.loads(body)


def _message_indexes(body: bytes) -> tuple[list[int], bytes]:
    """Confluent's Protobuf framing: a zigzag varint count then that many zigzag varint
    indexes (a path through nested message types); a lone 0 means [0]."""
    position = 0

    def varint() -> int:
        nonlocal position
        shift = result = 0
        while True:
            byte = body[position]
            position += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    count = varint()
    indexes = [varint() for _ in range(count)] or [0]
    return indexes, body[position:]


def _json_default(value: Any) -> Any:
    """Avro's bytes, decimals, dates and times as JSON."""
    if isinstance(value, bytes):
        return value.hex(" ")
    return str(value)
