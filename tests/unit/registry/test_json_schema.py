"""JSON Schema: metaschema validation, `$ref`s and Confluent's JSON Schema compatibility rules."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.registry.compatibility import LEVELS, check
from moldau.registry.formats import InvalidSchemaError
from moldau.registry.formats.catalog import FORMATS
from moldau.registry.formats.json_schema import JsonSchema

JSON = FORMATS["JSON"]


def parse(schema: object, references: dict[str, object] | None = None) -> JsonSchema:
    refs = {name: json.dumps(text) for name, text in (references or {}).items()}
    parsed = JSON.parse(json.dumps(schema), refs)
    assert isinstance(parsed, JsonSchema)
    return parsed


def obj(props: dict[str, object], **keywords: object) -> dict[str, object]:
    return {"type": "object", "properties": props, **keywords}


S, INT = {"type": "string"}, {"type": "integer"}
CLOSED = {"additionalProperties": False}

# (old schema, new schema, difference Confluent reports or None when backward compatible):
# BACKWARD = the new schema accepts every document the old one accepted.
BACKWARD_CASES = [
    # open content model: adding a property breaks (old documents may hold anything under
    # its name), removing one does not
    (obj({"a": S}), obj({"a": S, "b": INT}), "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"),
    (obj({"a": S}), obj({"a": S, "b": {}}), None),
    (obj({"a": S, "b": INT}), obj({"a": S}), None),
    # closed content model: the reverse
    (obj({"a": S}, **CLOSED), obj({"a": S, "b": INT}, **CLOSED), None),
    (
        obj({"a": S, "b": INT}, **CLOSED),
        obj({"a": S}, **CLOSED),
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    ),
    (
        obj({"a": S}, **CLOSED),
        obj({"a": S, "b": INT}, **CLOSED, required=["b"]),
        "REQUIRED_ATTRIBUTE_ADDED",
    ),
    # partially open content model: covered when the old additionalProperties fit
    (
        obj({"a": S}, additionalProperties=INT),
        obj({"a": S, "b": {"type": "number"}}, additionalProperties=INT),
        None,
    ),
    (
        obj({"a": S}, additionalProperties=INT),
        obj({"a": S, "b": S}, additionalProperties=INT),
        "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    ),
    (
        obj({"a": S, "b": INT}, additionalProperties={"type": "number"}),
        obj({"a": S}, additionalProperties={"type": "number"}),
        None,
    ),
    (
        obj({"a": S, "b": S}, additionalProperties=INT),
        obj({"a": S}, additionalProperties=INT),
        "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    ),
    (obj({"a": S}), obj({"a": S}, **CLOSED), "ADDITIONAL_PROPERTIES_REMOVED"),
    (obj({"a": S}, **CLOSED), obj({"a": S}), None),
    (
        obj({}, additionalProperties={"type": "number"}),
        obj({}, additionalProperties=INT),
        "ADDITIONAL_PROPERTIES_NARROWED",
    ),
    (
        obj({}, patternProperties={"^x_": INT}),
        obj({"x_b": {"type": "number"}}, patternProperties={"^x_": INT}),
        None,
    ),
    # required
    (obj({"a": S}), obj({"a": S}, required=["a"]), "REQUIRED_ATTRIBUTE_ADDED"),
    (obj({"a": S}, required=["a"]), obj({"a": S}), None),
    # types widen, never narrow
    (INT, {"type": "number"}, None),
    ({"type": "number"}, INT, "TYPE_NARROWED"),
    (S, {"type": ["string", "null"]}, None),
    ({"type": ["string", "null"]}, S, "TYPE_NARROWED"),
    (S, INT, "TYPE_CHANGED"),
    ({}, S, "TYPE_NARROWED"),
    (S, {}, None),
    (S, True, None),
    (S, False, "TYPE_NARROWED"),
    # enums may grow
    ({"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, None),
    ({"enum": ["a", "b"]}, {"enum": ["a"]}, "ENUM_ARRAY_NARROWED"),
    (S, {"type": "string", "enum": ["a"]}, "ENUM_ARRAY_NARROWED"),
    ({"enum": ["a"]}, S, None),
    ({"const": 1}, {"enum": [1, 2]}, None),
    # string, number, object and array bounds: added or tightened breaks, loosened does not
    (S, {"type": "string", "maxLength": 5}, "MAX_LENGTH_ADDED_OR_DECREASED"),
    (
        {"type": "string", "maxLength": 5},
        {"type": "string", "maxLength": 4},
        "MAX_LENGTH_ADDED_OR_DECREASED",
    ),
    ({"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 6}, None),
    ({"type": "string", "maxLength": 5}, S, None),
    (
        {"type": "string", "minLength": 2},
        {"type": "string", "minLength": 3},
        "MIN_LENGTH_ADDED_OR_INCREASED",
    ),
    ({"type": "string", "minLength": 2}, {"type": "string", "minLength": 1}, None),
    (S, {"type": "string", "pattern": "^a"}, "PATTERN_ADDED"),
    ({"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}, "PATTERN_CHANGED"),
    ({"type": "string", "pattern": "^a"}, S, None),
    (
        {"type": "number", "maximum": 10},
        {"type": "number", "maximum": 9},
        "MAXIMUM_ADDED_OR_DECREASED",
    ),
    ({"type": "number", "minimum": 0}, {"type": "number", "minimum": -1}, None),
    (
        {"type": "number", "minimum": 0},
        {"type": "number", "minimum": 1},
        "MINIMUM_ADDED_OR_INCREASED",
    ),
    (
        {"type": "number"},
        {"type": "number", "exclusiveMaximum": 3},
        "EXCLUSIVE_MAXIMUM_ADDED_OR_DECREASED",
    ),
    ({"type": "number", "multipleOf": 4}, {"type": "number", "multipleOf": 2}, None),
    (
        {"type": "number", "multipleOf": 2},
        {"type": "number", "multipleOf": 4},
        "MULTIPLE_OF_CHANGED",
    ),
    ({"type": "number"}, {"type": "number", "multipleOf": 2}, "MULTIPLE_OF_ADDED"),
    ({"type": "number", "multipleOf": 0.3}, {"type": "number", "multipleOf": 0.1}, None),
    (S, {"type": "string", "maximum": 3}, None),  # a number keyword on strings asserts nothing
    (obj({}), obj({}, maxProperties=3), "MAX_PROPERTIES_ADDED_OR_DECREASED"),
    ({"type": "array"}, {"type": "array", "minItems": 1}, "MIN_ITEMS_ADDED_OR_INCREASED"),
    # arrays
    ({"type": "array", "items": INT}, {"type": "array", "items": {"type": "number"}}, None),
    (
        {"type": "array", "items": {"type": "number"}},
        {"type": "array", "items": INT},
        "TYPE_NARROWED",
    ),
    ({"type": "array"}, {"type": "array", "uniqueItems": True}, "UNIQUE_ITEMS_ADDED"),
    (
        {"type": "array", "items": [S], "additionalItems": False},
        {"type": "array", "items": [S, INT], "additionalItems": False},
        None,
    ),
    (
        {"type": "array", "items": [S]},
        {"type": "array", "items": [S, INT]},
        "ITEM_ADDED_TO_OPEN_CONTENT_MODEL",
    ),
    (
        {"type": "array", "items": [S, INT]},
        {"type": "array", "items": [S], "additionalItems": False},
        "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    ),
    ({"type": "array", "items": [S, INT]}, {"type": "array", "items": [S]}, None),
    ({"type": "array", "items": S}, {"type": "array", "items": [S]}, "TYPE_CHANGED"),
    # combined schemas: sums may grow, products shrink
    ({"oneOf": [S, INT]}, {"oneOf": [S, INT, {"type": "boolean"}]}, None),
    ({"oneOf": [S, INT]}, {"oneOf": [INT, S]}, None),
    ({"oneOf": [S, INT]}, {"oneOf": [S]}, "SUM_TYPE_NARROWED"),
    ({"anyOf": [S, INT]}, {"anyOf": [S, {"type": "number"}]}, None),
    ({"allOf": [obj({"a": S}), obj({"b": INT})]}, {"allOf": [obj({"a": S})]}, None),
    (
        {"allOf": [obj({"a": S})]},
        {"allOf": [obj({"a": S}), obj({"b": INT})]},
        "PRODUCT_TYPE_EXTENDED",
    ),
    ({"oneOf": [S, INT]}, {"anyOf": [S, INT]}, None),
    ({"anyOf": [S, INT]}, {"oneOf": [S, INT]}, "COMBINED_TYPE_CHANGED"),
    (S, {"oneOf": [S, INT]}, None),
    (S, {"oneOf": [INT, {"type": "boolean"}]}, "SUM_TYPE_NARROWED"),
    ({"oneOf": [S, INT]}, S, "TYPE_CHANGED"),
    ({"oneOf": [S, INT]}, {"type": ["string", "integer"]}, None),
    # not: the new schema may refuse less, not more
    ({"not": S}, {"not": {"type": "string", "maxLength": 1}}, None),
    ({"not": {"type": "string", "maxLength": 1}}, {"not": S}, "NOT_TYPE_EXTENDED"),
    (S, {"type": "string", "not": {"enum": ["x"]}}, "NOT_TYPE_ADDED"),
    # annotations do not matter
    (
        {"type": "string", "title": "a", "description": "b"},
        {"type": "string", "title": "c", "default": "x"},
        None,
    ),
]


@pytest.mark.parametrize(("old", "new", "difference"), BACKWARD_CASES)
def test_backward_rules(old: object, new: object, difference: str | None) -> None:
    errors = parse(new).read_errors(parse(old))
    if difference is None:
        assert errors == []
    else:
        assert errors and all(difference in e for e in errors[:1]), errors


def test_draft4_boolean_exclusive_bounds() -> None:
    draft4 = "http://json-schema.org/draft-04/schema#"
    inclusive = {"$schema": draft4, "type": "number", "maximum": 5}
    exclusive = {"$schema": draft4, "type": "number", "maximum": 5, "exclusiveMaximum": True}
    assert parse(inclusive).read_errors(parse(exclusive)) == []
    assert parse(exclusive).read_errors(parse(inclusive))


ADDRESS = obj({"city": S, "zip": S}, required=["city"])


def test_references_by_name_resolve_against_the_id() -> None:
    person = {"$id": "https://acme.example/person.json", **obj({"home": {"$ref": "address.json"}})}
    with pytest.raises(InvalidSchemaError, match="address.json"):
        parse(person)
    v1 = parse(person, {"address.json": ADDRESS})
    v2 = parse(person, {"address.json": obj({"city": S, "zip": S}, required=["city", "zip"])})
    assert v1.read_errors(v1) == []
    errors = v2.read_errors(v1)
    assert (
        len(errors) == 1 and "REQUIRED_ATTRIBUTE_ADDED at #/properties/home/required" in errors[0]
    )
    relative = parse(obj({"home": {"$ref": "address.json"}}), {"address.json": ADDRESS})
    assert relative.read_errors(v1) == []


def test_a_reference_with_an_unresolvable_ref_is_refused() -> None:
    broken = obj({"zip": {"$ref": "zip.json"}})
    with pytest.raises(InvalidSchemaError, match="zip.json"):
        parse(obj({"home": {"$ref": "address.json"}}), {"address.json": broken})
    fixed = parse(obj({"home": {"$ref": "address.json"}}), {"address.json": broken, "zip.json": S})
    assert fixed.read_errors(fixed) == []


def test_references_by_their_own_id() -> None:
    address = {"$id": "https://acme.example/schemas/address", **ADDRESS}
    person = obj({"home": {"$ref": "https://acme.example/schemas/address"}})
    parsed = parse(person, {"address-value": address})
    assert parsed.read_errors(parse(obj({"home": S}))) == [
        "TYPE_CHANGED at #/properties/home/type: ['string'] -> ['object']"
    ]


def test_local_and_recursive_refs() -> None:
    node = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"node": obj({"value": INT, "next": {"$ref": "#/$defs/node"}})},
        "$ref": "#/$defs/node",
    }
    wider = json.loads(json.dumps(node).replace('"integer"', '"number"'))
    assert parse(node).read_errors(parse(node)) == []
    assert parse(wider).read_errors(parse(node)) == []
    assert parse(node).read_errors(parse(wider))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "[]",
        '"string"',
        "3",
        '{"type": "nope"}',
        '{"type": "string", "minLength": -1}',
        '{"properties": []}',
        '{"required": "a"}',
        '{"$schema": "http://example.com/my-draft", "type": "string"}',
        '{"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": {}}',
        '{"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMaximum": 3}',
        '{"$ref": "#/definitions/missing"}',
        '{"properties": {"a": {"$ref": "other.json"}}}',
    ],
)
def test_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchemaError):
        JSON.parse(text, {})


def test_canonical_and_normalized_forms() -> None:
    a = JSON.parse(
        '{"type": "object", "required": ["b", "a"], "properties": {"a": {}, "b": {}}}', {}
    )
    b = JSON.parse('{"properties":{"b":{},"a":{}},"required":["a","b"],"type":"object"}', {})
    assert a.canonical() != b.canonical()  # the order of `required` is kept
    assert a.normalized() == b.normalized()
    assert JSON.parse(a.normalized(), {}).canonical() == b.canonical()


def test_what_the_confluent_json_serializer_registers() -> None:
    """JSONSerializer registers its schema string unchanged as schemaType JSON."""
    from confluent_kafka.schema_registry import Schema

    schema_str = json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "User",
            "type": "object",
            "properties": {"name": {"type": "string"}, "favorite_number": {"type": "number"}},
            "required": ["name"],
        }
    )
    schema = Schema(schema_str, schema_type="JSON")
    parsed = FORMATS[schema.schema_type].parse(schema.schema_str, {})
    assert FORMATS["JSON"].parse(parsed.canonical(), {}).canonical() == parsed.canonical()
    assert check("FULL_TRANSITIVE", parsed, [parsed]) == []


V1 = obj({"a": S}, **CLOSED)
V2 = obj({"a": S, "b": INT}, **CLOSED)  # optional b added to a closed model
V3 = obj({"a": S, "b": INT}, **CLOSED, required=["b"])

LEVEL_MATRIX = [
    ("BACKWARD", [V1], V2, True),
    ("FORWARD", [V1], V2, False),  # V1 (closed) refuses documents with b
    ("FULL", [V1], V2, False),
    ("NONE", [V1], V2, True),
    ("FORWARD", [V2], V3, True),  # V2 reads V3's documents
    ("BACKWARD", [V2], V3, False),  # V3 requires b that V2's documents may lack
    ("FORWARD", [V1, V2], V3, True),
    ("FORWARD_TRANSITIVE", [V1, V2], V3, False),
    ("BACKWARD", [V3, V1], V2, True),
    ("BACKWARD_TRANSITIVE", [V3, V1], V2, True),
    ("FULL_TRANSITIVE", [V2, V2], V2, True),
]


@pytest.mark.parametrize(("level", "history", "new", "compatible"), LEVEL_MATRIX)
def test_levels(level: str, history: list[object], new: object, compatible: bool) -> None:
    errors = check(level, parse(new), [parse(s) for s in history])
    assert (errors == []) is compatible, errors


LEAVES = st.one_of(
    st.sampled_from(["string", "integer", "number", "boolean", "null"]).map(lambda t: {"type": t}),
    st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(0, 9)),
    st.builds(lambda n: {"type": "number", "minimum": n}, st.integers(-9, 9)),
    st.lists(st.text(max_size=3), min_size=1, max_size=3, unique=True).map(lambda v: {"enum": v}),
    st.booleans(),
)
SCHEMAS = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.builds(
            lambda props, closed, n: obj(
                props, required=sorted(props)[:n], additionalProperties=not closed
            ),
            st.dictionaries(st.sampled_from("abcd"), inner, max_size=3),
            st.booleans(),
            st.integers(0, 2),
        ),
        st.builds(lambda t: {"type": "array", "items": t}, inner),
        st.lists(inner, min_size=1, max_size=3).map(lambda subs: {"anyOf": subs}),
        st.lists(inner, min_size=1, max_size=2).map(lambda subs: {"allOf": subs}),
    ),
    max_leaves=8,
)


@given(SCHEMAS)
def test_any_schema_is_compatible_with_itself(schema: object) -> None:
    parsed = parse(schema)
    copy = JSON.parse(parsed.normalized(), {})
    for level in LEVELS:
        assert check(level, copy, [parsed]) == []
