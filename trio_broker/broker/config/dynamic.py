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

Why passwords are encrypted (Kafka's ``DynamicBrokerConfig.toPersistentProps``): the set may hold
passwords (a listener's ``ssl.key.password``, ``sasl.jaas.config``), and a copy of the log dir (a
backup, a support bundle) must not carry them. Each PASSWORD value is written encrypted with
``password.encoder.secret`` (``security.password_encoder``, Kafka's format) and decrypted at load;
they are clear in memory only. Without a secret a new password is refused ("Password encoder
secret not configured"), as Kafka refuses it. At start, ``password.encoder.old.secret`` re-encrypts
the stored ones with the new secret, and a file holding passwords the configured secret cannot
decrypt stops the start with one line saying so: starting without them would start listeners
without their keys. Passwords an older broker stored in clear are read, and encrypted at start
once a secret is set. Why mode 0600 as well: the file is the broker user's only, like
``users.json`` and ``acls.json``; a file found readable by others is tightened at start.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..fileio import atomic_write
from .broker import BrokerConfig, build_config
from .defs import ConfigValueError
from .errors import ConfigError
from .keys import BROKER_KEYS, base_key

if TYPE_CHECKING:
    from ..security.password_encoder import PasswordEncoder

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


def is_password(name: str) -> bool:
    """Whether ``name`` (or the key it prefixes) is a PASSWORD config, stored encrypted."""
    key = BROKER_KEYS.get(base_key(name) or name)
    return key is not None and key.sensitive


def password_encoder(static: BrokerConfig, secret: str | None) -> PasswordEncoder | None:
    """The encoder of ``secret`` with ``static``'s ``password.encoder.*`` settings, or None."""
    if not secret:
        return None
    # only here: a broker without dynamic passwords never loads the cipher library
    from ..security.password_encoder import PasswordEncoder

    return PasswordEncoder(secret, static.password_encoder_keyfactory_algorithm,
                           static.password_encoder_cipher_algorithm,
                           static.password_encoder_key_length,
                           static.password_encoder_iterations)


#: KIP-966: with eligible leader replicas on (a new Kafka 4.1+ cluster), the controller keeps a
#: cluster-level ``min.insync.replicas`` and refuses a broker-level one
MIN_INSYNC_REPLICAS = "min.insync.replicas"
ELR_BROKER_LEVEL = "Broker-level min.insync.replicas cannot be altered while ELR is enabled."
ELR_CLUSTER_REMOVAL = "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."


class DynamicBrokerConfigs:
    """The per-broker and cluster-default dynamic configs of one node, persisted."""

    def __init__(self, path: Path, static: BrokerConfig) -> None:
        self.path = path
        self.static = static
        #: cluster default (resource name "") and this broker's own (resource name = node id)
        self.cluster_default: dict[str, str] = {}
        self.per_broker: dict[str, str] = {}
        self.encoder = password_encoder(static, static.password_encoder_secret)
        #: (clear, encrypted) of each stored password, so a write re-encrypts only changes
        self._encrypted: dict[str, tuple[str, str]] = {}

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
        rewrite = False
        for attr, section in (("cluster_default", "default"), ("per_broker", str(static.node_id))):
            values = doc.get(section, {}) if isinstance(doc, dict) else {}
            kept = {str(k): str(v) for k, v in values.items() if _mode(str(k))}
            dropped = sorted(set(values) - set(kept))
            if dropped:
                LOGGER.warning("Non-dynamic configs in %s are ignored: %s", store.path,
                               ", ".join(dropped))
            rewrite |= store._decrypt(kept)
            setattr(store, attr, kept)
        if rewrite:
            store._write(store.cluster_default, store.per_broker)
            LOGGER.info("Stored dynamic passwords in %s re-encrypted with "
                        "password.encoder.secret", store.path)
        return store

    def _decrypt(self, values: dict[str, str]) -> bool:
        """Decrypt the passwords in ``values`` in place; whether the file must be rewritten
        (re-encrypted with the new secret, or encrypted for the first time).

        Raises ConfigError when a stored password cannot be decrypted.
        """
        if not any(is_password(name) for name in values):
            return False
        from ..security.password_encoder import PasswordDecodeError, is_encoded

        old = password_encoder(self.static, self.static.password_encoder_old_secret)
        rewrite = False
        for name, stored in sorted(values.items()):
            if not is_password(name):
                continue
            if not is_encoded(stored):  # written in clear by an older broker
                if self.encoder is None:
                    LOGGER.warning("%s holds %s in clear: set password.encoder.secret to store "
                                   "it encrypted", self.path, name)
                rewrite |= self.encoder is not None
                continue
            clear = None
            for encoder in (old, self.encoder):
                if encoder is None:
                    continue
                try:
                    clear = encoder.decode(stored)
                except PasswordDecodeError:
                    continue
                if encoder is self.encoder:
                    self._encrypted[name] = (clear, stored)
                else:
                    rewrite = True
                break
            if clear is None:
                if self.encoder is None and old is None:
                    raise ConfigError(f"{self.path} holds encrypted passwords ({name}): set "
                                      "password.encoder.secret to the secret that encrypted "
                                      "them", "password.encoder.secret")
                raise ConfigError(f"password.encoder.secret cannot decrypt {name} in "
                                  f"{self.path}: not the secret that encrypted it (after "
                                  "changing the secret, set password.encoder.old.secret to the "
                                  "previous one)", "password.encoder.secret")
            if self.encoder is None:
                raise ConfigError("password.encoder.old.secret is set without "
                                  "password.encoder.secret: name the new secret to re-encrypt "
                                  f"the passwords in {self.path} with",
                                  "password.encoder.secret")
            values[name] = clear
        return rewrite

    def for_node(self, static: BrokerConfig) -> DynamicBrokerConfigs:
        """The store of another node of a test cluster over the same file: its own static config
        and per-broker section, the cluster default shared (one dict, updated in place)."""
        node = DynamicBrokerConfigs.load(static)
        node.cluster_default = self.cluster_default
        return node

    def cluster_level(self) -> dict[str, str]:
        """The cluster-default layer as a Kafka 4.1+ cluster shows it: ``min.insync.replicas``
        always there (KIP-966: the controller writes it when eligible leader replicas are
        enabled, from the static value, unless one is set dynamically)."""
        static = BROKER_KEYS[MIN_INSYNC_REPLICAS].render(self.static.value_of(MIN_INSYNC_REPLICAS))
        return {MIN_INSYNC_REPLICAS: str(static), **self.cluster_default}

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
        current = self.per_broker if per_broker else self.cluster_default
        changed = sorted(k for k in props if is_password(k) and props[k] != current.get(k))
        if changed and not per_broker:
            raise DynamicConfigError("Password config can be defined only at broker level")
        if changed and self.encoder is None:
            raise DynamicConfigError("Password encoder secret not configured")
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
        doc.update({"version": 1, "default": self._encrypt(cluster_default),
                    str(self.static.node_id): self._encrypt(per_broker)})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode(),
                     mode=_FILE_MODE)

    def _encrypt(self, values: Mapping[str, str]) -> dict[str, str]:
        """``values`` as stored: passwords encrypted (each once, while it stays the same)."""
        stored = dict(values)
        if self.encoder is None:
            return stored  # only passwords an older broker stored in clear (see _decrypt)
        for name, value in values.items():
            if not is_password(name):
                continue
            cached = self._encrypted.get(name)
            if cached is None or cached[0] != value:
                cached = self._encrypted[name] = (value, self.encoder.encode(value))
            stored[name] = cached[1]
        return stored
