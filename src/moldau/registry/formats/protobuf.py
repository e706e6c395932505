"""Protobuf schemas: .proto text (proto2, proto3) or a base64 serialized FileDescriptorProto,
the form confluent-kafka's ProtobufSerializer registers.

`protobuf` has no .proto parser, so text goes through protoc itself, as grpcio-tools ships
it (Google's compiler, run in-process): it parses, resolves every name and import and
validates the whole file, and both forms end up as one FileDescriptorProto. Descriptors
given in base64 are validated by the same compiler (`--descriptor_set_in`). The compiler
reads files, so `_compile` writes the schema and its references to a private temporary
directory: the one IO of this module. The compatibility rules are Confluent's for Protobuf
("Protobuf compatibility rules" in Confluent's docs and Robert Yokota's "Understanding
Protobuf Compatibility"), written here because no library has them.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import grpc_tools
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from grpc_tools import protoc

from moldau.registry.formats import InvalidSchemaError, ParsedSchema

Field = descriptor_pb2.FieldDescriptorProto
_WELL_KNOWN = str(Path(grpc_tools.__file__).parent / "_proto")
_MAIN = "moldau_schema.proto"
_BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
_compiler_lock = threading.Lock()  # protoc's in-process entry point is not reentrant

# Scalar types whose encodings read each other (the Protobuf language guide's "Updating A
# Message Type"; Confluent's FIELD_SCALAR_KIND_CHANGED allows these).
_SCALAR_GROUPS = (
    {"int32", "uint32", "int64", "uint64", "bool"},
    {"sint32", "sint64"},
    {"string", "bytes"},
    {"fixed32", "sfixed32"},
    {"fixed64", "sfixed64"},
)


def _type_name(field: descriptor_pb2.FieldDescriptorProto) -> str:
    return Field.Type.Name(field.type).removeprefix("TYPE_").lower()


class ProtobufSchema:
    """A compiled .proto file: its FileDescriptorProto (imports compiled alongside)."""

    schema_type = "PROTOBUF"

    def __init__(self, file: descriptor_pb2.FileDescriptorProto) -> None:
        self.file = file

    def canonical(self) -> str:
        """.proto text printed from the descriptor, types fully qualified: the same for the
        text and the base64 descriptor of one schema, whatever its spacing and comments."""
        return _Printer(self.file, sort=False).text()

    def normalized(self) -> str:
        """The canonical text with imports, options, types (by name), fields and enum values
        (by number) sorted: declaration order carries no meaning on the wire."""
        return _Printer(self.file, sort=True).text()

    def serialized(self) -> str:
        """Base64 of the FileDescriptorProto: Confluent's `format=serialized` form, which
        confluent-kafka's Protobuf deserializer asks for when it fetches a writer schema."""
        return base64.standard_b64encode(self.file.SerializeToString()).decode("ascii")

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ProtobufSchema):
            return [f"cannot read {writer.schema_type} data with a PROTOBUF schema"]
        return _compare(self.file, writer.file)


class ProtobufFormat:
    """Protobuf: a reference is an import, named by its path ("acme/address.proto");
    google/protobuf/*.proto are known without references, as in Confluent's registry."""

    name = "PROTOBUF"

    def parse(self, text: str, references: Mapping[str, str]) -> ProtobufSchema:
        if not text.strip():
            raise InvalidSchemaError("empty Protobuf schema")
        sources: dict[str, str] = {}
        descriptors: list[descriptor_pb2.FileDescriptorProto] = []
        for ref_name, ref_text in references.items():
            described = _descriptor(ref_text)
            if described is None:
                sources[ref_name] = ref_text
            else:
                described.name = ref_name
                descriptors.append(described)
        main = _descriptor(text)
        if main is None:
            sources[_MAIN] = text
            name = _MAIN
        else:
            name = main.name or _MAIN
            main.name = name
            descriptors.append(main)
        compiled = _compile(name, sources, descriptors)
        compiled.name = ""  # the file's name is the registry's, not part of the schema
        return ProtobufSchema(compiled)


def _descriptor(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The FileDescriptorProto a base64 text holds; None when the text is .proto source."""
    stripped = text.strip()
    if not _BASE64.match(stripped):
        return None
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(stripped))
    except (binascii.Error, DecodeError, ValueError):
        return None


def _compile(
    name: str, sources: Mapping[str, str], descriptors: list[descriptor_pb2.FileDescriptorProto]
) -> descriptor_pb2.FileDescriptorProto:
    with tempfile.TemporaryDirectory(prefix="moldau-proto-") as work:
        root = Path(work, "src")
        for path, source in sources.items():
            target = (root / path).resolve()
            if not target.is_relative_to(root.resolve()):
                raise InvalidSchemaError(f"invalid reference name {path!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(source, encoding="utf-8")
        root.mkdir(exist_ok=True)
        args = ["protoc", f"-I{root}", f"-I{_WELL_KNOWN}", "--include_imports"]
        if descriptors:
            given = Path(work, "given.pb")
            given.write_bytes(
                descriptor_pb2.FileDescriptorSet(file=descriptors).SerializeToString()
            )
            args.append(f"--descriptor_set_in={given}")
        out = Path(work, "out.pb")
        args += [f"--descriptor_set_out={out}", name]
        with _compiler_lock:
            status = protoc.main(args)
        if status != 0:
            raise InvalidSchemaError(f"invalid Protobuf schema: {_compiler_error(args, work)}")
        compiled = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return next(f for f in compiled.file if f.name == name)


def _compiler_error(args: list[str], work: str) -> str:
    """protoc prints its errors on the process's stderr: run it again where they can be read
    (only when a schema is refused)."""
    run = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", *args[1:]],
        capture_output=True,
        text=True,
        cwd=Path(work, "src"),
        timeout=60,
        check=False,
    )
    prefix = str(Path(work, "src")) + os.sep
    lines = [line.replace(prefix, "") for line in run.stderr.splitlines() if line.strip()]
    return "; ".join(lines) or "protoc refused it"


class _Printer:
    """.proto text from a FileDescriptorProto (the grammar of the Protobuf language specs)."""

    def __init__(self, file: descriptor_pb2.FileDescriptorProto, *, sort: bool) -> None:
        self.file = file
        self.sort = sort
        self.lines: list[str] = []

    def text(self) -> str:
        f = self.file
        self.lines.append(f'syntax = "{f.syntax or "proto2"}";')
        if f.package:
            self.lines.append(f"package {f.package};")
        imports = sorted(f.dependency) if self.sort else list(f.dependency)
        self.lines += [f'import "{d}";' for d in imports]
        self._options(f.options, "")
        for kind, item in self._types(f.message_type, f.enum_type):
            self._message(item, "") if kind == "message" else self._enum(item, "")
        for service in self._ordered(f.service):
            self.lines.append(f"service {service.name} {{")
            self._options(service.options, "  ")
            for m in self._ordered(service.method):
                stream_in = "stream " if m.client_streaming else ""
                stream_out = "stream " if m.server_streaming else ""
                self.lines.append(
                    f"  rpc {m.name}({stream_in}{m.input_type}) returns ({stream_out}{m.output_type});"
                )
            self.lines.append("}")
        return "\n".join(self.lines) + "\n"

    def _ordered(self, items: Iterable[Any]) -> list[Any]:
        return sorted(items, key=lambda i: i.name) if self.sort else list(items)

    def _types(self, messages: Iterable[Any], enums: Iterable[Any]) -> list[tuple[str, Any]]:
        """Nested messages (map entries are printed as map fields) and enums."""
        typed = [("message", m) for m in messages if not m.options.map_entry]
        typed += [("enum", e) for e in enums]
        return sorted(typed, key=lambda t: t[1].name) if self.sort else typed

    def _options(self, options: object, indent: str) -> None:
        fields = options.ListFields()  # type: ignore[attr-defined]
        rendered = [f"{indent}option {d.name} = {_value(d, v)};" for d, v in fields]
        self.lines += sorted(rendered) if self.sort else rendered

    def _message(self, message: descriptor_pb2.DescriptorProto, indent: str) -> None:
        inner = indent + "  "
        self.lines.append(f"{indent}message {message.name} {{")
        self._options(message.options, inner)
        entries = {m.name: m for m in message.nested_type if m.options.map_entry}
        fields = sorted(message.field, key=lambda x: x.number) if self.sort else list(message.field)
        printed: set[int] = set()
        for field in fields:
            real_oneof = field.HasField("oneof_index") and not field.proto3_optional
            if not real_oneof:
                self.lines.append(inner + self._field(field, entries))
            elif field.oneof_index not in printed:
                printed.add(field.oneof_index)
                self.lines.append(f"{inner}oneof {message.oneof_decl[field.oneof_index].name} {{")
                members = [
                    x
                    for x in fields
                    if x.HasField("oneof_index") and x.oneof_index == field.oneof_index
                ]
                self.lines += [inner + "  " + self._field(x, entries) for x in members]
                self.lines.append(f"{inner}}}")
        for keyword, ranges in (
            ("extensions", message.extension_range),
            ("reserved", message.reserved_range),
        ):
            for span in ranges:  # end exclusive; 2^29 is the largest field number + 1
                end = "max" if span.end == 1 << 29 else str(span.end - 1)
                text = str(span.start) if end == str(span.start) else f"{span.start} to {end}"
                self.lines.append(f"{inner}{keyword} {text};")
        if message.reserved_name:
            names = sorted(message.reserved_name) if self.sort else message.reserved_name
            self.lines.append(f"{inner}reserved {', '.join(json.dumps(n) for n in names)};")
        for kind, item in self._types(message.nested_type, message.enum_type):
            self._message(item, inner) if kind == "message" else self._enum(item, inner)
        self.lines.append(f"{indent}}}")

    def _field(
        self,
        field: descriptor_pb2.FieldDescriptorProto,
        entries: dict[str, descriptor_pb2.DescriptorProto],
    ) -> str:
        entry = (
            entries.get(field.type_name.rpartition(".")[2])
            if field.label == Field.LABEL_REPEATED
            else None
        )
        if entry is not None and field.type == Field.TYPE_MESSAGE:
            key, value = entry.field[0], entry.field[1]
            kind = f"map<{_field_type(key)}, {_field_type(value)}>"
        else:
            label = ""
            if field.label == Field.LABEL_REPEATED:
                label = "repeated "
            elif field.label == Field.LABEL_REQUIRED:
                label = "required "
            elif field.proto3_optional or self.file.syntax in ("", "proto2"):
                label = "optional "
            kind = label + _field_type(field)
        options = [f"{d.name} = {_value(d, v)}" for d, v in field.options.ListFields()]
        if field.HasField("default_value"):
            quoted = field.type in (Field.TYPE_STRING, Field.TYPE_BYTES)
            options.insert(
                0, f"default = {json.dumps(field.default_value) if quoted else field.default_value}"
            )
        suffix = f" [{', '.join(sorted(options) if self.sort else options)}]" if options else ""
        return f"{kind} {field.name} = {field.number}{suffix};"

    def _enum(self, enum: descriptor_pb2.EnumDescriptorProto, indent: str) -> None:
        inner = indent + "  "
        self.lines.append(f"{indent}enum {enum.name} {{")
        self._options(enum.options, inner)
        values = sorted(enum.value, key=lambda v: (v.number, v.name)) if self.sort else enum.value
        for value in values:
            options = [f"{d.name} = {_value(d, v)}" for d, v in value.options.ListFields()]
            suffix = f" [{', '.join(options)}]" if options else ""
            self.lines.append(f"{inner}{value.name} = {value.number}{suffix};")
        for reserved in enum.reserved_range:
            span = (
                str(reserved.start)
                if reserved.end == reserved.start
                else f"{reserved.start} to {reserved.end}"
            )
            self.lines.append(f"{inner}reserved {span};")
        self.lines.append(f"{indent}}}")


def _field_type(field: descriptor_pb2.FieldDescriptorProto) -> str:
    if field.type in (Field.TYPE_MESSAGE, Field.TYPE_ENUM, Field.TYPE_GROUP):
        return field.type_name
    return _type_name(field)


def _value(descriptor: object, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    enum_type = getattr(descriptor, "enum_type", None)
    if enum_type is not None and isinstance(value, int):
        return str(enum_type.values_by_number[value].name)
    return str(value)


def _messages(
    file: descriptor_pb2.FileDescriptorProto,
) -> dict[str, descriptor_pb2.DescriptorProto]:
    """Every message of the file (nested ones too, map entries not) by name within the package."""
    found: dict[str, descriptor_pb2.DescriptorProto] = {}

    def visit(messages: list[descriptor_pb2.DescriptorProto], prefix: str) -> None:
        for message in messages:
            if not message.options.map_entry:
                found[prefix + message.name] = message
                visit(list(message.nested_type), f"{prefix}{message.name}.")

    visit(list(file.message_type), "")
    return found


def _kind(
    field: descriptor_pb2.FieldDescriptorProto,
    package: str,
    message: descriptor_pb2.DescriptorProto,
) -> str:
    """A field's type as compared: scalar name, or a named type relative to the package, or
    a map (whose entry is compared by its key and value types)."""
    if field.type in (Field.TYPE_MESSAGE, Field.TYPE_GROUP, Field.TYPE_ENUM):
        name = field.type_name.removeprefix(f".{package}." if package else ".")
        if field.label == Field.LABEL_REPEATED and field.type == Field.TYPE_MESSAGE:
            for entry in message.nested_type:
                if entry.options.map_entry and field.type_name.endswith("." + entry.name):
                    key, value = (_kind(f, package, entry) for f in entry.field)
                    return f"map<{key}, {value}>"
        return name
    return _type_name(field)


def _compatible_kinds(new: str, old: str) -> bool:
    """Same type, scalars of one wire-compatible group, or maps whose keys and values are."""
    if new.startswith("map<") and old.startswith("map<"):
        new_parts, old_parts = new[4:-1].split(", ", 1), old[4:-1].split(", ", 1)
        return all(_compatible_kinds(n, o) for n, o in zip(new_parts, old_parts, strict=True))
    return new == old or any(new in group and old in group for group in _SCALAR_GROUPS)


def _compare(
    reader: descriptor_pb2.FileDescriptorProto, writer: descriptor_pb2.FileDescriptorProto
) -> list[str]:
    """Why `reader` cannot read what `writer` wrote, by Confluent's Protobuf rules: the
    package may not change, messages may not be removed, fields are matched by number and
    may change name but not kind, named type or cardinality (scalars only within the wire
    compatible groups), required fields may be neither added nor removed, a oneof may not
    lose a field nor take in several existing fields or one into an existing oneof.
    Adding messages, enums, fields, oneofs and enum values is allowed, and so is changing
    the syntax or removing optional fields. Imported files are compared through the names
    of their types only."""
    errors: list[str] = []
    if reader.package != writer.package:
        errors.append(f"PACKAGE_CHANGED: {writer.package!r} -> {reader.package!r}")
    r_messages, w_messages = _messages(reader), _messages(writer)
    for name, old in w_messages.items():
        new = r_messages.get(name)
        if new is None:
            errors.append(f"MESSAGE_REMOVED: {name}")
            continue
        errors += [
            f"{e} in {name}" for e in _compare_message(new, reader.package, old, writer.package)
        ]
    return errors


def _compare_message(
    reader: descriptor_pb2.DescriptorProto,
    r_package: str,
    writer: descriptor_pb2.DescriptorProto,
    w_package: str,
) -> list[str]:
    errors: list[str] = []
    r_fields = {f.number: f for f in reader.field}
    w_fields = {f.number: f for f in writer.field}

    def oneof(
        field: descriptor_pb2.FieldDescriptorProto, message: descriptor_pb2.DescriptorProto
    ) -> str | None:
        real = field.HasField("oneof_index") and not field.proto3_optional
        return message.oneof_decl[field.oneof_index].name if real else None

    for number, old in w_fields.items():
        new = r_fields.get(number)
        if new is None:
            if old.label == Field.LABEL_REQUIRED:
                errors.append(f"REQUIRED_FIELD_REMOVED: {old.name} = {number}")
            elif oneof(old, writer) is not None:
                errors.append(f"ONEOF_FIELD_REMOVED: {old.name} = {number}")
            continue
        new_kind, old_kind = _kind(new, r_package, reader), _kind(old, w_package, writer)
        named = Field.TYPE_MESSAGE, Field.TYPE_GROUP, Field.TYPE_ENUM
        if (new.type in named) != (old.type in named) or (
            (new.type == Field.TYPE_ENUM) != (old.type == Field.TYPE_ENUM)
        ):
            errors.append(f"FIELD_KIND_CHANGED: field {number} {old_kind} -> {new_kind}")
        elif new.type in named and not _compatible_kinds(new_kind, old_kind):
            errors.append(f"FIELD_NAMED_TYPE_CHANGED: field {number} {old_kind} -> {new_kind}")
        elif not _compatible_kinds(new_kind, old_kind):
            errors.append(f"FIELD_SCALAR_KIND_CHANGED: field {number} {old_kind} -> {new_kind}")
        if (new.label == Field.LABEL_REPEATED) != (old.label == Field.LABEL_REPEATED):
            errors.append(f"FIELD_LABEL_CHANGED: field {number} repeated <-> singular")
        if old.label != Field.LABEL_REQUIRED and new.label == Field.LABEL_REQUIRED:
            errors.append(f"REQUIRED_FIELD_ADDED: {new.name} = {number}")
        if old.label == Field.LABEL_REQUIRED and new.label != Field.LABEL_REQUIRED:
            errors.append(f"REQUIRED_FIELD_REMOVED: {old.name} = {number}")
    for number, new in r_fields.items():
        if number not in w_fields and new.label == Field.LABEL_REQUIRED:
            errors.append(f"REQUIRED_FIELD_ADDED: {new.name} = {number}")
    # oneofs: which writer oneof (or none) each field of a reader oneof came from
    for index, decl in enumerate(reader.oneof_decl):
        members = [
            f
            for f in reader.field
            if f.HasField("oneof_index") and f.oneof_index == index and not f.proto3_optional
        ]
        origins = [oneof(w_fields[f.number], writer) for f in members if f.number in w_fields]
        moved = origins.count(None)
        if moved > 1:
            errors.append(f"MULTIPLE_FIELDS_MOVED_TO_ONEOF: {moved} fields into {decl.name}")
        elif moved == 1 and any(origin is not None for origin in origins):
            errors.append(f"FIELD_MOVED_TO_EXISTING_ONEOF: a field into {decl.name}")
    return errors
