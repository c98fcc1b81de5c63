"""``BrokerConfig``: one attribute per key this broker honours, plus every key it was given.

Why attributes and a map: handlers and the network layer read typed attributes
(``config.num_io_threads``) on hot paths; DescribeConfigs, the ``log.*`` topic defaults and the
"no effect here" log line need every key a user set, including the hundreds this broker only
accepts. The attributes take their default and validator from the key registry
(``keys.HONOURED_KEYS``), so a value set in code is checked exactly like one read from a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..security.acl import AUTHORIZER_CLASSES
from .consumer_groups import KEYS as CONSUMER_GROUP_TIMEOUT_KEYS
from .consumer_groups import consumer_group_bounds_error
from .defs import NO_DEFAULT, ConfigType, ConfigValueError, Support
from .errors import ConfigError as ConfigError
from .fields import Field, FrozenFields, key_field, text_map, to_list_text
from .keys import (
    ALIASES,
    BROKER_KEYS,
    CONSUMER_ASSIGNORS,
    HONOURED_KEYS,
    PER_LISTENER_KEYS,
    SASL_MECHANISMS,
    base_key,
    is_known,
)
from .listeners import HTTP_LISTENER_SCHEMES
from .listeners import KNOWN_PROTOCOLS as KNOWN_PROTOCOLS
from .listeners import Listener as Listener
from .listeners import parse_http_listener as parse_http_listener
from .listeners import parse_ip_overrides as parse_ip_overrides
from .listeners import parse_listeners as parse_listeners
from .listeners import parse_protocol_map as parse_protocol_map
from .topic_keys import TOPIC_KEYS

#: the SCRAM users' file in the first log dir when ``sasl.credentials.file`` is not set
SCRAM_CREDENTIALS_FILE = "scram-credentials.json"

__all__ = ["BrokerConfig", "ConfigError", "Listener", "build_config", "normalise",
           "parse_ip_overrides", "parse_listeners"]


def _f(name: str) -> Any:
    """The field of honoured key ``name``: its default, validator and registry entry."""
    return key_field(HONOURED_KEYS[name])


class BrokerConfig(FrozenFields):
    """Every honoured setting, attribute names being Kafka's keys with dots as underscores.

    ``originals`` holds every key the loader was given (Kafka's name -> the text as given), so
    keys without an attribute keep their values; ``origins`` says where each came from. Frozen,
    compared and shown by its fields (``fields.py``: not an attrs class, for start-up's sake).
    """

    # --- identity, roles and listeners ---------------------------------------------------------
    node_id: int = _f("node.id")
    process_roles: str = _f("process.roles")
    controller_listener_names: str | None = _f("controller.listener.names")
    listeners: str = _f("listeners")
    advertised_listeners: str = _f("advertised.listeners")
    listener_security_protocol_map: str = _f("listener.security.protocol.map")
    cluster_id: str = _f("cluster.id")
    broker_rack: str | None = _f("broker.rack")
    replica_selector_class: str | None = _f("replica.selector.class")
    # --- network --------------------------------------------------------------------------------
    num_network_threads: int = _f("num.network.threads")
    num_io_threads: int = _f("num.io.threads")
    queued_max_requests: int = _f("queued.max.requests")
    socket_request_max_bytes: int = _f("socket.request.max.bytes")
    max_connections: int = _f("max.connections")
    max_connection_creation_rate: int = _f("max.connection.creation.rate")
    max_connections_per_ip: int = _f("max.connections.per.ip")
    max_connections_per_ip_overrides: str = _f("max.connections.per.ip.overrides")
    connections_max_idle_ms: int = _f("connections.max.idle.ms")
    shutdown_timeout_ms: int = _f("shutdown.timeout.ms")
    metrics_listener: str = _f("metrics.listener")
    http_listener: str = _f("http.listener")
    schema_registry_listener: str = _f("schema.registry.listener")
    schema_registry_authentication_method: str = _f("schema.registry.authentication.method")
    schema_registry_enable: bool = _f("schema.registry.enable")
    telemetry_max_bytes: int = _f("telemetry.max.bytes")
    telemetry_subscribe_all: bool = _f("telemetry.subscribe.all")
    telemetry_subscribe_all_interval_ms: int = _f("telemetry.subscribe.all.interval.ms")
    control_listener: str = _f("control.listener")
    control_listener_token: str = _f("control.listener.token")
    http_allowed_hosts: str = _f("http.allowed.hosts")
    http_console_enabled: bool | None = _f("http.console.enabled")
    http_console_read_only: bool | None = _f("http.console.read.only")
    http_console_ssl_certfile: str = _f("http.console.ssl.certfile")
    http_console_ssl_keyfile: str = _f("http.console.ssl.keyfile")
    http_console_ssl_key_password: str = _f("http.console.ssl.key.password")
    rest_proxy_listener: str = _f("rest.proxy.listener")
    rest_proxy_authentication_method: str = _f("rest.proxy.authentication.method")
    kafka_rest_enable: bool = _f("kafka.rest.enable")
    rest_proxy_access_control_allow_origin: str = _f("rest.proxy.access.control.allow.origin")
    rest_proxy_access_control_allow_methods: str = _f(
        "rest.proxy.access.control.allow.methods")
    rest_proxy_access_control_allow_headers: str = _f(
        "rest.proxy.access.control.allow.headers")
    consumer_instance_timeout_ms: int = _f("consumer.instance.timeout.ms")
    # --- security (docs/security.md) ------------------------------------------------------------
    ssl_certfile: str = _f("ssl.certfile")
    ssl_keyfile: str = _f("ssl.keyfile")
    ssl_key_password: str = _f("ssl.key.password")
    ssl_cafile: str = _f("ssl.cafile")
    ssl_client_auth: str = _f("ssl.client.auth")
    ssl_enabled_protocols: str = _f("ssl.enabled.protocols")
    ssl_cipher_suites: str = _f("ssl.cipher.suites")
    sasl_enabled_mechanisms: str = _f("sasl.enabled.mechanisms")
    sasl_credentials_file: str = _f("sasl.credentials.file")
    sasl_server_max_receive_size: int = _f("sasl.server.max.receive.size")
    connection_failed_authentication_delay_ms: int = _f("connection.failed.authentication.delay.ms")
    connections_max_reauth_ms: int = _f("connections.max.reauth.ms")
    sasl_oauthbearer_jwks_endpoint_url: str | None = _f("sasl.oauthbearer.jwks.endpoint.url")
    sasl_oauthbearer_sub_claim_name: str = _f("sasl.oauthbearer.sub.claim.name")
    sasl_oauthbearer_clock_skew_seconds: int = _f("sasl.oauthbearer.clock.skew.seconds")
    sasl_oauthbearer_expected_audience: str | None = _f("sasl.oauthbearer.expected.audience")
    sasl_oauthbearer_expected_issuer: str | None = _f("sasl.oauthbearer.expected.issuer")
    password_encoder_secret: str | None = _f("password.encoder.secret")
    password_encoder_old_secret: str | None = _f("password.encoder.old.secret")
    password_encoder_keyfactory_algorithm: str | None = _f(
        "password.encoder.keyfactory.algorithm")
    password_encoder_cipher_algorithm: str = _f("password.encoder.cipher.algorithm")
    password_encoder_key_length: int = _f("password.encoder.key.length")
    password_encoder_iterations: int = _f("password.encoder.iterations")
    authorizer_class_name: str = _f("authorizer.class.name")
    super_users: str = _f("super.users")
    allow_everyone_if_no_acl_found: bool = _f("allow.everyone.if.no.acl.found")
    quota_window_num: int = _f("quota.window.num")
    quota_window_size_seconds: int = _f("quota.window.size.seconds")
    # --- logs -----------------------------------------------------------------------------------
    log_dirs: str = _f("log.dirs")
    log_dir: str = _f("log.dir")
    log_segment_bytes: int = _f("log.segment.bytes")
    log_roll_ms: int | None = _f("log.roll.ms")
    log_roll_hours: int = _f("log.roll.hours")
    log_retention_ms: int | None = _f("log.retention.ms")
    log_retention_minutes: int | None = _f("log.retention.minutes")
    log_retention_hours: int = _f("log.retention.hours")
    log_retention_bytes: int = _f("log.retention.bytes")
    log_retention_check_interval_ms: int = _f("log.retention.check.interval.ms")
    log_index_interval_bytes: int = _f("log.index.interval.bytes")
    log_flush_interval_messages: int = _f("log.flush.interval.messages")
    log_flush_interval_ms: int | None = _f("log.flush.interval.ms")
    log_flush_scheduler_interval_ms: int = _f("log.flush.scheduler.interval.ms")
    log_cleaner_enable: bool = _f("log.cleaner.enable")
    log_cleaner_threads: int = _f("log.cleaner.threads")
    log_cleaner_backoff_ms: int = _f("log.cleaner.backoff.ms")
    log_cleaner_dedupe_buffer_size: int = _f("log.cleaner.dedupe.buffer.size")
    log_cleaner_io_max_bytes_per_second: float = _f("log.cleaner.io.max.bytes.per.second")
    log_message_timestamp_type: str = _f("log.message.timestamp.type")
    log_cleanup_policy: str = _f("log.cleanup.policy")
    message_max_bytes: int = _f("message.max.bytes")
    compression_type: str = _f("compression.type")
    min_insync_replicas: int = _f("min.insync.replicas")
    # --- topics ---------------------------------------------------------------------------------
    auto_create_topics_enable: bool = _f("auto.create.topics.enable")
    num_partitions: int = _f("num.partitions")
    default_replication_factor: int = _f("default.replication.factor")
    delete_topic_enable: bool = _f("delete.topic.enable")
    # --- groups and producers -------------------------------------------------------------------
    group_initial_rebalance_delay_ms: int = _f("group.initial.rebalance.delay.ms")
    group_min_session_timeout_ms: int = _f("group.min.session.timeout.ms")
    group_max_session_timeout_ms: int = _f("group.max.session.timeout.ms")
    group_max_size: int = _f("group.max.size")
    group_coordinator_rebalance_protocols: str = _f("group.coordinator.rebalance.protocols")
    group_consumer_session_timeout_ms: int = _f("group.consumer.session.timeout.ms")
    group_share_record_lock_duration_ms: int = _f("group.share.record.lock.duration.ms")
    group_share_delivery_count_limit: int = _f("group.share.delivery.count.limit")
    group_share_session_timeout_ms: int = _f("group.share.session.timeout.ms")
    group_share_heartbeat_interval_ms: int = _f("group.share.heartbeat.interval.ms")
    group_share_max_size: int = _f("group.share.max.size")
    group_share_partition_max_record_locks: int = _f("group.share.partition.max.record.locks")
    group_consumer_min_session_timeout_ms: int = _f("group.consumer.min.session.timeout.ms")
    group_consumer_max_session_timeout_ms: int = _f("group.consumer.max.session.timeout.ms")
    group_consumer_heartbeat_interval_ms: int = _f("group.consumer.heartbeat.interval.ms")
    group_consumer_min_heartbeat_interval_ms: int = _f("group.consumer.min.heartbeat.interval.ms")
    group_consumer_max_heartbeat_interval_ms: int = _f("group.consumer.max.heartbeat.interval.ms")
    group_consumer_max_size: int = _f("group.consumer.max.size")
    group_consumer_migration_policy: str = _f("group.consumer.migration.policy")
    group_consumer_assignors: str = _f("group.consumer.assignors")
    offsets_retention_minutes: int = _f("offsets.retention.minutes")
    offsets_retention_check_interval_ms: int = _f("offsets.retention.check.interval.ms")
    offset_metadata_max_bytes: int = _f("offset.metadata.max.bytes")
    producer_id_expiration_ms: int = _f("producer.id.expiration.ms")
    transaction_max_timeout_ms: int = _f("transaction.max.timeout.ms")
    transaction_partition_verification_enable: bool = _f(
        "transaction.partition.verification.enable")
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _f(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms")
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _f(
        "transaction.remove.expired.transaction.cleanup.interval.ms")
    transactional_id_expiration_ms: int = _f("transactional.id.expiration.ms")
    # --- process --------------------------------------------------------------------------------
    log_level: str = _f("log.level")
    # --- every key given, as given ----------------------------------------------------------------
    #: Kafka key -> value text, for every key the loader was given (Kafka's "originals")
    originals: Mapping[str, str] = Field(None, factory=dict, converter=text_map,
                                         compared=False)  # type: ignore[assignment]
    #: Kafka key -> where it was set ("server.properties:12", "--override", "environment X")
    origins: Mapping[str, str] = Field(None, factory=dict, converter=text_map,
                                       compared=False)  # type: ignore[assignment]

    # --- derived values -------------------------------------------------------------------------
    @property
    def log_dir_list(self) -> list[Path]:
        dirs = self.log_dirs
        if "log.dirs" not in self.originals and "log.dir" in self.originals:
            dirs = self.log_dir  # Kafka: log.dir is used when log.dirs is not given
        return [Path(p.strip()) for p in dirs.split(",") if p.strip()]

    @property
    def scram_credentials_path(self) -> Path:
        """Where the SCRAM users live: ``sasl.credentials.file``, else the first log dir's
        ``scram-credentials.json`` (Kafka keeps them in its cluster metadata with no setting,
        so AlterUserScramCredentials works on any broker)."""
        if self.sasl_credentials_file:
            return Path(self.sasl_credentials_file)
        return self.log_dir_list[0] / SCRAM_CREDENTIALS_FILE

    @property
    def log_retention_effective_ms(self) -> int:
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        if self.log_retention_minutes is not None:
            return -1 if self.log_retention_minutes < 0 else self.log_retention_minutes * 60_000
        return -1 if self.log_retention_hours < 0 else self.log_retention_hours * 3_600_000

    @property
    def log_roll_effective_ms(self) -> int:
        return self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * 3_600_000

    @property
    def security_protocol_map(self) -> dict[str, str]:
        """Listener name -> security protocol (``listener.security.protocol.map``)."""
        return parse_protocol_map(self.listener_security_protocol_map)

    @property
    def controller_listener_set(self) -> frozenset[str]:
        names = (self.controller_listener_names or "").split(",")
        return frozenset(n.strip().upper() for n in names if n.strip())

    @property
    def all_listeners(self) -> list[Listener]:
        """Every listener in ``listeners``, the controller's included."""
        return parse_listeners(self.listeners, "listeners", self.security_protocol_map,
                               self.controller_listener_set)

    @property
    def listener_list(self) -> list[Listener]:
        """The listeners clients connect to: ``listeners`` without the controller's."""
        return [lst for lst in self.all_listeners if not lst.controller]

    @property
    def advertised_listener_list(self) -> list[Listener]:
        """``advertised.listeners`` without the controller's (clients never see those)."""
        if not self.advertised_listeners:
            return []
        return [lst for lst in parse_listeners(
            self.advertised_listeners, "advertised.listeners", self.security_protocol_map,
            self.controller_listener_set, required=False) if not lst.controller]

    @property
    def consumer_assignor_names(self) -> list[str]:
        """``group.consumer.assignors`` as built-in names (uniform, range), the default first."""
        return [CONSUMER_ASSIGNORS[v.strip()] for v in self.group_consumer_assignors.split(",")
                if v.strip()]

    @property
    def consumer_protocol_enabled(self) -> bool:
        """Whether ``group.coordinator.rebalance.protocols`` lists consumer (KIP-848)."""
        return "consumer" in (v.strip() for v in
                              self.group_coordinator_rebalance_protocols.split(","))

    @property
    def sasl_mechanism_list(self) -> list[str]:
        return [m.strip().upper() for m in self.sasl_enabled_mechanisms.split(",") if m.strip()]

    @property
    def per_ip_overrides(self) -> dict[str, int]:
        return parse_ip_overrides(self.max_connections_per_ip_overrides)

    def value_of(self, name: str) -> Any:
        """The parsed value of any broker key: its attribute, the value given, or the default."""
        key = BROKER_KEYS[name]
        attr = name.replace(".", "_")
        if name in HONOURED_KEYS:
            value = getattr(self, attr)
            if key.type is ConfigType.LIST and isinstance(value, str):
                return [v for v in value.split(",") if v]
            return value
        if name in self.originals:
            return key.parse(self.originals[name])
        return None if key.default is NO_DEFAULT else key.default

    def static_values(self) -> dict[str, str]:
        """Keys set in this configuration (Kafka's STATIC_BROKER_CONFIG), as their text."""
        out = dict(self.originals)
        for name, key in HONOURED_KEYS.items():
            value = self.value_of(name)
            if name not in out and value != key.default and not (
                    value in ("", None) and key.default in ("", None, [])):
                out[name] = key.render(value) or ""
        return out

    def log_config_values(self) -> dict[str, Any]:
        """The broker keys that supply topic defaults, parsed (None: not set, no default)."""
        return {broker_key: self.value_of(broker_key)
                for topic in TOPIC_KEYS.values() for broker_key, _ in topic.synonyms} | {
            "remote.log.storage.system.enable": self.value_of("remote.log.storage.system.enable")}

    def ignored_keys(self) -> list[str]:
        """Keys given that have no meaning on one node (logged once at start-up); per-listener
        settings (listener.name.L.<key>) are not applied per listener here but for
        ``PER_LISTENER_KEYS``."""
        return sorted(name for name in self.originals if _ignored(name))

    def evolve(self, **changes: Any) -> BrokerConfig:
        """A copy with ``changes`` (Python or Kafka key names) applied and validated."""
        values: dict[str, Any] = {}
        for name, key in HONOURED_KEYS.items():
            value = getattr(self, name.replace(".", "_"))
            if name not in self.originals and value != to_list_text(key.default):
                values[name] = value  # set in code rather than read from a source
        values.update(self.originals)
        origins = dict(self.origins)
        changed = normalise(changes, "override")
        origins.update(dict.fromkeys(changed, "override"))
        values.update(changed)
        return build_config(values, origins)


def _ignored(name: str) -> bool:
    base = base_key(name)
    if base is not None:
        return base not in PER_LISTENER_KEYS
    key = BROKER_KEYS.get(name)
    return key is None or key.support is Support.IGNORED


def check_config(config: BrokerConfig) -> None:
    """Cross-key checks that need several parsed values (Kafka's ``KafkaConfig.validateValues``)."""
    names = [lst.name for lst in config.all_listeners]  # raises ConfigError on a bad listener
    unknown = [lst.name for lst in config.advertised_listener_list if lst.name not in names]
    if unknown:
        # Kafka's check: each listener answers with its own advertised entry, so an entry of
        # no listener would never be seen
        raise ConfigError(
            "advertised.listeners listener names must be equal to or a subset of the ones "
            f"defined in listeners. Found {','.join(unknown)}. The valid options based on the "
            f"current configuration are {','.join(names)}", key="advertised.listeners")
    config.per_ip_overrides  # noqa: B018
    for key in HTTP_LISTENER_SCHEMES:
        if value := config.value_of(key):
            scheme = parse_http_listener(value, key)[0]
            if scheme == "https" and not config.ssl_certfile:
                raise ConfigError(f"{key}={value!r}: https needs ssl.certfile (the certificate "
                                  "it presents)", key=key)
    if not config.log_dir_list:
        raise ConfigError(f"Invalid value {config.log_dirs} for configuration log.dirs: expected "
                          "at least one directory", key="log.dirs")
    if "broker.id" in config.originals and "node.id" in config.originals and (
            int(config.originals["broker.id"]) != int(config.originals["node.id"])):
        raise ConfigError(f"The values for broker.id ({config.originals['broker.id']}) and "
                          f"node.id ({config.originals['node.id']}) must be the same if both are "
                          "specified.", key="node.id")
    if config.authorizer_class_name.strip() and (
            config.authorizer_class_name.strip() not in AUTHORIZER_CLASSES):
        raise ConfigError(f"authorizer.class.name={config.authorizer_class_name!r}: the "
                          "supported authorizer is org.apache.kafka.metadata.authorizer."
                          "StandardAuthorizer", key="authorizer.class.name")
    protocols = {listener.security_protocol for listener in config.listener_list}
    if protocols & {"SSL", "SASL_SSL"} and not config.ssl_certfile:
        raise ConfigError(f"listeners={config.listeners!r}: an SSL or SASL_SSL listener needs "
                          "ssl.certfile (or ssl.keystore.location)", key="listeners")
    if config.ssl_client_auth != "none" and not config.ssl_cafile:
        raise ConfigError(f"ssl.client.auth={config.ssl_client_auth}: needs ssl.cafile to "
                          "verify client certificates", key="ssl.client.auth")
    if protocols & {"SASL_PLAINTEXT", "SASL_SSL"}:
        mechanisms = config.sasl_mechanism_list
        unknown = [m for m in mechanisms if m not in SASL_MECHANISMS]
        if unknown or not mechanisms:
            raise ConfigError(f"Invalid value {config.sasl_enabled_mechanisms} for configuration "
                              f"sasl.enabled.mechanisms: expected one or more of "
                              f"{', '.join(SASL_MECHANISMS)}", key="sasl.enabled.mechanisms")
        if "OAUTHBEARER" in mechanisms and config.sasl_oauthbearer_jwks_endpoint_url:
            _check_jwks(config.sasl_oauthbearer_jwks_endpoint_url)
    bounds = consumer_group_bounds_error(
        {k: config.value_of(k) for k in CONSUMER_GROUP_TIMEOUT_KEYS})
    if bounds is not None:
        raise ConfigError(bounds[1], key=bounds[0])


def _check_jwks(url: str) -> None:
    """Read the JWKS once at start, as Kafka's validator does: a bad one fails every login."""
    from ..security.oauthbearer import OAuthBearerError, jwks_file, read_jwks

    try:
        read_jwks(jwks_file(url))
    except OAuthBearerError as exc:
        raise ConfigError(f"Invalid value {url} for configuration "
                          f"sasl.oauthbearer.jwks.endpoint.url: {exc}",
                          key="sasl.oauthbearer.jwks.endpoint.url") from None


# --- building from raw values ------------------------------------------------------------

_NULLS = ("", "null", "None")
#: keyword-argument spelling (dots as underscores) -> Kafka name, for every known key
_ATTRIBUTE_TO_KEY = {name.replace(".", "_"): name for name in (*BROKER_KEYS, *ALIASES)}


def normalise(values: Mapping[str, Any], source: str,
              origins: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Kafka key names for ``values`` given by Kafka name or attribute name; unknown -> error."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        key = _ATTRIBUTE_TO_KEY.get(name, name)
        if not is_known(key):
            where = (origins or {}).get(name, source)
            raise ConfigError(f"{where}: unknown config key {name!r}", key)
        out[key] = value
    return out


def _parse_one(name: str, raw: Any) -> tuple[Any, str]:
    """(parsed value, text to keep) of one key; raises ConfigValueError."""
    key = BROKER_KEYS.get(name) or BROKER_KEYS[base_key(name) or name]
    if raw is None or (key.default is None and isinstance(raw, str) and raw.strip() in _NULLS
                       and key.type not in (ConfigType.STRING, ConfigType.PASSWORD)):
        return None, ""
    try:
        parsed = key.parse(_from_toml(raw, key.type))
    except ConfigValueError as exc:
        if key.name == name:
            raise
        raise ConfigValueError(name, exc.value, exc.reason) from None
    text = raw.strip() if isinstance(raw, str) else (key.render(parsed) or "")
    return parsed, text


def _from_toml(raw: Any, type_: ConfigType) -> Any:
    """TOML's own types and Python values, as Kafka would read their text."""
    if isinstance(raw, bool) and type_ is not ConfigType.BOOLEAN:
        return "true" if raw else "false"
    if isinstance(raw, int | float) and not isinstance(raw, bool) and type_ in (
            ConfigType.STRING, ConfigType.PASSWORD, ConfigType.CLASS):
        return str(raw)
    return raw


def build_config(values: Mapping[str, Any], origins: Mapping[str, str] | None = None
                 ) -> BrokerConfig:
    """Parse and validate ``values`` (by Kafka or attribute name) into a BrokerConfig."""
    origins = dict(origins or {})
    kwargs: dict[str, Any] = {}
    originals: dict[str, str] = {}
    for name, raw in normalise(values, "config", origins).items():
        target = ALIASES.get(name, name)
        try:
            parsed, text = _parse_one(target, raw)
        except ConfigValueError as exc:
            message = str(exc) if target == name else str(exc).replace(
                f"configuration {target}", f"configuration {name}")
            raise ConfigError(_where(origins, name) + message, name) from None
        originals[name] = text
        if target in HONOURED_KEYS:
            attr = target.replace(".", "_")
            key = HONOURED_KEYS[target]
            if parsed is None and key.default is not None and key.type in (
                    ConfigType.STRING, ConfigType.PASSWORD):
                parsed = key.default
            kwargs[attr] = parsed if parsed is not None or key.default is None else key.default
    try:
        config = BrokerConfig(**kwargs, originals=originals, origins=origins)
        check_config(config)
    except ConfigError as exc:
        where = _where(origins, exc.key) if exc.key else ""
        raise ConfigError(where + str(exc), exc.key) from None
    return config


def _where(origins: Mapping[str, str], key: str | None) -> str:
    if key is None:
        return ""
    origin = origins.get(key) or origins.get(next(
        (alias for alias, target in ALIASES.items() if target == key and alias in origins), ""))
    return f"{origin}: " if origin else ""


