"""The controller's side of the security admin APIs: CreateAcls, DeleteAcls,
AlterClientQuotas and AlterUserScramCredentials, each one operation of the quorum
controller that validates against the latest state and returns the records carrying it
out (Kafka's AclControlManager, ClientQuotaControlManager and ScramControlManager).
Brokers authorize the caller before forwarding; the describe APIs are served by brokers
from their image.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from moldau.controller.quorum_controller import ControllerResult
from moldau.ids import IdSource
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import MetadataRecord
from moldau.metadata.security import StandardAcl, quota_entity
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest,
)
from moldau.protocol.messages.alter_client_quotas_request import EntryData as QuotaAlteration
from moldau.protocol.messages.alter_client_quotas_response import (
    AlterClientQuotasResponse,
)
from moldau.protocol.messages.alter_client_quotas_response import (
    EntityData as ResponseEntity,
)
from moldau.protocol.messages.alter_client_quotas_response import (
    EntryData as QuotaResult,
)
from moldau.protocol.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from moldau.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from moldau.protocol.messages.create_acls_request import CreateAclsRequest
from moldau.protocol.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from moldau.protocol.messages.delete_acls_request import DeleteAclsRequest
from moldau.protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
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
from moldau.security.acl import AclFilter, new_acl_error
from moldau.security.quotas import CLIENT_ID, IP, IP_KEYS, USER, USER_CLIENT_KEYS
from moldau.security.scram import BY_TYPE, MAX_ITERATIONS

if TYPE_CHECKING:
    from moldau.controller.context import ControllerContext


# -- ACLs ------------------------------------------------------------------------------
async def create_acls(
    controller: ControllerContext, version: int, request: CreateAclsRequest
) -> CreateAclsResponse:
    def op(image: MetadataImage) -> ControllerResult[CreateAclsResponse]:
        existing = set(image.security.acls.values())
        results, records = [], []
        for c in request.creations or []:
            acl = StandardAcl(
                c.resource_type,
                c.resource_name or "",
                c.resource_pattern_type,
                c.principal or "",
                c.host or "",
                c.operation,
                c.permission_type,
            )
            error = new_acl_error(acl)
            if error is not None:
                results.append(
                    AclCreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=error)
                )
                continue
            if acl not in existing:  # an identical ACL is a success that adds nothing
                existing.add(acl)
                records.append(acl.to_record(_new_id(controller.ids, image)))
            results.append(AclCreationResult(error_code=ErrorCode.NONE))
        return ControllerResult(CreateAclsResponse(results=results), records)

    return await controller.quorum.write(op)


def _new_id(ids: IdSource, image: MetadataImage) -> bytes:
    while (acl_id := ids.uuid4().bytes) in image.security.acls:
        pass
    return acl_id


async def delete_acls(
    controller: ControllerContext, version: int, request: DeleteAclsRequest
) -> DeleteAclsResponse:
    def op(image: MetadataImage) -> ControllerResult[DeleteAclsResponse]:
        results = []
        removed: dict[bytes, None] = {}
        for f in request.filters or []:
            acl_filter = AclFilter(
                f.resource_type_filter,
                f.resource_name_filter,
                f.pattern_type_filter,
                f.principal_filter,
                f.host_filter,
                f.operation,
                f.permission_type,
            )
            if acl_filter.is_unknown():
                results.append(
                    DeleteAclsFilterResult(
                        error_code=ErrorCode.INVALID_REQUEST, error_message="Unknown filter."
                    )
                )
                continue
            matching = [(i, a) for i, a in image.security.acls.items() if acl_filter.matches(a)]
            removed.update((i, None) for i, _ in matching)
            results.append(
                DeleteAclsFilterResult(
                    error_code=ErrorCode.NONE,
                    matching_acls=[_matching(a) for _, a in matching],
                )
            )
        records: list[MetadataRecord] = [RemoveAccessControlEntryRecord(id=i) for i in removed]
        return ControllerResult(DeleteAclsResponse(filter_results=results), records)

    return await controller.quorum.write(op)


def _matching(a: StandardAcl) -> DeleteAclsMatchingAcl:
    return DeleteAclsMatchingAcl(
        error_code=ErrorCode.NONE,
        resource_type=a.resource_type,
        resource_name=a.resource_name,
        pattern_type=a.pattern_type,
        principal=a.principal,
        host=a.host,
        operation=a.operation,
        permission_type=a.permission_type,
    )


# -- client quotas ------------------------------------------------------------------------
async def alter_client_quotas(
    controller: ControllerContext, version: int, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    def op(image: MetadataImage) -> ControllerResult[AlterClientQuotasResponse]:
        results, records = [], []
        for entry in request.entries or []:
            error, message, changes = _quota_changes(image, entry)
            results.append(
                QuotaResult(
                    error_code=error,
                    error_message=message,
                    entity=[
                        ResponseEntity(entity_type=e.entity_type, entity_name=e.entity_name)
                        for e in entry.entity or []
                    ],
                )
            )
            records += changes
        return ControllerResult(
            AlterClientQuotasResponse(entries=results),
            [] if request.validate_only else records,
        )

    return await controller.quorum.write(op)


def _quota_changes(
    image: MetadataImage, entry: QuotaAlteration
) -> tuple[ErrorCode, str | None, list[MetadataRecord]]:
    invalid = ErrorCode.INVALID_REQUEST
    pairs: dict[str, str | None] = {}
    for e in entry.entity or []:
        if e.entity_type in pairs:
            return (
                invalid,
                f"Invalid client quota entity, duplicate entity entry {e.entity_type}",
                [],
            )
        if e.entity_type not in (USER, CLIENT_ID, IP):
            return invalid, f"Unhandled client quota entity type: {e.entity_type}", []
        if e.entity_name == "":
            return invalid, f"Empty {e.entity_type} not supported", []
        pairs[e.entity_type] = e.entity_name
    if not pairs:
        return invalid, "Invalid empty client quota entity", []
    if IP in pairs and len(pairs) > 1:
        return (
            invalid,
            "Invalid quota entity combination, IP entity should not be combined with User or ClientId",
            [],
        )
    valid_keys = IP_KEYS if IP in pairs else USER_CLIENT_KEYS
    entity = quota_entity(pairs)
    current = image.security.quotas.get(entity, {})
    records: list[MetadataRecord] = []

    def record(key: str, value: float = 0.0, remove: bool = False) -> ClientQuotaRecord:
        return ClientQuotaRecord(
            entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
            key=key,
            value=value,
            remove=remove,
        )

    for o in entry.ops or []:
        key = o.key or ""
        if o.remove:
            if key in current:
                records.append(record(key, remove=True))
            continue
        if key not in valid_keys:
            return invalid, f"Invalid configuration key {key}", []
        if not o.value > 0.0 or math.isinf(o.value):
            return invalid, f"Quota {key} must be greater than 0", []
        if valid_keys[key] and abs(o.value % 1.0) > 1e-6:
            return invalid, f"{key} cannot be a fractional value.", []
        if current.get(key) != o.value:
            records.append(record(key, o.value))
    return ErrorCode.NONE, None, records


# -- SCRAM credentials ---------------------------------------------------------------------
async def alter_user_scram_credentials(
    controller: ControllerContext, version: int, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    return await controller.quorum.write(lambda image: _alter_credentials(image, request))


def _alter_credentials(
    image: MetadataImage, request: AlterUserScramCredentialsRequest
) -> ControllerResult[AlterUserScramCredentialsResponse]:
    """Kafka's rules: a user altered twice in one request (deleted twice, or deleted and
    upserted, whatever the mechanisms) fails as DUPLICATE_RESOURCE."""
    errors: dict[str, tuple[ErrorCode, str]] = {}
    deletions: dict[str, int] = {}
    upsertions: dict[str, ScramCredentialUpsertion] = {}
    duplicate = (
        ErrorCode.DUPLICATE_RESOURCE,
        "A user credential cannot be altered twice in the same request",
    )
    for d in request.deletions or []:
        name = d.name or ""
        if name in errors:
            continue
        if deletions.pop(name, None) is not None:
            errors[name] = duplicate
        elif problem := _user_error(name, d.mechanism):
            errors[name] = problem
        elif image.security.scram_credential(name, d.mechanism) is None:
            errors[name] = (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        else:
            deletions[name] = d.mechanism
    for u in request.upsertions or []:
        name = u.name or ""
        if name in errors:
            continue
        if deletions.pop(name, None) is not None or upsertions.pop(name, None) is not None:
            errors[name] = duplicate
        elif problem := _user_error(name, u.mechanism) or _upsertion_error(u):
            errors[name] = problem
        else:
            upsertions[name] = u
    results: list[AlterUserScramCredentialsResult] = []
    records: list[MetadataRecord] = []
    for name, mechanism in deletions.items():
        records.append(RemoveUserScramCredentialRecord(name=name, mechanism=mechanism))
        results.append(AlterUserScramCredentialsResult(user=name, error_code=ErrorCode.NONE))
    for name, u in upsertions.items():
        salted = bytes(u.salted_password)
        c = BY_TYPE[u.mechanism].credential(salted, bytes(u.salt), u.iterations)
        records.append(
            UserScramCredentialRecord(
                name=name,
                mechanism=u.mechanism,
                salt=c.salt,
                stored_key=c.stored_key,
                server_key=c.server_key,
                iterations=c.iterations,
            )
        )
        results.append(AlterUserScramCredentialsResult(user=name, error_code=ErrorCode.NONE))
    results += [
        AlterUserScramCredentialsResult(user=name, error_code=code, error_message=message)
        for name, (code, message) in errors.items()
    ]
    return ControllerResult(AlterUserScramCredentialsResponse(results=results), records)


def _user_error(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in BY_TYPE:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _upsertion_error(u: ScramCredentialUpsertion) -> tuple[ErrorCode, str] | None:
    if u.iterations < BY_TYPE[u.mechanism].min_iterations:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if u.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not u.salt or not u.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None
