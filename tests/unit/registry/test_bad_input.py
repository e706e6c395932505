"""Any JSON a client sends as an Avro or JSON schema is either refused with
InvalidSchemaError or parsed into a schema whose text forms and checks never raise."""

from __future__ import annotations

import json
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moldau.registry.formats import InvalidSchemaError
from moldau.registry.formats.catalog import FORMATS

KEYWORDS = [
    *("type", "name", "namespace", "fields", "items", "values", "symbols", "size", "default"),
    *("aliases", "logicalType", "precision", "scale", "properties", "required", "enum"),
    *("additionalProperties", "$ref", "allOf", "anyOf", "oneOf", "not", "minimum", "maxLength"),
    *("prefixItems", "$schema", "definitions", "const", "patternProperties", "multipleOf"),
]
WORDS = [
    *("record", "enum", "fixed", "array", "map", "int", "string", "null", "object", "integer"),
    *("R", "#/definitions/a", "decimal", "bytes", "a", "http://json-schema.org/draft-04/schema#"),
]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(WORDS),
)
DOCUMENTS = st.recursive(
    VALUES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYWORDS), inner, max_size=5)
    ),
    max_leaves=25,
)


@pytest.mark.parametrize("schema_type", ["AVRO", "JSON"])
@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(first=DOCUMENTS, second=DOCUMENTS)
def test_bad_input_is_refused_never_crashes(
    schema_type: str, first: object, second: object
) -> None:
    fmt = FORMATS[schema_type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # avro warns about logical types it ignores
        try:
            a, b = fmt.parse(json.dumps(first), {}), fmt.parse(json.dumps(second), {})
        except InvalidSchemaError:
            return
    a.canonical(), a.normalized()
    assert a.read_errors(a) == []
    a.read_errors(b), b.read_errors(a)


@pytest.mark.parametrize(
    "text", ["message", "syntax = 'proto3'; message {", "\x00\xff", "AAAA", "Cg=="]
)
def test_bad_protobuf_input_is_refused(text: str) -> None:
    with pytest.raises(InvalidSchemaError):
        FORMATS["PROTOBUF"].parse(text, {})
