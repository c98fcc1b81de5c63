"""Who may call the registry: HTTP basic authentication as the broker's SASL users, and
permissions on subjects from the broker's ACLs (``schema.registry.authentication.method=BASIC``).

Why the broker's users and ACLs: a user who produces Avro needs the registry too, and one set of
credentials and one set of ACLs (``trio-broker acls``, confluent-kafka's AdminClient) should say
what they may do on both. Credentials are checked against the broker's SCRAM store (the users
``AlterUserScramCredentials`` or ``sasl.credentials.file`` define), the password verified with
its PBKDF2 off the event loop, once: later requests with the same password cost one HMAC.

The permission model (Confluent's Schema Registry ACLs are a commercial plugin; this is a model
of its own, over Kafka's ACLs, documented in docs/schema-registry.md):

    subject S           the Kafka topic S names: S without its ``-key``/``-value`` suffix (the
                        topic name strategy), else S itself
    read                DESCRIBE on that topic: versions, schemas, lookups, compatibility checks,
                        the subject's config and mode
    write               WRITE on that topic: registering a schema
    admin               ALTER on that topic: deleting versions and subjects, setting or deleting
                        the subject's config and mode
    global read/write   DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster: the global config and
                        mode
    schemas by id       read on one subject that holds the id (or the GUID); the subjects and
                        versions of an id, and ``GET /subjects``, show only the readable ones

Without an authorizer (``authorizer.class.name``) every authenticated user may do everything.
A refusal is Confluent's 403 with error code 40301.
"""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from ..http.basic_auth import parse_basic
from ..security.acl import Operation, ResourceType
from ..server.state import BrokerState
from . import errors as e

LOGGER = logging.getLogger(__name__)
DENIED = logging.getLogger("kafka.authorizer.logger")

REALM = "SchemaRegistry"
#: a level of access -> the ACL operation it needs on the subject's topic
SUBJECT_OPERATIONS = {"read": Operation.DESCRIBE, "write": Operation.WRITE,
                      "admin": Operation.ALTER}
GLOBAL_OPERATIONS = {"global-read": Operation.DESCRIBE_CONFIGS,
                     "global-write": Operation.ALTER_CONFIGS}
CLUSTER_RESOURCE = "kafka-cluster"


def topic_of(subject: str) -> str:
    for suffix in ("-key", "-value"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[:-len(suffix)]
    return subject


class RegistryAuth:
    """The users of one registry and what they may do."""

    def __init__(self, credentials_path: Path, state: BrokerState) -> None:
        from ..security.credentials import CredentialStore

        self.store = CredentialStore(credentials_path, missing_ok=True)
        self.state = state

    async def principal(self, authorization: str | None) -> str:
        """``User:<name>`` of the request's credentials, or Confluent's 401."""
        parsed = parse_basic(authorization)
        if parsed is None:
            raise unauthorized()
        user, password = parsed
        self.store.maybe_reload()  # users added or changed since (AlterUserScramCredentials)
        if not (self.store.plain_verified(user, password)
                or await trio.to_thread.run_sync(self.store.verify_plain, user, password)):
            LOGGER.info("schema registry: failed login for user %r", user)
            raise unauthorized()
        return f"User:{user}"

    def allows(self, principal: str, host: str, level: str, subject: str | None) -> bool:
        authorizer = self.state.authorizer
        if authorizer is None:
            return True
        if subject is None:
            return authorizer.authorize(principal, host, GLOBAL_OPERATIONS[level],
                                        ResourceType.CLUSTER, CLUSTER_RESOURCE)
        return authorizer.authorize(principal, host, SUBJECT_OPERATIONS[level],
                                    ResourceType.TOPIC, topic_of(subject))

    def check(self, principal: str, host: str, level: str, subject: str | None) -> None:
        """Confluent's 403 (40301) unless ``principal`` may act at ``level``."""
        if self.allows(principal, host, level, subject):
            return
        operation = (GLOBAL_OPERATIONS[level] if subject is None
                     else SUBJECT_OPERATIONS[level]).name
        target = "the global config and mode" if subject is None else f"Subject: {subject}"
        DENIED.info("Principal = %s is Denied operation = %s from host = %s on the schema "
                    "registry's %s", principal, operation, host, target)
        raise e.RegistryError(403, 40301, f"User {principal} is denied operation {operation} "
                                          f"on {target}")


def unauthorized() -> e.RegistryError:
    return e.RegistryError(401, 401, "Unauthorized")


__all__ = ["REALM", "RegistryAuth", "topic_of", "unauthorized"]
