"""The registry's operations, as Confluent's REST API defines them, over a `Store`.

Reads answer from the state once the store caught up with `_schemas`; writes (only on the
primary) decide against that state and return once their records were consumed back, so
the next read sees them. The REST layer maps paths to these methods and errors to bodies.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from moldau.registry import errors
from moldau.registry.compatibility import LEVELS
from moldau.registry.errors import RegistryError
from moldau.registry.formats import InvalidSchemaError, ParsedSchema, SchemaFormat
from moldau.registry.records import CONFIG, DELETE_SUBJECT, MODE, SCHEMA, Key
from moldau.registry.state import (
    AVRO,
    RegistryState,
    Schema,
    SchemaVersion,
    parse_references,
)

DEFAULT_LEVEL = "BACKWARD"
MODES = ("READWRITE", "READONLY", "IMPORT")
DEFAULT_MODE = "READWRITE"
MAX_VERSION = 2**31 - 1

Record = tuple[Key, dict[str, Any] | None]
# (level, new schema, previous schemas oldest first) -> why the new one is incompatible
Compatibility = Callable[[str, ParsedSchema, list[ParsedSchema]], list[str]]


class Store(Protocol):
    """Where the state comes from and writes go: `_schemas` (or a list, in unit tests)."""

    state: RegistryState
    lock: threading.RLock  # held while the state changes

    def catch_up(self) -> None:
        """Return once the state holds every record in the topic when this was called."""
        ...

    def write(self, records: Sequence[Record]) -> None:
        """Append the records and return once the state applied them."""
        ...


def parse_bool(value: str | None) -> bool:
    return value is not None and value.lower() == "true"


class SchemaRegistry:
    def __init__(
        self, store: Store, formats: Mapping[str, SchemaFormat], compatibility: Compatibility
    ) -> None:
        self.store = store
        self.formats = formats
        self.compatibility_errors = compatibility
        self._parsed: dict[Schema, ParsedSchema] = {}
        self._write_lock = threading.Lock()  # one decision-and-write at a time

    @contextmanager
    def _reading(self) -> Iterator[RegistryState]:
        self.store.catch_up()
        with self.store.lock:
            yield self.store.state

    # -- schemas -------------------------------------------------------------------------
    def parse(self, state: RegistryState, schema: Schema) -> ParsedSchema:
        parsed = self._parsed.get(schema)
        if parsed is None:
            fmt = self.formats.get(schema.schema_type)
            if fmt is None:
                raise errors.invalid_schema(f"unknown schemaType {schema.schema_type!r}")
            try:
                parsed = fmt.parse(schema.text, self._resolve(state, schema))
            except InvalidSchemaError as e:
                raise errors.invalid_schema(str(e)) from None
            self._parsed[schema] = parsed
        return parsed

    def _resolve(self, state: RegistryState, schema: Schema) -> dict[str, str]:
        """Every schema `schema` references, directly or not: name -> text."""
        found: dict[str, str] = {}
        pending = list(schema.references)
        while pending:
            ref = pending.pop()
            if ref.name in found:
                continue
            version = state.subjects.get(ref.subject, {}).get(ref.version)
            if version is None:
                raise errors.invalid_schema(
                    f"reference {ref.name!r}: version {ref.version} of subject "
                    f"{ref.subject!r} not found"
                )
            found[ref.name] = version.schema.text
            pending.extend(version.schema.references)
        return found

    def _request_schema(
        self, state: RegistryState, body: Mapping[str, Any], normalize: bool
    ) -> tuple[Schema, ParsedSchema]:
        """The schema a request body gives, stored as the format's canonical text."""
        text = body.get("schema")
        if not isinstance(text, str):
            raise errors.invalid_schema("the request has no schema (a string)")
        schema_type = body.get("schemaType") or AVRO
        if not isinstance(schema_type, str):
            raise errors.invalid_schema("schemaType must be a string")
        try:
            refs = parse_references(body.get("references"))
        except ValueError as e:
            raise errors.invalid_schema(str(e)) from None
        parsed = self.parse(state, Schema(schema_type.upper(), text, refs))
        stored = parsed.normalized() if normalize else parsed.canonical()
        return Schema(parsed.schema_type, stored, refs), parsed

    def schema_by_id(
        self, schema_id: int, subject: str | None = None, fmt: str | None = None
    ) -> dict[str, Any]:
        with self._reading() as state:
            schema = state.schemas.get(schema_id)
            if schema is None or (
                subject is not None
                and not any(v.id == schema_id for v in state.versions(subject, True))
            ):
                raise errors.schema_not_found(f"Schema {schema_id} not found")
            return {**schema.to_json(), **self._formatted(state, schema, fmt)}

    def version_json(
        self, subject: str, version: str, deleted: bool, fmt: str | None = None
    ) -> dict[str, Any]:
        with self._reading() as state:
            found = self._version(state, subject, version, deleted)
            return {**found.to_json(), **self._formatted(state, found.schema, fmt)}

    def _formatted(self, state: RegistryState, schema: Schema, fmt: str | None) -> dict[str, str]:
        """`format=serialized`: a Protobuf schema as its base64 FileDescriptorProto (what
        confluent-kafka's Protobuf deserializer asks for); other formats ignore it."""
        if fmt != "serialized" or schema.schema_type != "PROTOBUF":
            return {}
        serialized = getattr(self.parse(state, schema), "serialized", None)
        return {"schema": serialized()} if callable(serialized) else {}

    def subjects_of_id(self, schema_id: int, deleted: bool) -> list[dict[str, Any]]:
        """The (subject, version) pairs that hold the id."""
        with self._reading() as state:
            if schema_id not in state.schemas:
                raise errors.schema_not_found(f"Schema {schema_id} not found")
            return [
                {"subject": v.subject, "version": v.version}
                for s in sorted(state.subjects)
                for v in state.versions(s, deleted)
                if v.id == schema_id
            ]

    def types(self) -> list[str]:
        return sorted(self.formats)

    # -- subjects and versions -----------------------------------------------------------
    def subjects(self, deleted: bool) -> list[str]:
        with self._reading() as state:
            return state.subject_names(deleted)

    def version_numbers(self, subject: str, deleted: bool) -> list[int]:
        with self._reading() as state:
            found = [v.version for v in state.versions(subject, deleted)]
            if not found:
                raise errors.subject_not_found(subject)
            return found

    def version(self, subject: str, version: str, deleted: bool = False) -> SchemaVersion:
        with self._reading() as state:
            return self._version(state, subject, version, deleted)

    @staticmethod
    def _version(state: RegistryState, subject: str, version: str, deleted: bool) -> SchemaVersion:
        """`version` is a number, `latest` or -1 (the latest)."""
        latest = version == "latest" or version == "-1"
        if not latest and not (version.isdigit() and 0 < int(version) <= MAX_VERSION):
            raise errors.invalid_version(version)
        versions = state.versions(subject, deleted or not latest)
        if not versions:
            raise errors.subject_not_found(subject)
        if latest:
            live = [v for v in versions if deleted or not v.deleted]
            if not live:
                raise errors.version_not_found(subject, version)
            return live[-1]
        for v in versions:
            if v.version == int(version) and (deleted or not v.deleted):
                return v
        raise errors.version_not_found(subject, version)

    def referenced_by(self, subject: str, version: str) -> list[int]:
        with self._reading() as state:
            found = self._version(state, subject, version, False)
            return state.referenced_by(subject, found.version)

    def lookup(
        self, subject: str, body: Mapping[str, Any], normalize: bool, deleted: bool
    ) -> dict[str, Any]:
        with self._reading() as state:
            versions = state.versions(subject, deleted)
            if not versions:
                raise errors.subject_not_found(subject)
            schema, _ = self._request_schema(state, body, normalize)
            for v in versions:
                if v.schema == schema:
                    return v.to_json()
            raise errors.schema_not_found()

    def register(self, subject: str, body: Mapping[str, Any], normalize: bool) -> int:
        """The new schema's id (or the id it already has in this subject)."""
        with self._write_lock:
            self.store.catch_up()
            with self.store.lock:
                state = self.store.state
                mode = state.mode(subject) or state.mode(None) or DEFAULT_MODE
                if mode == "READONLY":
                    raise errors.not_permitted(f"Subject {subject} is in read-only mode")
                schema, parsed = self._request_schema(state, body, normalize)
                versions = state.versions(subject, deleted=True)
                wanted_id, wanted_version = body.get("id"), body.get("version")
                if mode == "IMPORT":
                    new = self._imported(state, subject, schema, wanted_id, wanted_version)
                else:
                    if wanted_id not in (None, -1) or wanted_version not in (None, -1):
                        raise errors.not_permitted(
                            f"Subject {subject} is not in import mode: a schema id or version "
                            "cannot be given"
                        )
                    live = [v for v in versions if not v.deleted]
                    for v in live:
                        if v.schema == schema:
                            return v.id
                    self._check(state, subject, parsed, live)
                    schema_id = state.ids.get(schema) or state.max_id + 1
                    number = max((v.version for v in versions), default=0) + 1
                    new = SchemaVersion(subject, number, schema_id, schema)
            self.store.write([new.record()])
            return new.id

    @staticmethod
    def _imported(
        state: RegistryState, subject: str, schema: Schema, wanted_id: Any, wanted_version: Any
    ) -> SchemaVersion:
        """IMPORT mode: the client gives the id (and maybe the version)."""
        if not isinstance(wanted_id, int) or wanted_id < 1:
            raise errors.not_permitted("A schema id is required in import mode")
        taken = state.schemas.get(wanted_id)
        if taken is not None and taken != schema:
            raise errors.not_permitted(
                f"Overwrite new schema with id {wanted_id} is not permitted."
            )
        versions = state.subjects.get(subject, {})
        if wanted_version in (None, -1):
            wanted_version = max(versions, default=0) + 1
        if not isinstance(wanted_version, int) or not 0 < wanted_version <= MAX_VERSION:
            raise errors.invalid_version(wanted_version)
        existing = versions.get(wanted_version)
        if existing is not None and (existing.id != wanted_id or existing.schema != schema):
            raise errors.not_permitted(
                f"Version {wanted_version} of subject {subject} already exists"
            )
        return SchemaVersion(subject, wanted_version, wanted_id, schema)

    def _check(
        self,
        state: RegistryState,
        subject: str,
        parsed: ParsedSchema,
        previous: Sequence[SchemaVersion],
        level: str | None = None,
    ) -> None:
        messages = self._compatibility(state, subject, parsed, previous, level)
        if messages:
            raise RegistryError(
                409,
                409,
                "Schema being registered is incompatible with an earlier schema for subject "
                f'"{subject}", details: {messages}',
            )

    def _compatibility(
        self,
        state: RegistryState,
        subject: str,
        parsed: ParsedSchema,
        previous: Sequence[SchemaVersion],
        level: str | None = None,
    ) -> list[str]:
        level = level or state.compatibility(subject) or state.compatibility(None)
        level = level or DEFAULT_LEVEL
        if level == "NONE" or not previous:
            return []
        old = [self.parse(state, v.schema) for v in previous]
        if any(o.schema_type != parsed.schema_type for o in old):
            return [f"the schema type changed: {old[-1].schema_type} -> {parsed.schema_type}"]
        return self.compatibility_errors(level, parsed, old)

    def check(
        self, subject: str, version: str | None, body: Mapping[str, Any], normalize: bool
    ) -> list[str]:
        """Why the schema could not be registered: against `version`, or against every
        version the subject's level compares with (`version` None); [] if compatible."""
        with self._reading() as state:
            schema, parsed = self._request_schema(state, body, normalize)
            if version is None:
                live = state.versions(subject)
                return self._compatibility(state, subject, parsed, live)
            against = self._version(state, subject, version, False)
            level = state.compatibility(subject) or state.compatibility(None) or DEFAULT_LEVEL
            return self._compatibility(
                state, subject, parsed, [against], level.removesuffix("_TRANSITIVE")
            )

    # -- deletes -------------------------------------------------------------------------
    def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        with self._write_lock:
            self.store.catch_up()
            with self.store.lock:
                state = self.store.state
                found = self._version(state, subject, version, permanent)
                if state.referenced_by(subject, found.version):
                    raise RegistryError(
                        422,
                        42206,
                        "One or more references exist to the schema "
                        f"{{subject={subject},version={found.version}}}.",
                    )
                if permanent and not found.deleted:
                    raise RegistryError(
                        404,
                        40407,
                        f"Subject '{subject}' Version {found.version} was not deleted first "
                        "before being permanently deleted",
                    )
                if permanent:
                    record: Record = (Key(SCHEMA, subject, found.version), None)
                else:
                    record = SchemaVersion(
                        subject, found.version, found.id, found.schema, True
                    ).record()
            self.store.write([record])
            return found.version

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        with self._write_lock:
            self.store.catch_up()
            with self.store.lock:
                state = self.store.state
                every = state.versions(subject, deleted=True)
                if not every:
                    raise errors.subject_not_found(subject)
                live = [v for v in every if not v.deleted]
                if permanent and live:
                    raise RegistryError(
                        404,
                        40405,
                        f"Subject '{subject}' was not deleted first before being "
                        "permanently deleted",
                    )
                if not permanent and not live:
                    raise RegistryError(
                        404,
                        40404,
                        f"Subject '{subject}' was soft deleted. Set permanent=true to delete "
                        "permanently",
                    )
                for v in live:
                    if state.referenced_by(subject, v.version):
                        raise RegistryError(
                            422,
                            42206,
                            "One or more references exist to the schema "
                            f"{{subject={subject},version={v.version}}}.",
                        )
                latest = every[-1].version
                records: list[Record]
                if permanent:
                    records = [(Key(SCHEMA, subject, v.version), None) for v in every]
                    records += [(Key(CONFIG, subject), None), (Key(MODE, subject), None)]
                else:
                    value = {"subject": subject, "version": latest}
                    records = [(Key(DELETE_SUBJECT, subject), value)]
                numbers = [v.version for v in (every if permanent else live)]
            self.store.write(records)
            return numbers

    # -- config and mode -----------------------------------------------------------------
    def config(self, subject: str | None, default_to_global: bool) -> dict[str, Any]:
        with self._reading() as state:
            found = state.configs.get(subject)
            if found is None and subject is not None and not default_to_global:
                raise RegistryError(
                    404,
                    40408,
                    f"Subject '{subject}' does not have subject-level compatibility configured",
                )
            if found is None:
                found = state.configs.get(None, {"compatibilityLevel": DEFAULT_LEVEL})
            return dict(found)

    def set_config(self, subject: str | None, body: Mapping[str, Any]) -> dict[str, Any]:
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise errors.invalid_compatibility(level)
        value = {"compatibilityLevel": level.upper()}
        if isinstance(body.get("normalize"), bool):
            value["normalize"] = body["normalize"]
        with self._write_lock:
            self.store.write([(Key(CONFIG, subject), value)])
        return {
            "compatibility": level.upper(),
            **{k: v for k, v in value.items() if k != "compatibilityLevel"},
        }

    def delete_config(self, subject: str | None) -> dict[str, Any]:
        with self._write_lock:
            old = self.config(subject, default_to_global=True)
            self.store.write([(Key(CONFIG, subject), None)])
            return old

    def mode(self, subject: str | None, default_to_global: bool) -> dict[str, str]:
        with self._reading() as state:
            found = state.mode(subject)
            if found is None and subject is not None and not default_to_global:
                raise RegistryError(
                    404, 40409, f"Subject '{subject}' does not have subject-level mode configured"
                )
            return {"mode": found or state.mode(None) or DEFAULT_MODE}

    def set_mode(self, subject: str | None, body: Mapping[str, Any], force: bool) -> dict[str, str]:
        mode = body.get("mode")
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        with self._write_lock:
            self.store.catch_up()
            with self.store.lock:
                state = self.store.state
                has_schemas = bool(state.versions(subject) if subject else state.subjects)
            if mode == "IMPORT" and has_schemas and not force:
                raise errors.not_permitted(
                    "Cannot import since found existing subjects (set force=true to override)"
                )
            self.store.write([(Key(MODE, subject), {"mode": mode})])
        return {"mode": mode}

    def delete_mode(self, subject: str) -> dict[str, str]:
        with self._write_lock:
            old = self.mode(subject, default_to_global=True)
            self.store.write([(Key(MODE, subject), None)])
            return old
