"""``meta.properties``: which cluster and which node a log dir belongs to, as Kafka keeps it.

Why: a broker's data is only meaningful inside the cluster that wrote it. Kafka stamps every log
dir with the cluster id (chosen once, when the storage is formatted), the node id and a directory
id, and refuses to start over a dir stamped by another node or another cluster. The same file in
the same format (a Java properties file, ``version=1``) lets an operator read it, and lets
``kafka-storage.sh info`` read ours.

The file is read as Java's ``Properties.load`` reads it (``config.java_properties``, the reader
of ``server.properties`` too), for a file Java or an operator may have written.

Ids are Kafka ``Uuid`` strings: the 16 bytes of a random UUID in URL-safe base64, unpadded (22
characters), never starting with ``-`` (Kafka rejects those: they read as command-line flags).
"""

from __future__ import annotations

import base64
import logging
import time
import uuid
from pathlib import Path

import attrs

from ..config.java_properties import load_properties
from .files import atomic_write

LOGGER = logging.getLogger(__name__)

META_PROPERTIES_NAME = "meta.properties"


class MetaPropertiesError(RuntimeError):
    """A log dir that belongs to another node or cluster, or whose meta.properties is unreadable."""


def random_uuid() -> str:
    """A new Kafka ``Uuid`` string, as ``kafka-storage.sh random-uuid`` prints one."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        # Kafka's Uuid.randomUuid: never a leading "-"; the reserved ids (all zero, one) have
        # no version-4 bits, so uuid4 cannot produce them
        if not text.startswith("-"):
            return text


@attrs.frozen
class MetaProperties:
    """One log dir's stamp (Kafka's ``MetaProperties``, version 1)."""

    cluster_id: str
    node_id: int
    directory_id: str | None = None
    version: int = 1

    def to_properties(self) -> dict[str, str]:
        props = {"cluster.id": self.cluster_id, "node.id": str(self.node_id),
                 "version": str(self.version)}
        if self.directory_id is not None:
            props["directory.id"] = self.directory_id
        return props


def read_meta_properties(log_dir: Path) -> MetaProperties | None:
    """The dir's stamp; None when it has no meta.properties (a new or empty dir)."""
    path = log_dir / META_PROPERTIES_NAME
    try:
        text = path.read_text(encoding="latin-1")
    except FileNotFoundError:
        return None
    try:
        props = load_properties(text)
    except ValueError as exc:
        raise MetaPropertiesError(f"Cannot read {path}: {exc}") from None
    version = props.get("version", "0")
    if version != "1":
        # version 0 is a ZooKeeper-mode broker's: its data needs a migration, not a start
        raise MetaPropertiesError(f"Found unexpected version {version} in {path}; only version 1 "
                                  "(KRaft) is supported.")
    if "cluster.id" not in props:
        raise MetaPropertiesError(f"cluster.id was not specified in the v1 file: {path}")
    node_id = props.get("node.id")
    if node_id is None:
        raise MetaPropertiesError(f"node.id was not specified in {path}")
    try:
        node = int(node_id)
    except ValueError:
        raise MetaPropertiesError(f"Invalid node.id {node_id!r} in {path}") from None
    return MetaProperties(props["cluster.id"], node, props.get("directory.id"))


def write_meta_properties(log_dir: Path, meta: MetaProperties) -> None:
    """Write the stamp durably (temp file, fsync, rename), as Kafka does."""
    # the two comment lines of Java's Properties.store, then the keys
    lines = ["#", time.strftime("#%a %b %d %H:%M:%S UTC %Y", time.gmtime())]
    lines += [f"{k}={v}" for k, v in sorted(meta.to_properties().items())]
    atomic_write(log_dir / META_PROPERTIES_NAME, ("\n".join(lines) + "\n").encode("latin-1"))


def ensure_meta_properties(log_dirs: list[Path], node_id: int, cluster_id: str = "") -> str:
    """Check every log dir's stamp against ``node_id`` and each other, stamp the unstamped ones,
    and return the cluster id: the stamped one, else ``cluster_id`` when configured, else a new
    random one (Kafka's ``MetaPropertiesEnsemble.verify`` and its formatting of new dirs)."""
    chosen, stamps = plan_meta_properties(log_dirs, node_id, cluster_id)
    write_stamps(stamps)
    return chosen


def write_stamps(stamps: list[tuple[Path, MetaProperties]]) -> None:
    """Write each new dir's ``meta.properties`` (durably: temp file, fsync, rename)."""
    for log_dir, meta in stamps:
        try:
            write_meta_properties(log_dir, meta)
        except OSError as exc:
            LOGGER.error("Error while writing meta.properties to %s: %s", log_dir, exc)


def plan_meta_properties(log_dirs: list[Path], node_id: int, cluster_id: str = "",
                         ) -> tuple[str, list[tuple[Path, MetaProperties]]]:
    """What ``ensure_meta_properties`` checks and decides, without writing: the cluster id and
    the stamps the unstamped dirs need."""
    found: dict[Path, MetaProperties | None] = {}
    for log_dir in log_dirs:
        try:
            found[log_dir] = read_meta_properties(log_dir)
        except OSError as exc:
            # an unreadable dir is left out, as Kafka does; the log manager takes it offline
            LOGGER.error("Error while reading meta.properties file in %s: %s", log_dir, exc)
    expected = cluster_id or None
    seen_dirs: dict[str, Path] = {}
    for log_dir, meta in found.items():
        if meta is None:
            continue
        path = log_dir / META_PROPERTIES_NAME
        if expected is None:
            expected = meta.cluster_id
        elif meta.cluster_id != expected:
            raise MetaPropertiesError(f"Invalid cluster.id in: {path}. Expected {expected}, but "
                                      f"read {meta.cluster_id}")
        if meta.node_id != node_id:
            raise MetaPropertiesError(
                f"Stored node id {meta.node_id} doesn't match previous node id {node_id} in "
                f"{path}. If you moved your data, make sure your configured node id matches. If "
                "you intend to create a new node, you should remove all data in your data "
                "directories.")
        if meta.directory_id is not None:
            other = seen_dirs.setdefault(meta.directory_id, log_dir)
            if other != log_dir:
                raise MetaPropertiesError(f"Duplicate directory ID {meta.directory_id} found. It "
                                          f"was the ID of {other}, but also of {log_dir}")
    chosen = expected or random_uuid()
    stamps = []
    for log_dir, meta in found.items():
        if meta is None:
            directory_id = random_uuid()
            while directory_id in seen_dirs:
                directory_id = random_uuid()
            seen_dirs[directory_id] = log_dir
            stamps.append((log_dir, MetaProperties(chosen, node_id, directory_id)))
    return chosen, stamps
