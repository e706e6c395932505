"""JSON Schema: validated by `jsonschema` against its draft's metaschema, `$ref`s resolved by
`referencing`, compatibility by the rules Confluent documents for JSON Schema.

Confluent's rules ("JSON Schema compatibility rules" in Confluent's Schema Registry docs,
and Robert Yokota's "Understanding JSON Schema Compatibility") treat a reader as compatible
with a writer when every document the writer accepts, the reader accepts too. No library
implements them, so `_Checker` does, one method per group of keywords; each reports
Confluent's name for the difference it finds (TYPE_NARROWED, REQUIRED_ATTRIBUTE_ADDED, ...).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema

from moldau.registry.formats import InvalidSchemaError, ParsedSchema

if TYPE_CHECKING:  # `referencing` exports the class only from its core module
    from referencing._core import Resolver

# `$schema` (without a trailing "#") -> the validator of that draft; draft-07 when absent,
# as in Confluent's registry.
_DRAFTS: dict[str, type[jsonschema.protocols.Validator]] = {
    str(cls.META_SCHEMA.get("$id", cls.META_SCHEMA.get("id"))).rstrip("#"): cls
    for cls in (
        jsonschema.Draft4Validator,
        jsonschema.Draft6Validator,
        jsonschema.Draft7Validator,
        jsonschema.Draft201909Validator,
        jsonschema.Draft202012Validator,
    )
}
_DEFAULT_DRAFT = jsonschema.Draft7Validator

_TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})
_COMBINERS = ("allOf", "anyOf", "oneOf")
# Keywords that assert nothing about a document: changing them changes no document's validity.
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "$id",
        "id",
        "$schema",
        "$anchor",
        "$vocabulary",
        "definitions",
        "$defs",
    }
)


def _specification(contents: Any) -> referencing.Specification[Any]:
    draft = _draft(contents) if isinstance(contents, dict) else _DEFAULT_DRAFT
    return referencing.jsonschema.specification_with(
        str(draft.META_SCHEMA.get("$id", draft.META_SCHEMA.get("id")))
    )


def _draft(schema: dict[str, Any]) -> type[jsonschema.protocols.Validator]:
    dialect = schema.get("$schema")
    if dialect is None:
        return _DEFAULT_DRAFT
    if not isinstance(dialect, str) or dialect.rstrip("#") not in _DRAFTS:
        raise InvalidSchemaError(f"unsupported $schema {dialect!r}")
    return _DRAFTS[dialect.rstrip("#")]


class JsonSchema:
    """A parsed JSON Schema and the resolver of its `$ref`s (its references included)."""

    schema_type = "JSON"

    def __init__(self, schema: Any, resolver: Resolver[Any]) -> None:
        self.schema = schema
        self.resolver = resolver

    def canonical(self) -> str:
        """Compact JSON with sorted keys: the same schema however it was spaced or ordered."""
        return json.dumps(self.schema, separators=(",", ":"), sort_keys=True)

    def normalized(self) -> str:
        """The canonical text with the order of `required` and `type` lists, which carries no
        meaning, sorted too."""
        return json.dumps(_normalize(self.schema), separators=(",", ":"), sort_keys=True)

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, JsonSchema):
            return [f"cannot read {writer.schema_type} data with a JSON schema"]
        checker = _Checker()
        checker.check(self.schema, self.resolver, writer.schema, writer.resolver, "#")
        return checker.errors


_DATA_KEYWORDS = ("enum", "const", "default", "examples")  # their values are documents


def _normalize(node: Any) -> Any:
    if isinstance(node, list):
        return [_normalize(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: v if k in _DATA_KEYWORDS else _normalize(v) for k, v in node.items()}
    for keyword in ("required", "type"):
        names = out.get(keyword)
        if isinstance(names, list) and all(isinstance(name, str) for name in names):
            out[keyword] = sorted(set(names))
    return out


def _values(schema: dict[str, Any]) -> list[Any] | None:
    """The only values a schema admits (`enum`, `const`), None when not limited so."""
    return [schema["const"]] if "const" in schema else schema.get("enum")


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    names = {float: "number", str: "string", list: "array", dict: "object"}
    return names.get(type(value), "null")


def _types(schema: dict[str, Any]) -> set[str]:
    """The instance types a schema admits ("integer" is within "number"; the types of its
    values when it lists them)."""
    declared = schema.get("type")
    values = _values(schema)
    if declared is None:
        return set(_TYPES) if values is None else {_type_of(v) for v in values}
    types = {declared} if isinstance(declared, str) else set(declared)
    if "number" in types:
        types.add("integer")
    return types


def _upper(reader: Any, writer: Any) -> bool:
    """An upper bound the reader adds or lowers (maxLength, maximum, ...)."""
    return reader is not None and (writer is None or reader < writer)


def _lower(reader: Any, writer: Any) -> bool:
    return reader is not None and (writer is None or reader > writer)


# (keyword, the reader's value narrows the writer's, Confluent's name when it does)
_BOUNDS: dict[str, tuple[tuple[str, Callable[[Any, Any], bool], str], ...]] = {
    "string": (
        ("maxLength", _upper, "MAX_LENGTH_ADDED_OR_DECREASED"),
        ("minLength", _lower, "MIN_LENGTH_ADDED_OR_INCREASED"),
    ),
    "object": (
        ("maxProperties", _upper, "MAX_PROPERTIES_ADDED_OR_DECREASED"),
        ("minProperties", _lower, "MIN_PROPERTIES_ADDED_OR_INCREASED"),
    ),
    "array": (
        ("maxItems", _upper, "MAX_ITEMS_ADDED_OR_DECREASED"),
        ("minItems", _lower, "MIN_ITEMS_ADDED_OR_INCREASED"),
    ),
}


def _number_bound(schema: dict[str, Any], upper: bool) -> tuple[Any, bool] | None:
    """The tightest upper (or lower) bound as (value, exclusive); draft 4's boolean
    `exclusiveMaximum`/`exclusiveMinimum` make `maximum`/`minimum` exclusive."""
    inclusive, exclusive = (
        ("maximum", "exclusiveMaximum") if upper else ("minimum", "exclusiveMinimum")
    )
    bounds = []
    if isinstance(schema.get(inclusive), (int, float)):
        bounds.append((schema[inclusive], schema.get(exclusive) is True))
    if isinstance(schema.get(exclusive), (int, float)) and not isinstance(schema[exclusive], bool):
        bounds.append((schema[exclusive], True))
    sign = 1 if upper else -1
    return min(bounds, key=lambda b: (sign * b[0], not b[1]), default=None)


class _Checker:
    """Walks a reader and a writer schema side by side, collecting Confluent's differences
    that make the reader refuse a document the writer accepts."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self._in_progress: set[tuple[int, int]] = set()

    def _fail(self, kind: str, path: str, detail: str) -> None:
        self.errors.append(f"{kind} at {path}: {detail}")

    def reads(self, reader: Any, r_res: Any, writer: Any, w_res: Any, path: str) -> bool:
        """Whether reader reads writer, without reporting (for matching subschemas)."""
        probe = _Checker()
        probe._in_progress = self._in_progress
        probe.check(reader, r_res, writer, w_res, path)
        return not probe.errors

    def check(self, reader: Any, r_res: Any, writer: Any, w_res: Any, path: str) -> None:
        reader, r_res = _resolve(reader, r_res)
        writer, w_res = _resolve(writer, w_res)
        if reader is True or reader == {} or writer is False:
            return
        if reader is False:
            self._fail("TYPE_NARROWED", path, "the new schema accepts no document")
            return
        if writer is True:
            writer = {}
        key = (id(reader), id(writer))
        if key in self._in_progress:  # a recursive schema: assume the cycle reads itself
            return
        self._in_progress.add(key)
        try:
            self._check_schemas(reader, r_res, writer, w_res, path)
        finally:
            self._in_progress.discard(key)

    def _check_schemas(
        self, reader: dict[str, Any], r_res: Any, writer: dict[str, Any], w_res: Any, path: str
    ) -> None:
        if any(k in reader or k in writer for k in _COMBINERS):
            self._combined(reader, r_res, writer, w_res, path)
            return
        if "not" in reader or "not" in writer:
            # not: the reader must refuse no more than the writer did (Confluent's NOT_TYPE_*)
            if "not" in reader and "not" not in writer:
                self._fail("NOT_TYPE_ADDED", path, "a `not` was added")
            elif "not" in reader and not self.reads(
                writer["not"], w_res, reader["not"], r_res, path + "/not"
            ):
                self._fail("NOT_TYPE_EXTENDED", path, "the `not` refuses more documents")
        self._type_and_values(reader, writer, path)
        shared = _types(reader) & _types(writer)
        for kind, bounds in _BOUNDS.items():
            if kind in shared:
                for keyword, narrows, name in bounds:
                    if narrows(reader.get(keyword), writer.get(keyword)):
                        self._fail(
                            name, f"{path}/{keyword}", f"{writer.get(keyword)} -> {reader[keyword]}"
                        )
        if "string" in shared:
            self._string(reader, writer, path)
        if "number" in shared or "integer" in shared:
            self._number(reader, writer, path)
        if "object" in shared:
            self._object(reader, r_res, writer, w_res, path)
        if "array" in shared:
            self._array(reader, r_res, writer, w_res, path)

    def _type_and_values(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        """Types may widen (integer -> number, one type -> several) but not narrow; enum and
        const values may be added but not removed (TYPE_*, ENUM_ARRAY_*)."""
        r_types, w_types = _types(reader), _types(writer)
        lost = w_types - r_types
        if lost:
            kind = "TYPE_NARROWED" if w_types & r_types else "TYPE_CHANGED"
            self._fail(kind, f"{path}/type", f"{sorted(w_types)} -> {sorted(r_types)}")
        r_values, w_values = _values(reader), _values(writer)
        if r_values is not None:
            if w_values is None:
                self._fail("ENUM_ARRAY_NARROWED", f"{path}/enum", "values were restricted")
            elif any(value not in r_values for value in w_values):
                removed = [value for value in w_values if value not in r_values]
                self._fail("ENUM_ARRAY_NARROWED", f"{path}/enum", f"{removed} removed")

    def _string(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        if "pattern" in reader and reader["pattern"] != writer.get("pattern"):
            kind = "PATTERN_CHANGED" if "pattern" in writer else "PATTERN_ADDED"
            self._fail(kind, f"{path}/pattern", f"{writer.get('pattern')} -> {reader['pattern']}")

    def _number(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        """Bounds may loosen, not tighten (MAXIMUM_*, MINIMUM_*, EXCLUSIVE_*); multipleOf may
        become a divisor of the old one (MULTIPLE_OF_REDUCED), nothing else."""
        for upper, name in ((True, "MAXIMUM"), (False, "MINIMUM")):
            new, old = _number_bound(reader, upper), _number_bound(writer, upper)
            sign = 1 if upper else -1
            if new is not None and (
                old is None or (sign * new[0], not new[1]) < (sign * old[0], not old[1])
            ):
                kind = f"{'EXCLUSIVE_' if new[1] else ''}{name}_ADDED_OR_{'DECREASED' if upper else 'INCREASED'}"
                self._fail(kind, path, f"{old} -> {new} (bound, exclusive)")
        new, old = reader.get("multipleOf"), writer.get("multipleOf")
        if new is not None and (old is None or Decimal(str(old)) % Decimal(str(new)) != 0):
            kind = "MULTIPLE_OF_ADDED" if old is None else "MULTIPLE_OF_CHANGED"
            self._fail(kind, f"{path}/multipleOf", f"{old} -> {new}")

    def _object(
        self, reader: dict[str, Any], r_res: Any, writer: dict[str, Any], w_res: Any, path: str
    ) -> None:
        """Properties under open, closed and partially open content models (Confluent's
        PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL, PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL,
        PROPERTY_*_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL), required and
        additionalProperties."""
        r_props, w_props = reader.get("properties", {}), writer.get("properties", {})
        for name, schema in r_props.items():
            where = f"{path}/properties/{name}"
            if name in w_props:
                self.check(schema, r_res, w_props[name], w_res, where)
                continue
            old = _additional_for(writer, name)
            if old is False:
                continue  # old documents never had it; only `required` matters
            if old is True or old is None:
                if schema not in (True, {}):
                    self._fail(
                        "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
                        where,
                        "old documents may hold any value under this name",
                    )
            elif not self.reads(schema, r_res, old, w_res, where):
                self._fail(
                    "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                    where,
                    "the old additionalProperties admit values it refuses",
                )
        for name, schema in w_props.items():
            if name in r_props:
                continue
            where = f"{path}/properties/{name}"
            new = _additional_for(reader, name)
            if new is False:
                self._fail(
                    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where, "old documents may hold it"
                )
            elif new not in (True, None) and not self.reads(new, r_res, schema, w_res, where):
                self._fail(
                    "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                    where,
                    "the new additionalProperties refuse its old values",
                )
        added = [
            name for name in reader.get("required", []) if name not in writer.get("required", [])
        ]
        if added:
            self._fail("REQUIRED_ATTRIBUTE_ADDED", f"{path}/required", f"{added} now required")
        r_more, w_more = (
            reader.get("additionalProperties", True),
            writer.get("additionalProperties", True),
        )
        if w_more is not False and r_more is not True:
            if r_more is False:
                self._fail(
                    "ADDITIONAL_PROPERTIES_REMOVED",
                    f"{path}/additionalProperties",
                    "the content model was closed",
                )
            elif not self.reads(r_more, r_res, w_more, w_res, f"{path}/additionalProperties"):
                self._fail(
                    "ADDITIONAL_PROPERTIES_NARROWED",
                    f"{path}/additionalProperties",
                    "other properties are restricted more",
                )

    def _array(
        self, reader: dict[str, Any], r_res: Any, writer: dict[str, Any], w_res: Any, path: str
    ) -> None:
        """Item schemas, tuples under open and closed content models (ITEM_*), uniqueItems."""
        r_tuple, r_rest = _items(reader)
        w_tuple, w_rest = _items(writer)
        if (r_tuple is None) != (w_tuple is None):
            self._fail("TYPE_CHANGED", f"{path}/items", "a list became a tuple or the reverse")
            return
        if r_tuple is None or w_tuple is None:
            self.check(r_rest, r_res, w_rest, w_res, f"{path}/items")
        else:
            for i in range(max(len(r_tuple), len(w_tuple))):
                where = f"{path}/items/{i}"
                r_item = r_tuple[i] if i < len(r_tuple) else r_rest
                w_item = w_tuple[i] if i < len(w_tuple) else w_rest
                if w_item is False:
                    continue
                if i >= len(w_tuple) and w_item is True and r_item not in (True, {}):
                    self._fail(
                        "ITEM_ADDED_TO_OPEN_CONTENT_MODEL",
                        where,
                        "old arrays may hold any value here",
                    )
                elif i >= len(r_tuple) and r_item is False:
                    self._fail(
                        "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", where, "old arrays may hold it"
                    )
                elif not self.reads(r_item, r_res, w_item, w_res, where):
                    self._fail("ITEM_CHANGED", where, "the item's schema refuses old values")
        if reader.get("uniqueItems") and not writer.get("uniqueItems"):
            self._fail("UNIQUE_ITEMS_ADDED", f"{path}/uniqueItems", "items must now be unique")

    def _combined(
        self, reader: dict[str, Any], r_res: Any, writer: dict[str, Any], w_res: Any, path: str
    ) -> None:
        """allOf/anyOf/oneOf: a sum (anyOf, oneOf) may gain subschemas, a product (allOf)
        may lose them; oneOf may become anyOf; a plain schema may become a sum containing a
        compatible subschema (Confluent's SUM_TYPE_*, PRODUCT_TYPE_*, COMBINED_TYPE_*)."""
        r_kind, r_subs = _combination(reader)
        w_kind, w_subs = _combination(writer)
        if r_kind == w_kind or (w_kind == "oneOf" and r_kind == "anyOf"):
            if r_kind == "allOf":  # every reader subschema holds for some writer one
                missing = _unmatched(
                    r_subs, w_subs, lambda r, w: self.reads(r, r_res, w, w_res, path)
                )
                kind = "PRODUCT_TYPE_EXTENDED"
            else:  # every writer subschema is read by a distinct reader one
                missing = _unmatched(
                    w_subs, r_subs, lambda w, r: self.reads(r, r_res, w, w_res, path)
                )
                kind = "SUM_TYPE_NARROWED"
            if missing:
                self._fail(
                    kind,
                    f"{path}/{r_kind}",
                    f"{len(missing)} subschema(s) without a compatible counterpart",
                )
        elif w_kind is None and r_kind in ("anyOf", "oneOf"):
            if not any(self.reads(sub, r_res, writer, w_res, path) for sub in r_subs):
                self._fail(
                    "SUM_TYPE_NARROWED", f"{path}/{r_kind}", "no subschema reads the old schema"
                )
        elif r_kind is None and w_kind in ("anyOf", "oneOf"):
            for i, sub in enumerate(w_subs):
                self.check(reader, r_res, sub, w_res, f"{path}/{w_kind}/{i}")
        elif r_kind is None and w_kind == "allOf":
            if not any(self.reads(reader, r_res, sub, w_res, path) for sub in w_subs):
                self._fail(
                    "COMBINED_TYPE_CHANGED",
                    f"{path}/allOf",
                    "no subschema is read by the new schema",
                )
        elif w_kind is None and r_kind == "allOf":
            for i, sub in enumerate(r_subs):
                self.check(sub, r_res, writer, w_res, f"{path}/allOf/{i}")
        else:
            self._fail("COMBINED_TYPE_CHANGED", path, f"{w_kind} -> {r_kind}")


def _combination(schema: dict[str, Any]) -> tuple[str | None, list[Any]]:
    """The schema's combining keyword and subschemas; other keywords next to it (an implicit
    allOf) join the subschemas as one more."""
    for kind in _COMBINERS:
        if kind in schema:
            rest = {k: v for k, v in schema.items() if k != kind and k not in _ANNOTATIONS}
            subs = list(schema[kind])
            if rest:
                return "allOf", [*([{kind: subs}] if kind != "allOf" else subs), rest]
            return kind, subs
    return None, []


def _unmatched(left: list[Any], right: list[Any], fits: Callable[[Any, Any], bool]) -> list[Any]:
    """The items of `left` left without a partner in a maximum matching of `left` to distinct
    items of `right` (augmenting paths)."""
    partner: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for j, candidate in enumerate(right):
            if j not in seen and fits(left[i], candidate):
                seen.add(j)
                if j not in partner or place(partner[j], seen):
                    partner[j] = i
                    return True
        return False

    return [left[i] for i in range(len(left)) if not place(i, set())]


def _additional_for(schema: dict[str, Any], name: str) -> Any:
    """What an object schema says of a property it does not list: a patternProperties schema
    the name matches, else additionalProperties (None when absent: open)."""
    for pattern, sub in schema.get("patternProperties", {}).items():
        if re.search(pattern, name):
            return sub
    return schema.get("additionalProperties")


def _items(schema: dict[str, Any]) -> tuple[list[Any] | None, Any]:
    """(tuple item schemas or None for a list, the schema of the items after them)."""
    if isinstance(schema.get("prefixItems"), list):  # 2020-12 (earlier drafts ignore it)
        return list(schema["prefixItems"]), schema.get("items", True)
    items = schema.get("items", True)
    if isinstance(items, list):
        return items, schema.get("additionalItems", True)
    return None, items


def _resolve(node: Any, resolver: Resolver[Any]) -> tuple[Any, Resolver[Any]]:
    """Follow `$ref`s (keywords beside one join it as an allOf, as drafts 2019-09+ say)."""
    seen = 0
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and seen < 100:
        seen += 1
        if "$id" in node or "id" in node:
            resolver = resolver.in_subresource(_specification(node).create_resource(node))
        resolved = resolver.lookup(node["$ref"])
        rest = {k: v for k, v in node.items() if k != "$ref" and k not in _ANNOTATIONS}
        if rest:
            return {"allOf": [resolved.contents, rest]}, resolved.resolver
        node, resolver = resolved.contents, resolved.resolver
    return node, resolver


def _check_refs(node: Any, resolver: Resolver[Any]) -> None:
    """Every `$ref` must resolve now, not when a document is validated."""
    if isinstance(node, list):
        for item in node:
            _check_refs(item, resolver)
    elif isinstance(node, dict):
        if isinstance(node.get("$id", node.get("id")), str):
            resolver = resolver.in_subresource(_specification(node).create_resource(node))
        if isinstance(node.get("$ref"), str):
            try:
                resolver.lookup(node["$ref"])
            except referencing.exceptions.Unresolvable as exc:
                raise InvalidSchemaError(f"unresolvable $ref {node['$ref']!r}: {exc}") from None
        for key, value in node.items():
            if key not in _DATA_KEYWORDS:
                _check_refs(value, resolver)


def _load(text: str, what: str) -> Any:
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise InvalidSchemaError(f"{what} is not JSON: {exc}") from None
    if not isinstance(schema, (dict, bool)):
        raise InvalidSchemaError(f"{what} is not a JSON Schema (an object or a boolean)")
    if isinstance(schema, dict):
        try:
            _draft(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise InvalidSchemaError(
                f"{what} is not valid against its metaschema: {exc.message}"
            ) from None
    return schema


class JsonSchemaFormat:
    """JSON Schema, drafts 4, 6, 7, 2019-09 and 2020-12 (as `$schema` says; 7 by default).

    A reference is found by its name (resolved against the schema's `$id`, as Confluent's
    registry does) and by its own `$id`.
    """

    name = "JSON"

    def parse(self, text: str, references: Mapping[str, str]) -> JsonSchema:
        schema = _load(text, "schema")
        base = schema.get("$id", schema.get("id", "")) if isinstance(schema, dict) else ""
        resources = []
        for ref_name, ref_text in references.items():
            contents = _load(ref_text, f"reference {ref_name!r}")
            resource = _specification(contents).create_resource(contents)
            uris = {ref_name, urljoin(base, ref_name) if isinstance(base, str) else ref_name}
            resources += [(uri, resource) for uri in uris]
        registry: referencing.Registry[Any] = referencing.Registry().with_resources(resources)
        root = _specification(schema).create_resource(schema)
        uri = base if isinstance(base, str) else ""
        registry = registry.with_resource(uri, root).crawl()
        for ref_uri, resource in resources:  # a reference's own $refs must resolve too
            _check_refs(resource.contents, registry.resolver(base_uri=ref_uri))
        resolver = registry.resolver(base_uri=uri)
        _check_refs(schema, resolver)
        return JsonSchema(schema, resolver)
