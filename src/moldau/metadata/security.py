"""The security part of the metadata image: ACLs, SCRAM credentials, client quotas.

As in KRaft, all three are metadata records (AccessControlEntryRecord and its removal by
id, UserScramCredentialRecord per user and mechanism, ClientQuotaRecord per entity and
key), so every node authorizes, authenticates and throttles from the same committed
state. Like the rest of the image this part is immutable: a :class:`SecurityDelta`
replays records and builds the next :class:`SecurityImage`, and a part no record touched
keeps its mapping object, so "did the ACLs change" is an identity check.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from moldau.protocol.metadata_records.access_control_entry_record import (
    AccessControlEntryRecord,
)
from moldau.protocol.metadata_records.client_quota_record import ClientQuotaRecord, EntityData
from moldau.protocol.metadata_records.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from moldau.protocol.metadata_records.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from moldau.protocol.metadata_records.user_scram_credential_record import (
    UserScramCredentialRecord,
)

SECURITY_RECORDS = (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    UserScramCredentialRecord,
    RemoveUserScramCredentialRecord,
    ClientQuotaRecord,
)

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class StandardAcl:
    """One ACL as the standard authorizer stores it (Kafka's codes for every enum)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str  # "User:alice", "User:*"
    host: str  # an address or "*"
    operation: int
    permission_type: int

    @classmethod
    def from_record(cls, r: AccessControlEntryRecord) -> StandardAcl:
        return cls(
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            r.principal,
            r.host,
            r.operation,
            r.permission_type,
        )

    def to_record(self, acl_id: bytes) -> AccessControlEntryRecord:
        return AccessControlEntryRecord(
            id=acl_id,
            resource_type=self.resource_type,
            resource_name=self.resource_name,
            pattern_type=self.pattern_type,
            principal=self.principal,
            host=self.host,
            operation=self.operation,
            permission_type=self.permission_type,
        )


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps of a SCRAM password (RFC 5802): never the password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


QuotaEntity = tuple[tuple[str, str | None], ...]
"""A client quota entity: sorted (entity type, name) pairs; a None name is the default."""


def quota_entity(pairs: Mapping[str, str | None]) -> QuotaEntity:
    return tuple(sorted(pairs.items()))


@dataclass(frozen=True, slots=True)
class SecurityImage:
    acls: Mapping[bytes, StandardAcl] = field(default_factory=lambda: _EMPTY)
    # user -> mechanism type (1: SCRAM-SHA-256, 2: SCRAM-SHA-512) -> credential
    scram: Mapping[str, Mapping[int, ScramCredential]] = field(default_factory=lambda: _EMPTY)
    quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=lambda: _EMPTY)

    def scram_credential(self, user: str, mechanism: int) -> ScramCredential | None:
        return self.scram.get(user, _EMPTY).get(mechanism)

    def records(self) -> Iterator[Any]:
        """This state as records (what a metadata snapshot holds of it)."""
        for acl_id, acl in self.acls.items():
            yield acl.to_record(acl_id)
        for user, mechanisms in self.scram.items():
            for mechanism, c in mechanisms.items():
                yield UserScramCredentialRecord(
                    name=user,
                    mechanism=mechanism,
                    salt=c.salt,
                    stored_key=c.stored_key,
                    server_key=c.server_key,
                    iterations=c.iterations,
                )
        for entity, values in self.quotas.items():
            for key, value in values.items():
                yield ClientQuotaRecord(
                    entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                    key=key,
                    value=value,
                )


class SecurityDelta:
    """Security records replayed on top of ``image``; :meth:`apply` builds the next one."""

    def __init__(self, image: SecurityImage) -> None:
        self.image = image
        self._acls: dict[bytes, StandardAcl] | None = None
        self._scram: dict[str, Mapping[int, ScramCredential]] | None = None
        self._quotas: dict[QuotaEntity, Mapping[str, float]] | None = None

    def replay(self, rec: Any) -> None:
        if isinstance(rec, AccessControlEntryRecord):
            self._acl_map()[rec.id] = StandardAcl.from_record(rec)
        elif isinstance(rec, RemoveAccessControlEntryRecord):
            self._acl_map().pop(rec.id, None)
        elif isinstance(rec, UserScramCredentialRecord):
            users = self._scram_map()
            mechanisms = dict(users.get(rec.name, _EMPTY))
            mechanisms[rec.mechanism] = ScramCredential(
                rec.salt, rec.stored_key, rec.server_key, rec.iterations
            )
            users[rec.name] = MappingProxyType(mechanisms)
        elif isinstance(rec, RemoveUserScramCredentialRecord):
            users = self._scram_map()
            mechanisms = dict(users.get(rec.name, _EMPTY))
            mechanisms.pop(rec.mechanism, None)
            if mechanisms:
                users[rec.name] = MappingProxyType(mechanisms)
            else:
                users.pop(rec.name, None)
        elif isinstance(rec, ClientQuotaRecord):
            entity = quota_entity({e.entity_type: e.entity_name for e in rec.entity})
            quotas = self._quota_map()
            values = dict(quotas.get(entity, _EMPTY))
            if rec.remove:
                values.pop(rec.key, None)
            else:
                values[rec.key] = rec.value
            if values:
                quotas[entity] = MappingProxyType(values)
            else:
                quotas.pop(entity, None)

    def _acl_map(self) -> dict[bytes, StandardAcl]:
        if self._acls is None:
            self._acls = dict(self.image.acls)
        return self._acls

    def _scram_map(self) -> dict[str, Mapping[int, ScramCredential]]:
        if self._scram is None:
            self._scram = dict(self.image.scram)
        return self._scram

    def _quota_map(self) -> dict[QuotaEntity, Mapping[str, float]]:
        if self._quotas is None:
            self._quotas = dict(self.image.quotas)
        return self._quotas

    def apply(self) -> SecurityImage:
        if self._acls is None and self._scram is None and self._quotas is None:
            return self.image
        image = self.image
        return SecurityImage(
            acls=image.acls if self._acls is None else MappingProxyType(self._acls),
            scram=image.scram if self._scram is None else MappingProxyType(self._scram),
            quotas=image.quotas if self._quotas is None else MappingProxyType(self._quotas),
        )
