"""trio-broker: a Kafka-compatible broker on Trio.

The public face of the package: ``serve`` (a Trio task for ``nursery.start``), ``open_broker``
(an async context manager), ``Broker`` (the handle they give back) and the config types.
"""

from __future__ import annotations

from .broker import Broker as Broker
from .broker import open_broker as open_broker
from .broker import serve as serve
from .config import BrokerConfig as BrokerConfig
from .config import ConfigError as ConfigError
from .config import load_config as load_config

__version__ = "0.1.0"

__all__ = ["Broker", "BrokerConfig", "ConfigError", "load_config", "open_broker", "serve"]
