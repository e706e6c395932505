"""The registry's state: what the records of `_schemas` say, applied one by one.

A plain object (no IO): every node feeds it the same records in the same order, so every
node holds the same subjects, versions, ids, configs and modes. Only the primary decides
new ids and versions, from this state after it caught up with the topic.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from moldau.registry.records import (
    CLEAR_SUBJECT,
    CONFIG,
    DELETE_SUBJECT,
    MODE,
    SCHEMA,
    Key,
)

AVRO = "AVRO"


@dataclass(frozen=True)
class Reference:
    """A schema reference: the name the schema imports, and the subject version it is."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class Schema:
    """A schema's content: what an id stands for (the same content keeps its id)."""

    schema_type: str
    text: str
    references: tuple[Reference, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The schema's fields as Confluent returns them (schemaType omitted for Avro)."""
        fields: dict[str, Any] = {}
        if self.schema_type != AVRO:
            fields["schemaType"] = self.schema_type
        if self.references:
            fields["references"] = [r.to_json() for r in self.references]
        fields["schema"] = self.text
        return fields


@dataclass(frozen=True)
class SchemaVersion:
    subject: str
    version: int
    id: int
    schema: Schema
    deleted: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "version": self.version,
            "id": self.id,
            **self.schema.to_json(),
        }

    def record(self) -> tuple[Key, dict[str, Any]]:
        """The `_schemas` record that registers (or soft-deletes) this version."""
        value = {
            "subject": self.subject,
            "version": self.version,
            "id": self.id,
            **self.schema.to_json(),
            "deleted": self.deleted,
        }
        if self.schema.schema_type == AVRO:
            value["schemaType"] = AVRO
        return Key(SCHEMA, self.subject, self.version), value


def parse_references(raw: Any) -> tuple[Reference, ...]:
    """References from a request or a record; ValueError if malformed."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError("references must be a list")
    refs = []
    for r in raw:
        if (
            not isinstance(r, dict)
            or not isinstance(r.get("name"), str)
            or not isinstance(r.get("subject"), str)
            or not isinstance(r.get("version"), int)
        ):
            raise ValueError(f"malformed reference {r!r} (name, subject, version)")
        refs.append(Reference(r["name"], r["subject"], r["version"]))
    return tuple(refs)


class RegistryState:
    """Subjects, versions, ids, configs and modes, as of the last record applied."""

    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, SchemaVersion]] = {}
        self.schemas: dict[int, Schema] = {}  # ids still used by some version
        self.ids: dict[Schema, int] = {}
        self.max_id = 0  # the highest id ever seen: never handed out again
        self.configs: dict[str | None, dict[str, Any]] = {}  # None: the global config
        self.modes: dict[str | None, str] = {}
        self.offset = -1  # of the last record applied

    # -- applying records ----------------------------------------------------------------
    def apply(self, offset: int, key: Key | None, value: dict[str, Any] | None) -> None:
        """Apply the record at `offset`; records of unknown or malformed shape are skipped
        (another registry's newer record types must not stop this one)."""
        self.offset = offset
        if key is None:
            return
        if key.keytype == SCHEMA and key.subject is not None and key.version is not None:
            self._apply_schema(key.subject, key.version, value)
        elif key.keytype == CONFIG:
            if value is None:
                self.configs.pop(key.subject, None)
            else:
                self.configs[key.subject] = value
        elif key.keytype == MODE:
            mode = value.get("mode") if value else None
            if isinstance(mode, str):
                self.modes[key.subject] = mode
            else:
                self.modes.pop(key.subject, None)
        elif key.keytype in (DELETE_SUBJECT, CLEAR_SUBJECT) and key.subject is not None:
            upto = value.get("version") if value else None
            if isinstance(upto, int):
                self._delete_subject(key.subject, upto, permanent=key.keytype == CLEAR_SUBJECT)

    def _apply_schema(self, subject: str, version: int, value: dict[str, Any] | None) -> None:
        if value is None:  # a hard delete
            self._remove(subject, version)
            return
        try:
            schema_id = value["id"]
            text = value["schema"]
            if not isinstance(schema_id, int) or not isinstance(text, str):
                return
            schema = Schema(
                value.get("schemaType") or AVRO, text, parse_references(value.get("references"))
            )
        except (KeyError, ValueError):
            return
        self._remove(subject, version)
        self.subjects.setdefault(subject, {})[version] = SchemaVersion(
            subject, version, schema_id, schema, bool(value.get("deleted", False))
        )
        self.schemas[schema_id] = schema
        self.ids.setdefault(schema, schema_id)
        self.max_id = max(self.max_id, schema_id)

    def _delete_subject(self, subject: str, upto: int, permanent: bool) -> None:
        versions = self.subjects.get(subject, {})
        for number, v in list(versions.items()):
            if number > upto:
                continue
            if permanent and v.deleted:
                self._remove(subject, number)
            else:
                versions[number] = replace(v, deleted=True)

    def _remove(self, subject: str, version: int) -> None:
        versions = self.subjects.get(subject)
        if versions is None or version not in versions:
            return
        old = versions.pop(version)
        if not versions:
            del self.subjects[subject]
        if not any(v.id == old.id for v in self.all_versions()):
            self.schemas.pop(old.id, None)
            if self.ids.get(old.schema) == old.id:
                del self.ids[old.schema]

    # -- reading -------------------------------------------------------------------------
    def all_versions(self) -> Iterator[SchemaVersion]:
        for versions in self.subjects.values():
            yield from versions.values()

    def versions(self, subject: str, deleted: bool = False) -> list[SchemaVersion]:
        """The subject's versions, oldest first (soft-deleted ones only with `deleted`)."""
        found = self.subjects.get(subject, {})
        return [found[n] for n in sorted(found) if deleted or not found[n].deleted]

    def live_ids(self, subject: str | None) -> frozenset[int]:
        """Ids of the subject's versions not deleted (None: of every subject's)."""
        versions = (
            self.all_versions() if subject is None else self.subjects.get(subject, {}).values()
        )
        return frozenset(v.id for v in versions if not v.deleted)

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted))

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live schemas that reference this subject version."""
        return sorted(
            {
                v.id
                for v in self.all_versions()
                if not v.deleted
                and any(r.subject == subject and r.version == version for r in v.schema.references)
            }
        )

    def compatibility(self, subject: str | None) -> str | None:
        level = self.configs.get(subject, {}).get("compatibilityLevel")
        return level if isinstance(level, str) else None

    def mode(self, subject: str | None) -> str | None:
        return self.modes.get(subject)
