"""Which topics exist, with their id, partition count and config overrides (Kafka keeps this in
its metadata log; a single broker keeps one small file per topic).

Why one file per topic: creating, growing, re-configuring or deleting a topic rewrites or removes
only that topic's file, atomically (temp file, fsync, rename, fsync dir), so a crash leaves every
topic either as it was or as it became. Layout, in the first log dir::

    topic-configs/<topic>.json      {"version": 1, "topic", "topic_id", "partitions", "configs",
                                     "leader_epochs"}

The topic id (KIP-516) is a random UUID made when the topic is created and kept for its life, so
a deleted and re-created topic of the same name has a new one. It is written in Kafka's text
form (URL-safe base64 without padding, as ``kafka-topics --describe`` shows it). A file from
before topic ids gets one at load, written back at once so it stays stable.

``leader_epochs`` holds each partition's current leader epoch, the record a KRaft controller keeps
in its metadata log: the next leadership (the next start) takes a higher one, even when the
partition's own epoch cache lost its newest entries with a torn log tail.

A file that cannot be read marks its topic *broken*: its partitions stay offline (an operator can
fix the file), the rest of the broker serves.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import uuid
from pathlib import Path

import attrs

from .config import LogConfig
from .errors import KafkaStorageError, StorageError
from .files import atomic_write, fsync_dir

LOGGER = logging.getLogger(__name__)

TOPIC_CONFIG_DIR = "topic-configs"
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")  # whole name: fullmatch (``$`` admits "a\n")


def validate_topic_name(name: str) -> str | None:
    """Kafka's topic name rule; returns the error message, or None for a legal name."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} "
            f"characters, topic name: {name}"
        )
    if not _LEGAL_TOPIC.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
        )
    return None


#: Kafka's reserved ids: the all-zero "no id" and the metadata topic's id (``Uuid.java``)
ZERO_TOPIC_ID = uuid.UUID(int=0)
METADATA_TOPIC_ID = uuid.UUID(int=1)


def new_topic_id() -> uuid.UUID:
    """A random topic id as Kafka makes them: never a reserved id, never one whose text form
    starts with ``-`` (it would read as a command-line option)."""
    while True:
        topic_id = uuid.uuid4()
        if topic_id not in (ZERO_TOPIC_ID, METADATA_TOPIC_ID) and \
                not topic_id_str(topic_id).startswith("-"):
            return topic_id


def topic_id_str(topic_id: uuid.UUID) -> str:
    """Kafka's text form of an id (``Uuid.toString``): URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def parse_topic_id(text: str) -> uuid.UUID:
    """Inverse of ``topic_id_str``; raises ValueError for anything else."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"topic id {text!r} is not base64") from exc
    if len(raw) != 16:
        raise ValueError(f"topic id {text!r} is not 16 bytes")
    return uuid.UUID(bytes=raw)


@attrs.define
class TopicMetadata:
    partitions: int
    overrides: dict[str, str]
    config: LogConfig
    #: the topic's id for its whole life (a new one after delete and re-create)
    topic_id: uuid.UUID = attrs.field(factory=new_topic_id)
    #: partition -> its current leader epoch (-1: none recorded yet)
    leader_epochs: list[int] = attrs.field(factory=list)

    def leader_epoch(self, partition: int) -> int:
        epochs = self.leader_epochs
        return epochs[partition] if partition < len(epochs) else -1

    def set_leader_epoch(self, partition: int, epoch: int) -> None:
        missing = partition + 1 - len(self.leader_epochs)
        if missing > 0:
            self.leader_epochs.extend([-1] * missing)
        self.leader_epochs[partition] = epoch
    #: its metadata file could not be read: partitions stay offline, config unknown
    broken: bool = False
    #: found on disk without a metadata file (written during load)
    adopted: bool = False


class TopicMetadataStore:
    """The ``topic-configs`` directory: read every topic at load, write or remove one."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, topic: str) -> Path:
        return self.directory / f"{topic}.json"

    def load_all(self, default_config: LogConfig) -> dict[str, TopicMetadata]:
        """Every topic with a file; an unreadable file gives a broken topic, logged."""
        try:
            paths = sorted(self.directory.glob("*.json")) if self.directory.is_dir() else []
        except OSError as exc:
            LOGGER.error("Cannot list topic configs in %s: %s", self.directory, exc)
            return {}
        topics: dict[str, TopicMetadata] = {}
        for path in paths:
            topic = path.name[: -len(".json")]
            try:
                doc = json.loads(path.read_text())
                partitions = int(doc["partitions"])
                overrides = {str(k): str(v) for k, v in doc.get("configs", {}).items()}
                if doc.get("topic", topic) != topic or partitions < 1:
                    raise ValueError("inconsistent topic or partition count")
                config = default_config.with_overrides(overrides)
                stored_id = doc.get("topic_id")
                topic_id = None if stored_id is None else parse_topic_id(str(stored_id))
                epochs = [int(e) for e in doc.get("leader_epochs", [])]
            except (OSError, ValueError, KeyError, TypeError, StorageError) as exc:
                LOGGER.error(
                    "Topic config %s is unreadable (%s); the topic's partitions stay offline",
                    path,
                    exc,
                )
                topics[topic] = TopicMetadata(0, {}, default_config, broken=True)
                continue
            meta = TopicMetadata(partitions, overrides, config, leader_epochs=epochs)
            if topic_id is not None:
                meta.topic_id = topic_id
            else:
                LOGGER.info("Topic %s has no topic id yet; giving it %s", topic,
                            topic_id_str(meta.topic_id))
                try:
                    self.write(topic, meta)
                except KafkaStorageError as exc:  # the id holds until the next start only
                    LOGGER.error("Could not persist the new id of topic %s: %s", topic, exc)
            topics[topic] = meta
        return topics

    def exists(self, topic: str) -> bool:
        return self._path(topic).exists()

    def write(self, topic: str, meta: TopicMetadata) -> None:
        doc = {
            "version": 1,
            "topic": topic,
            "topic_id": topic_id_str(meta.topic_id),
            "partitions": meta.partitions,
            "configs": meta.overrides,
            "leader_epochs": meta.leader_epochs,
        }
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            atomic_write(self._path(topic), json.dumps(doc, sort_keys=True).encode())
        except OSError as exc:
            raise KafkaStorageError(f"writing the config of topic {topic} failed: {exc}") from exc

    def remove(self, topic: str) -> None:
        """Forget ``topic``; a failure is logged (its data is going anyway)."""
        try:
            self._path(topic).unlink()
            fsync_dir(self.directory)
        except FileNotFoundError:
            pass
        except OSError as exc:
            LOGGER.error("Could not remove the config file of topic %s: %s", topic, exc)
