"""Confluent's v2 consumer API: ``/consumers/{group}`` and ``.../instances/{name}/...``.

Create an instance, subscribe it (or assign partitions), read ``records``, commit or read
``offsets``, move ``positions``, delete it. Each instance is a real group member
(``instances``). Records come back as v2 shows them: ``{"topic", "key", "value", "partition",
"offset"}``, keys and values as JSON (the ``json`` format), base64 (``binary``), or decoded
through the Schema Registry (``avro``: Avro's JSON encoding, ``protobuf``: Protobuf's JSON
mapping, ``jsonschema``: the JSON value). A records
request returns at most ``max_bytes`` of keys and values (the rest is read by the next one: the
consumer is moved back to the first record not returned) and waits at most ``timeout`` ms for
the first record.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...client.core.errors import IllegalStateError
from ...client.core.structs import ConsumerRecord, TopicPartition
from ..security.patterns import InvalidPattern, compile_pattern
from .errors import RestError
from .instances import FORMATS, Instance, Instances
from .proxy import proxy_of, read_json
from .schema_records import RecordSchemas
from .v2_produce import V2_JSON, V2Response

MEDIA = {fmt: f"application/vnd.kafka.{fmt}.v2+json" for fmt in FORMATS}
#: what one records request returns at most (Confluent's consumer.request.max.bytes)
MAX_RESPONSE_BYTES = 64 << 20
MAX_WAIT_MS = 30_000
INSTANCE = "/consumers/{group}/instances/{name}"


def _instances(request: Request) -> Instances:
    return proxy_of(request).instances


def _instance(request: Request) -> Instance:
    return _instances(request).get(request.path_params["group"], request.path_params["name"],
                                   proxy_of(request).user)


@contextlib.contextmanager
def _consumer_call() -> Iterator[None]:
    """The consumer's refusals as Confluent's answers: a call its state does not allow (seek
    a partition not assigned, subscribe after assign) is 409 with 40903, a bad value 422."""
    try:
        yield
    except IllegalStateError as exc:
        raise RestError(409, 40903, f"Illegal state: {exc}") from None
    except ValueError as exc:
        raise RestError(422, 42201, str(exc)) from None


def _no_content() -> Response:
    return Response(status_code=204)


async def _body(request: Request) -> dict[str, Any]:
    media = request.headers.get("content-type", V2_JSON).split(";")[0].strip().lower()
    if media not in (V2_JSON, "application/vnd.kafka+json", "application/json", ""):
        raise RestError(415, 415, "HTTP 415 Unsupported Media Type")
    body = await read_json(request, media_checked=True)
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise RestError(422, 42201, "Request body must be a JSON object")
    return body


def _partitions(body: dict[str, Any], field: str = "partitions") -> list[TopicPartition]:
    items = body.get(field)
    if not isinstance(items, list):
        raise RestError(422, 42201, f"{field} is required")
    try:
        return [TopicPartition(str(p["topic"]), int(p["partition"])) for p in items]
    except (KeyError, TypeError, ValueError):
        raise RestError(422, 42201, f"each of {field} needs a topic and a partition") from None


def _offsets(body: dict[str, Any]) -> dict[TopicPartition, int]:
    items = body.get("offsets")
    if not isinstance(items, list):
        raise RestError(422, 42201, "offsets is required")
    try:
        return {TopicPartition(str(o["topic"]), int(o["partition"])): int(o["offset"])
                for o in items}
    except (KeyError, TypeError, ValueError):
        raise RestError(422, 42201, "each offset needs a topic, a partition and an offset"
                        ) from None


async def create(request: Request) -> Response:
    group = request.path_params["group"]
    proxy = proxy_of(request)
    instance = await proxy.instances.create(group, await _body(request), proxy.client_config,
                                            proxy.user, schemas=proxy.schemas is not None)
    base = str(request.base_url).rstrip("/")
    return V2Response({"instance_id": instance.name,
                       "base_uri": f"{base}/consumers/{group}/instances/{instance.name}"})


async def delete(request: Request) -> Response:
    await _instances(request).delete(request.path_params["group"], request.path_params["name"],
                                     proxy_of(request).user)
    return _no_content()


async def subscribe(request: Request) -> Response:
    instance = _instance(request)
    body = await _body(request)
    pattern, topics = body.get("topic_pattern"), body.get("topics")
    if pattern is not None:
        if topics:
            raise RestError(422, 42201, "topics and topic_pattern are exclusive: send one")
        if not isinstance(pattern, str) or not pattern:
            raise RestError(422, 42201, "topic_pattern must be a regular expression")
        # RE2, as for every expression a client sends: the consumer matches it on the
        # broker's event loop against every topic name, where a backtracking engine could
        # be held for hours by a short expression
        try:
            compiled = compile_pattern(pattern)
        except InvalidPattern as exc:
            raise RestError(422, 42201, f"topic_pattern {pattern!r}: {exc}") from None
        async with instance.lock:
            with _consumer_call():
                instance.consumer.subscribe(pattern=compiled)
        return _no_content()
    if not isinstance(topics, list) or not topics or not all(isinstance(t, str)
                                                              for t in topics):
        raise RestError(422, 42201, "topics must be a list of topic names")
    async with instance.lock:
        with _consumer_call():
            instance.consumer.subscribe(topics)
    return _no_content()


async def subscription(request: Request) -> Response:
    return V2Response({"topics": sorted(_instance(request).consumer.subscription())})


async def unsubscribe(request: Request) -> Response:
    instance = _instance(request)
    async with instance.lock:
        with _consumer_call():
            await instance.consumer.unsubscribe()
    return _no_content()


async def assign(request: Request) -> Response:
    instance = _instance(request)
    wanted = _partitions(await _body(request))
    async with instance.lock:
        with _consumer_call():
            instance.consumer.assign(wanted)
    return _no_content()


async def assignments(request: Request) -> Response:
    return V2Response({"partitions": [
        {"topic": tp.topic, "partition": tp.partition}
        for tp in sorted(_instance(request).consumer.assignment())]})


async def seek(request: Request) -> Response:
    instance = _instance(request)
    wanted = _offsets(await _body(request))
    async with instance.lock:
        with _consumer_call():
            for tp, offset in wanted.items():
                instance.consumer.seek(tp, offset)
    return _no_content()


async def seek_to(request: Request) -> Response:
    instance = _instance(request)
    wanted = _partitions(await _body(request))
    async with instance.lock:
        with _consumer_call():
            if request.url.path.endswith("/beginning"):
                instance.consumer.seek_to_beginning(*wanted)
            else:
                instance.consumer.seek_to_end(*wanted)
    return _no_content()


async def commit(request: Request) -> Response:
    """The offsets given are the last records processed (Confluent commits the next one);
    without a body, everything returned so far."""
    instance = _instance(request)
    body = await _body(request)
    async with instance.lock:
        with _consumer_call():
            if body.get("offsets") is None:
                await instance.consumer.commit()
            else:
                await instance.consumer.commit({tp: offset + 1
                                                for tp, offset in _offsets(body).items()})
    return Response(status_code=200)


async def committed(request: Request) -> Response:
    instance = _instance(request)
    wanted = _partitions(await _body(request))
    out = []
    async with instance.lock:
        with _consumer_call():
            for tp in wanted:
                offset = await instance.consumer.committed(tp)
                out.append({"topic": tp.topic, "partition": tp.partition,
                            "offset": -1 if offset is None else offset, "metadata": ""})
    return V2Response({"offsets": out})


async def _shown(data: bytes | None, fmt: str, record: ConsumerRecord,
                 schemas: RecordSchemas | None) -> Any:
    if data is None:
        return None
    if fmt == "binary":
        return base64.b64encode(data).decode()
    try:
        if fmt != "json" and schemas is not None:
            return await schemas.deserialize(data, fmt)
        return json.loads(data)
    except (ValueError, RecursionError, EOFError, TypeError) as exc:
        raise RestError(500, 50002, f"the record at offset {record.offset} of "
                                    f"{record.topic}-{record.partition} cannot be read as "
                                    f"{fmt}: {exc}") from None


async def records(request: Request) -> Response:
    instance = _instance(request)
    schemas = proxy_of(request).schemas
    accept = request.headers.get("accept", "*/*").lower()
    asked = [fmt for fmt, media in MEDIA.items() if media in accept]
    if asked and instance.fmt not in asked:
        raise RestError(406, 40601, "The requested embedded data format does not match the "
                                    "deserializer for this consumer instance")
    try:
        timeout_ms = min(int(request.query_params.get("timeout", instance.request_timeout_ms)),
                         MAX_WAIT_MS)
        max_bytes = min(int(request.query_params.get("max_bytes", MAX_RESPONSE_BYTES)),
                        MAX_RESPONSE_BYTES)
    except ValueError:
        raise RestError(400, 400, "timeout and max_bytes must be integers") from None
    out: list[dict[str, Any]] = []
    async with instance.lock:
        batches = await instance.consumer.getmany(timeout_ms=max(timeout_ms, 0))
        size, full = 0, False
        for tp, found in sorted(batches.items()):
            for record in found:
                size += len(record.key or b"") + len(record.value or b"")
                full = full or bool(out and size > max_bytes)
                try:
                    if full:
                        break
                    out.append({"topic": record.topic,
                                "key": await _shown(record.key, instance.fmt, record, schemas),
                                "value": await _shown(record.value, instance.fmt, record,
                                                      schemas),
                                "partition": record.partition, "offset": record.offset})
                except RestError:
                    if not out:
                        instance.consumer.seek(tp, record.offset)
                        raise
                    full = True
                    break
            else:
                continue
            # not returned: the next request reads it again
            instance.consumer.seek(tp, record.offset)
    return Response(json.dumps(out, separators=(",", ":")), media_type=MEDIA[instance.fmt])


def routes() -> list[Route]:
    return [
        Route("/consumers/{group}", create, methods=["POST"]),
        Route(INSTANCE, delete, methods=["DELETE"]),
        Route(INSTANCE + "/subscription", subscribe, methods=["POST"]),
        Route(INSTANCE + "/subscription", subscription, methods=["GET"]),
        Route(INSTANCE + "/subscription", unsubscribe, methods=["DELETE"]),
        Route(INSTANCE + "/assignments", assign, methods=["POST"]),
        Route(INSTANCE + "/assignments", assignments, methods=["GET"]),
        Route(INSTANCE + "/positions", seek, methods=["POST"]),
        Route(INSTANCE + "/positions/beginning", seek_to, methods=["POST"]),
        Route(INSTANCE + "/positions/end", seek_to, methods=["POST"]),
        Route(INSTANCE + "/offsets", commit, methods=["POST"]),
        Route(INSTANCE + "/offsets", committed, methods=["GET"]),
        Route(INSTANCE + "/records", records, methods=["GET"]),
    ]
