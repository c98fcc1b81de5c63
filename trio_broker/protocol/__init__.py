"""The Kafka wire protocol, sans-IO: framing, headers, message bodies, record batches.

Nothing here imports trio or touches a socket.
"""

from __future__ import annotations

import importlib.util
import sys


def _defer_kafka_package_init() -> None:
    """Import ``kafka.protocol`` without running ``kafka/__init__.py`` until it is needed.

    Why: the package's ``__init__`` imports kafka-python's whole client (producer, consumer,
    admin, network), about 200 ms that the broker never uses and that would double its start
    time. The package module is created unexecuted; the first access of one of its own
    attributes (``from kafka import KafkaProducer``) runs the real ``__init__`` in place, so
    kafka-python keeps working unchanged in the same process.
    """
    if "kafka" in sys.modules:
        return
    spec = importlib.util.find_spec("kafka")
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(name: str) -> object:
        if name.startswith("__") and name != "__version__":
            raise AttributeError(name)
        del module.__dict__["__getattr__"]
        loader.exec_module(module)
        return getattr(module, name)

    module.__dict__["__getattr__"] = __getattr__
    sys.modules["kafka"] = module


_defer_kafka_package_init()
