"""All partition logs of the broker (Kafka's ``LogManager``): topics, placement, lifecycle.

Why it owns so little: each ``Log`` is self-sufficient on disk. The manager adds what spans
partitions: which topics exist and their config overrides, which log dir holds each partition,
the per-dir files that tell the next start how to load (clean-shutdown marker, recovery points),
and isolation of failures, so one unreadable partition directory leaves the rest serving.

On-disk layout, under each entry of ``log.dirs``::

    <topic>-<partition>/                    one directory per partition (see log.py)
    <topic>-<partition>.<id>-delete/        a deleted partition, removed on the next load
    recovery-point-offset-checkpoint        "0", count, then "<topic> <partition> <offset>" lines
    .clean_shutdown                         present only between a clean close and the next load

and in the first log dir only::

    topic-configs/<topic>.json              which topics exist, their ids (``topic_metadata.py``)

Leader epochs: this broker is the leader of every partition it holds, and each opening of a
partition (its creation, every start) is a new leadership with a new epoch: 0 at creation, then
one above both the epoch in the topic's file and the newest in the partition's epoch cache. It is
recorded in the partition's ``leader-epoch-checkpoint`` before the partition serves (a new
partition's epoch 0 is fsynced by its first flush: ``durability.py``), and in the topic's file
(the record a KRaft controller would keep), at creation and once all are loaded. A cluster
that moves leaders calls ``Log.become_leader`` with its controller's epoch instead.

Metadata files are replaced atomically (temp file, fsync, rename, fsync dir); the checkpoint's
format is Kafka's (``checkpoint.py``), and the per-dir files are ``LogDirCheckpoints``'
(``dir_checkpoints.py``).

Background duties (flush and retention passes, recovery-point checkpoints, DeleteRecords' log
starts, the clean close) run in worker threads while the event loop serves: each is a walk over
every log under the manager's lock. Opening and closing logs fsyncs a few files per partition
(milliseconds each, even for an empty one); done on a pool (``in_parallel``), as Kafka's
``num.recovery.threads.per.data.dir``, the file system commits the fsyncs together, so a start
or a close does not take one fsync per partition in turn.
"""

from __future__ import annotations

import logging
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import attrs

from ...protocol.errors import CorruptRecordError
from .config import LogConfig
from .dir_checkpoints import LogDirCheckpoints
from .errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaStorageError,
    StorageError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from .files import fitting_name
from .log import Log, parse_partition_dir
from .log_start import restore_log_starts
from .producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from .topic_metadata import (
    TOPIC_CONFIG_DIR,
    TopicMetadata,
    TopicMetadataStore,
    topic_id_str,
    validate_topic_name,
)

LOGGER = logging.getLogger(__name__)

_DELETE_SUFFIX = "-delete"
_LOAD_ERRORS = (OSError, StorageError, CorruptRecordError, ValueError)
#: threads opening logs at start-up and closing (flushing) them at shutdown
PARALLEL_THREADS = 32
_T = TypeVar("_T")
_R = TypeVar("_R")


def in_parallel(work: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
    """``[work(item) for item in items]`` on up to ``PARALLEL_THREADS`` threads (an exception
    is raised once all have run)."""
    if len(items) <= 1:
        return [work(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor  # an empty or one-log start needs none

    with ThreadPoolExecutor(min(PARALLEL_THREADS, len(items)),
                            thread_name_prefix="log-io") as pool:
        return list(pool.map(work, items))


def _close(log: Log) -> KafkaStorageError | None:
    try:
        log.close()
    except KafkaStorageError as exc:
        return exc
    return None


class LogManager:
    def __init__(self, log_dirs: Sequence[Path | str], default_config: LogConfig, *,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        if not log_dirs:
            raise ValueError("log.dirs must name at least one directory")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.producer_id_expiration_ms = producer_id_expiration_ms
        #: (topic, partition) -> why it could not be loaded
        self.offline_partitions: dict[tuple[str, int], str] = {}
        #: log dir -> why it could not be used
        self.offline_dirs: dict[Path, str] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._names_by_id: dict[uuid.UUID, str] = {}
        self._logs: dict[tuple[str, int], Log] = {}
        self._dir_of: dict[tuple[str, int], Path] = {}
        # guards the maps above against a flusher or retention thread iterating them; the
        # topic maps (``_topics``, ``_names_by_id``) are replaced, never changed in place, so the
        # event loop may read them while an admin change runs in a worker thread
        self._lock = threading.Lock()
        # serialises admin changes (create, add partitions, delete), which run in worker threads
        self._admin_lock = threading.Lock()
        self._checkpoints = LogDirCheckpoints()
        self._topic_store = TopicMetadataStore(self.log_dirs[0] / TOPIC_CONFIG_DIR)

    # --- loading ------------------------------------------------------------------------

    def load(self) -> None:
        """Open every partition, recovering those not cleanly shut down."""
        clean: dict[Path, bool] = {}
        recovery_points: dict[Path, dict[tuple[str, int], int]] = {}
        for log_dir in self.log_dirs:
            try:
                log_dir.mkdir(parents=True, exist_ok=True)
                clean[log_dir] = self._checkpoints.take_clean_shutdown(log_dir)
            except OSError as exc:
                self._dir_failed(log_dir, f"cannot use log dir: {exc}")
                continue
            recovery_points[log_dir] = self._checkpoints.read_recovery_points(log_dir)
        self._topics = self._topic_store.load_all(self.default_config)
        found: dict[tuple[str, int], Path] = {}
        for log_dir in self.log_dirs:
            if log_dir in self.offline_dirs:
                continue
            try:
                entries = sorted(log_dir.iterdir())
            except OSError as exc:
                self._dir_failed(log_dir, f"cannot list log dir: {exc}")
                continue
            for path in entries:
                if path.name.endswith(_DELETE_SUFFIX):
                    LOGGER.info("Removing %s, left by a topic deletion", path)
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                parsed = parse_partition_dir(path.name)
                if parsed is None or path.name == TOPIC_CONFIG_DIR:
                    continue
                if parsed in found:
                    self._partition_failed(parsed, f"present in both {found[parsed]} and {log_dir}")
                    continue
                found[parsed] = log_dir
        for topic, partition in sorted(found):
            if validate_topic_name(topic) is not None:
                continue
            if topic not in self._topics:
                LOGGER.warning("Topic %s has no config file; adopting it with defaults", topic)
                self._topics[topic] = TopicMetadata(0, {}, self.default_config, adopted=True)
            adopted = self._topics[topic]
            if adopted.adopted or adopted.broken:
                adopted.partitions = max(adopted.partitions, partition + 1)
        to_open: list[tuple[str, int, Path]] = []
        for (topic, partition), log_dir in sorted(found.items()):
            meta = self._topics.get(topic)
            if meta is None:
                LOGGER.warning("Ignoring %s: not a legal topic name", log_dir / topic)
                continue
            if meta.broken:
                self._partition_failed((topic, partition), "its topic config is unreadable")
                continue
            if partition >= meta.partitions:
                LOGGER.warning("Ignoring %s-%d in %s: the topic has only %d partitions",
                               topic, partition, log_dir, meta.partitions)
                continue
            if (topic, partition) in self.offline_partitions:
                continue
            to_open.append((topic, partition, log_dir))

        def open_one(item: tuple[str, int, Path]) -> None:
            topic, partition, log_dir = item
            self._open_log(
                topic, partition, log_dir,
                recovery_point=recovery_points.get(log_dir, {}).get((topic, partition), 0),
                clean_shutdown=clean.get(log_dir, False))

        for meta in self._topics.values():  # sized now: the opens below set entries in parallel
            if meta.partitions > len(meta.leader_epochs):
                meta.set_leader_epoch(meta.partitions - 1, -1)
        # Each open recovers or checks a partition and writes its leader epoch (an fsync): in
        # parallel, as Kafka's num.recovery.threads.per.data.dir, the file system commits the
        # fsyncs together.
        in_parallel(open_one, to_open)
        restore_log_starts(self.log_dirs, self._logs, self._dir_of)
        self._names_by_id = {meta.topic_id: name for name, meta in self._topics.items()
                             if not meta.broken}
        def complete(topic: str, meta: TopicMetadata) -> None:
            offline = self.offline_partitions
            missing = [p for p in range(meta.partitions)
                       if (topic, p) not in self._logs and (topic, p) not in offline]
            for partition in missing:
                if self.offline_dirs:
                    self._partition_failed((topic, partition), "its log dir is offline")
                    continue
                LOGGER.warning("Partition %s-%d has no directory; creating it empty",
                               topic, partition)
                with self._lock:
                    log_dir = self._choose_dir()
                self._open_log(topic, partition, log_dir, create=True)
            try:  # new leader epochs (and the file of an adopted topic)
                self._topic_store.write(topic, meta)
            except KafkaStorageError as exc:
                LOGGER.error("Recording the leader epochs of topic %s failed: %s", topic, exc)

        in_parallel(lambda item: complete(*item),
                     [(t, m) for t, m in sorted(self._topics.items()) if not m.broken])
        LOGGER.info("Loaded %d partition(s) of %d topic(s) from %d log dir(s); %d offline",
                    len(self._logs), len(self._topics), len(self.log_dirs),
                    len(self.offline_partitions))

    def _open_log(self, topic: str, partition: int, log_dir: Path, *, recovery_point: int = 0,
                  clean_shutdown: bool = False, create: bool = False,
                  meta: TopicMetadata | None = None) -> Log | None:
        path = log_dir / f"{topic}-{partition}"
        if meta is None:
            meta = self._topics[topic]
        made = False
        try:
            if create:
                path.mkdir(parents=True, exist_ok=False)
                made = True
            log = Log(path, meta.config, recovery_point=recovery_point,
                      clean_shutdown=clean_shutdown,
                      producer_id_expiration_ms=self.producer_id_expiration_ms, new=create)
            if create:
                log.defer_parent_dir_sync()
            try:
                if create:
                    epoch = 0
                else:  # each start is a new leadership, as a re-elected KRaft broker's is
                    cached = log.epochs.latest_epoch
                    epoch = max(meta.leader_epoch(partition), -1 if cached is None else cached) + 1
                # a new partition's first epoch: synced by its first flush (durability.py)
                log.become_leader(epoch, durable=not create)
                meta.set_leader_epoch(partition, epoch)
            except KafkaStorageError:
                log.close(flush=False)
                raise
        except _LOAD_ERRORS as exc:
            if create:
                if made:  # a retry must find no directory, a restart no orphan to adopt
                    shutil.rmtree(path, ignore_errors=True)
                raise KafkaStorageError(f"creating {path} failed: {exc}") from exc
            self._partition_failed((topic, partition), f"cannot load {path}: {exc}")
            return None
        with self._lock:
            self._logs[(topic, partition)] = log
            self._dir_of[(topic, partition)] = log_dir
        return log

    def _partition_failed(self, key: tuple[str, int], reason: str) -> None:
        LOGGER.error("Partition %s-%d is offline: %s", key[0], key[1], reason)
        self.offline_partitions[key] = reason

    def _dir_failed(self, log_dir: Path, reason: str) -> None:
        LOGGER.error("Log dir %s is offline: %s", log_dir, reason)
        self.offline_dirs[log_dir] = reason

    def _take_dir_offline(self, log_dir: Path, reason: str) -> None:
        """Kafka's ``LogDirFailureChannel``: every partition of ``log_dir`` answers
        KAFKA_STORAGE_ERROR until a restart recovers them from what the disk holds; nothing
        more is written there (no flush, no checkpoint, no clean-shutdown marker)."""
        with self._lock:
            keys = [key for key, d in self._dir_of.items() if d == log_dir]
            logs = [self._logs.pop(key) for key in keys if key in self._logs]
            for key in keys:
                del self._dir_of[key]
        self._dir_failed(log_dir, reason)
        for key in keys:
            self._partition_failed(key, f"its log dir is offline: {reason}")
        for log in logs:
            try:
                log.close(flush=False)
            except KafkaStorageError as exc:
                LOGGER.warning("Closing %s in offline log dir %s: %s", log.name, log_dir, exc)

    def flush(self, log: Log) -> None:
        """fsync ``log`` now. A failure takes its log dir offline, as Kafka does: after a
        failed fsync the kernel may have dropped the written pages, so what the log serves
        may not be what the disk holds. Raises KafkaStorageError."""
        try:
            log.flush()
        except KafkaStorageError as exc:
            log_dir = self._dir_of.get((log.topic, log.partition))
            if log_dir is not None and not log.closed:  # closed: deleted, or shutting down
                self._take_dir_offline(log_dir, f"flushing {log.name} failed: {exc}")
            raise

    def _choose_dir(self) -> Path:
        return self._place(1)[0]

    def _place(self, n: int) -> list[Path]:
        """Log dirs for ``n`` new partitions, each in turn to the online dir holding the fewest
        (Kafka's placement rule)."""
        online = [d for d in self.log_dirs if d not in self.offline_dirs]
        if not online:
            raise KafkaStorageError("no log dir is online")
        counts = {d: 0 for d in online}
        for log_dir in self._dir_of.values():
            if log_dir in counts:
                counts[log_dir] += 1
        placed = []
        for _ in range(n):
            placed.append(min(online, key=counts.__getitem__))
            counts[placed[-1]] += 1
        return placed

    # --- topics -------------------------------------------------------------------------

    def topics(self) -> dict[str, int]:
        """Topic name -> partition count."""
        return {name: meta.partitions for name, meta in self._topics.items()}

    def partition_count(self, name: str) -> int | None:
        """The topic's partition count, or None if no such topic exists (one lookup, where
        ``topics()`` copies every topic)."""
        meta = self._topics.get(name)
        return None if meta is None else meta.partitions

    def topic_id(self, name: str) -> uuid.UUID | None:
        """The topic's id (KIP-516), or None if no such topic exists."""
        meta = self._topics.get(name)
        return None if meta is None or meta.broken else meta.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id, or None (unknown id, or the topic was deleted)."""
        return self._names_by_id.get(topic_id)

    def topic_ids(self) -> dict[str, uuid.UUID]:
        """Topic name -> id, for every topic that is served."""
        return {name: meta.topic_id for name, meta in self._topics.items() if not meta.broken}

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def topic_config(self, name: str) -> LogConfig:
        return self._topic(name).config

    def topic_overrides(self, name: str) -> dict[str, str]:
        return dict(self._topic(name).overrides)

    def _topic(self, name: str) -> TopicMetadata:
        meta = self._topics.get(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        return meta

    def create_topic(self, name: str, num_partitions: int, configs: Mapping[str, str], *,
                     validate_only: bool = False) -> uuid.UUID | None:
        """Create a topic with a new topic id and return the id (None with ``validate_only``).

        Raises InvalidTopicError, TopicAlreadyExistsError, InvalidPartitionsError,
        InvalidConfigError or KafkaStorageError. Its fsyncs (the topic's record) take
        milliseconds: a broker calls it in a worker thread (readers of the topic maps are not
        disturbed, and admin changes are serialised)."""
        if validate_only:
            return self._create_topic(name, num_partitions, configs, validate_only=True)
        with self._admin_lock:
            return self._create_topic(name, num_partitions, configs)

    def _create_topic(self, name: str, num_partitions: int, configs: Mapping[str, str], *,
                      validate_only: bool = False) -> uuid.UUID | None:
        error = validate_topic_name(name)
        if error is not None:
            raise InvalidTopicError(error)
        if name in self._topics:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        collision = name.replace(".", "_")
        for existing in self._topics:
            if existing.replace(".", "_") == collision:
                raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {existing}")
        if num_partitions < 1:
            raise InvalidPartitionsError("Number of partitions must be larger than 0.")
        overrides = {str(k): str(v) for k, v in configs.items()}
        config = self.default_config.with_overrides(overrides)
        if validate_only:
            return None
        meta = TopicMetadata(num_partitions, overrides, config, leader_epochs=[0] * num_partitions)
        self._topic_store.write(name, meta)
        try:
            # the topic is published with its partitions: a reader never sees one without them
            self._create_partitions(name, range(num_partitions), meta=meta)
        except KafkaStorageError:
            self._publish_topic(name, meta)
            self._delete_topic(name)
            raise
        self._publish_topic(name, meta)
        LOGGER.info("Created topic %s (id %s) with %d partition(s)", name,
                    topic_id_str(meta.topic_id), num_partitions)
        return meta.topic_id

    def _publish_topic(self, name: str, meta: TopicMetadata) -> None:
        with self._lock:
            self._topics = {**self._topics, name: meta}
            self._names_by_id = {**self._names_by_id, meta.topic_id: name}

    def _create_partitions(self, topic: str, partitions: range, *,
                           meta: TopicMetadata | None = None) -> None:
        placed = list(zip(partitions, self._place(len(partitions)), strict=True))
        # no fsync: each partition's first epoch, its directory and the log dir's new entry are
        # synced by the log's first flush (durability.py, defer_parent_dir_sync)
        in_parallel(lambda p: self._open_log(topic, p[0], p[1], create=True, meta=meta), placed)

    def add_partitions(self, name: str, new_total: int, *, validate_only: bool = False) -> None:
        """Raise the topic's partition count (may run in a worker thread, as create_topic)."""
        with self._admin_lock:
            self._add_partitions(name, new_total, validate_only=validate_only)

    def _add_partitions(self, name: str, new_total: int, *, validate_only: bool) -> None:
        meta = self._topic(name)
        if new_total <= meta.partitions:
            raise InvalidPartitionsError(
                f"Topic currently has {meta.partitions} partitions, which is higher than "
                f"the requested {new_total}.")
        if validate_only:
            return
        old_total = meta.partitions
        epochs = [*meta.leader_epochs, *[0] * (new_total - len(meta.leader_epochs))]
        self._topic_store.write(name, attrs.evolve(meta, partitions=new_total,
                                                   leader_epochs=epochs))
        meta.partitions, meta.leader_epochs = new_total, epochs
        self._create_partitions(name, range(old_total, new_total))
        LOGGER.info("Topic %s now has %d partitions (was %d)", name, new_total, old_total)

    def alter_topic_config(
        self,
        name: str,
        overrides: Mapping[str, str | None],
        *,
        incremental: bool = False,
        validate_only: bool = False,
    ) -> LogConfig:
        """Replace (AlterConfigs) or patch (IncrementalAlterConfigs; None deletes a key) the
        topic's overrides; returns the resulting config. Raises InvalidConfigError."""
        meta = self._topic(name)
        if incremental:
            merged = dict(meta.overrides)
            for key, value in overrides.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = str(value)
        else:
            merged = {k: str(v) for k, v in overrides.items() if v is not None}
        config = self.default_config.with_overrides(merged)
        if validate_only:
            return config
        self._topic_store.write(name, attrs.evolve(meta, overrides=merged, config=config))
        meta.overrides, meta.config, meta.broken = merged, config, False
        for (topic, _), log in list(self._logs.items()):
            if topic == name:
                log.update_config(config)
        LOGGER.info("Altered config of topic %s: %s", name, merged)
        return config

    def delete_topic(self, name: str) -> None:
        """Forget the topic and remove its data (renamed away first, so a crash mid-way
        only leaves ``-delete`` directories for the next load to finish removing)."""
        with self._admin_lock:
            self._delete_topic(name)

    def _delete_topic(self, name: str) -> None:
        meta = self._topic(name)
        keys = [(name, p) for p in range(meta.partitions)]
        with self._lock:
            logs = [(key, self._logs.pop(key, None), self._dir_of.pop(key, None)) for key in keys]
            self._topics = {k: v for k, v in self._topics.items() if k != name}
            self._names_by_id = {k: v for k, v in self._names_by_id.items()
                                 if k != meta.topic_id}
        for key in keys:
            self.offline_partitions.pop(key, None)
        self._topic_store.remove(name)
        for _, log, _ in logs:
            if log is None:
                continue
            try:
                log.close(flush=False)
            except KafkaStorageError as exc:
                LOGGER.warning("Closing %s for deletion: %s", log.name, exc)
            doomed = log.directory.with_name(fitting_name(
                log.directory.name, f".{uuid.uuid4().hex}{_DELETE_SUFFIX}"))
            try:
                log.directory.rename(doomed)
                shutil.rmtree(doomed)
            except OSError as exc:
                LOGGER.error("Could not remove %s: %s", log.directory, exc)
        LOGGER.info("Deleted topic %s", name)

    # --- background duties (worker threads) ---------------------------------------------

    def all_logs(self) -> list[Log]:
        with self._lock:
            return list(self._logs.values())

    def logs_needing_flush(self) -> list[Log]:
        return [log for log in self.all_logs() if log.needs_flush()]

    def flush_dirty(self) -> int:
        """fsync every log whose flush policy asks for it, then checkpoint recovery points.

        Meant for a worker thread; returns the number of logs flushed.
        """
        flushed = 0
        for log in self.logs_needing_flush():
            try:
                self.flush(log)
                flushed += 1
            except KafkaStorageError as exc:
                LOGGER.error("Flushing %s failed: %s", log.name, exc)
        self.checkpoint_recovery_points()
        return flushed

    def checkpoint_recovery_points(self) -> None:
        """Persist each partition's recovery point, so an unclean restart re-checks only the
        data written since (Kafka's recovery-point-offset-checkpoint)."""
        by_dir: dict[Path, list[Log]] = {}
        with self._lock:
            for key, log in self._logs.items():
                if not log.closed:
                    by_dir.setdefault(self._dir_of[key], []).append(log)
        self._checkpoints.write_recovery_points(by_dir)

    def delete_records(self, log: Log, offset: int) -> int:
        """DeleteRecords on ``log``: its new start offset, checkpointed before it is returned."""
        start = log.advance_log_start_offset(offset)
        log_dir = self._dir_of[(log.topic, log.partition)]
        with self._lock:
            in_dir = [g for k, g in self._logs.items() if self._dir_of[k] == log_dir]
        self._checkpoints.write_log_starts(log_dir, in_dir)
        return start

    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every log and expire idle producer ids; returns segments deleted."""
        deleted = 0
        for log in self.all_logs():
            try:
                deleted += log.delete_old_segments(now_ms)
                log.remove_expired_producers(now_ms)
            except KafkaStorageError as exc:
                LOGGER.error("Retention on %s failed: %s", log.name, exc)
        return deleted

    def close(self) -> None:
        """Flush and close every log, then mark each log dir whose logs all closed cleanly."""
        with self._lock:
            logs = list(self._logs.items())
        failed_dirs: set[Path] = set()
        points: dict[Path, dict[tuple[str, int], int]] = {}
        # in parallel: see the module's docstring
        errors = in_parallel(_close, [log for _, log in logs])
        for (key, log), exc in zip(logs, errors, strict=True):
            log_dir = self._dir_of[key]
            if exc is not None:
                LOGGER.error("Closing %s failed: %s", log.name, exc)
                failed_dirs.add(log_dir)
            points.setdefault(log_dir, {})[key] = log.recovery_point
        for log_dir in self.log_dirs:
            if log_dir in self.offline_dirs or log_dir in failed_dirs:
                continue
            try:
                self._checkpoints.mark_clean_shutdown(log_dir, points.get(log_dir, {}))
            except OSError as exc:
                LOGGER.error("Could not mark %s as cleanly shut down: %s", log_dir, exc)
