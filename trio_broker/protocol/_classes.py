"""Index of kafka-python's schema-driven message classes by API key.

Why kafka-python: its ``kafka.protocol`` package is generated from Kafka's own message JSON and
decodes hostile bytes with ordinary exceptions and bounded memory, so we build on it behind our
own interface (``messages``) instead of hand-writing twenty APIs' layouts. Pinned to major 3.
"""

from __future__ import annotations

from typing import Any

import kafka.protocol.admin as _admin
import kafka.protocol.consumer as _consumer
import kafka.protocol.metadata as _metadata
import kafka.protocol.producer as _producer
import kafka.protocol.sasl as _sasl
from kafka.protocol.api_message import ApiMessage


def _index() -> tuple[dict[int, type[ApiMessage]], dict[int, type[ApiMessage]], dict[int, int]]:
    requests: dict[int, type[ApiMessage]] = {}
    responses: dict[int, type[ApiMessage]] = {}
    flexible: dict[int, int] = {}
    for module in (_metadata, _producer, _consumer, _admin, _sasl):
        for name in dir(module):
            obj = getattr(module, name)
            if not (isinstance(obj, type) and issubclass(obj, ApiMessage)):
                continue
            if obj is ApiMessage or getattr(obj, "_json", None) is None:
                continue
            if getattr(obj, "_class_version", None) is not None:
                continue
            message: Any = obj  # the generated classes carry their schema as class attributes
            key = message.API_KEY
            if message.is_request():
                requests[key] = obj
                flex = message._flexible_versions
                if flex is not None and flex[0] >= 0:
                    flexible[key] = flex[0]
            else:
                responses[key] = obj
    return requests, responses, flexible


REQUESTS, RESPONSES, FLEXIBLE_FROM = _index()
