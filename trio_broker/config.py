"""Broker configuration: Kafka's key names and defaults, as one attrs class.

Why this shape: users already know Kafka's ``server.properties``; every key here uses Kafka's
name and default where Kafka has the key. Sources, later wins: defaults < a file (Kafka
``server.properties`` format, or TOML) < environment ``TRIO_BROKER_<KEY>`` (dots to underscores,
upper case) < ``--override key=value``. An unknown key or a bad value is a ``ConfigError`` whose
message is one line naming the key, the value and what was expected.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import cattrs

__all__ = ["SENSITIVE_KEYS", "BrokerConfig", "ConfigError", "Listener", "load_config",
           "parse_listeners"]

#: keys whose values are never shown (DescribeConfigs answers null and is_sensitive=true)
SENSITIVE_KEYS = frozenset({"ssl.key.password"})

_LONG_MAX = 9_223_372_036_854_775_807
_INT_MAX = 2_147_483_647


class ConfigError(ValueError):
    """A bad configuration key or value; ``str()`` is a one-line message for the user."""


def _key(kafka: str, doc: str, *, common: bool = False) -> dict[str, Any]:
    return {"kafka": kafka, "doc": doc, "common": common}


def _nonneg(inst: Any, attribute: attrs.Attribute, value: int) -> None:  # type: ignore[type-arg]
    if value < 0:
        raise ConfigError(f"{attribute.metadata['kafka']}={value}: expected a value >= 0")


def _positive(inst: Any, attribute: attrs.Attribute, value: int) -> None:  # type: ignore[type-arg]
    if value <= 0:
        raise ConfigError(f"{attribute.metadata['kafka']}={value}: expected a value > 0")


def _one_of(*choices: str) -> Any:
    def check(inst: Any, attribute: attrs.Attribute, value: str) -> None:  # type: ignore[type-arg]
        if value not in choices:
            raise ConfigError(f"{attribute.metadata['kafka']}={value!r}: expected one of "
                              f"{', '.join(choices)}")
    return check


@attrs.frozen(kw_only=True)
class BrokerConfig:
    """Every broker setting. Attribute names are Kafka's keys with dots as underscores."""

    # --- identity and listeners ---------------------------------------------------------
    node_id: int = attrs.field(default=0, validator=_nonneg, metadata=_key(
        "node.id", "This broker's id, advertised in Metadata (alias broker.id).", common=True))
    listeners: str = attrs.field(default="PLAINTEXT://127.0.0.1:9092", metadata=_key(
        "listeners", "Comma list of NAME://host:port to bind; port 0 picks a free port.",
        common=True))
    advertised_listeners: str = attrs.field(default="", metadata=_key(
        "advertised.listeners", "What Metadata tells clients to connect to; empty = the bound "
        "addresses.", common=True))
    cluster_id: str = attrs.field(default="trio-broker-cluster", metadata=_key(
        "cluster.id", "Cluster id reported in Metadata v2+."))

    # --- network ------------------------------------------------------------------------
    num_network_threads: int = attrs.field(default=3, validator=_positive, metadata=_key(
        "num.network.threads", "Processors (connection-owning tasks) per listener."))
    num_io_threads: int = attrs.field(default=8, validator=_positive, metadata=_key(
        "num.io.threads", "Request handler tasks."))
    queued_max_requests: int = attrs.field(default=500, validator=_positive, metadata=_key(
        "queued.max.requests", "Bound of the request channel; readers wait when it is full."))
    socket_request_max_bytes: int = attrs.field(default=104_857_600, validator=_positive,
        metadata=_key("socket.request.max.bytes", "Largest request frame accepted."))
    max_connections: int = attrs.field(default=_INT_MAX, validator=_positive, metadata=_key(
        "max.connections", "Broker-wide connection limit; the acceptor waits for a free slot."))
    max_connections_per_ip: int = attrs.field(default=_INT_MAX, validator=_nonneg,
        metadata=_key("max.connections.per.ip",
                      "Connections allowed from one address; more are closed at once."))
    max_connections_per_ip_overrides: str = attrs.field(default="", metadata=_key(
        "max.connections.per.ip.overrides", "Per-address limits, 'host:N,ip:N'."))
    connections_max_idle_ms: int = attrs.field(default=600_000, validator=_positive,
        metadata=_key("connections.max.idle.ms", "Idle connections are closed after this."))
    shutdown_timeout_ms: int = attrs.field(default=5_000, validator=_nonneg, metadata=_key(
        "shutdown.timeout.ms", "Grace period for in-flight requests on shutdown."))
    metrics_listener: str = attrs.field(default="", metadata=_key(
        "metrics.listener", "http://host:port serving Prometheus metrics; empty = off.",
        common=True))

    # --- security (docs/security.md) ------------------------------------------------------
    ssl_certfile: str = attrs.field(default="", metadata=_key(
        "ssl.certfile", "PEM certificate chain of SSL/SASL_SSL listeners (may hold the key "
        "too; alias ssl.keystore.location)."))
    ssl_keyfile: str = attrs.field(default="", metadata=_key(
        "ssl.keyfile", "PEM private key, if not in ssl.certfile."))
    ssl_key_password: str = attrs.field(default="", metadata=_key(
        "ssl.key.password", "Password of an encrypted private key."))
    ssl_cafile: str = attrs.field(default="", metadata=_key(
        "ssl.cafile", "PEM CA certificates that sign client certificates (alias "
        "ssl.truststore.location)."))
    ssl_client_auth: str = attrs.field(default="none", validator=_one_of(
        "none", "requested", "required"), metadata=_key(
        "ssl.client.auth", "Client certificates: none, requested or required."))
    ssl_enabled_protocols: str = attrs.field(default="TLSv1.2,TLSv1.3", metadata=_key(
        "ssl.enabled.protocols", "TLS versions accepted."))
    ssl_cipher_suites: str = attrs.field(default="", metadata=_key(
        "ssl.cipher.suites", "OpenSSL cipher list for TLS 1.2; empty = OpenSSL's default."))
    sasl_enabled_mechanisms: str = attrs.field(default="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        metadata=_key("sasl.enabled.mechanisms",
                      "SASL mechanisms offered on SASL listeners (GSSAPI and OAUTHBEARER are "
                      "not supported)."))
    sasl_credentials_file: str = attrs.field(default="", metadata=_key(
        "sasl.credentials.file", "JSON file of SCRAM-hashed users (python -m "
        "trio_broker.security.credentials add USER --file F)."))
    sasl_server_max_receive_size: int = attrs.field(default=524_288, validator=_positive,
        metadata=_key("sasl.server.max.receive.size",
                      "Largest request accepted before authentication."))
    connection_failed_authentication_delay_ms: int = attrs.field(default=100,
        validator=_nonneg, metadata=_key("connection.failed.authentication.delay.ms",
                                         "Delay before answering and closing a failed login."))

    # --- logs ---------------------------------------------------------------------------
    log_dirs: str = attrs.field(default="./data", metadata=_key(
        "log.dirs", "Comma list of directories holding partition logs.", common=True))
    log_segment_bytes: int = attrs.field(default=1_073_741_824, validator=_positive,
        metadata=_key("log.segment.bytes", "Segment size before a new one is rolled."))
    log_roll_ms: int | None = attrs.field(default=None, metadata=_key(
        "log.roll.ms", "Roll a segment after this age (overrides log.roll.hours)."))
    log_roll_hours: int = attrs.field(default=168, validator=_positive, metadata=_key(
        "log.roll.hours", "Roll a segment after this age, in hours."))
    log_retention_ms: int | None = attrs.field(default=None, metadata=_key(
        "log.retention.ms", "Delete segments older than this; -1 keeps forever."))
    log_retention_minutes: int | None = attrs.field(default=None, metadata=_key(
        "log.retention.minutes", "Retention in minutes (if log.retention.ms is unset)."))
    log_retention_hours: int = attrs.field(default=168, metadata=_key(
        "log.retention.hours", "Retention in hours (if the finer keys are unset).",
        common=True))
    log_retention_bytes: int = attrs.field(default=-1, metadata=_key(
        "log.retention.bytes", "Delete old segments beyond this size per partition; -1 = no "
        "limit."))
    log_retention_check_interval_ms: int = attrs.field(default=300_000, validator=_positive,
        metadata=_key("log.retention.check.interval.ms", "How often retention runs."))
    log_index_interval_bytes: int = attrs.field(default=4096, validator=_positive,
        metadata=_key("log.index.interval.bytes", "Bytes between offset-index entries."))
    log_flush_interval_messages: int = attrs.field(default=_LONG_MAX, validator=_positive,
        metadata=_key("log.flush.interval.messages",
                      "fsync a partition after this many messages; 1 = before every ack.",
                      common=True))
    log_flush_interval_ms: int | None = attrs.field(default=None, metadata=_key(
        "log.flush.interval.ms", "fsync a partition whose oldest unflushed data is this old."))
    log_flush_scheduler_interval_ms: int = attrs.field(default=1000, validator=_positive,
        metadata=_key("log.flush.scheduler.interval.ms",
                      "How often the flusher checks log.flush.interval.ms."))
    log_message_timestamp_type: str = attrs.field(default="CreateTime",
        validator=_one_of("CreateTime", "LogAppendTime"),
        metadata=_key("log.message.timestamp.type", "CreateTime or LogAppendTime."))
    log_cleanup_policy: str = attrs.field(default="delete", validator=_one_of(
        "delete", "compact", "compact,delete", "delete,compact"),
        metadata=_key("log.cleanup.policy", "delete (compact is accepted but not run)."))
    message_max_bytes: int = attrs.field(default=1_048_588, validator=_positive, metadata=_key(
        "message.max.bytes", "Largest record batch accepted (topic: max.message.bytes)."))
    compression_type: str = attrs.field(default="producer", validator=_one_of(
        "uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), metadata=_key(
        "compression.type", "Codec of stored batches; producer keeps the producer's codec."))
    min_insync_replicas: int = attrs.field(default=1, validator=_positive, metadata=_key(
        "min.insync.replicas", "In-sync replicas an acks=all write needs (1 on one node)."))

    # --- topics ---------------------------------------------------------------------------
    auto_create_topics_enable: bool = attrs.field(default=True, metadata=_key(
        "auto.create.topics.enable", "Create unknown topics on Metadata/Produce requests.",
        common=True))
    num_partitions: int = attrs.field(default=1, validator=_positive, metadata=_key(
        "num.partitions", "Partitions of an auto-created topic.", common=True))
    default_replication_factor: int = attrs.field(default=1, validator=_positive,
        metadata=_key("default.replication.factor", "Always 1 on a single broker."))
    delete_topic_enable: bool = attrs.field(default=True, metadata=_key(
        "delete.topic.enable", "Whether DeleteTopics is allowed."))

    # --- groups and producers -------------------------------------------------------------
    group_initial_rebalance_delay_ms: int = attrs.field(default=3000, validator=_nonneg,
        metadata=_key("group.initial.rebalance.delay.ms",
                      "Wait for more members before the first rebalance of a new group.",
                      common=True))
    group_min_session_timeout_ms: int = attrs.field(default=6000, validator=_nonneg,
        metadata=_key("group.min.session.timeout.ms", "Smallest session timeout accepted."))
    group_max_session_timeout_ms: int = attrs.field(default=1_800_000, validator=_positive,
        metadata=_key("group.max.session.timeout.ms", "Largest session timeout accepted."))
    group_max_size: int = attrs.field(default=_INT_MAX, validator=_positive, metadata=_key(
        "group.max.size", "Members allowed in one group."))
    offsets_retention_minutes: int = attrs.field(default=10080, validator=_positive,
        metadata=_key("offsets.retention.minutes",
                      "Committed offsets of an empty group expire after this."))
    offsets_retention_check_interval_ms: int = attrs.field(default=600_000,
        validator=_positive, metadata=_key("offsets.retention.check.interval.ms",
                                           "How often expired offsets are removed."))
    offset_metadata_max_bytes: int = attrs.field(default=4096, validator=_nonneg,
        metadata=_key("offset.metadata.max.bytes", "Largest commit metadata string."))
    producer_id_expiration_ms: int = attrs.field(default=86_400_000, validator=_positive,
        metadata=_key("producer.id.expiration.ms",
                      "Idempotent producer state is forgotten after this idle time."))

    # --- process --------------------------------------------------------------------------
    log_level: str = attrs.field(default="INFO", validator=_one_of(
        "DEBUG", "INFO", "WARNING", "ERROR"), metadata=_key(
        "log.level", "Logging level of the broker process (trio-broker serve)."))

    # --- derived values -------------------------------------------------------------------
    @property
    def log_dir_list(self) -> list[Path]:
        return [Path(p.strip()) for p in self.log_dirs.split(",") if p.strip()]

    @property
    def log_retention_effective_ms(self) -> int:
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        if self.log_retention_minutes is not None:
            return self.log_retention_minutes * 60_000
        return self.log_retention_hours * 3_600_000

    @property
    def log_roll_effective_ms(self) -> int:
        return self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * 3_600_000

    @property
    def listener_list(self) -> list[Listener]:
        return parse_listeners(self.listeners, "listeners")

    @property
    def sasl_mechanism_list(self) -> list[str]:
        return [m.strip().upper() for m in self.sasl_enabled_mechanisms.split(",") if m.strip()]

    @property
    def per_ip_overrides(self) -> dict[str, int]:
        return parse_ip_overrides(self.max_connections_per_ip_overrides)

    def evolve(self, **changes: Any) -> BrokerConfig:
        """A copy with ``changes`` (Python or Kafka key names) applied and validated."""
        return build_config(attrs.asdict(self) | _normalise(changes, "override"))


@attrs.frozen
class Listener:
    name: str
    host: str
    port: int

    @property
    def security_protocol(self) -> str:
        return self.name


_KNOWN_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parse_listeners(value: str, key: str) -> list[Listener]:
    """Parse Kafka's ``NAME://host:port,...`` syntax ([::1] for IPv6)."""
    out: list[Listener] = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        host, colon, port_s = rest.rpartition(":")
        if not sep or not colon or not port_s.isdigit() or int(port_s) > 65535:
            raise ConfigError(f"{key}={value!r}: expected NAME://host:port[,...], got {item!r}")
        if name.upper() not in _KNOWN_PROTOCOLS:
            raise ConfigError(f"{key}={value!r}: listener name {name!r} is not one of "
                              f"{', '.join(_KNOWN_PROTOCOLS)}")
        out.append(Listener(name.upper(), host.strip("[]"), int(port_s)))
    if key == "listeners" and not out:
        raise ConfigError(f"{key}={value!r}: expected at least one NAME://host:port")
    return out


def parse_ip_overrides(value: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        host, colon, n = item.rpartition(":")
        if not colon or not host or not n.strip().isdigit():
            raise ConfigError(f"max.connections.per.ip.overrides={value!r}: expected "
                              f"host:N[,...], got {item!r}")
        out[host.strip()] = int(n)
    return out


# --- loading ----------------------------------------------------------------------------------

_FIELDS = {f.name: f for f in attrs.fields(BrokerConfig)}
_BY_KAFKA = {f.metadata["kafka"]: f.name for f in attrs.fields(BrokerConfig)}
_ALIASES = {"broker.id": "node_id", "ssl.keystore.location": "ssl_certfile",
            "ssl.truststore.location": "ssl_cafile"}
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

_converter = cattrs.Converter()


def _structure_bool(value: Any, _: type) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError("not a boolean")


def _structure_int(value: Any, _: type) -> int:
    if isinstance(value, bool):
        raise ValueError("not an integer")
    if isinstance(value, int):
        return value
    return int(str(value).strip())


def _structure_str(value: Any, _: type) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


_converter.register_structure_hook(bool, _structure_bool)
_converter.register_structure_hook(int, _structure_int)
_converter.register_structure_hook(str, _structure_str)


def _expected(tp: Any) -> str:
    text = str(tp)
    return {"int": "an integer", "bool": "true or false", "str": "a string",
            "int | None": "an integer"}.get(text, text)


def _field_name(key: str, source: str) -> str:
    if key in _FIELDS:
        return key
    if key in _BY_KAFKA:
        return _BY_KAFKA[key]
    if key in _ALIASES:
        return _ALIASES[key]
    raise ConfigError(f"{source}: unknown config key {key!r}")


def _normalise(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    return {_field_name(k, source): v for k, v in values.items()}


def build_config(values: Mapping[str, Any]) -> BrokerConfig:
    """Structure raw values (strings or Python values, by field name) into a BrokerConfig."""
    kwargs: dict[str, Any] = {}
    for name, raw in values.items():
        field = _FIELDS[name]
        kafka = field.metadata["kafka"]
        tp = field.type
        if raw is None or (tp == "int | None" and str(raw).strip() in ("", "null", "None")):
            kwargs[name] = None if tp == "int | None" else field.default
            continue
        target = {"int": int, "int | None": int, "bool": bool, "str": str}[str(tp)]
        try:
            kwargs[name] = _converter.structure(raw, target)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{kafka}={raw!r}: expected {_expected(tp)}") from exc
    config = BrokerConfig(**kwargs)
    # Cross-field checks that need the parsed values.
    config.listener_list  # noqa: B018 - raises ConfigError on a bad listener
    if config.advertised_listeners:
        parse_listeners(config.advertised_listeners, "advertised.listeners")
    config.per_ip_overrides  # noqa: B018
    if not config.log_dir_list:
        raise ConfigError(f"log.dirs={config.log_dirs!r}: expected at least one directory")
    _check_security(config)
    if config.default_replication_factor != 1:
        raise ConfigError(f"default.replication.factor={config.default_replication_factor}: "
                          "expected 1 (single broker)")
    return config


def _check_security(config: BrokerConfig) -> None:
    protocols = {listener.security_protocol for listener in config.listener_list}
    if protocols & {"SSL", "SASL_SSL"} and not config.ssl_certfile:
        raise ConfigError(f"listeners={config.listeners!r}: an SSL or SASL_SSL listener needs "
                          "ssl.certfile (or ssl.keystore.location)")
    if config.ssl_client_auth != "none" and not config.ssl_cafile:
        raise ConfigError(f"ssl.client.auth={config.ssl_client_auth}: needs ssl.cafile to "
                          "verify client certificates")
    if protocols & {"SASL_PLAINTEXT", "SASL_SSL"}:
        mechanisms = config.sasl_mechanism_list
        unknown = [m for m in mechanisms if m not in _SASL_MECHANISMS]
        if unknown or not mechanisms:
            raise ConfigError(f"sasl.enabled.mechanisms={config.sasl_enabled_mechanisms!r}: "
                              f"expected one or more of {', '.join(_SASL_MECHANISMS)}")
        if not config.sasl_credentials_file:
            raise ConfigError(f"listeners={config.listeners!r}: a SASL listener needs "
                              "sasl.credentials.file")


def read_properties(text: str, source: str) -> dict[str, str]:
    """Kafka's ``server.properties`` syntax: key=value (or key: value), # and ! comments."""
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep <= 0:
            raise ConfigError(f"{source}:{lineno}: expected key=value, got {line!r}")
        out[line[:sep].strip()] = line[sep + 1 :].strip()
    return out


def _flatten_toml(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten_toml(v, key + "."))
        else:
            out[key] = v
    return out


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config file {str(p)!r}: {exc.strerror or exc}") from exc
    if p.suffix == ".toml":
        try:
            return _flatten_toml(tomllib.loads(text))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(p)!r}: invalid TOML: {exc}") from exc
    return dict(read_properties(text, str(p)))


ENV_PREFIX = "TRIO_BROKER_"


def read_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``TRIO_BROKER_LOG_DIRS=/x`` -> ``{"log_dirs": "/x"}``; unknown names are errors."""
    out: dict[str, str] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        field = name[len(ENV_PREFIX):].lower()
        if field not in _FIELDS:
            raise ConfigError(f"environment {name}: unknown config key "
                              f"{field.replace('_', '.')!r}")
        out[field] = value
    return out


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override {item!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def load_config(config_file: str | os.PathLike[str] | None = None, *,
                environ: Mapping[str, str] | None = None,
                overrides: Mapping[str, Any] | None = None) -> BrokerConfig:
    """Defaults < file < environment < overrides, validated into a BrokerConfig."""
    values: dict[str, Any] = {}
    if config_file is not None:
        values.update(_normalise(read_config_file(config_file), f"config file {config_file}"))
    values.update(read_environment(os.environ if environ is None else environ))
    if overrides:
        values.update(_normalise(overrides, "override"))
    return build_config(values)


def describe_keys(common_only: bool = False) -> list[tuple[str, str, str]]:
    """(kafka key, default, doc) for docs and ``--help``."""
    rows = []
    for f in attrs.fields(BrokerConfig):
        if common_only and not f.metadata["common"]:
            continue
        default = "" if f.default is None else str(f.default).lower() if isinstance(
            f.default, bool) else str(f.default)
        rows.append((f.metadata["kafka"], default, f.metadata["doc"]))
    return rows
