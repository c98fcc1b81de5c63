"""Confluent's Schema Registry REST API (v1), served by the broker (docs/schema-registry.md).

Why in the broker: a test of a service that serializes through a registry needs the registry's
rules (ids, versions, compatibility), not ``mock://``'s, and no JVM beside the broker. The state
is the ``_schemas`` topic in Confluent's own record format, so the same log serves Confluent's
registry or Karapace.

What it owns: the topic's records and their replay (``store``), the operations in Confluent's
order of checks (``registry``), the three schema types (``schemas``, ``avro``, ``protobuf``),
compatibility (``compat``), the REST routes (``app``), the HTTP server (``server``), the error
answers (``errors``) and the API other parts of the broker call (``serialize`` below).

May import config, the storage, the server core (``BrokerState``) and the protocol; never the
network or a handler. Its web stack is imported only when the registry is served
(``schema.registry.listener``, or ``schema.registry.enable`` under the console's listener).
"""

from __future__ import annotations

import io
import json
import logging
import struct
from typing import TYPE_CHECKING

import trio

from ..config import BrokerConfig, parse_http_listener
from ..config.listeners import http_url
from ..server.state import BrokerState
from .errors import RegistryError

if TYPE_CHECKING:
    from .registry import SchemaRegistry

#: Confluent's wire format: magic byte 0, then the schema id as a big-endian int32
_HEADER = struct.Struct(">bI")
#: where ``schema.registry.enable`` serves the API on the web console's listener
MOUNT_PREFIX = "/schema-registry"

LOGGER = logging.getLogger("trio_broker.broker.schema_registry")


async def serve_schema_registry(config: BrokerConfig, state: BrokerState, *,
                                task_status: trio.TaskStatus[tuple[str, int, SchemaRegistry]
                                                             | None]
                                = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the registry on ``schema.registry.listener`` (and under ``/schema-registry`` of the
    console's listener with ``schema.registry.enable``) until cancelled; ``task_status``
    reports (host, port, registry), or None without a listener of its own (the registry, when
    served, is ``state.attached.schema_registry``)."""
    mounted = config.schema_registry_enable and bool(config.http_listener)
    if config.schema_registry_enable and not config.http_listener:
        LOGGER.warning("schema.registry.enable=true serves the Schema Registry under "
                       "%s of the web console's listener, and http.listener is not set: "
                       "nothing is served there", MOUNT_PREFIX)
    if not config.schema_registry_listener and not mounted:
        task_status.started(None)
        return
    from .server import run_registry

    await run_registry(config, state, mount=MOUNT_PREFIX if mounted else None,
                       task_status=task_status)


def registry_url(config: BrokerConfig, bound: tuple[str, int, SchemaRegistry] | None,
                 ) -> str | None:
    """``http(s)://host:port`` of a served registry (``bound``: what ``serve_schema_registry``
    reported), None when it is off."""
    if bound is None:
        return None
    host, port, _registry = bound
    scheme = parse_http_listener(config.schema_registry_listener, "schema.registry.listener")[0]
    return http_url(scheme, host, port)


async def serialize(registry: SchemaRegistry, subject: str, value: object, *,
                    version: str = "latest") -> bytes:
    """``value`` in Confluent's wire format with ``subject``'s schema at ``version``: what
    Confluent's AVRO and JSONSCHEMA serializers write. Raises RegistryError (40401, 40402, or
    42201 when the value does not fit the schema; PROTOBUF needs the message's generated class,
    which the registry does not have: 42201)."""
    import fastavro
    import jsonschema

    sv = registry.version(subject, version)
    parsed = await registry.parsed(sv)
    header = _HEADER.pack(0, sv.id)
    if sv.schema_type == "AVRO":
        out = io.BytesIO()
        try:
            # the named types of the schema's references are known to the writer too
            schema = fastavro.parse_schema(parsed.parsed, named_schemas=dict(parsed.named))
            fastavro.schemaless_writer(out, schema, value)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise RegistryError(422, 42201, f"The value does not fit the schema: {exc}") from None
        return header + out.getvalue()
    if sv.schema_type == "JSON":
        try:
            jsonschema.validate(value, parsed.parsed)
        except jsonschema.ValidationError as exc:
            raise RegistryError(422, 42201, f"The value does not fit the schema: "
                                            f"{exc.message}") from None
        return header + json.dumps(value).encode()
    raise RegistryError(422, 42201, "PROTOBUF values are serialized by the client that has "
                                    "the message's generated class")


__all__ = ["RegistryError", "serialize", "serve_schema_registry"]
