"""Avro: parsing, text forms and the Avro specification's schema resolution rules."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.registry.compatibility import LEVELS, check
from moldau.registry.formats import InvalidSchemaError
from moldau.registry.formats.avro import AvroSchema
from moldau.registry.formats.catalog import FORMATS

AVRO = FORMATS["AVRO"]


def parse(schema: object, references: dict[str, str] | None = None) -> AvroSchema:
    parsed = AVRO.parse(json.dumps(schema), references or {})
    assert isinstance(parsed, AvroSchema)
    return parsed


def record(*fields: dict[str, object], name: str = "R") -> dict[str, object]:
    return {"type": "record", "name": name, "fields": list(fields)}


def can_read(reader: object, writer: object) -> bool:
    return parse(reader).read_errors(parse(writer)) == []


# (reader, writer, readable): the "Schema Resolution" section of the Avro specification.
RESOLUTION = [
    # "the writer's schema may be promoted to the reader's"
    ("long", "int", True),
    ("float", "int", True),
    ("double", "int", True),
    ("float", "long", True),
    ("double", "long", True),
    ("double", "float", True),
    ("bytes", "string", True),
    ("string", "bytes", True),
    ("int", "long", False),
    ("long", "float", False),
    ("float", "double", False),
    ("int", "string", False),
    ("boolean", "int", False),
    # "both schemas are arrays: ... the item types resolve"
    ({"type": "array", "items": "long"}, {"type": "array", "items": "int"}, True),
    ({"type": "array", "items": "int"}, {"type": "array", "items": "long"}, False),
    ({"type": "map", "values": "double"}, {"type": "map", "values": "float"}, True),
    ({"type": "map", "values": "int"}, {"type": "array", "items": "int"}, False),
    # fixed: same name and size
    ({"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 4}, True),
    ({"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 8}, False),
    ({"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "G", "size": 4}, False),
    # enums: "if the writer's symbol is not enumerated in the reader's schema" it is an error,
    # unless the reader has a default
    (
        {"type": "enum", "name": "E", "symbols": ["A", "B"]},
        {"type": "enum", "name": "E", "symbols": ["A"]},
        True,
    ),
    (
        {"type": "enum", "name": "E", "symbols": ["A"]},
        {"type": "enum", "name": "E", "symbols": ["A", "B"]},
        False,
    ),
    (
        {"type": "enum", "name": "E", "symbols": ["A", "U"], "default": "U"},
        {"type": "enum", "name": "E", "symbols": ["A", "B"]},
        True,
    ),
    # records: same (unqualified) name; fields matched by name
    (record({"name": "a", "type": "int"}), record({"name": "a", "type": "int"}, name="S"), False),
    (record({"name": "a", "type": "long"}), record({"name": "a", "type": "int"}), True),
    (record({"name": "a", "type": "int"}), record({"name": "a", "type": "string"}), False),
    # "the writer's schema has a field not present in the reader's: its value is ignored"
    (
        record({"name": "a", "type": "int"}),
        record({"name": "a", "type": "int"}, {"name": "b", "type": "int"}),
        True,
    ),
    # "the reader's schema has a field ... not present in the writer's": its default is used,
    # "if the reader's record schema has a field with no default value ... an error"
    (
        record({"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}),
        record({"name": "a", "type": "int"}),
        True,
    ),
    (
        record({"name": "a", "type": "int"}, {"name": "b", "type": "int"}),
        record({"name": "a", "type": "int"}),
        False,
    ),
    # aliases: a reader names the writer's old names
    (
        record({"name": "b", "type": "int", "aliases": ["a"]}),
        record({"name": "a", "type": "int"}),
        True,
    ),
    (
        {"type": "record", "name": "New", "aliases": ["Old"], "fields": []},
        {"type": "record", "name": "Old", "fields": []},
        True,
    ),
    # unions: "the first schema in the reader's union that matches the selected writer's
    # union schema is recursively resolved"; "if none match, an error is signalled"
    (["null", "string"], "string", True),
    (["null", "long"], "int", True),
    (["null", "string"], "int", False),
    (["null", "int", "string"], ["null", "int"], True),
    (["null", "int"], ["null", "int", "string"], False),
    # "if writer's is a union, but reader's is not": every branch must resolve
    ("long", ["int", "long"], True),
    ("int", ["int", "string"], False),
]


@pytest.mark.parametrize(("reader", "writer", "readable"), RESOLUTION)
def test_schema_resolution(reader: object, writer: object, readable: bool) -> None:
    assert can_read(reader, writer) is readable


def test_errors_name_the_rule_and_the_place() -> None:
    errors = parse(record({"name": "a", "type": "int"}, {"name": "b", "type": "int"})).read_errors(
        parse(record({"name": "a", "type": "int"}))
    )
    assert len(errors) == 1
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in errors[0] and "/fields/1" in errors[0]


V1 = record({"name": "a", "type": "int"})
V2_ADD_DEFAULTED = record(
    {"name": "a", "type": "int", "default": 0}, {"name": "b", "type": "string", "default": ""}
)
V3_DROP_A = record({"name": "b", "type": "string", "default": ""})
V_ADD_REQUIRED = record({"name": "a", "type": "int"}, {"name": "c", "type": "int"})
V_DROP_ALL = record()

# (level, history oldest first, new, compatible): Confluent's documented evolution rules.
LEVEL_MATRIX = [
    # a field with a default: readable both ways
    *[(level, [V1], V2_ADD_DEFAULTED, True) for level in LEVELS],
    # a new field without default: new readers cannot read old data; old readers ignore it
    ("BACKWARD", [V1], V_ADD_REQUIRED, False),
    ("FORWARD", [V1], V_ADD_REQUIRED, True),
    ("FULL", [V1], V_ADD_REQUIRED, False),
    ("NONE", [V1], V_ADD_REQUIRED, True),
    # removing a field without default: new readers ignore it; old readers miss it
    ("BACKWARD", [V1], V_DROP_ALL, True),
    ("FORWARD", [V1], V_DROP_ALL, False),
    ("FULL", [V1], V_DROP_ALL, False),
    # transitivity: V3 reads V2 (b defaulted, a ignored) and V1 (b from its default), but V1
    # cannot read V3's data (a has no default), which only FORWARD_TRANSITIVE sees
    ("FORWARD", [V1, V2_ADD_DEFAULTED], V3_DROP_A, True),
    ("FORWARD_TRANSITIVE", [V1, V2_ADD_DEFAULTED], V3_DROP_A, False),
    ("FULL", [V1, V2_ADD_DEFAULTED], V3_DROP_A, True),
    ("FULL_TRANSITIVE", [V1, V2_ADD_DEFAULTED], V3_DROP_A, False),
    ("BACKWARD_TRANSITIVE", [V1, V2_ADD_DEFAULTED], V3_DROP_A, True),
    # only the latest version counts for BACKWARD
    ("BACKWARD", [V_DROP_ALL, V1], V2_ADD_DEFAULTED, True),
    ("BACKWARD", [record({"name": "a", "type": "string"}), V1], V1, True),
    ("BACKWARD_TRANSITIVE", [record({"name": "a", "type": "string"}), V1], V1, False),
]


@pytest.mark.parametrize(("level", "history", "new", "compatible"), LEVEL_MATRIX)
def test_levels(level: str, history: list[object], new: object, compatible: bool) -> None:
    errors = check(level, parse(new), [parse(s) for s in history])
    assert (errors == []) is compatible, errors


def test_transitive_errors_name_the_version() -> None:
    errors = check("FORWARD_TRANSITIVE", parse(V3_DROP_A), [parse(V1), parse(V2_ADD_DEFAULTED)])
    assert len(errors) == 1 and "previous schema 1 of 2" in errors[0]


def test_unknown_level() -> None:
    with pytest.raises(ValueError, match="BACKWARDS"):
        check("BACKWARDS", parse(V1), [parse(V1)])


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        '"nosuchtype"',
        '{"type": "record", "name": "R"}',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Missing"}]}',
        '{"type": "enum", "name": "E", "symbols": ["A", "A"]}',
        '{"type": "fixed", "name": "F"}',
        '{"type": "record", "name": "1bad", "fields": []}',
        '{"type": "array"}',
        "42",
        # defaults must match their field's type (the specification's field defaults table)
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": "x"}]}',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": ["null", "int"], "default": "x"}]}',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": {"type": "enum", "name": "E", "symbols": ["A"]}, "default": "B"}]}',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": {"type": "array", "items": "long"}, "default": [1, "2"]}]}',
    ],
)
def test_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchemaError):
        AVRO.parse(text, {})


ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "com.acme",
    "fields": [{"name": "city", "type": "string"}],
}
PERSON = {
    "type": "record",
    "name": "Person",
    "namespace": "com.acme",
    "fields": [
        {"name": "home", "type": "com.acme.Address"},
        {"name": "work", "type": ["null", "Address"]},
    ],
}


def test_references_resolve_named_types_and_stay_by_name() -> None:
    with pytest.raises(InvalidSchemaError):
        parse(PERSON)
    person = parse(PERSON, {"com.acme.Address": json.dumps(ADDRESS)})
    assert '"type":"com.acme.Address"' in person.canonical()
    assert "city" not in person.canonical() and "city" not in person.normalized()
    # a reference may itself use a reference given after it
    company = record({"name": "boss", "type": "com.acme.Person"}, name="Company")
    refs = {"com.acme.Person": json.dumps(PERSON), "com.acme.Address": json.dumps(ADDRESS)}
    assert parse(company, refs).read_errors(parse(company, refs)) == []
    with pytest.raises(InvalidSchemaError, match="reference"):
        parse(company, {"com.acme.Person": json.dumps(PERSON)})


def test_valid_defaults() -> None:
    fields = [
        {"name": "n", "type": ["null", "string"], "default": None},
        {"name": "u", "type": ["string", "null"], "default": None},
        {"name": "b", "type": "bytes", "default": "\u00ff"},
        {"name": "d", "type": "double", "default": 1},
        {"name": "m", "type": {"type": "map", "values": "int"}, "default": {"k": 1}},
        {
            "name": "r",
            "type": record({"name": "x", "type": "int", "default": 0}, name="Inner"),
            "default": {},
        },
    ]
    assert parse(record(*fields)).read_errors(parse(record(*fields))) == []


def test_canonical_keeps_what_readers_use() -> None:
    spaced = AVRO.parse(json.dumps(V2_ADD_DEFAULTED, indent=4), {})
    other_default = record(
        {"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": "x"}
    )
    assert spaced.canonical() == parse(V2_ADD_DEFAULTED).canonical()
    assert parse(other_default).canonical() != parse(V2_ADD_DEFAULTED).canonical()


def test_normalized_uses_full_names_and_a_fixed_key_order() -> None:
    a = {
        "namespace": "com.acme",
        "fields": [
            {
                "type": {"logicalType": "decimal", "scale": 2, "type": "bytes", "precision": 9},
                "name": "price",
            }
        ],
        "name": "Item",
        "type": "record",
    }
    b = {
        "type": "record",
        "name": "com.acme.Item",
        "fields": [
            {
                "name": "price",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            }
        ],
    }
    assert parse(a).normalized() == parse(b).normalized()
    assert json.loads(parse(a).normalized()) == {
        "name": "com.acme.Item",
        "type": "record",
        "fields": [
            {
                "name": "price",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            }
        ],
    }
    assert parse({"type": "string"}).normalized() == '"string"'
    # the normalized text is itself a schema, with the same meaning
    assert AVRO.parse(parse(a).normalized(), {}).canonical() == parse(a).canonical()


def test_what_the_confluent_avro_serializer_registers() -> None:
    """AvroSerializer registers the schema text it was given, its references by full name."""
    from confluent_kafka.schema_registry import Schema, SchemaReference

    address = Schema(json.dumps(ADDRESS), "AVRO")
    person = Schema(
        json.dumps(PERSON), "AVRO", [SchemaReference("com.acme.Address", "address-value", 1)]
    )
    refs = {ref.name: address.schema_str for ref in person.references}
    parsed = FORMATS[person.schema_type].parse(person.schema_str, refs)
    again = FORMATS["AVRO"].parse(parsed.canonical(), refs)
    assert again.canonical() == parsed.canonical()
    assert check("FULL_TRANSITIVE", again, [parsed]) == []


PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
SCHEMAS = st.recursive(
    st.sampled_from(PRIMITIVES),
    lambda inner: st.one_of(
        st.builds(lambda t: {"type": "array", "items": t}, inner),
        st.builds(lambda t: {"type": "map", "values": t}, inner),
        st.sets(st.sampled_from(PRIMITIVES[1:]), min_size=1).map(lambda b: ["null", *sorted(b)]),
        st.lists(inner, max_size=3).map(
            lambda ts: record(*[{"name": f"f{i}", "type": t} for i, t in enumerate(ts)])
        ),
    ),
    max_leaves=6,
)


def unique_names(schema: object, names: list[str]) -> object:
    """The schema with its records named R0, R1, ... (a name may be defined only once)."""
    if isinstance(schema, list):
        return [unique_names(branch, names) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: unique_names(v, names) for k, v in schema.items() if k != "fields"}
    if schema.get("type") == "record":
        names.append(f"R{len(names)}")
        out["name"] = names[-1]
        out["fields"] = [{**f, "type": unique_names(f["type"], names)} for f in schema["fields"]]
    return out


@given(SCHEMAS)
def test_any_schema_is_compatible_with_itself(schema: object) -> None:
    parsed = parse(unique_names(schema, []))
    for level in LEVELS:
        assert check(level, parsed, [parsed, parsed]) == []
    assert AVRO.parse(parsed.normalized(), {}).canonical() == parsed.canonical()
