"""Broker configuration: every Kafka broker and topic key, Kafka's validation, this broker's use.

Why a package: Kafka defines hundreds of keys; they live here as data (``kafka_keys``: Kafka's
facts; ``keys``: what this broker honours; ``topic_keys``: every topic config and its broker
synonyms), read by one loader (``loader``: file, environment, ``--override``) into one typed
``BrokerConfig`` (``broker``). Dynamic broker configs (AlterConfigs on a broker) are in
``dynamic``; DescribeConfigs' sources and synonyms in ``describe``. See docs/configuration.md,
which ``python -m trio_broker.broker.config.docgen`` writes from these tables.

May import ``broker.security``, its neighbour in the bottom layer of the broker stack (the
authorizer classes and OAUTHBEARER's key files it validates); nothing above it.
"""

from .broker import BrokerConfig as BrokerConfig
from .broker import ConfigError as ConfigError
from .broker import Listener as Listener
from .broker import parse_http_listener as parse_http_listener
from .broker import parse_ip_overrides as parse_ip_overrides
from .broker import parse_listeners as parse_listeners
from .keys import SENSITIVE_KEYS as SENSITIVE_KEYS
from .loader import ENV_PREFIX as ENV_PREFIX
from .loader import build_config as build_config
from .loader import describe_keys as describe_keys
from .loader import load_config as load_config
from .loader import parse_overrides as parse_overrides
from .loader import read_config_file as read_config_file
from .loader import read_environment as read_environment
from .loader import read_properties as read_properties

__all__ = ["ENV_PREFIX", "SENSITIVE_KEYS", "BrokerConfig", "ConfigError", "Listener",
           "build_config", "describe_keys", "load_config", "parse_http_listener",
           "parse_ip_overrides", "parse_listeners",
           "parse_overrides", "read_config_file", "read_environment", "read_properties"]
