"""The ``_schemas`` topic: Confluent's record formats, written through the broker's own log.

Why the in-process log and not a Kafka client over a listener (as Confluent's registry does):
the registry runs inside the broker, so a client would only add a connection, credentials on a
SASL or TLS listener and a round trip per write, for the same bytes in the same partition. A
write is one record batch appended to partition 0 and acknowledged once durable under the
topic's flush policy, as a Produce with acks=all is. The state is whatever the topic says: every
write is applied by reading the log back from where the last read stopped, and a start reads the
whole partition, so ids and versions survive a clean stop and a kill -9 alike, and records
another tool wrote (a Confluent registry's, or a restore) are read the same way.

The records (keys and values are JSON, as Confluent's ``SchemaRegistrySerializer`` writes them):
SCHEMA ``{"keytype":"SCHEMA","subject":s,"version":v,"magic":1}`` -> ``{"subject","version",
"id","schemaType","references","schema","deleted"}`` (a tombstone deletes it for good); CONFIG and
MODE ``{"keytype":..,"subject":s or null,"magic":0}`` -> ``{"compatibilityLevel":..,
"defaultMetadata", "overrideMetadata", "defaultRuleSet", "overrideRuleSet"}`` /
``{"mode":..}`` (a tombstone removes the setting); DELETE_SUBJECT -> ``{"subject","version"}``
(versions up to it soft-deleted); CLEAR_SUBJECT -> ``{"subject"}`` (soft-deleted versions
forgotten); CONTEXT ``{"keytype":"CONTEXT","tenant":"default","context":".ctx","magic":0}`` ->
``{"tenant","context"}`` (a context made by its first schema; a tombstone deletes it); NOOP
(nothing). A subject outside the default context is stored qualified (``:.ctx:orders``), and
ids count per context (``contexts.py``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import attrs

from ...protocol.batch import read_batch_header
from ...protocol.records import build_batch, decode_batches
from ..offload import run_io
from ..server.state import BrokerState, TopicChange
from ..storage import Log, StorageError
from .contexts import context_of
from .errors import store_error
from .guids import schema_guid

LOGGER = logging.getLogger(__name__)

TOPIC = "_schemas"
#: how much of the log one catch-up read takes at a time
READ_BYTES = 1 << 20


@attrs.define
class SchemaVersion:
    subject: str
    version: int
    id: int
    schema_type: str
    references: list[dict[str, Any]]
    schema: str
    deleted: bool = False
    #: Confluent's data contract (7.4+): ``{"tags", "properties", "sensitive"}`` and
    #: ``{"migrationRules", "domainRules"}``, kept as given
    metadata: dict[str, Any] | None = None
    rule_set: dict[str, Any] | None = None
    #: the content's digest when the record carries one (``guids.py``)
    md5: str | None = None

    @property
    def guid(self) -> str:
        return schema_guid(self.schema, self.references, self.metadata, self.rule_set, self.md5)

    def key(self) -> dict[str, Any]:
        return schema_key(self.subject, self.version)

    def value(self) -> dict[str, Any]:
        out: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.md5 is not None:
            out["md5"] = self.md5
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        out["references"] = self.references
        if self.metadata is not None:
            out["metadata"] = self.metadata
        if self.rule_set is not None:
            out["ruleSet"] = self.rule_set
        out["schema"] = self.schema
        out["deleted"] = self.deleted
        return out


def schema_key(subject: str, version: int) -> dict[str, Any]:
    return {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}


def setting_key(keytype: str, subject: str | None) -> dict[str, Any]:
    return {"keytype": keytype, "subject": subject, "magic": 0}


TENANT = "default"


def context_record(context: str, *, delete: bool = False,
                   ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Confluent's CONTEXT record: a context exists from its first schema until deleted."""
    key = {"keytype": "CONTEXT", "tenant": TENANT, "context": context, "magic": 0}
    return key, None if delete else {"tenant": TENANT, "context": context}


@attrs.define
class RegistryState:
    """What the topic says, applied record by record."""

    subjects: dict[str, dict[int, SchemaVersion]] = attrs.field(factory=dict)
    #: (context, id) -> the (subject, version)s registered with it: each context numbers
    #: its schemas apart
    ids: dict[tuple[str, int], set[tuple[str, int]]] = attrs.field(factory=dict)
    #: subject (None: global) -> Confluent's ConfigValue: ``compatibilityLevel`` and the data
    #: contract defaults and overrides (``contracts.py``)
    configs: dict[str | None, dict[str, Any]] = attrs.field(factory=dict)
    modes: dict[str | None, str] = attrs.field(factory=dict)
    #: context -> the highest id given in it
    max_ids: dict[str, int] = attrs.field(factory=dict)
    #: the contexts other than the default one, from CONTEXT records
    contexts: set[str] = attrs.field(factory=set)
    #: context -> GUID -> the id of the schema with that content
    guids: dict[str, dict[str, int]] = attrs.field(factory=dict)

    def apply(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        keytype = key.get("keytype")
        subject = key.get("subject")
        if keytype == "SCHEMA":
            self._apply_schema(str(subject), int(key["version"]), value)
        elif keytype == "CONFIG":
            if value is None:
                self.configs.pop(subject, None)
            else:
                self.configs[subject] = value
        elif keytype == "MODE":
            self._set(self.modes, subject, value and value.get("mode"))
        elif keytype == "CONTEXT" and key.get("tenant", TENANT) == TENANT:
            if value is None:
                self.contexts.discard(str(key.get("context")))
            else:
                self.contexts.add(str(key.get("context")))
        elif keytype == "DELETE_SUBJECT" and value is not None:
            for sv in self.subjects.get(str(subject), {}).values():
                if sv.version <= int(value.get("version", 0)):
                    sv.deleted = True
        elif keytype == "CLEAR_SUBJECT" and value is not None:
            versions = self.subjects.get(str(subject), {})
            for v in [v for v, sv in versions.items() if sv.deleted]:
                self._apply_schema(str(subject), v, None)

    @staticmethod
    def _set(table: dict[str | None, str], subject: Any, value: Any) -> None:
        if value is None:
            table.pop(subject, None)
        else:
            table[subject] = str(value)

    def _apply_schema(self, subject: str, version: int, value: dict[str, Any] | None) -> None:
        versions = self.subjects.setdefault(subject, {})
        old = versions.pop(version, None)
        context = context_of(subject)
        if old is not None:
            users = self.ids.get((context, old.id), set())
            users.discard((subject, version))
            if not users:
                self.ids.pop((context, old.id), None)
                in_context = self.guids.get(context, {})
                if in_context.get(old.guid) == old.id:
                    del in_context[old.guid]
        if value is None:
            if not versions:
                del self.subjects[subject]
            return
        sv = SchemaVersion(subject, version, int(value["id"]), value.get("schemaType") or "AVRO",
                           list(value.get("references") or []), str(value["schema"]),
                           bool(value.get("deleted", False)), value.get("metadata"),
                           value.get("ruleSet"), value.get("md5"))
        versions[version] = sv
        self.ids.setdefault((context, sv.id), set()).add((subject, version))
        self.guids.setdefault(context, {})[sv.guid] = sv.id
        self.max_ids[context] = max(self.max_ids.get(context, 0), sv.id)


def _encode(obj: dict[str, Any] | None) -> bytes | None:
    return None if obj is None else json.dumps(obj, separators=(",", ":")).encode()


class KafkaStore:
    """Append to and read back partition 0 of ``_schemas``."""

    def __init__(self, broker: BrokerState) -> None:
        self.broker = broker
        self.state = RegistryState()
        self._position = 0
        self.skipped = 0

    async def start(self) -> None:
        """Read the topic whole (a missing topic is an empty registry)."""
        self.catch_up()
        LOGGER.info("schema registry: read %d subjects, %d schema ids from %s (offset %d)",
                    len(self.state.subjects), len(self.state.ids), TOPIC, self._position)

    async def _create_topic(self) -> Log:
        """``_schemas`` with one partition, compacted, made by the first write (a broker
        whose registry is never written to shows no extra topic)."""
        logs = self.broker.logs
        try:
            await run_io(logs.create_topic, TOPIC, 1, {"cleanup.policy": "compact"})
            self.broker.topics_changed(TopicChange(TOPIC, 0, 1))
        except StorageError as exc:
            if logs.get_log(TOPIC, 0) is None:  # not created meanwhile by someone else
                raise store_error(str(exc)) from exc
        log = logs.get_log(TOPIC, 0)
        if log is None:
            raise store_error(f"the {TOPIC} topic is missing")
        return log

    def catch_up(self) -> None:
        """Apply every record between the last read and the log's end."""
        log = self.broker.logs.get_log(TOPIC, 0)
        if log is None:
            return
        try:
            while self._position < log.log_end_offset:
                start = max(self._position, log.log_start_offset)
                data = log.read(start, READ_BYTES).records
                if not isinstance(data, bytes) or not data:
                    break
                for _header, records in decode_batches(data):
                    for record in records:
                        if record.offset >= start:
                            self._apply(record.key, record.value)
                        self._position = record.offset + 1
                    self._position = max(self._position, _header.last_offset + 1)
        except StorageError as exc:
            raise store_error(str(exc)) from exc

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        try:
            k = json.loads(key) if key else None
            v = json.loads(value) if value else None
            if isinstance(k, dict) and (v is None or isinstance(v, dict)):
                self.state.apply(k, v)
                return
        except (ValueError, KeyError, TypeError):
            pass
        self.skipped += 1  # not a registry record: Confluent's reader skips it too
        LOGGER.warning("schema registry: skipped a record of %s it cannot read", TOPIC)

    async def write(self, records: Sequence[tuple[dict[str, Any], dict[str, Any] | None]],
                    ) -> None:
        """Append ``records`` as one batch, wait until durable, and apply them."""
        log = self.broker.logs.get_log(TOPIC, 0) or await self._create_topic()
        batch = build_batch([(_encode(k), _encode(v)) for k, v in records])
        broker = self.broker
        try:
            info = log.append(batch, read_batch_header(batch), now_ms=broker.now_ms())
            broker.fetch_purgatory.notify((TOPIC, 0), info.size)
            if log.needs_flush():
                await run_io(log.flush)
        except StorageError as exc:
            raise store_error(str(exc)) from exc
        self.catch_up()
