"""Protobuf: .proto text and base64 descriptors, imports as references, Confluent's rules."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.registry.compatibility import LEVELS, check
from moldau.registry.formats import InvalidSchemaError
from moldau.registry.formats.catalog import FORMATS
from moldau.registry.formats.protobuf import ProtobufSchema

PROTOBUF = FORMATS["PROTOBUF"]


def parse(
    body: str, syntax: str = "proto3", package: str = "acme", refs: dict[str, str] | None = None
) -> ProtobufSchema:
    text = f'syntax = "{syntax}";\npackage {package};\n{body}'
    parsed = PROTOBUF.parse(text, refs or {})
    assert isinstance(parsed, ProtobufSchema)
    return parsed


def errors(old: str, new: str, **kw: str) -> list[str]:
    """BACKWARD: the new schema reading data written with the old one."""
    return parse(new, **kw).read_errors(parse(old, **kw))


# (old, new, difference or None when compatible): Confluent's Protobuf compatibility rules
# and the Protobuf language guide's "Updating A Message Type".
CASES = [
    ("message M { int32 a = 1; }", "message M { int32 a = 1; string b = 2; }", None),
    ("message M { int32 a = 1; string b = 2; }", "message M { int32 a = 1; }", None),
    ("message M { int32 a = 1; string b = 2; }", "message M { int32 a = 1; reserved 2; }", None),
    ("message M { int32 a = 1; }", "message M { int32 renamed = 1; }", None),
    ("message M { int32 a = 1; }", "message M { int64 a = 1; }", None),
    ("message M { int32 a = 1; }", "message M { bool a = 1; }", None),
    ("message M { string a = 1; }", "message M { bytes a = 1; }", None),
    ("message M { fixed32 a = 1; }", "message M { sfixed32 a = 1; }", None),
    ("message M { sint32 a = 1; }", "message M { sint64 a = 1; }", None),
    ("message M { sint32 a = 1; }", "message M { int32 a = 1; }", "FIELD_SCALAR_KIND_CHANGED"),
    ("message M { int32 a = 1; }", "message M { string a = 1; }", "FIELD_SCALAR_KIND_CHANGED"),
    ("message M { fixed64 a = 1; }", "message M { double a = 1; }", "FIELD_SCALAR_KIND_CHANGED"),
    (
        "message M { int32 a = 1; } message N {}",
        "message M { N a = 1; } message N {}",
        "FIELD_KIND_CHANGED",
    ),
    (
        "message M { E a = 1; } enum E { Z = 0; }",
        "message M { int32 a = 1; } enum E { Z = 0; }",
        "FIELD_KIND_CHANGED",
    ),
    (
        "message M { N a = 1; } message N {} message O {}",
        "message M { O a = 1; } message N {} message O {}",
        "FIELD_NAMED_TYPE_CHANGED",
    ),
    ("message M { int32 a = 1; }", "message M { repeated int32 a = 1; }", "FIELD_LABEL_CHANGED"),
    ("message M { map<string, int32> a = 1; }", "message M { map<string, int64> a = 1; }", None),
    (
        "message M { map<string, int32> a = 1; }",
        "message M { map<string, string> a = 1; }",
        "FIELD_NAMED_TYPE_CHANGED",
    ),
    ("message M {}", "message M {} message N {}", None),
    ("message M {} message N {}", "message M {}", "MESSAGE_REMOVED"),
    ("message M { message Inner {} }", "message M {}", "MESSAGE_REMOVED"),
    ("message M { message Inner {} }", "message M {} message Inner {}", "MESSAGE_REMOVED"),
    ("message M {} enum E { Z = 0; }", "message M {} enum E { Z = 0; O = 1; }", None),
    ("message M {} enum E { Z = 0; O = 1; }", "message M {} enum E { Z = 0; }", None),
    ("message M {} enum E { Z = 0; }", "message M {}", None),
    # oneofs
    ("message M { int32 a = 1; }", "message M { int32 a = 1; oneof o { string b = 2; } }", None),
    ("message M { int32 a = 1; }", "message M { oneof o { int32 a = 1; } }", None),
    (
        "message M { int32 a = 1; int32 b = 2; }",
        "message M { oneof o { int32 a = 1; int32 b = 2; } }",
        "MULTIPLE_FIELDS_MOVED_TO_ONEOF",
    ),
    (
        "message M { int32 a = 1; oneof o { int32 b = 2; } }",
        "message M { oneof o { int32 a = 1; int32 b = 2; } }",
        "FIELD_MOVED_TO_EXISTING_ONEOF",
    ),
    (
        "message M { oneof o { int32 a = 1; int32 b = 2; } }",
        "message M { oneof o { int32 a = 1; } }",
        "ONEOF_FIELD_REMOVED",
    ),
    (
        "message M { oneof o { int32 a = 1; int32 b = 2; } }",
        "message M { oneof o { int32 a = 1; int32 b = 2; int32 c = 3; } }",
        None,
    ),
]


@pytest.mark.parametrize(("old", "new", "difference"), CASES)
def test_backward_rules(old: str, new: str, difference: str | None) -> None:
    found = errors(old, new)
    if difference is None:
        assert found == []
    else:
        assert found and difference in found[0], found


def test_proto2_required_fields() -> None:
    old = "message M { optional int32 a = 1; }"
    assert (
        "REQUIRED_FIELD_ADDED"
        in errors(
            old, "message M { optional int32 a = 1; required int32 b = 2; }", syntax="proto2"
        )[0]
    )
    assert (
        "REQUIRED_FIELD_ADDED"
        in errors(old, "message M { required int32 a = 1; }", syntax="proto2")[0]
    )
    required = "message M { required int32 a = 1; }"
    assert "REQUIRED_FIELD_REMOVED" in errors(required, "message M {}", syntax="proto2")[0]
    assert (
        "REQUIRED_FIELD_REMOVED"
        in errors(required, "message M { optional int32 a = 1; }", syntax="proto2")[0]
    )


def test_proto2_text_round_trips() -> None:
    body = (
        'message M {\n  optional string a = 1 [default = "x"];\n  required int32 b = 2;\n'
        "  repeated int64 c = 3 [packed = true];\n  extensions 100 to max;\n  reserved 5 to 7;\n}\n"
    )
    parsed = parse(body, syntax="proto2")
    assert parsed.canonical() == f'syntax = "proto2";\npackage acme;\n{body}'
    assert PROTOBUF.parse(parsed.canonical(), {}).canonical() == parsed.canonical()


def test_package_and_syntax_changes() -> None:
    body = "message M { int32 a = 1; }"
    assert "PACKAGE_CHANGED" in parse(body, package="b").read_errors(parse(body, package="a"))[0]
    proto2 = parse("message M { optional int32 a = 1; }", syntax="proto2")
    assert parse(body).read_errors(proto2) == []


ADDRESS = 'syntax = "proto3";\npackage acme.common;\nmessage Address { string city = 1; }\n'
PERSON = 'import "acme/common/address.proto";\nmessage Person { string name = 1; acme.common.Address home = 2; }\n'


def test_imports_resolve_through_references() -> None:
    with pytest.raises(InvalidSchemaError, match="address.proto"):
        parse(PERSON)
    person = parse(PERSON, refs={"acme/common/address.proto": ADDRESS})
    assert ".acme.common.Address home = 2;" in person.canonical()
    assert 'import "acme/common/address.proto";' in person.canonical()
    timestamp = parse(
        'import "google/protobuf/timestamp.proto";\nmessage T { google.protobuf.Timestamp at = 1; }'
    )
    assert ".google.protobuf.Timestamp at = 1;" in timestamp.canonical()


@pytest.mark.parametrize(
    ("text", "refs"),
    [
        ("", {}),
        ("this is not protobuf", {}),
        ('syntax = "proto3"; message M { Missing a = 1; }', {}),
        ('syntax = "proto3"; message M { int32 a = 1; int32 b = 1; }', {}),
        ('syntax = "proto3"; message M { required int32 a = 1; }', {}),
        ('syntax = "proto3"; enum E { A = 1; }', {}),
        ('syntax = "proto4"; message M {}', {}),
        ('syntax = "proto3"; import "other.proto"; message M {}', {}),
        (
            'syntax = "proto3"; import "../x.proto"; message M {}',
            {"../x.proto": 'syntax = "proto3";'},
        ),
        ('syntax = "proto3"; import "x.proto"; message M {}', {"x.proto": "garbage"}),
    ],
)
def test_invalid_schemas(text: str, refs: dict[str, str]) -> None:
    with pytest.raises(InvalidSchemaError):
        PROTOBUF.parse(text, refs)


def test_canonical_and_normalized_forms() -> None:
    a = PROTOBUF.parse(
        'syntax="proto3";  package p;\n// a comment\nmessage M{int32 b=2;int32 a=1;}\nmessage L{}',
        {},
    )
    b = PROTOBUF.parse(
        'syntax = "proto3";\npackage p;\nmessage L {}\nmessage M {\n  int32 a = 1;\n  int32 b = 2;\n}',
        {},
    )
    assert a.canonical() != b.canonical()
    assert a.normalized() == b.normalized()
    assert PROTOBUF.parse(a.canonical(), {}).canonical() == a.canonical()
    assert PROTOBUF.parse(a.normalized(), {}).normalized() == a.normalized()


def _descriptors() -> tuple[descriptor_pb2.FileDescriptorProto, descriptor_pb2.FileDescriptorProto]:
    """What protoc generates into a `_pb2` module: an imported file and a message using it."""
    Field = descriptor_pb2.FieldDescriptorProto
    address = descriptor_pb2.FileDescriptorProto(
        name="acme/common/address.proto", package="acme.common", syntax="proto3"
    )
    address.message_type.add(name="Address").field.add(
        name="city", number=1, type=Field.TYPE_STRING, label=Field.LABEL_OPTIONAL, json_name="city"
    )
    person = descriptor_pb2.FileDescriptorProto(
        name="acme/person.proto", package="acme", syntax="proto3", dependency=[address.name]
    )
    message = person.message_type.add(name="Person")
    message.field.add(
        name="name", number=1, type=Field.TYPE_STRING, label=Field.LABEL_OPTIONAL, json_name="name"
    )
    message.field.add(
        name="home",
        number=2,
        type=Field.TYPE_MESSAGE,
        type_name=".acme.common.Address",
        label=Field.LABEL_OPTIONAL,
        json_name="home",
    )
    return address, person


def test_what_the_confluent_protobuf_serializer_registers() -> None:
    """ProtobufSerializer registers each file as base64 of its serialized descriptor, the
    imports first under their file names (`_resolve_dependencies`)."""
    from confluent_kafka.schema_registry.common.protobuf import _schema_to_str

    pool = descriptor_pool.DescriptorPool()
    address, person = _descriptors()
    pool.Add(address)
    pool.Add(person)
    person_file = pool.FindFileByName(person.name)
    refs = {dep.name: _schema_to_str(dep) for dep in person_file.dependencies}
    registered = PROTOBUF.parse(_schema_to_str(person_file), refs)
    as_text = parse(PERSON, refs={"acme/common/address.proto": ADDRESS})
    assert registered.canonical() == as_text.canonical()
    assert registered.read_errors(as_text) == [] and as_text.read_errors(registered) == []
    # what GET /schemas/ids/{id}?format=serialized gives back builds in the client's pool
    from confluent_kafka.schema_registry.common.protobuf import _str_to_proto

    client_pool = descriptor_pool.DescriptorPool()
    client_pool.Add(address)
    client_pool.Add(_str_to_proto("person.proto", as_text.serialized()))
    fields = client_pool.FindMessageTypeByName("acme.Person").fields_by_name
    assert fields["home"].message_type.full_name == "acme.common.Address"
    # a descriptor whose types do not resolve is refused like text
    broken = descriptor_pb2.FileDescriptorProto()
    broken.CopyFrom(person)
    broken.message_type[0].field[1].type_name = ".acme.common.Missing"
    import base64

    with pytest.raises(InvalidSchemaError, match="Missing"):
        PROTOBUF.parse(base64.b64encode(broken.SerializeToString()).decode(), refs)


V1 = "message M { int32 a = 1; }"
V2 = "message M { }"
V3 = "message M { string a = 1; }"
V_EXTRA = "message M { int32 a = 1; } message N {}"

LEVEL_MATRIX = [
    ("BACKWARD", [V1], V_EXTRA, True),
    ("FORWARD", [V1], V_EXTRA, False),  # the old schema lacks message N
    ("FULL", [V1], V_EXTRA, False),
    ("NONE", [V1], V_EXTRA, True),
    ("BACKWARD", [V1, V2], V3, True),
    ("BACKWARD_TRANSITIVE", [V1, V2], V3, False),
    ("FORWARD_TRANSITIVE", [V1, V2], V3, False),
    ("FULL", [V1, V2], V3, True),
    ("FULL_TRANSITIVE", [V1, V2], V3, False),
]


@pytest.mark.parametrize(("level", "history", "new", "compatible"), LEVEL_MATRIX)
def test_levels(level: str, history: list[str], new: str, compatible: bool) -> None:
    found = check(level, parse(new), [parse(s) for s in history])
    assert (found == []) is compatible, found


SCALARS = ["int32", "int64", "uint32", "sint64", "bool", "string", "bytes", "double", "fixed32"]
FIELDS = st.lists(
    st.tuples(st.sampled_from(["", "repeated ", "optional "]), st.sampled_from(SCALARS)), max_size=6
)


@settings(max_examples=40, deadline=None)
@given(st.lists(FIELDS, min_size=1, max_size=3))
def test_any_schema_is_compatible_with_itself(messages: list[list[tuple[str, str]]]) -> None:
    body = "\n".join(
        f"message M{i} {{ {' '.join(f'{label}{kind} f{n} = {n + 1};' for n, (label, kind) in enumerate(fields))} }}"
        for i, fields in enumerate(messages)
    )
    parsed = parse(body)
    again = PROTOBUF.parse(parsed.normalized(), {})
    assert again.canonical() == parsed.canonical()
    for level in LEVELS:
        assert check(level, again, [parsed]) == []
