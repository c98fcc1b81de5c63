"""Every message class by Kafka's name (``ProduceRequest``, ``FetchResponse``, ...).

The classes are built from the schemas on first access. Their typed view, for mypy and editors,
is ``message_types.pyi``, generated from the same schemas by
``python -m trio_broker.protocol.stubgen`` (a test fails when it is stale)::

    from trio_broker.protocol.message_types import ProduceResponse

    part = ProduceResponse.TopicProduceResponse.PartitionProduceResponse(index=0, base_offset=7)
"""

from __future__ import annotations

from .schema import message_names
from .structs import Message, class_by_name


def __getattr__(name: str) -> type[Message]:
    if name.startswith("__"):
        raise AttributeError(name)
    cls = class_by_name(name)
    globals()[name] = cls
    return cls


def __dir__() -> list[str]:
    return message_names()
