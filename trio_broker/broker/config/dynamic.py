"""Dynamic broker configs: AlterConfigs on a broker, per broker or as the cluster default.

Why a file in the first log dir: Kafka keeps dynamic broker configs in its metadata log, so they
outlive restarts and win over ``server.properties`` (per-broker > cluster default > static >
default). One node has no metadata log; a small JSON document next to the data it configures
does the same job, written atomically (temporary file, fsync, rename) so a crash leaves the old
or the new set, never a mix.

Kafka's rules are kept: only keys Kafka updates dynamically are accepted ("Cannot update these
configs dynamically"); per-broker keys (listeners, TLS) cannot be set as the cluster default;
security keys must carry a listener prefix. The ``log.*`` topic defaults and the log cleaner's
keys apply at once (the caller re-derives every topic's config and reconfigures the cleaner),
and so do ``max.connections`` and the ``max.connection.creation.rate`` keys (the connection
quotas take the new config); other keys are stored, described and used from the next start,
since this broker reads them when it starts.

Why mode 0600: the set may hold passwords (a listener's ``ssl.key.password``, ``sasl.jaas.config``),
so the file is readable by the broker's user only, like ``users.json`` and ``acls.json``; a file
found readable by others is tightened at start. Kafka also encrypts those values with
``password.encoder.secret``; this broker stores them in clear (docs/security.md), since the cipher
would need a dependency the broker does not have.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..fileio import atomic_write
from .broker import BrokerConfig, build_config
from .defs import ConfigValueError
from .keys import BROKER_KEYS, base_key

__all__ = ["DYNAMIC_CONFIG_FILE", "DynamicBrokerConfigs", "DynamicConfigError"]

LOGGER = logging.getLogger(__name__)

DYNAMIC_CONFIG_FILE = "broker-configs.json"
_FILE_MODE = 0o600
#: SslConfigs.RECONFIGURABLE_CONFIGS: updatable only with a listener prefix
_SECURITY_RECONFIGURABLE = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"})
_CLUSTER_LEVEL_LISTENER_KEYS = frozenset({"max.connections", "max.connection.creation.rate",
                                          "num.network.threads"})


class DynamicConfigError(ValueError):
    """A dynamic config Kafka refuses; ``str()`` is Kafka's message (INVALID_REQUEST)."""


def _mode(name: str) -> str:
    base = base_key(name)
    key = BROKER_KEYS.get(base or name)
    return "" if key is None else key.dynamic


class DynamicBrokerConfigs:
    """The per-broker and cluster-default dynamic configs of one node, persisted."""

    def __init__(self, path: Path, static: BrokerConfig) -> None:
        self.path = path
        self.static = static
        #: cluster default (resource name "") and this broker's own (resource name = node id)
        self.cluster_default: dict[str, str] = {}
        self.per_broker: dict[str, str] = {}

    @classmethod
    def load(cls, static: BrokerConfig) -> DynamicBrokerConfigs:
        """The store of ``static``'s first log dir; unreadable content is logged and skipped."""
        store = cls(static.log_dir_list[0] / DYNAMIC_CONFIG_FILE, static)
        try:
            doc = json.loads(store.path.read_text())
        except FileNotFoundError:
            return store
        except (OSError, ValueError) as exc:
            LOGGER.error("Dynamic broker configs in %s are unreadable (%s); starting without them",
                         store.path, exc)
            return store
        store._tighten()
        for attr, section in (("cluster_default", "default"), ("per_broker", str(static.node_id))):
            values = doc.get(section, {}) if isinstance(doc, dict) else {}
            kept = {str(k): str(v) for k, v in values.items() if _mode(str(k))}
            dropped = sorted(set(values) - set(kept))
            if dropped:
                LOGGER.warning("Non-dynamic configs in %s are ignored: %s", store.path,
                               ", ".join(dropped))
            setattr(store, attr, kept)
        return store

    def for_node(self, static: BrokerConfig) -> DynamicBrokerConfigs:
        """The store of another node of a test cluster over the same file: its own static config
        and per-broker section, the cluster default shared (one dict, updated in place)."""
        node = DynamicBrokerConfigs.load(static)
        node.cluster_default = self.cluster_default
        return node

    def _tighten(self) -> None:
        """Make a file others may read (an older broker wrote it so) the owner's only."""
        try:
            mode = self.path.stat().st_mode & 0o777
            if mode & 0o077:
                os.chmod(self.path, _FILE_MODE)
                LOGGER.warning("%s was readable by others (mode %o): now %o", self.path, mode,
                               _FILE_MODE)
        except OSError as exc:
            LOGGER.warning("cannot restrict the mode of %s: %s", self.path, exc)

    def effective(self, cluster_default: Mapping[str, str] | None = None,
                  per_broker: Mapping[str, str] | None = None) -> BrokerConfig:
        """Static config overridden by the cluster default, then by the per-broker configs."""
        cluster_default = self.cluster_default if cluster_default is None else cluster_default
        per_broker = self.per_broker if per_broker is None else per_broker
        if not cluster_default and not per_broker:
            return self.static
        values: dict[str, Any] = dict(self.static.originals)
        origins = dict(self.static.origins)
        for label, layer in (("dynamic cluster default", cluster_default),
                             (f"dynamic config of broker {self.static.node_id}", per_broker)):
            for key, value in layer.items():
                values[key] = value
                origins[key] = label
        return build_config(values, origins)

    def validate(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Kafka's ``DynamicBrokerConfig.validateConfigs``, then a full parse of the result."""
        non_dynamic = sorted(k for k in props if not _mode(k))
        if non_dynamic:
            raise DynamicConfigError("Cannot update these configs dynamically: "
                                     f"Set({', '.join(non_dynamic)})")
        unprefixed = sorted(k for k in props if k in _SECURITY_RECONFIGURABLE)
        if unprefixed:
            raise DynamicConfigError("These security configs can be dynamically updated only "
                                     f"per-listener using the listener prefix: "
                                     f"Set({', '.join(unprefixed)})")
        for name, value in props.items():
            key = BROKER_KEYS[base_key(name) or name]
            try:
                key.parse(value)
            except ConfigValueError as exc:
                raise DynamicConfigError(str(exc)) from None
        if not per_broker:
            per_broker_only = sorted(k for k in props if self._per_broker_only(k))
            if per_broker_only:
                raise DynamicConfigError("Cannot update these configs at default cluster level, "
                                         f"broker id must be specified: "
                                         f"Set({', '.join(per_broker_only)})")

    @staticmethod
    def _per_broker_only(name: str) -> bool:
        base = base_key(name)
        if base is not None:
            return base not in _CLUSTER_LEVEL_LISTENER_KEYS
        return _mode(name) == "per-broker"

    def replace(self, props: Mapping[str, str], per_broker: bool, *,
                validate_only: bool = False) -> BrokerConfig:
        """Make ``props`` the whole dynamic set of one level; returns the effective config.

        Raises DynamicConfigError (Kafka's messages) or ConfigError (the combined config is
        invalid) and changes nothing then.
        """
        self.validate(props, per_broker)
        new_default = self.cluster_default if per_broker else dict(props)
        new_broker = dict(props) if per_broker else self.per_broker
        effective = self.effective(new_default, new_broker)
        if validate_only:
            return effective
        self._write(new_default, new_broker)
        # in place: the other nodes of a test cluster hold the same cluster-default dict
        if new_default is not self.cluster_default:
            self.cluster_default.clear()
            self.cluster_default.update(new_default)
        self.per_broker = dict(new_broker)
        return effective

    def _write(self, cluster_default: Mapping[str, str], per_broker: Mapping[str, str]) -> None:
        # the other nodes' sections stay (the nodes of a test cluster share one file)
        try:
            old = json.loads(self.path.read_text())
        except (OSError, ValueError):
            old = {}
        doc: dict[str, Any] = old if isinstance(old, dict) else {}
        doc.update({"version": 1, "default": dict(cluster_default),
                    str(self.static.node_id): dict(per_broker)})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode(),
                     mode=_FILE_MODE)
