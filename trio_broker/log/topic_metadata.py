"""Which topics exist, with how many partitions and which config overrides (Kafka keeps this in
its metadata log; a single broker keeps one small file per topic).

Why one file per topic: creating, growing, re-configuring or deleting a topic rewrites or removes
only that topic's file, atomically (temp file, fsync, rename, fsync dir), so a crash leaves every
topic either as it was or as it became. Layout, in the first log dir::

    topic-configs/<topic>.json      {"version": 1, "topic", "partitions", "configs"}

A file that cannot be read marks its topic *broken*: its partitions stay offline (an operator can
fix the file), the rest of the broker serves.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import attrs

from ._files import atomic_write, fsync_dir
from .config import LogConfig
from .errors import KafkaStorageError, StorageError

LOGGER = logging.getLogger(__name__)

TOPIC_CONFIG_DIR = "topic-configs"
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


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
    if not _LEGAL_TOPIC.match(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
        )
    return None


@attrs.define
class TopicMetadata:
    partitions: int
    overrides: dict[str, str]
    config: LogConfig
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
            except (OSError, ValueError, KeyError, TypeError, StorageError) as exc:
                LOGGER.error(
                    "Topic config %s is unreadable (%s); the topic's partitions stay offline",
                    path,
                    exc,
                )
                topics[topic] = TopicMetadata(0, {}, default_config, broken=True)
                continue
            topics[topic] = TopicMetadata(partitions, overrides, config)
        return topics

    def exists(self, topic: str) -> bool:
        return self._path(topic).exists()

    def write(self, topic: str, meta: TopicMetadata) -> None:
        doc = {
            "version": 1,
            "topic": topic,
            "partitions": meta.partitions,
            "configs": meta.overrides,
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
