"""trio-broker: a Kafka-compatible broker on Trio.

The public face of the package: ``serve`` (a Trio task for ``nursery.start``), ``open_broker``
(an async context manager), ``Broker`` (the handle they give back) and the config types.

Names are imported on first use, so a Spark executor that only needs ``trio_broker.spark`` or a
client-only app does not pay for the broker's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _moved
from .lazy_names import lazy_names

__version__ = "0.1.0"

__all__ = ["Broker", "BrokerConfig", "ConfigError", "load_config", "open_broker", "serve"]

_LAZY = {
    "Broker": "broker.lifecycle",
    "open_broker": "broker.lifecycle",
    "serve": "broker.lifecycle",
    "BrokerConfig": "broker.config",
    "ConfigError": "broker.config",
    "load_config": "broker.config",
}

if TYPE_CHECKING:
    from .broker.config import BrokerConfig as BrokerConfig
    from .broker.config import ConfigError as ConfigError
    from .broker.config import load_config as load_config
    from .broker.lifecycle import Broker as Broker
    from .broker.lifecycle import open_broker as open_broker
    from .broker.lifecycle import serve as serve


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
_moved.install()
