"""The broker keys this broker acts on, and the one registry of every broker key.

Why two layers: ``kafka_keys`` holds Kafka's facts for every key; this module redefines the
keys this broker honours (with its own documentation, and its own default where it differs from
Kafka's: it binds 127.0.0.1 and keeps data in ./data), adds its own keys (TLS files, SCRAM
credentials, metrics endpoint, web console, log level), and marks the ``log.*`` keys that set
topic defaults with what happens to that topic config. ``BROKER_KEYS`` is the merged registry;
``BrokerConfig`` builds one attribute per honoured key from it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import attrs

from .defs import AtLeast, Between, Check, ConfigKey, OneOf, Support
from .defs import ConfigType as T
from .kafka_keys import KAFKA_BROKER_KEYS
from .topic_keys import TOPIC_KEYS

__all__ = ["ALIASES", "BROKER_KEYS", "CONSUMER_ASSIGNORS", "HONOURED_KEYS",
           "LISTENER_MECHANISM_KEYS", "NO_EFFECT", "PER_LISTENER_KEYS", "SENSITIVE_KEYS",
           "base_key", "is_known", "no_effect_broker_keys", "no_effect_topic_keys"]

#: Kafka names this broker reads as another key (PEM files instead of JKS keystores)
ALIASES = {"broker.id": "node.id", "ssl.keystore.location": "ssl.certfile",
           "ssl.truststore.location": "ssl.cafile"}
#: keys whose listener.name.L.<key> form this broker applies to listener L
PER_LISTENER_KEYS = ("max.connection.creation.rate",)
#: SASL keys Kafka sets per listener and mechanism: listener.name.L.scram-sha-256.sasl.jaas.config
LISTENER_MECHANISM_KEYS = ("sasl.jaas.config", "sasl.login.callback.handler.class",
                           "sasl.login.class", "sasl.server.callback.handler.class",
                           "connections.max.reauth.ms")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
#: the hashes of the PBKDF2 key factories the password encoder takes (Java's names)
PBKDF2_HASHES = ("SHA512", "SHA384", "SHA256", "SHA224", "SHA1")


def _roles(value: list[str]) -> str | None:
    return None if "broker" in value else (
        "process.roles must include broker: this node serves clients (it is broker and "
        "controller at once)")


def _key_factory(value: str | None) -> str | None:
    if value is None or value in {f"PBKDF2WithHmac{h}" for h in PBKDF2_HASHES}:
        return None
    return "the key factories are PBKDF2WithHmac" + ", PBKDF2WithHmac".join(PBKDF2_HASHES)


#: Kafka's built-in server-side assignors (group.consumer.assignors takes names or class names)
CONSUMER_ASSIGNORS = {"uniform": "uniform", "range": "range",
                      "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
                      "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}


def _assignors(value: list[str]) -> str | None:
    unknown = [v for v in value if v not in CONSUMER_ASSIGNORS]
    if unknown:
        return f"unknown assignor {unknown[0]}: the built-in assignors are uniform and range"
    names = [CONSUMER_ASSIGNORS[v] for v in value]
    if len(set(names)) != len(names):
        return "each assignor may be named once"
    return None if names else "at least one assignor is needed"


def _h(name: str, doc: str, *, type_: T | None = None, default: object = None,
       validator: object = None, own: bool = False, note: str = "") -> ConfigKey:
    """An honoured key: Kafka's definition with this broker's doc (and default if given)."""
    kafka = KAFKA_BROKER_KEYS.get(name)
    if kafka is None:
        if not own or type_ is None:
            raise ValueError(f"{name} is not a Kafka key: define its type")
        return ConfigKey(name, type_, default, validator, doc,  # type: ignore[arg-type]
                         Support.HONOURED, note=note or "this broker's own key")
    changes: dict[str, Any] = {"doc": doc, "support": Support.HONOURED, "note": note}
    for field, value in (("default", default), ("type", type_), ("validator", validator)):
        if value is not None:
            changes[field] = value
    return attrs.evolve(kafka, **changes)


_HONOURED: tuple[ConfigKey, ...] = (
    # --- identity, roles and listeners ---------------------------------------------------------
    _h("node.id", "This broker's id, advertised in Metadata.", default=0,
       validator=AtLeast(0)),
    _h("process.roles", "Roles of this node; it is always broker and controller of its "
       "one-node cluster, so the value must include broker.", default=["broker", "controller"],
       validator=Check(_roles, "[broker, controller]")),
    _h("controller.listener.names", "Listeners of the controller role: accepted in listeners "
       "and advertised.listeners, never bound or shown to clients."),
    _h("listeners", "Comma list of NAME://host:port to bind; port 0 picks a free port.",
       default="PLAINTEXT://127.0.0.1:9092"),
    _h("advertised.listeners", "What Metadata tells clients to connect to, per listener name; "
       "a listener without an entry advertises its bound address.", default=""),
    _h("listener.security.protocol.map", "Listener name to security protocol, NAME:PROTOCOL,...; "
       "a listener named after a protocol needs no entry."),
    _h("cluster.id", "Cluster id; empty: the one stamped in the log dirs' meta.properties, "
       "or a new random one stamped there at the first start.", own=True, type_=T.STRING,
       default=""),
    _h("broker.rack", "This broker's rack, named in Metadata v1+ and DescribeCluster; a test "
       "cluster (serve --brokers N --racks a,b,...) places replicas rack-aware when every node "
       "has one."),
    _h("replica.selector.class", "org.apache.kafka.common.replica.RackAwareReplicaSelector: a "
       "test cluster's leader sends a consumer (Fetch v11+) to the in-sync replica in its "
       "client.rack, which serves it (KIP-392); unset: the leader serves every fetch."),
    # --- network --------------------------------------------------------------------------------
    _h("num.network.threads", "Processors (connection-owning tasks) per listener."),
    _h("num.io.threads", "Request handler tasks."),
    _h("queued.max.requests", "Bound of the request channel; readers wait when it is full."),
    _h("socket.request.max.bytes", "Largest request frame accepted."),
    _h("max.connections", "Broker-wide connection limit; the acceptor waits for a free slot."),
    _h("max.connection.creation.rate", "New connections per second the broker accepts (also "
       "per listener: listener.name.L.max.connection.creation.rate); over it the acceptor "
       "waits, none is refused."),
    _h("max.connections.per.ip", "Connections allowed from one address; more are closed at "
       "once."),
    _h("max.connections.per.ip.overrides", "Per-address limits, 'host:N,ip:N'."),
    _h("connections.max.idle.ms", "Idle connections are closed after this.",
       validator=AtLeast(1)),
    _h("shutdown.timeout.ms", "Grace period for in-flight requests on shutdown.", own=True,
       type_=T.LONG, default=5000, validator=AtLeast(0)),
    _h("metrics.listener", "http://host:port serving Prometheus metrics (one broker; no host = "
       "loopback); empty = off.", own=True,
       type_=T.STRING, default=""),
    # --- client telemetry (KIP-714; docs/telemetry.md) -----------------------------------------
    _h("telemetry.max.bytes", "Largest metrics payload a client may push (PushTelemetry), "
       "before decompression; larger pushes are answered TELEMETRY_TOO_LARGE."),
    _h("telemetry.subscribe.all", "Subscribe every client to all of its metrics, besides the "
       "CLIENT_METRICS subscriptions, so that clients push without an admin setting one up "
       "(local use); the interval is telemetry.subscribe.all.interval.ms.", own=True,
       type_=T.BOOLEAN, default=False),
    _h("telemetry.subscribe.all.interval.ms", "Push interval of telemetry.subscribe.all.",
       own=True, type_=T.INT, default=30000, validator=Between(100, 3600000)),
    _h("control.listener", "http://host:port of a test cluster's control endpoint (serve "
       "--brokers N; docs/testing.md; no host = loopback); empty = off.", own=True,
       type_=T.STRING, default=""),
    _h("control.listener.token", "Bearer token every request to control.listener must carry "
       "(Authorization: Bearer TOKEN); empty = none asked.", own=True, type_=T.PASSWORD,
       default=""),
    _h("http.allowed.hosts", "Host names the web console, the Schema Registry, the REST proxy, "
       "metrics.listener and control.listener "
       "answer to besides loopback names and the address they are bound to or reached on (the "
       "DNS rebinding guard: any other Host gets 421).", own=True, type_=T.LIST, default=[]),
    # --- schema registry (docs/schema-registry.md) -------------------------------------------
    _h("schema.registry.listener", "http://host:port (or https://, with ssl.certfile) of the "
       "broker's Schema Registry (Confluent's REST API v1, stored in the _schemas topic; no host = "
       "loopback); empty = off.", own=True,
       type_=T.STRING, default=""),
    _h("schema.registry.authentication.method", "NONE, or BASIC: requests carry HTTP basic "
       "credentials of the broker's SASL (SCRAM) users, and the broker's ACLs decide what each "
       "may do on each subject (docs/schema-registry.md).", own=True, type_=T.STRING,
       default="NONE", validator=OneOf(("NONE", "BASIC"), True)),
    _h("schema.registry.enable", "Also serve the Schema Registry's API under /schema-registry "
       "of the web console's listener (http.listener): its clients' URL is then "
       "http://host:port/schema-registry.", own=True, type_=T.BOOLEAN, default=False),
    # --- web console (docs/console.md) ----------------------------------------------------------
    _h("http.listener", "http://host:port (or https://, with ssl.certfile) of the broker's web "
       "console (one broker; no host = loopback); empty = off.", own=True, type_=T.STRING,
       default=""),
    _h("http.console.enabled", "Serve the web console on http.listener. Unset: on, unless the "
       "advertised listener is SSL without SASL (no credentials to log in with).", own=True,
       type_=T.BOOLEAN, default=None),
    _h("http.console.read.only", "Refuse the console's writes (create, delete, alter, produce, "
       "reset). Unset: read-only when http.listener binds beyond loopback.", own=True,
       type_=T.BOOLEAN, default=None),
    _h("http.console.ssl.certfile", "PEM certificate (and key) the console's own Kafka client "
       "presents when its listener asks for client certificates; empty = none (the broker's "
       "ssl.certfile is never presented for it).", own=True, type_=T.STRING, default=""),
    _h("http.console.ssl.keyfile", "PEM private key of http.console.ssl.certfile, if not in it.",
       own=True, type_=T.STRING, default=""),
    _h("http.console.ssl.key.password", "Password of an encrypted http.console.ssl.keyfile.",
       own=True, type_=T.PASSWORD, default=""),
    # --- REST proxy (docs/rest.md) -------------------------------------------------------------
    _h("rest.proxy.listener", "http://host:port (or https://, with ssl.certfile) serving "
       "Confluent's REST Proxy API v3 (topics, configs, groups, produce) from this broker (no "
       "host = loopback); empty = off.",
       own=True, type_=T.STRING, default=""),
    _h("rest.proxy.authentication.method", "NONE, or BASIC: requests carry HTTP basic "
       "credentials, which the REST proxy logs in to the broker's SASL_PLAINTEXT listener with "
       "(the broker's SASL users; docs/rest.md).", own=True, type_=T.STRING, default="NONE"),
    _h("kafka.rest.enable", "Also serve the REST proxy's API under /kafka of the web console's "
       "listener (http.listener), as Confluent Server does (its key).", own=True,
       type_=T.BOOLEAN, default=False),
    _h("rest.proxy.access.control.allow.origin", "Origins (comma-separated, or *) whose web "
       "pages may call the REST proxy (CORS; Confluent's access.control.allow.origin); empty "
       "= CORS off.", own=True, type_=T.STRING, default=""),
    _h("rest.proxy.access.control.allow.methods", "Methods those pages may use (Confluent's "
       "access.control.allow.methods).", own=True, type_=T.STRING,
       default="GET,POST,PUT,DELETE,HEAD"),
    _h("rest.proxy.access.control.allow.headers", "Request headers those pages may send "
       "(Confluent's access.control.allow.headers).", own=True, type_=T.STRING,
       default="origin,content-type,accept,authorization"),
    _h("consumer.instance.timeout.ms", "REST proxy v2: a consumer instance not used for this "
       "long is closed and leaves its group (Confluent's key).", own=True, type_=T.INT,
       default=300_000, validator=AtLeast(1)),
    # --- security (docs/security.md) ------------------------------------------------------------
    _h("ssl.certfile", "PEM certificate chain of SSL/SASL_SSL listeners (may hold the key "
       "too).", own=True, type_=T.STRING, default=""),
    _h("ssl.keyfile", "PEM private key, if not in ssl.certfile.", own=True, type_=T.STRING,
       default=""),
    _h("ssl.key.password", "Password of an encrypted private key.", default=""),
    _h("ssl.cafile", "PEM CA certificates that sign client certificates.", own=True,
       type_=T.STRING, default=""),
    _h("ssl.client.auth", "Client certificates: none, requested or required."),
    _h("ssl.enabled.protocols", "TLS versions accepted."),
    _h("ssl.cipher.suites", "OpenSSL cipher list for TLS 1.2; empty = OpenSSL's default."),
    _h("sasl.enabled.mechanisms", "SASL mechanisms offered on SASL listeners (GSSAPI is not "
       "supported).", default=list(SASL_MECHANISMS[:3])),
    _h("sasl.credentials.file", "JSON file of SCRAM-hashed users (python -m "
       "trio_broker.broker.security.credentials add USER --file F, or AlterUserScramCredentials);"
       " empty: scram-credentials.json in the first log dir.", own=True, type_=T.STRING,
       default=""),
    _h("sasl.server.max.receive.size", "Largest request accepted before authentication.",
       validator=AtLeast(1)),
    _h("connection.failed.authentication.delay.ms", "Delay before answering and closing a failed "
       "login."),
    _h("connections.max.reauth.ms", "Session lifetime of SASL connections; the client "
       "re-authenticates before it ends (KIP-368). 0 = sessions never end."),
    _h("sasl.oauthbearer.jwks.endpoint.url", "file: URL of the JWKS that signs OAUTHBEARER "
       "tokens; unset = unsecured JWS tokens (development only)."),
    _h("sasl.oauthbearer.sub.claim.name", "OAUTHBEARER claim naming the principal."),
    _h("sasl.oauthbearer.clock.skew.seconds", "Clock skew allowed on signed tokens' times."),
    _h("sasl.oauthbearer.expected.audience", "Audiences a signed token must name one of."),
    _h("sasl.oauthbearer.expected.issuer", "Issuer a signed token must name."),
    _h("password.encoder.secret", "Secret that encrypts the passwords set as dynamic broker "
       "configs (AlterConfigs: listener.name.L.ssl.key.password, sasl.jaas.config, ...) before "
       "they are written to broker-configs.json; unset: such configs are refused."),
    _h("password.encoder.old.secret", "The previous password.encoder.secret: at start, stored "
       "passwords it encrypted are re-encrypted with password.encoder.secret."),
    _h("password.encoder.keyfactory.algorithm", "Key derivation of the password encoder: "
       "PBKDF2WithHmacSHA512 (unset), -SHA384, -SHA256, -SHA224 or -SHA1.",
       validator=Check(_key_factory, "PBKDF2WithHmacSHA512, ..., PBKDF2WithHmacSHA1")),
    _h("password.encoder.cipher.algorithm", "Cipher of the password encoder: "
       "AES/CBC/PKCS5Padding or AES/GCM/NoPadding.",
       validator=OneOf(("AES/CBC/PKCS5Padding", "AES/GCM/NoPadding"))),
    _h("password.encoder.key.length", "AES key length of the password encoder, in bits.",
       validator=Check(lambda v: None if v in (128, 192, 256) else
                       "AES keys are 128, 192 or 256 bits", "[128, 192, 256]")),
    _h("password.encoder.iterations", "PBKDF2 iterations of the password encoder."),
    _h("authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns "
       "on ACL authorization (kept in acls.json in the first log dir); empty = off."),
    _h("super.users", "Principals allowed everything, ';'-separated (User:admin;User:ops).",
       own=True, type_=T.STRING, default="", note="Kafka's authorizer key"),
    _h("quota.window.num", "Client quota burst: a new client may use this many windows' worth "
       "of its quota at once."),
    _h("quota.window.size.seconds", "Length of one client quota window, in seconds."),
    _h("allow.everyone.if.no.acl.found", "Allow an action on a resource no ACL names (else "
       "deny).", own=True, type_=T.BOOLEAN, default=False, note="Kafka's authorizer key"),
    # --- logs -----------------------------------------------------------------------------------
    _h("log.dirs", "Comma list of directories holding partition logs (log.dir when not "
       "given).", default="./data"),
    _h("log.dir", "The log directory when log.dirs is not given."),
    _h("log.roll.hours", "Roll a segment after this age, in hours (if log.roll.ms is unset)."),
    _h("log.retention.minutes", "Retention in minutes (if log.retention.ms is unset)."),
    _h("log.retention.hours", "Retention in hours (if the finer keys are unset)."),
    _h("log.retention.check.interval.ms", "How often retention runs."),
    _h("log.flush.scheduler.interval.ms", "How often the flusher checks flush.ms (Kafka's "
       "default never runs it).", default=1000, validator=AtLeast(1)),
    _h("log.cleaner.enable", "Run the log cleaner (compaction of cleanup.policy=compact topics)."),
    _h("log.cleaner.threads", "Cleaner tasks, each cleaning one partition at a time in a worker "
       "thread; dynamic (0 stops cleaning)."),
    _h("log.cleaner.backoff.ms", "How long a cleaner task waits when no log is due; dynamic."),
    _h("log.cleaner.dedupe.buffer.size", "Bytes of the cleaners' offset maps (24 an entry, as "
       "Kafka counts), shared by the threads; dynamic."),
    _h("log.cleaner.io.max.bytes.per.second", "Bytes read plus written per second by all "
       "cleaners together; dynamic, even for a cleaning under way."),
    # --- topics ---------------------------------------------------------------------------------
    _h("auto.create.topics.enable", "Create unknown topics on Metadata/Produce requests."),
    _h("num.partitions", "Partitions of an auto-created topic."),
    _h("default.replication.factor", "Replicas of a new topic; 1 on a single broker.",
       validator=Check(lambda v: None if v == 1 else "Value must be 1 on a single broker", "[1]")),
    _h("delete.topic.enable", "Whether DeleteTopics is allowed."),
    # --- groups and producers -------------------------------------------------------------------
    _h("group.initial.rebalance.delay.ms", "Wait for more members before the first rebalance of a "
       "new group.", validator=AtLeast(0)),
    _h("group.min.session.timeout.ms", "Smallest session timeout accepted.",
       validator=AtLeast(0)),
    _h("group.max.session.timeout.ms", "Largest session timeout accepted.",
       validator=AtLeast(1)),
    _h("group.max.size", "Members allowed in one group."),
    _h("group.coordinator.rebalance.protocols", "Group protocols served: classic and consumer "
       "(KIP-848; Kafka 4.x serves both by default); without consumer, ConsumerGroupHeartbeat "
       "answers UNSUPPORTED_VERSION. share and streams are accepted: share groups are served "
       "whatever this lists (Kafka 4.2 enables them with the share.version feature, not this "
       "key), streams groups do not exist here.",
       default=["classic", "consumer", "streams"]),
    _h("group.share.record.lock.duration.ms", "How long a share group's member holds the "
       "records a ShareFetch handed it before they are released for another delivery."),
    _h("group.share.delivery.count.limit", "Deliveries of one record to a share group; a "
       "record released this many times is archived (never delivered again)."),
    _h("group.share.session.timeout.ms", "A share group member that sends no heartbeat for "
       "this long leaves its group; its acquired records are released."),
    _h("group.share.heartbeat.interval.ms", "The heartbeat interval given to share group "
       "members."),
    _h("group.share.max.size", "Members allowed in one share group (GROUP_MAX_SIZE_REACHED "
       "beyond)."),
    _h("group.share.partition.max.record.locks", "Records of one partition a share group may "
       "have in flight (acquired or waiting for redelivery); acquisition waits beyond."),
    _h("group.consumer.session.timeout.ms", "A consumer-protocol member that sends no "
       "heartbeat for this long is removed from its group.", default=45000),
    _h("group.consumer.min.session.timeout.ms", "Lower bound of "
       "group.consumer.session.timeout.ms."),
    _h("group.consumer.max.session.timeout.ms", "Upper bound of "
       "group.consumer.session.timeout.ms."),
    _h("group.consumer.heartbeat.interval.ms", "The heartbeat interval given to "
       "consumer-protocol members."),
    _h("group.consumer.min.heartbeat.interval.ms", "Lower bound of "
       "group.consumer.heartbeat.interval.ms."),
    _h("group.consumer.max.heartbeat.interval.ms", "Upper bound of "
       "group.consumer.heartbeat.interval.ms."),
    _h("group.consumer.max.size", "Members allowed in one consumer-protocol group."),
    _h("group.consumer.migration.policy", "Which way a group with members may change protocol "
       "online: upgrade (a consumer-protocol member joining a classic group), downgrade (the "
       "last consumer-protocol member leaving a group of classic members), bidirectional or "
       "disabled (only empty groups change protocol)."),
    _h("group.consumer.assignors", "Server-side assignors, by name (uniform, range) or Kafka "
       "class name; the first is the default.", default=["uniform", "range"],
       validator=Check(_assignors, "[uniform, range]")),
    _h("offsets.retention.minutes", "Committed offsets of an empty group expire after this."),
    _h("offsets.retention.check.interval.ms", "How often expired offsets are removed."),
    _h("offset.metadata.max.bytes", "Largest commit metadata string.", validator=AtLeast(0)),
    _h("producer.id.expiration.ms", "Idempotent producer state is forgotten after this idle "
       "time."),
    _h("transaction.max.timeout.ms", "Largest transaction.timeout.ms a producer may ask for."),
    _h("transaction.partition.verification.enable",
       "Refuse a transactional Produce below v12 (transaction version 1) for a partition not in "
       "the producer's ongoing transaction (KIP-890 part 1). Produce v12+ adds the partition "
       "itself whatever the value."),
    _h("transaction.abort.timed.out.transaction.cleanup.interval.ms",
       "How often transactions older than their timeout are aborted."),
    _h("transaction.remove.expired.transaction.cleanup.interval.ms",
       "How often idle transactional ids are forgotten."),
    _h("transactional.id.expiration.ms", "A transactional id without a transaction is forgotten "
       "after this idle time."),
    # --- process --------------------------------------------------------------------------------
    _h("log.level", "Logging level of the broker process (trio-broker serve).", own=True,
       type_=T.STRING, default="INFO", validator=OneOf(("DEBUG", "INFO", "WARNING", "ERROR"))),
)


def _topic_default_key(name: str) -> ConfigKey:
    """A broker key that supplies a topic config's default: its support follows the topic's."""
    for topic in TOPIC_KEYS.values():
        for broker_key, scale in topic.synonyms:
            if broker_key == name:
                unit = "" if scale == 1 else " (in the key's own unit)"
                return attrs.evolve(
                    KAFKA_BROKER_KEYS[name], support=topic.key.support, note=topic.key.note,
                    doc=f"Default of topic config {topic.name}{unit}: {topic.key.doc}")
    raise KeyError(name)


def _registry() -> dict[str, ConfigKey]:
    keys = dict(KAFKA_BROKER_KEYS)
    for topic in TOPIC_KEYS.values():
        for broker_key, _ in topic.synonyms:
            keys[broker_key] = _topic_default_key(broker_key)
    for key in _HONOURED:
        keys[key.name] = key
    for alias, target in ALIASES.items():
        keys[alias] = attrs.evolve(keys[alias], support=Support.HONOURED,
                                   doc=f"Read as {target} (same value).")
    # message.max.bytes and the log.* defaults the broker acts on keep Kafka's facts but read
    # as honoured (their topic configs are).
    return dict(sorted(keys.items()))


#: every broker key: Kafka's, this broker's own, by name
BROKER_KEYS: dict[str, ConfigKey] = _registry()
#: topic defaults BrokerConfig keeps an attribute for (the rest: ``BrokerConfig.value_of``)
_TOPIC_DEFAULT_ATTRIBUTES = (
    "log.segment.bytes", "log.roll.ms", "log.retention.ms", "log.retention.bytes",
    "log.index.interval.bytes", "log.flush.interval.messages", "log.flush.interval.ms",
    "log.message.timestamp.type", "log.cleanup.policy", "message.max.bytes", "compression.type",
    "min.insync.replicas")
#: the keys BrokerConfig has an attribute for, in declaration order
HONOURED_KEYS: dict[str, ConfigKey] = {
    name: BROKER_KEYS[name]
    for name in (*(k.name for k in _HONOURED), *_TOPIC_DEFAULT_ATTRIBUTES)}
#: keys whose values are never shown (DescribeConfigs answers null and is_sensitive=true)
SENSITIVE_KEYS = frozenset(k for k, v in BROKER_KEYS.items() if v.sensitive)

_LISTENER_PREFIX = re.compile(r"listener\.name\.([^.]+)\.(.+)")


def base_key(name: str) -> str | None:
    """The key a listener-prefixed name configures (Kafka's ``listener.name.L.<key>`` and
    ``listener.name.L.<mechanism>.<sasl key>``), or None if ``name`` is not one."""
    match = _LISTENER_PREFIX.fullmatch(name)
    if match is None:
        return None
    rest = match.group(2)
    if rest in BROKER_KEYS:
        return rest
    for mechanism_key in LISTENER_MECHANISM_KEYS:
        if rest.endswith("." + mechanism_key):
            return mechanism_key
    return None


def is_known(name: str) -> bool:
    return name in BROKER_KEYS or name in ALIASES or base_key(name) is not None



#: how the broker's log introduces keys it accepted but does not act on (one line at start, one
#: for each dynamic or topic config change that sets any): a user who set one learns it at once
NO_EFFECT = "Accepted for compatibility, no effect here"


def no_effect_broker_keys(names: Iterable[str]) -> list[str]:
    """The broker keys among ``names`` that change nothing here, sorted: keys ignored on one
    node, topic defaults whose topic config is only stored, and listener-prefixed settings this
    broker does not apply per listener (all but ``PER_LISTENER_KEYS``)."""
    def no_effect(name: str) -> bool:
        base = base_key(name)
        if base is not None:
            return base not in PER_LISTENER_KEYS
        key = BROKER_KEYS.get(name)
        return key is not None and key.support is not Support.HONOURED

    return sorted(name for name in names if no_effect(name))


def no_effect_topic_keys(names: Iterable[str]) -> list[str]:
    """The topic configs among ``names`` that are stored and described but not acted on."""
    return sorted(name for name in names
                  if name in TOPIC_KEYS and TOPIC_KEYS[name].key.support is not Support.HONOURED)
