"""Confluent Schema Registry's errors: an HTTP status and an `error_code` in the body."""

from __future__ import annotations


class RegistryError(Exception):
    """A request the registry refuses; the REST layer answers `{"error_code", "message"}`."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found for subject '{subject}'.")


def schema_not_found(detail: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, detail)


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {detail}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. Allowed values are "
        'between [1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility(level: object) -> RegistryError:
    return RegistryError(
        422,
        42203,
        f"Invalid compatibility level {level!r}. Valid values are none, backward, forward, "
        "full, backward_transitive, forward_transitive, and full_transitive",
    )


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(
        422, 42204, f"Invalid mode {mode!r}. Valid values are READWRITE, READONLY and IMPORT"
    )


def not_permitted(detail: str) -> RegistryError:
    return RegistryError(422, 42205, detail)


def bad_request(detail: str) -> RegistryError:
    return RegistryError(400, 400, detail)
