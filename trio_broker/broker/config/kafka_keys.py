"""Every broker key Kafka 3.9 and 4.x define (``KafkaConfig``), as Kafka defines it.

Why a table of facts apart from what this broker does: the names, types, defaults and validators
are Kafka's (taken from Kafka 3.9's ``ConfigDef`` definitions and the 4.x additions), so a stock
``server.properties`` is read as Kafka reads it. Keys this broker acts on are redefined, with its
own documentation, in ``keys.py``; every other key here is accepted, validated for type and
range, described by DescribeConfigs, and named in the start-up line of keys with no effect here.
``versions`` marks keys only one generation defines ("3.x": removed in Kafka 4.0 with ZooKeeper;
"4.x": added after 3.9).
"""

from __future__ import annotations

from typing import Any

from .defs import (
    INT_MAX,
    LONG_MAX,
    AtLeast,
    Between,
    Check,
    ConfigKey,
    ListOf,
    OneOf,
    Support,
)
from .defs import ConfigType as T
from .topic_keys import COMPRESSION_TYPES, GZIP_LEVEL, METADATA_VERSION

__all__ = ["AREAS", "KAFKA_BROKER_KEYS"]

BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = (
    T.BOOLEAN,
    T.STRING,
    T.INT,
    T.SHORT,
    T.LONG,
    T.DOUBLE,
    T.LIST,
    T.CLASS,
    T.PASSWORD,
)
DOUBLE_MAX = 1.7976931348623157e308
COMPRESSION_TYPE = OneOf(COMPRESSION_TYPES)
SECURITY_PROTOCOL = OneOf(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))


def _voters(value: list[str]) -> str | None:
    for entry in value:
        voter_id, at, address = entry.partition("@")
        host, colon, port = address.rpartition(":")
        if (
            not at
            or not voter_id.strip().lstrip("-").isdigit()
            or not colon
            or not host
            or (not port.isdigit())
        ):
            return f"Each entry should be in the form `{{id}}@{{host}}:{{port}}`, got {entry!r}"
    return None


def _bootstrap(value: list[str]) -> str | None:
    for entry in value:
        host, colon, port = entry.rpartition(":")
        if not colon or not host or not port.isdigit():
            return f'Each entry should be in the form "{{host}}:{{port}}", got {entry!r}'
    return None


NON_EMPTY = Check(lambda v: "String must be non-empty" if not v else None, "non-empty string")
POOL_SIZE = Check(
    lambda v: "Value can be -1 or greater than 0" if v < -1 or v == 0 else None, "[-1,1,...]"
)

QUORUM_VOTERS = Check(_voters, "non-empty list")
BOOTSTRAP_SERVERS = Check(_bootstrap, "non-empty list")

_Row = tuple[Any, ...]


def _k(
    name: str,
    type_: T,
    default: Any,
    validator: Any = None,
    *,
    dynamic: str = "",
    internal: bool = False,
    versions: str = "",
) -> _Row:
    return (name, type_, default, validator, dynamic, internal, versions)


_SECTIONS: tuple[tuple[str, tuple[_Row, ...]], ...] = (
    (
        "server",
        (
            _k("authorizer.class.name", STRING, "", None),
            _k("background.threads", INT, 10, AtLeast(1), dynamic="cluster-wide"),
            _k("broker.id", INT, -1, None),
            _k("broker.id.generation.enable", BOOLEAN, True, None, versions="3.x"),
            _k("broker.rack", STRING, None, None),
            _k("compression.gzip.level", INT, -1, GZIP_LEVEL, dynamic="cluster-wide"),
            _k("compression.lz4.level", INT, 9, Between(1, 17), dynamic="cluster-wide"),
            _k("compression.type", STRING, "producer", COMPRESSION_TYPE, dynamic="cluster-wide"),
            _k("compression.zstd.level", INT, 3, Between(-131072, 22), dynamic="cluster-wide"),
            _k("controlled.shutdown.enable", BOOLEAN, True, None),
            _k("controlled.shutdown.max.retries", INT, 3, None, versions="3.x"),
            _k("controlled.shutdown.retry.backoff.ms", LONG, 5000, None, versions="3.x"),
            _k("delete.topic.enable", BOOLEAN, True, None),
            _k("early.start.listeners", STRING, None, None),
            _k("fetch.max.bytes", INT, 57671680, AtLeast(1024)),
            _k("max.incremental.fetch.session.cache.slots", INT, 1000, AtLeast(0)),
            _k("max.request.partition.size.limit", INT, 2000, AtLeast(1)),
            _k("message.max.bytes", INT, 1048588, AtLeast(0), dynamic="cluster-wide"),
            _k("num.io.threads", INT, 8, AtLeast(1), dynamic="cluster-wide"),
            _k("num.replica.alter.log.dirs.threads", INT, None, None),
            _k("request.timeout.ms", INT, 30000, None),
            _k("reserved.broker.max.id", INT, 1000, AtLeast(0), versions="3.x"),
            _k("socket.connection.setup.timeout.max.ms", LONG, 30000, None),
            _k("socket.connection.setup.timeout.ms", LONG, 10000, None),
            _k("unstable.api.versions.enable", BOOLEAN, False, None, internal=True),
            _k("unstable.feature.versions.enable", BOOLEAN, False, None, internal=True),
        ),
    ),
    (
        "KRaft",
        (
            _k("broker.heartbeat.interval.ms", INT, 2000, None),
            _k("broker.session.timeout.ms", INT, 9000, None),
            _k("controller.listener.names", STRING, None, None),
            _k("eligible.leader.replicas.enable", BOOLEAN, False, None),
            _k("initial.broker.registration.timeout.ms", INT, 60000, None),
            _k("metadata.log.dir", STRING, None, None),
            _k("metadata.log.max.record.bytes.between.snapshots", LONG, 20971520, AtLeast(1)),
            _k("metadata.log.max.snapshot.interval.ms", LONG, 3600000, AtLeast(0)),
            _k("metadata.log.segment.bytes", INT, 1073741824, AtLeast(12)),
            _k("metadata.log.segment.min.bytes", INT, 8388608, AtLeast(12), internal=True),
            _k("metadata.log.segment.ms", LONG, 604800000, None),
            _k("metadata.max.idle.interval.ms", INT, 500, AtLeast(0)),
            _k("metadata.max.retention.bytes", LONG, 104857600, None),
            _k("metadata.max.retention.ms", LONG, 604800000, None),
            _k("node.id", INT, -1, None),
            _k("process.roles", LIST, "", ListOf(("broker", "controller"))),
            _k("sasl.mechanism.controller.protocol", STRING, "GSSAPI", None),
            _k("server.max.startup.time.ms", LONG, LONG_MAX, AtLeast(0), internal=True),
            _k("zookeeper.metadata.migration.enable", BOOLEAN, False, None, versions="3.x"),
            _k(
                "zookeeper.metadata.migration.min.batch.size",
                INT,
                200,
                AtLeast(1),
                internal=True,
                versions="3.x",
            ),
        ),
    ),
    (
        "socket server",
        (
            _k("advertised.listeners", STRING, None, None, dynamic="per-broker"),
            _k("connection.failed.authentication.delay.ms", INT, 100, AtLeast(0)),
            _k("connections.max.idle.ms", LONG, 600000, None),
            _k("control.plane.listener.name", STRING, None, None, versions="3.x"),
            _k(
                "listener.security.protocol.map",
                STRING,
                "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
                None,
                dynamic="per-broker",
            ),
            _k("listeners", STRING, "PLAINTEXT://:9092", None, dynamic="per-broker"),
            _k("max.connection.creation.rate", INT, INT_MAX, AtLeast(0), dynamic="cluster-wide"),
            _k("max.connections", INT, INT_MAX, AtLeast(0), dynamic="cluster-wide"),
            _k("max.connections.per.ip", INT, INT_MAX, AtLeast(0), dynamic="cluster-wide"),
            _k("max.connections.per.ip.overrides", STRING, "", None, dynamic="cluster-wide"),
            _k("num.network.threads", INT, 3, AtLeast(1), dynamic="cluster-wide"),
            _k("queued.max.request.bytes", LONG, -1, None),
            _k("queued.max.requests", INT, 500, AtLeast(1)),
            _k("socket.listen.backlog.size", INT, 50, AtLeast(1)),
            _k("socket.receive.buffer.bytes", INT, 102400, None),
            _k("socket.request.max.bytes", INT, 104857600, AtLeast(1)),
            _k("socket.send.buffer.bytes", INT, 102400, None),
        ),
    ),
    (
        "replication",
        (
            _k("auto.leader.rebalance.enable", BOOLEAN, True, None),
            _k("controller.socket.timeout.ms", INT, 30000, None),
            _k("default.replication.factor", INT, 1, None),
            _k("delete.records.purgatory.purge.interval.requests", INT, 1, None),
            _k("fetch.purgatory.purge.interval.requests", INT, 1000, None),
            _k("inter.broker.listener.name", STRING, None, None),
            _k(
                "inter.broker.protocol.version", STRING, "3.9-IV0", METADATA_VERSION, versions="3.x"
            ),
            _k("leader.imbalance.check.interval.seconds", LONG, 300, AtLeast(1)),
            _k("leader.imbalance.per.broker.percentage", INT, 10, None),
            _k("num.replica.fetchers", INT, 1, None, dynamic="cluster-wide"),
            _k("producer.purgatory.purge.interval.requests", INT, 1000, None),
            _k("replica.fetch.backoff.ms", INT, 1000, AtLeast(0)),
            _k("replica.fetch.max.bytes", INT, 1048576, AtLeast(0)),
            _k("replica.fetch.min.bytes", INT, 1, None),
            _k("replica.fetch.response.max.bytes", INT, 10485760, AtLeast(0)),
            _k("replica.fetch.wait.max.ms", INT, 500, None),
            _k("replica.high.watermark.checkpoint.interval.ms", LONG, 5000, None),
            _k("replica.lag.time.max.ms", LONG, 30000, None),
            _k("replica.selector.class", STRING, None, None),
            _k("replica.socket.receive.buffer.bytes", INT, 65536, None),
            _k("replica.socket.timeout.ms", INT, 30000, None),
            _k("security.inter.broker.protocol", STRING, "PLAINTEXT", SECURITY_PROTOCOL),
            _k("unclean.leader.election.enable", BOOLEAN, False, None, dynamic="cluster-wide"),
            _k("unclean.leader.election.interval.ms", LONG, 300000, AtLeast(1), internal=True),
        ),
    ),
    (
        "group coordinator",
        (
            _k(
                "group.consumer.assignors",
                LIST,
                "org.apache.kafka.coordinator.group.assignor.UniformAssignor,org.apache.kafka.coordinator.group.assignor.RangeAssignor",
                None,
            ),
            _k("group.consumer.heartbeat.interval.ms", INT, 5000, AtLeast(1)),
            _k("group.consumer.max.heartbeat.interval.ms", INT, 15000, AtLeast(1)),
            _k("group.consumer.max.session.timeout.ms", INT, 60000, AtLeast(1)),
            _k("group.consumer.max.size", INT, INT_MAX, AtLeast(1)),
            _k(
                "group.consumer.migration.policy",
                STRING,
                "bidirectional",
                OneOf(("disabled", "downgrade", "upgrade", "bidirectional"), True),
                internal=True,
            ),
            _k("group.consumer.min.heartbeat.interval.ms", INT, 5000, AtLeast(1)),
            _k("group.consumer.min.session.timeout.ms", INT, 45000, AtLeast(1)),
            _k("group.consumer.session.timeout.ms", INT, 45000, AtLeast(1)),
            _k("group.coordinator.append.linger.ms", INT, 10, AtLeast(0)),
            _k("group.coordinator.new.enable", BOOLEAN, False, None, internal=True, versions="3.x"),
            _k(
                "group.coordinator.rebalance.protocols",
                LIST,
                "classic",
                ListOf(("classic", "consumer", "share", "streams")),
            ),
            _k("group.coordinator.threads", INT, 1, AtLeast(1)),
            _k("group.initial.rebalance.delay.ms", INT, 3000, None),
            _k("group.max.session.timeout.ms", INT, 1800000, None),
            _k("group.max.size", INT, INT_MAX, AtLeast(1)),
            _k("group.min.session.timeout.ms", INT, 6000, None),
            _k("group.share.heartbeat.interval.ms", INT, 5000, AtLeast(1)),
            _k("group.share.max.heartbeat.interval.ms", INT, 15000, AtLeast(1)),
            _k("group.share.max.session.timeout.ms", INT, 60000, AtLeast(1)),
            _k("group.share.max.size", SHORT, 200, Between(10, 1000)),
            _k("group.share.min.heartbeat.interval.ms", INT, 5000, AtLeast(1)),
            _k("group.share.min.session.timeout.ms", INT, 45000, AtLeast(1)),
            _k("group.share.session.timeout.ms", INT, 45000, AtLeast(1)),
            _k("offset.metadata.max.bytes", INT, 4096, None),
            _k("offsets.commit.required.acks", SHORT, -1, None, versions="3.x"),
            _k("offsets.commit.timeout.ms", INT, 5000, AtLeast(1)),
            _k("offsets.load.buffer.size", INT, 5242880, AtLeast(1)),
            _k("offsets.retention.check.interval.ms", LONG, 600000, AtLeast(1)),
            _k("offsets.retention.minutes", INT, 10080, AtLeast(1)),
            _k("offsets.topic.compression.codec", INT, 0, None),
            _k("offsets.topic.num.partitions", INT, 50, AtLeast(1)),
            _k("offsets.topic.replication.factor", SHORT, 3, AtLeast(1)),
            _k("offsets.topic.segment.bytes", INT, 104857600, AtLeast(1)),
        ),
    ),
    (
        "log cleaner",
        (
            _k("log.cleaner.backoff.ms", LONG, 15000, AtLeast(0), dynamic="cluster-wide"),
            _k("log.cleaner.dedupe.buffer.size", LONG, 134217728, None, dynamic="cluster-wide"),
            _k(
                "log.cleaner.delete.retention.ms",
                LONG,
                86400000,
                AtLeast(0),
                dynamic="cluster-wide",
            ),
            _k("log.cleaner.enable", BOOLEAN, True, None),
            _k("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, None, dynamic="cluster-wide"),
            _k("log.cleaner.io.buffer.size", INT, 524288, AtLeast(0), dynamic="cluster-wide"),
            _k(
                "log.cleaner.io.max.bytes.per.second",
                DOUBLE,
                DOUBLE_MAX,
                None,
                dynamic="cluster-wide",
            ),
            _k(
                "log.cleaner.max.compaction.lag.ms",
                LONG,
                LONG_MAX,
                AtLeast(1),
                dynamic="cluster-wide",
            ),
            _k(
                "log.cleaner.min.cleanable.ratio",
                DOUBLE,
                0.5,
                Between(0, 1),
                dynamic="cluster-wide",
            ),
            _k("log.cleaner.min.compaction.lag.ms", LONG, 0, AtLeast(0), dynamic="cluster-wide"),
            _k("log.cleaner.threads", INT, 1, AtLeast(0), dynamic="cluster-wide"),
        ),
    ),
    (
        "log",
        (
            _k("alter.config.policy.class.name", CLASS, None, None),
            _k("auto.create.topics.enable", BOOLEAN, True, None),
            _k("create.topic.policy.class.name", CLASS, None, None),
            _k(
                "log.cleanup.policy",
                LIST,
                "delete",
                ListOf(("compact", "delete")),
                dynamic="cluster-wide",
            ),
            _k("log.dir", STRING, "/tmp/kafka-logs", None),
            _k("log.dir.failure.timeout.ms", LONG, 30000, AtLeast(1)),
            _k("log.dirs", STRING, None, None),
            _k("log.flush.interval.messages", LONG, LONG_MAX, AtLeast(1), dynamic="cluster-wide"),
            _k("log.flush.interval.ms", LONG, None, None, dynamic="cluster-wide"),
            _k("log.flush.offset.checkpoint.interval.ms", INT, 60000, AtLeast(0)),
            _k("log.flush.scheduler.interval.ms", LONG, LONG_MAX, None),
            _k("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, AtLeast(0)),
            _k("log.index.interval.bytes", INT, 4096, AtLeast(0), dynamic="cluster-wide"),
            _k("log.index.size.max.bytes", INT, 10485760, AtLeast(4), dynamic="cluster-wide"),
            _k("log.initial.task.delay.ms", LONG, 30000, AtLeast(0), internal=True),
            _k("log.message.downconversion.enable", BOOLEAN, True, None, dynamic="cluster-wide"),
            _k("log.message.format.version", STRING, "3.0-IV1", METADATA_VERSION, versions="3.x"),
            _k(
                "log.message.timestamp.after.max.ms",
                LONG,
                LONG_MAX,
                AtLeast(0),
                dynamic="cluster-wide",
            ),
            _k(
                "log.message.timestamp.before.max.ms",
                LONG,
                LONG_MAX,
                AtLeast(0),
                dynamic="cluster-wide",
            ),
            _k(
                "log.message.timestamp.difference.max.ms",
                LONG,
                LONG_MAX,
                AtLeast(0),
                dynamic="cluster-wide",
                versions="3.x",
            ),
            _k(
                "log.message.timestamp.type",
                STRING,
                "CreateTime",
                OneOf(("CreateTime", "LogAppendTime")),
                dynamic="cluster-wide",
            ),
            _k("log.preallocate", BOOLEAN, False, None, dynamic="cluster-wide"),
            _k("log.retention.bytes", LONG, -1, None, dynamic="cluster-wide"),
            _k("log.retention.check.interval.ms", LONG, 300000, AtLeast(1)),
            _k("log.retention.hours", INT, 168, None),
            _k("log.retention.minutes", INT, None, None),
            _k("log.retention.ms", LONG, None, None, dynamic="cluster-wide"),
            _k("log.roll.hours", INT, 168, AtLeast(1)),
            _k("log.roll.jitter.hours", INT, 0, AtLeast(0)),
            _k("log.roll.jitter.ms", LONG, None, None, dynamic="cluster-wide"),
            _k("log.roll.ms", LONG, None, None, dynamic="cluster-wide"),
            _k("log.segment.bytes", INT, 1073741824, AtLeast(14), dynamic="cluster-wide"),
            _k("log.segment.delete.delay.ms", LONG, 60000, AtLeast(0), dynamic="cluster-wide"),
            _k("min.insync.replicas", INT, 1, AtLeast(1), dynamic="cluster-wide"),
            _k("num.partitions", INT, 1, AtLeast(1)),
            _k("num.recovery.threads.per.data.dir", INT, 1, AtLeast(1), dynamic="cluster-wide"),
        ),
    ),
    (
        "controller quorum",
        (
            _k("controller.quorum.append.linger.ms", INT, 25, None),
            _k("controller.quorum.bootstrap.servers", LIST, "", BOOTSTRAP_SERVERS),
            _k("controller.quorum.election.backoff.max.ms", INT, 1000, None),
            _k("controller.quorum.election.timeout.ms", INT, 1000, None),
            _k("controller.quorum.fetch.timeout.ms", INT, 2000, None),
            _k("controller.quorum.request.timeout.ms", INT, 2000, None),
            _k("controller.quorum.retry.backoff.ms", INT, 20, None),
            _k("controller.quorum.voters", LIST, "", QUORUM_VOTERS),
        ),
    ),
    (
        "group coordinator",
        (
            _k("group.streams.heartbeat.interval.ms", INT, 5000, AtLeast(1), versions="4.x"),
            _k("group.streams.max.heartbeat.interval.ms", INT, 15000, AtLeast(1), versions="4.x"),
            _k("group.streams.max.session.timeout.ms", INT, 60000, AtLeast(1), versions="4.x"),
            _k("group.streams.max.size", INT, INT_MAX, AtLeast(1), versions="4.x"),
            _k("group.streams.max.standby.replicas", INT, 2, AtLeast(0), versions="4.x"),
            _k("group.streams.min.heartbeat.interval.ms", INT, 5000, AtLeast(1), versions="4.x"),
            _k("group.streams.min.session.timeout.ms", INT, 45000, AtLeast(1), versions="4.x"),
            _k("group.streams.num.standby.replicas", INT, 0, AtLeast(0), versions="4.x"),
            _k("group.streams.session.timeout.ms", INT, 45000, AtLeast(1), versions="4.x"),
        ),
    ),
    (
        "controller quorum",
        (_k("controller.quorum.auto.join.enable", BOOLEAN, False, versions="4.x"),),
    ),
    (
        "tiered storage",
        (
            _k("log.local.retention.bytes", LONG, -2, AtLeast(-2), dynamic="cluster-wide"),
            _k("log.local.retention.ms", LONG, -2, AtLeast(-2), dynamic="cluster-wide"),
            _k("remote.fetch.max.wait.ms", INT, 500, AtLeast(1), dynamic="cluster-wide"),
            _k("remote.list.offsets.request.timeout.ms", LONG, 30000, AtLeast(1), versions="4.x"),
            _k(
                "remote.log.index.file.cache.total.size.bytes",
                LONG,
                1073741824,
                AtLeast(1),
                dynamic="cluster-wide",
            ),
            _k("remote.log.manager.copier.thread.pool.size", INT, -1, POOL_SIZE),
            _k(
                "remote.log.manager.copy.max.bytes.per.second",
                LONG,
                LONG_MAX,
                AtLeast(1),
                dynamic="cluster-wide",
            ),
            _k("remote.log.manager.copy.quota.window.num", INT, 11, AtLeast(1)),
            _k("remote.log.manager.copy.quota.window.size.seconds", INT, 1, AtLeast(1)),
            _k("remote.log.manager.expiration.thread.pool.size", INT, -1, POOL_SIZE),
            _k(
                "remote.log.manager.fetch.max.bytes.per.second",
                LONG,
                LONG_MAX,
                AtLeast(1),
                dynamic="cluster-wide",
            ),
            _k("remote.log.manager.fetch.quota.window.num", INT, 11, AtLeast(1)),
            _k("remote.log.manager.fetch.quota.window.size.seconds", INT, 1, AtLeast(1)),
            _k("remote.log.manager.task.interval.ms", LONG, 30000, AtLeast(1)),
            _k(
                "remote.log.manager.task.retry.backoff.max.ms",
                LONG,
                30000,
                AtLeast(1),
                internal=True,
            ),
            _k("remote.log.manager.task.retry.backoff.ms", LONG, 500, AtLeast(1), internal=True),
            _k("remote.log.manager.task.retry.jitter", DOUBLE, 0.2, Between(0, 0.5), internal=True),
            _k("remote.log.manager.thread.pool.size", INT, 10, AtLeast(1)),
            _k("remote.log.metadata.custom.metadata.max.bytes", INT, 128, AtLeast(0)),
            _k(
                "remote.log.metadata.manager.class.name",
                STRING,
                "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
                NON_EMPTY,
            ),
            _k("remote.log.metadata.manager.class.path", STRING, None, None),
            _k("remote.log.metadata.manager.impl.prefix", STRING, "rlmm.config.", NON_EMPTY),
            _k("remote.log.metadata.manager.listener.name", STRING, None, NON_EMPTY),
            _k("remote.log.reader.max.pending.tasks", INT, 100, AtLeast(1)),
            _k("remote.log.reader.threads", INT, 10, AtLeast(1)),
            _k("remote.log.storage.manager.class.name", STRING, None, NON_EMPTY),
            _k("remote.log.storage.manager.class.path", STRING, None, None),
            _k("remote.log.storage.manager.impl.prefix", STRING, "rsm.config.", NON_EMPTY),
            _k("remote.log.storage.system.enable", BOOLEAN, False, None),
        ),
    ),
    (
        "ZooKeeper",
        (
            _k("zookeeper.clientCnxnSocket", STRING, None, None, versions="3.x"),
            _k("zookeeper.connect", STRING, None, None, versions="3.x"),
            _k("zookeeper.connection.timeout.ms", INT, None, None, versions="3.x"),
            _k("zookeeper.max.in.flight.requests", INT, 10, AtLeast(1), versions="3.x"),
            _k("zookeeper.session.timeout.ms", INT, 18000, None, versions="3.x"),
            _k("zookeeper.set.acl", BOOLEAN, False, None, versions="3.x"),
            _k("zookeeper.ssl.cipher.suites", LIST, None, None, versions="3.x"),
            _k("zookeeper.ssl.client.enable", BOOLEAN, False, None, versions="3.x"),
            _k("zookeeper.ssl.crl.enable", BOOLEAN, False, None, versions="3.x"),
            _k("zookeeper.ssl.enabled.protocols", LIST, None, None, versions="3.x"),
            _k(
                "zookeeper.ssl.endpoint.identification.algorithm",
                STRING,
                "HTTPS",
                None,
                versions="3.x",
            ),
            _k("zookeeper.ssl.keystore.location", STRING, None, None, versions="3.x"),
            _k("zookeeper.ssl.keystore.password", PASSWORD, None, None, versions="3.x"),
            _k("zookeeper.ssl.keystore.type", STRING, None, None, versions="3.x"),
            _k("zookeeper.ssl.ocsp.enable", BOOLEAN, False, None, versions="3.x"),
            _k("zookeeper.ssl.protocol", STRING, "TLSv1.2", None, versions="3.x"),
            _k("zookeeper.ssl.truststore.location", STRING, None, None, versions="3.x"),
            _k("zookeeper.ssl.truststore.password", PASSWORD, None, None, versions="3.x"),
            _k("zookeeper.ssl.truststore.type", STRING, None, None, versions="3.x"),
        ),
    ),
    (
        "metrics",
        (
            _k("auto.include.jmx.reporter", BOOLEAN, True, None, versions="3.x"),
            _k("kafka.metrics.polling.interval.secs", INT, 10, AtLeast(1)),
            _k("kafka.metrics.reporters", LIST, "", None),
            _k("metric.reporters", LIST, "", None, dynamic="cluster-wide"),
            _k("metrics.num.samples", INT, 2, AtLeast(1)),
            _k("metrics.recording.level", STRING, "INFO", None),
            _k("metrics.sample.window.ms", LONG, 30000, AtLeast(1)),
            _k("telemetry.max.bytes", INT, 1048576, AtLeast(1)),
        ),
    ),
    (
        "quotas",
        (
            _k("alter.log.dirs.replication.quota.window.num", INT, 11, AtLeast(1)),
            _k("alter.log.dirs.replication.quota.window.size.seconds", INT, 1, AtLeast(1)),
            _k("client.quota.callback.class", CLASS, None, None),
            _k("controller.quota.window.num", INT, 11, AtLeast(1)),
            _k("controller.quota.window.size.seconds", INT, 1, AtLeast(1)),
            _k("follower.replication.throttled.rate", LONG, LONG_MAX, AtLeast(0)),
            _k("leader.replication.throttled.rate", LONG, LONG_MAX, AtLeast(0)),
            _k("quota.window.num", INT, 11, AtLeast(1)),
            _k("quota.window.size.seconds", INT, 1, AtLeast(1)),
            _k("replica.alter.log.dirs.io.max.bytes.per.second", LONG, LONG_MAX, AtLeast(0)),
            _k("replication.quota.window.num", INT, 11, AtLeast(1)),
            _k("replication.quota.window.size.seconds", INT, 1, AtLeast(1)),
        ),
    ),
    (
        "security",
        (
            _k("connections.max.reauth.ms", LONG, 0, None),
            _k(
                "principal.builder.class",
                CLASS,
                "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
                None,
                dynamic="per-broker",
            ),
            _k("sasl.client.callback.handler.class", CLASS, None, None),
            _k("sasl.enabled.mechanisms", LIST, "GSSAPI", None, dynamic="per-broker"),
            _k("sasl.jaas.config", PASSWORD, None, None, dynamic="per-broker"),
            _k(
                "sasl.kerberos.kinit.cmd",
                STRING,
                "/usr/bin/kinit",
                None,
                dynamic="per-broker",
            ),
            _k("sasl.kerberos.min.time.before.relogin", LONG, 60000, None, dynamic="per-broker"),
            _k(
                "sasl.kerberos.principal.to.local.rules",
                LIST,
                "DEFAULT",
                None,
                dynamic="per-broker",
            ),
            _k("sasl.kerberos.service.name", STRING, None, None, dynamic="per-broker"),
            _k("sasl.kerberos.ticket.renew.jitter", DOUBLE, 0.05, None, dynamic="per-broker"),
            _k("sasl.kerberos.ticket.renew.window.factor", DOUBLE, 0.8, None, dynamic="per-broker"),
            _k("sasl.login.callback.handler.class", CLASS, None, None),
            _k("sasl.login.class", CLASS, None, None),
            _k("sasl.login.connect.timeout.ms", INT, None, None),
            _k("sasl.login.read.timeout.ms", INT, None, None),
            _k("sasl.login.refresh.buffer.seconds", SHORT, 300, None, dynamic="per-broker"),
            _k("sasl.login.refresh.min.period.seconds", SHORT, 60, None, dynamic="per-broker"),
            _k("sasl.login.refresh.window.factor", DOUBLE, 0.8, None, dynamic="per-broker"),
            _k("sasl.login.refresh.window.jitter", DOUBLE, 0.05, None, dynamic="per-broker"),
            _k("sasl.login.retry.backoff.max.ms", LONG, 10000, None),
            _k("sasl.login.retry.backoff.ms", LONG, 100, None),
            _k(
                "sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI", None, dynamic="per-broker"
            ),
            _k("sasl.oauthbearer.clock.skew.seconds", INT, 30, None),
            _k("sasl.oauthbearer.expected.audience", LIST, None, None),
            _k("sasl.oauthbearer.expected.issuer", STRING, None, None),
            _k("sasl.oauthbearer.jwks.endpoint.refresh.ms", LONG, 3600000, None),
            _k("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", LONG, 10000, None),
            _k("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", LONG, 100, None),
            _k("sasl.oauthbearer.jwks.endpoint.url", STRING, None, None),
            _k("sasl.oauthbearer.scope.claim.name", STRING, "scope", None),
            _k("sasl.oauthbearer.sub.claim.name", STRING, "sub", None),
            _k("sasl.oauthbearer.token.endpoint.url", STRING, None, None),
            _k("sasl.server.callback.handler.class", CLASS, None, None),
            _k("sasl.server.max.receive.size", INT, 524288, None),
            _k("security.providers", STRING, None, None),
            _k("ssl.allow.dn.changes", BOOLEAN, False, None),
            _k("ssl.allow.san.changes", BOOLEAN, False, None),
            _k("ssl.cipher.suites", LIST, "", None, dynamic="per-broker"),
            _k(
                "ssl.client.auth",
                STRING,
                "none",
                OneOf(("required", "requested", "none")),
                dynamic="per-broker",
            ),
            _k("ssl.enabled.protocols", LIST, "TLSv1.2,TLSv1.3", None, dynamic="per-broker"),
            _k(
                "ssl.endpoint.identification.algorithm", STRING, "https", None, dynamic="per-broker"
            ),
            _k("ssl.engine.factory.class", CLASS, None, None, dynamic="per-broker"),
            _k("ssl.key.password", PASSWORD, None, None, dynamic="per-broker"),
            _k("ssl.keymanager.algorithm", STRING, "SunX509", None, dynamic="per-broker"),
            _k("ssl.keystore.certificate.chain", PASSWORD, None, None, dynamic="per-broker"),
            _k("ssl.keystore.key", PASSWORD, None, None, dynamic="per-broker"),
            _k("ssl.keystore.location", STRING, None, None, dynamic="per-broker"),
            _k("ssl.keystore.password", PASSWORD, None, None, dynamic="per-broker"),
            _k("ssl.keystore.type", STRING, "JKS", None, dynamic="per-broker"),
            _k("ssl.principal.mapping.rules", STRING, "DEFAULT", None),
            _k("ssl.protocol", STRING, "TLSv1.3", None, dynamic="per-broker"),
            _k("ssl.provider", STRING, None, None, dynamic="per-broker"),
            _k("ssl.secure.random.implementation", STRING, None, None, dynamic="per-broker"),
            _k("ssl.trustmanager.algorithm", STRING, "PKIX", None, dynamic="per-broker"),
            _k("ssl.truststore.certificates", PASSWORD, None, None, dynamic="per-broker"),
            _k("ssl.truststore.location", STRING, None, None, dynamic="per-broker"),
            _k("ssl.truststore.password", PASSWORD, None, None, dynamic="per-broker"),
            _k("ssl.truststore.type", STRING, "JKS", None, dynamic="per-broker"),
        ),
    ),
    (
        "delegation tokens",
        (
            _k("delegation.token.expiry.check.interval.ms", LONG, 3600000, AtLeast(1)),
            _k("delegation.token.expiry.time.ms", LONG, 86400000, AtLeast(1)),
            _k("delegation.token.master.key", PASSWORD, None, None, versions="3.x"),
            _k("delegation.token.max.lifetime.ms", LONG, 604800000, AtLeast(1)),
            _k("delegation.token.secret.key", PASSWORD, None, None),
        ),
    ),
    (
        "password encoder",
        (
            _k("password.encoder.cipher.algorithm", STRING, "AES/CBC/PKCS5Padding", None),
            _k("password.encoder.iterations", INT, 4096, AtLeast(1024)),
            _k("password.encoder.key.length", INT, 128, AtLeast(8)),
            _k("password.encoder.keyfactory.algorithm", STRING, None, None),
            _k("password.encoder.old.secret", PASSWORD, None, None),
            _k("password.encoder.secret", PASSWORD, None, None),
        ),
    ),
    (
        "share groups",
        (
            _k("group.share.delivery.count.limit", INT, 5, Between(2, 10)),
            _k("group.share.enable", BOOLEAN, False, None, internal=True),
            _k("group.share.max.groups", SHORT, 10, Between(1, 100)),
            _k("group.share.max.record.lock.duration.ms", INT, 60000, Between(30000, 3600000)),
            _k("group.share.min.record.lock.duration.ms", INT, 15000, Between(1000, 30000)),
            _k("group.share.partition.max.record.locks", INT, 2000, Between(100, 10000)),
            _k("group.share.record.lock.duration.ms", INT, 30000, Between(1000, 60000)),
            _k("share.coordinator.append.linger.ms", INT, 10, AtLeast(0), versions="4.x"),
            _k("share.coordinator.load.buffer.size", INT, 5242880, AtLeast(1), versions="4.x"),
            _k(
                "share.coordinator.snapshot.update.records.per.snapshot",
                INT,
                500,
                AtLeast(0),
                versions="4.x",
            ),
            _k("share.coordinator.state.topic.compression.codec", INT, 0, None, versions="4.x"),
            _k("share.coordinator.state.topic.min.isr", SHORT, 2, AtLeast(1), versions="4.x"),
            _k("share.coordinator.state.topic.num.partitions", INT, 50, AtLeast(1), versions="4.x"),
            _k(
                "share.coordinator.state.topic.replication.factor",
                SHORT,
                3,
                AtLeast(1),
                versions="4.x",
            ),
            _k(
                "share.coordinator.state.topic.segment.bytes",
                INT,
                104857600,
                AtLeast(1),
                versions="4.x",
            ),
            _k("share.coordinator.threads", INT, 1, AtLeast(1), versions="4.x"),
            _k("share.coordinator.write.timeout.ms", INT, 5000, AtLeast(1), versions="4.x"),
            _k("share.fetch.max.fetch.records", INT, INT_MAX, None, internal=True, versions="4.x"),
            _k("share.fetch.purgatory.purge.interval.requests", INT, 1000, None, versions="4.x"),
        ),
    ),
    (
        "transactions",
        (
            _k("producer.id.expiration.check.interval.ms", INT, 600000, AtLeast(1), internal=True),
            _k("producer.id.expiration.ms", INT, 86400000, AtLeast(1), dynamic="cluster-wide"),
            _k(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                INT,
                10000,
                AtLeast(1),
            ),
            _k("transaction.max.timeout.ms", INT, 900000, AtLeast(1)),
            _k(
                "transaction.partition.verification.enable",
                BOOLEAN,
                True,
                None,
                dynamic="cluster-wide",
            ),
            _k(
                "transaction.remove.expired.transaction.cleanup.interval.ms",
                INT,
                3600000,
                AtLeast(1),
            ),
            _k("transaction.state.log.load.buffer.size", INT, 5242880, AtLeast(1)),
            _k("transaction.state.log.min.isr", INT, 2, AtLeast(1)),
            _k("transaction.state.log.num.partitions", INT, 50, AtLeast(1)),
            _k("transaction.state.log.replication.factor", SHORT, 3, AtLeast(1)),
            _k("transaction.state.log.segment.bytes", INT, 104857600, AtLeast(1)),
            _k("transactional.id.expiration.ms", INT, 604800000, AtLeast(1)),
        ),
    ),
)


def _build() -> dict[str, ConfigKey]:
    out: dict[str, ConfigKey] = {}
    for area, rows in _SECTIONS:
        for name, type_, default, validator, dynamic, internal, versions in rows:
            if type_ is T.LIST and isinstance(default, str):
                default = [v for v in default.split(",") if v]
            doc = f"Kafka's {area} setting; accepted and checked, with no meaning on one broker."
            out[name] = ConfigKey(
                name,
                type_,
                default,
                validator,
                doc,
                Support.IGNORED,
                dynamic=dynamic,
                internal=internal,
                versions=versions,
            )
    return out


#: Kafka broker key -> definition (Kafka's default, validator and dynamic update mode)
KAFKA_BROKER_KEYS: dict[str, ConfigKey] = _build()
#: the areas of Kafka's broker keys, in table order (docs group the ignored keys by them)
AREAS: tuple[str, ...] = tuple(dict.fromkeys(area for area, _ in _SECTIONS))
