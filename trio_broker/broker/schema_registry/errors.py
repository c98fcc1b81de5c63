"""Confluent's error answers: an HTTP status, an ``error_code`` and the message it words.

Every refusal the registry gives is one of these, raised where the rule is checked and turned
into ``{"error_code": 40401, "message": "Subject 'x' not found."}`` at the one HTTP entry point,
so a client's ``SchemaRegistryError`` carries the code Confluent's registry would have sent.
"""

from __future__ import annotations

from ..http.confluent_error import ConfluentError


class RegistryError(ConfluentError):
    """One of Confluent's REST errors."""


def invalid_subject(subject: str) -> RegistryError:
    return RegistryError(422, 42208, f"The specified subject '{subject}' is not a valid.")


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(message: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, message)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true "
                                     "to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being "
                                     "permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40406, f"Subject '{subject}' Version {version} was soft deleted.Set "
                                     "permanent=true to delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not deleted "
                                     "first before being permanently deleted")


def subject_compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level "
                                     "compatibility configured")


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode "
                                     "configured")


def incompatible(messages: list[str]) -> RegistryError:
    detail = "; ".join(messages)
    return RegistryError(409, 409, "Schema being registered is incompatible with an earlier "
                                   f"schema for subject {detail}")


def reference_exists(message: str) -> RegistryError:
    return RegistryError(422, 42206, message)


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema {detail}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(422, 42202, "The specified version '" + str(version) + "' is not a "
                         "valid version id. Allowed values are between [1, 2^31-1] and the "
                         "string \"latest\"")


def invalid_compatibility(level: object) -> RegistryError:
    return RegistryError(422, 42203, f"Invalid compatibility level. Valid values are none, "
                         f"backward, forward, full, backward_transitive, forward_transitive, "
                         f"and full_transitive (got {level!r})")


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode. Valid values are READWRITE, READONLY, "
                         f"READONLY_OVERRIDE, and IMPORT (got {mode!r})")


def operation_not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def bad_request(message: str, status: int = 422, code: int = 422) -> RegistryError:
    return RegistryError(status, code, message)


def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store - {message}")


def store_timeout(message: str) -> RegistryError:
    return RegistryError(500, 50002, f"Operation timed out - {message}")


def forward_error(message: str) -> RegistryError:
    return RegistryError(500, 50003, f"Error while forwarding the request to the primary - "
                                     f"{message}")
