"""Avro schemas: parsed by the Apache `avro` library, checked by its reader/writer resolver.

Parsing, name resolution and the compatibility rules are the library's (`avro.schema`,
`avro.compatibility`, which implements the "Schema Resolution" section of the Avro
specification); this module only adds schema references and the registry's text forms.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import avro.constants
import avro.errors
import avro.name
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from moldau.registry.formats import InvalidSchemaError, ParsedSchema

# The key order of the Parsing Canonical Form ("[ORDER]" in the specification), followed by
# the attributes Confluent's normalization keeps because they change what a schema means.
_NORMALIZED_KEY_ORDER = (
    "name",
    "type",
    "fields",
    "symbols",
    "items",
    "values",
    "size",
    "logicalType",
    "precision",
    "scale",
    "order",
    "aliases",
    "default",
    "doc",
)


class AvroSchema:
    """A parsed Avro schema, with the named types of its references."""

    schema_type = "AVRO"

    def __init__(self, schema: avro.schema.Schema, reference_names: avro.name.Names) -> None:
        self.schema = schema
        # The named types the references define: written by name, not inlined, in the
        # text forms (as Confluent writes a schema with references).
        self._reference_names = reference_names

    def _json(self) -> Any:
        names = avro.name.Names()
        names.names = dict(self._reference_names.names)
        return self.schema.to_json(names)

    def canonical(self) -> str:
        """Compact JSON with sorted keys keeping every attribute (as Confluent's
        `canonicalString`, the text a lookup compares, does).

        Not the Parsing Canonical Form: that drops defaults, logical types and aliases, so
        two schemas that read data differently would be found as one.
        """
        return json.dumps(self._json(), separators=(",", ":"), sort_keys=True)

    def normalized(self) -> str:
        """The Parsing Canonical Form's rules ([FULLNAMES], [ORDER], [PRIMITIVES]), keeping
        the attributes that matter to readers (defaults, logical types, aliases, order, doc)
        and custom properties, sorted, after them.
        """
        return json.dumps(_normalize(self._json(), None), separators=(",", ":"))

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        """The Avro specification's resolution rules, as `avro.compatibility` checks them."""
        if not isinstance(writer, AvroSchema):
            return [f"cannot read {writer.schema_type} data with an AVRO schema"]
        result = ReaderWriterCompatibilityChecker().get_compatibility(self.schema, writer.schema)
        if result.compatibility is not SchemaCompatibilityType.incompatible:
            return []
        kinds = ", ".join(sorted({i.name.upper() for i in result.incompatibilities}))
        where = ", ".join(sorted(result.locations - {"/"}) or ["/"])
        details = "; ".join(sorted(result.messages))
        return [f"{kinds} at {where}: {details}"]


def _fullname(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _normalize(node: Any, namespace: str | None) -> Any:
    """One schema (or field) JSON node in normalized form; `namespace` is the enclosing one."""
    if isinstance(node, str):
        return node if node in avro.constants.PRIMITIVE_TYPES else _fullname(node, namespace)
    if isinstance(node, list):
        return [_normalize(branch, namespace) for branch in node]
    attrs = dict(node)
    kind = attrs.get("type")
    if kind in avro.constants.PRIMITIVE_TYPES and len(attrs) == 1:
        return kind
    if kind in ("record", "error", "enum", "fixed"):
        namespace = attrs.pop("namespace", None) or namespace
        attrs["name"] = _fullname(attrs["name"], namespace)
        namespace = attrs["name"].rpartition(".")[0] or None
        if "aliases" in attrs:
            attrs["aliases"] = sorted(_fullname(a, namespace) for a in attrs["aliases"])
    if "fields" in attrs:
        attrs["fields"] = [_normalize_field(f, namespace) for f in attrs["fields"]]
    for key in ("items", "values"):
        if key in attrs:
            attrs[key] = _normalize(attrs[key], namespace)
    if isinstance(kind, (dict, list)) or (
        isinstance(kind, str) and kind not in ("record", "error", "enum", "fixed", "array", "map")
    ):
        attrs["type"] = _normalize(kind, namespace)
    return _ordered(attrs)


def _normalize_field(field: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    attrs = dict(field)
    attrs["type"] = _normalize(attrs["type"], namespace)
    if "aliases" in attrs:
        attrs["aliases"] = sorted(attrs["aliases"])
    return _ordered(attrs)


def _ordered(attrs: dict[str, Any]) -> dict[str, Any]:
    known = {k: attrs[k] for k in _NORMALIZED_KEY_ORDER if k in attrs}
    custom = {k: attrs[k] for k in sorted(attrs) if k not in known}
    return known | custom


def _parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidSchemaError(f"{what} is not JSON: {exc}") from None


def _add_references(references: Mapping[str, str]) -> avro.name.Names:
    """Parse the references' named types into one name space, in dependency order.

    A reference may use the types of another one given after it, so the ones that name a type
    not yet known are retried until a pass makes no progress.
    """
    names = avro.name.Names()
    pending = dict(references)
    while pending:
        errors: dict[str, str] = {}
        for ref_name, text in pending.items():
            before = dict(names.names)
            try:
                avro.schema.make_avsc_object(_parse_json(text, f"reference {ref_name!r}"), names)
            except (avro.errors.AvroException, TypeError, ValueError, KeyError) as exc:
                names.names = before
                errors[ref_name] = str(exc)
        if len(errors) == len(pending):
            ref_name, error = next(iter(errors.items()))
            raise InvalidSchemaError(f"invalid Avro reference {ref_name!r}: {error}")
        pending = {name: pending[name] for name in errors}
    return names


def _valid_default(schema: avro.schema.Schema, value: Any) -> bool:
    """Whether `value` is a field default of `schema`'s type, in the JSON encoding the Avro
    specification's field defaults table gives (bytes and fixed as strings, records as
    objects...); a union's default may match any branch, as Avro 1.12's Java parser allows."""
    kind = schema.type
    if isinstance(schema, avro.schema.UnionSchema):
        return any(_valid_default(branch, value) for branch in schema.schemas)
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("int", "long"):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in ("float", "double"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind in ("bytes", "string", "fixed"):
        return isinstance(value, str)
    if isinstance(schema, avro.schema.EnumSchema):
        return value in schema.symbols
    if isinstance(schema, avro.schema.ArraySchema):
        return isinstance(value, list) and all(_valid_default(schema.items, v) for v in value)
    if isinstance(schema, avro.schema.MapSchema):
        return isinstance(value, dict) and all(
            _valid_default(schema.values, v) for v in value.values()
        )
    if isinstance(schema, avro.schema.RecordSchema):
        return isinstance(value, dict) and all(
            _valid_default(f.type, value[f.name]) if f.name in value else f.has_default
            for f in schema.fields
        )
    return True


def _check_defaults(schema: avro.schema.Schema, seen: set[int]) -> None:
    """Refuse a field default that does not match its type (Confluent's registry does)."""
    if id(schema) in seen:
        return
    seen.add(id(schema))
    if isinstance(schema, avro.schema.RecordSchema):
        for field in schema.fields:
            if field.has_default and not _valid_default(field.type, field.default):
                raise InvalidSchemaError(
                    f"invalid default {json.dumps(field.default)} for field {field.name!r} of {schema.fullname}"
                )
            _check_defaults(field.type, seen)
    children: list[avro.schema.Schema] = []
    if isinstance(schema, avro.schema.UnionSchema):
        children = list(schema.schemas)
    elif isinstance(schema, avro.schema.ArraySchema):
        children = [schema.items]
    elif isinstance(schema, avro.schema.MapSchema):
        children = [schema.values]
    for child in children:
        _check_defaults(child, seen)


class AvroFormat:
    """Avro: named types of references are resolved by their full names."""

    name = "AVRO"

    def parse(self, text: str, references: Mapping[str, str]) -> AvroSchema:
        reference_names = _add_references(references)
        names = avro.name.Names()
        names.names = dict(reference_names.names)
        try:
            schema = avro.schema.make_avsc_object(_parse_json(text, "schema"), names)
        except InvalidSchemaError:
            raise
        except (avro.errors.AvroException, TypeError, ValueError, KeyError) as exc:
            raise InvalidSchemaError(f"invalid Avro schema: {exc}") from None
        _check_defaults(schema, set())
        return AvroSchema(schema, reference_names)
