"""``POST /v3/clusters/{cluster_id}/topics/{topic_name}/records``: Confluent's v3 produce.

Why an ASGI endpoint of its own: the body is read as it arrives, so one request may stream
records for as long as the connection stays open (``Transfer-Encoding: chunked``). Records are
concatenated JSON in, delivery reports concatenated JSON out, one per record, in order, each
followed by ``\\r\\n`` as Confluent writes them, each with its own ``error_code`` (200 when
written). The status is 200 once the stream is under way; a request holding exactly one record
that fails gets that record's error as its status, as a non-streaming client expects.

Why batches: what arrived together is produced together, one Produce request per leader with
one batch per partition (at most ``MAX_BATCH_BYTES`` each), so ten thousand records in one body
cost the broker a few requests, not ten thousand. A client that stops reading its reports or
vanishes holds nothing: sending blocks this request's task alone, a disconnect ends it, and a
stream quiet for ``STREAM_IDLE_TIMEOUT_S`` is ended.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import attrs
import trio

from ...client.core.errors import KafkaError, describe_code
from ...client.core.metadata import TopicInfo
from ...client.core.partitioner import any_partition, partition_for_key
from ...client.core.produce import parse_produce, produce_request
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.records import build_batch
from .errors import RETRIABLE, RestError, from_kafka
from .proxy import MAX_BODY_BYTES, RestProxy, proxy_of, read_json
from .records import Data, JsonStream, ProduceRecord, format_timestamp, parse_record
from .schema_records import FORMAT_OF

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: a batch's records' bytes, below the default max.message.bytes (1 MiB) with room to spare
MAX_BATCH_BYTES = 512 * 1024
#: one record's JSON text at most (Confluent's produce refuses larger bodies with 413)
MAX_RECORD_JSON_BYTES = 8 << 20
STREAM_IDLE_TIMEOUT_S = 30.0
PRODUCE_TIMEOUT_MS = 30_000
_SEPARATOR = b"\r\n"

Report = dict[str, Any]
#: partition -> [(index in the request's records, record)]
Round = dict[int, list[tuple[int, ProduceRecord]]]
#: errors that say the partition's leader is elsewhere, so nothing was written: sent again
RESEND_CODES = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                          ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS})
MAX_RESENDS = 5
RESEND_BACKOFF_S = 0.1


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _error_report(error: RestError) -> Report:
    # per record, Confluent's codes are the HTTP statuses
    return {"error_code": error.status, "message": error.message}


class Producer:
    """The records of one request, produced in rounds of what arrived together."""

    def __init__(self, proxy: RestProxy, info: TopicInfo) -> None:
        self.proxy = proxy
        self.info = info
        #: the partition records without key or partition go to in this round (sticky)
        self._sticky: int | None = None
        #: the items of the last ``produce`` that failed with a retriable error
        self.retriable: set[int] = set()

    def _partition(self, record: ProduceRecord) -> int | RestError:
        if record.partition_id is not None:
            if record.partition_id not in self.info.partitions:
                return RestError(404, 404, "This server does not host this topic-partition.")
            return record.partition_id
        if record.key.data is not None:
            return partition_for_key(record.key.data, self.info.num_partitions)
        if self._sticky is None:
            self._sticky = any_partition(self.info.available, self.info.partitions)
        return self._sticky

    async def produce(self, items: list[Any]) -> list[Report]:
        """Delivery reports, in order, for parsed JSON values (or RestErrors) ``items``."""
        reports: list[Report | None] = [None] * len(items)
        self.retriable = set()
        #: partition -> [(index in items, record)]
        wanted: dict[int, list[tuple[int, ProduceRecord]]] = {}
        self._sticky = None
        for i, item in enumerate(items):
            try:
                if isinstance(item, RestError):
                    raise item
                record = await self._with_schemas(parse_record(item))
                partition = self._partition(record)
                if isinstance(partition, RestError):
                    raise partition
            except RestError as error:
                reports[i] = _error_report(error)
                continue
            wanted.setdefault(partition, []).append((i, record))
        while wanted:
            round_: Round = {}
            for partition in list(wanted):
                taken, size = 0, 0
                pending = wanted[partition]
                while taken < len(pending) and (taken == 0 or size < MAX_BATCH_BYTES):
                    size += pending[taken][1].size
                    taken += 1
                round_[partition] = pending[:taken]
                if taken == len(pending):
                    del wanted[partition]
                else:
                    wanted[partition] = pending[taken:]
            await self._produce_with_resends(round_, reports)
        return [r if r is not None else {"error_code": 500, "message": "not produced"}
                for r in reports]

    async def _with_schemas(self, record: ProduceRecord) -> ProduceRecord:
        if record.key.schema is None and record.value.schema is None:
            return record
        return attrs.evolve(record, key=await self._schema_data(record.key, is_key=True),
                            value=await self._schema_data(record.value, is_key=False))

    async def _schema_data(self, d: Data, *, is_key: bool) -> Data:
        """A key or value written with its schema (``schema_records.py``); an untyped one
        stays JSON unless the registry holds its topic's subject."""
        spec, schemas = d.schema, self.proxy.schemas
        if spec is None:
            return d
        untyped = spec.fmt is None and d.fmt == "JSON"
        if untyped and (schemas is None or not schemas.has_subject(
                f"{self.info.name}-{'key' if is_key else 'value'}")):
            return Data("JSON", d.data)
        if schemas is None:
            raise RestError(400, 400, f"{spec.field}: a schema needs the Schema Registry, "
                                      "which this broker does not serve: set "
                                      "schema.registry.listener")
        schema, data = await schemas.serialize(self.info.name, spec, is_key=is_key)
        return Data(FORMAT_OF[schema.schema_type], data,
                    registered=(schema.subject, schema.id, schema.version))

    async def _produce_with_resends(self, round_: Round, reports: list[Report | None],
                                    ) -> None:
        """One round, and again for the partitions whose leader moved (fresh metadata first),
        as Kafka's producer retries them; what still fails after ``MAX_RESENDS`` is reported."""
        resend = await self._produce_round(round_, reports)
        for attempt in range(1, MAX_RESENDS + 1):
            if not resend:
                return
            await trio.sleep(RESEND_BACKOFF_S * attempt)
            try:
                self.info = await self.proxy.topic(self.info.name)
            except KafkaError:
                break
            resend = await self._produce_round(
                {p: entries for p, (entries, _) in resend.items()}, reports)
        for entries, error in resend.values():
            self._fail(entries, reports, error)

    async def _produce_round(self, round_: Round, reports: list[Report | None],
                             ) -> dict[int, tuple[list[tuple[int, ProduceRecord]], RestError]]:
        """One Produce request per leader; returns the partitions to send again (their leader
        moved: nothing of them was written) with their error."""
        resend: dict[int, tuple[list[tuple[int, ProduceRecord]], RestError]] = {}
        now_ms = int(time.time() * 1000)
        by_leader: dict[int, list[tuple[str, int, bytes]]] = {}
        stamps: dict[int, list[int]] = {}
        for partition, entries in round_.items():
            stamps[partition] = [r.timestamp_ms if r.timestamp_ms is not None else now_ms
                                 for _, r in entries]
            batch = build_batch([(r.key.data, r.value.data, r.headers) for _, r in entries],
                                timestamps=stamps[partition])
            by_leader.setdefault(self.info.leader(partition), []).append(
                (self.info.name, partition, batch))

        async def send(leader: int, batches: list[tuple[str, int, bytes]]) -> None:
            if leader < 0:
                for _, partition, _ in batches:
                    resend[partition] = (round_[partition], from_kafka(
                        KafkaError(code=ErrorCode.LEADER_NOT_AVAILABLE)))
                return
            try:
                response = await self.proxy.admin.client.request(
                    leader, ApiKey.Produce, functools.partial(
                        produce_request, batches=batches, acks=-1,
                        timeout_ms=PRODUCE_TIMEOUT_MS))
            except KafkaError as exc:
                for _, partition, _ in batches:
                    self._fail(round_[partition], reports, from_kafka(exc))
                return
            for tp, result in parse_produce(response).items():
                entries = round_.get(tp.partition)
                if entries is None:
                    continue
                if result.error:
                    error = from_kafka(KafkaError(describe_code(result.error), code=result.error))
                    if result.error in RESEND_CODES:
                        resend[tp.partition] = (entries, error)
                    else:
                        self._fail(entries, reports, error)
                    continue
                for n, (i, record) in enumerate(entries):
                    stamp = (result.log_append_time if result.log_append_time >= 0
                             else stamps[tp.partition][n])
                    report: Report = {
                        "error_code": 200, "cluster_id": self.proxy.cluster_id,
                        "topic_name": self.info.name, "partition_id": tp.partition,
                        "offset": result.base_offset + n, "timestamp": format_timestamp(stamp)}
                    for field, data in (("key", record.key), ("value", record.value)):
                        shown = data.report()
                        if shown is not None:
                            report[field] = shown
                    reports[i] = report

        async with trio.open_nursery() as nursery:
            for leader, batches in by_leader.items():
                nursery.start_soon(send, leader, batches)
        return resend

    def _fail(self, entries: list[tuple[int, ProduceRecord]], reports: list[Report | None],
              error: RestError) -> None:
        for i, _ in entries:
            reports[i] = _error_report(error)
            if error.error_code == RETRIABLE:
                self.retriable.add(i)


async def _respond_error(send: Send, error: RestError) -> None:
    body = _json(error.body())
    await send({"type": "http.response.start", "status": error.status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class ProduceEndpoint:
    """The ASGI endpoint (Starlette calls it with the route's path params in the scope)."""

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive,
                       send: Send) -> None:
        from starlette.requests import Request

        request = Request(scope, receive)
        if request.method != "POST":
            await _respond_error(send, RestError(405, 405, "HTTP 405 Method Not Allowed"))
            return
        proxy = proxy_of(request)
        try:
            proxy.urls(request)
            media = request.headers.get("content-type", "application/json")
            if media.split(";")[0].strip() not in ("application/json", ""):
                raise RestError(415, 415, "HTTP 415 Unsupported Media Type")
            info = await proxy.topic(request.path_params["topic_name"])
        except RestError as error:
            await _respond_error(send, error)
            return
        except KafkaError as exc:
            await _respond_error(send, from_kafka(exc))
            return
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
            await _respond_error(send, RestError(
                413, 413, f"Request body of {declared} bytes exceeds {MAX_BODY_BYTES}"))
            return
        await self._stream(Producer(proxy, info), receive, send, streaming=declared is None)

    async def _stream(self, producer: Producer, receive: Receive, send: Send,
                      streaming: bool) -> None:
        """Read, produce and answer until the body ends; ``streaming`` (no Content-Length)
        answers what arrived as it arrives, else the whole body is one round."""
        stream = JsonStream(MAX_RECORD_JSON_BYTES)
        started = body_open = False
        more = True
        while more:
            with trio.move_on_after(STREAM_IDLE_TIMEOUT_S) as idle:
                message = await receive()
            if idle.cancelled_caught or message["type"] == "http.disconnect":
                break
            more = bool(message.get("more_body", False))
            try:
                stream.feed(message.get("body", b""))
                items = stream.values(final=not more) if streaming or not more else []
            except RestError as error:
                items, more = [error], False
            if stream.broken:
                more = False
            if not items:
                continue
            reports = await producer.produce(items)
            if not started:
                # one record, not a stream: its own status, as a plain POST expects
                status = 200 if streaming or len(reports) != 1 else int(reports[0]["error_code"])
                await send({"type": "http.response.start", "status": status,
                            "headers": [(b"content-type", b"application/json")]})
                started = True
            body = b"".join(_json(r) + _SEPARATOR for r in reports)
            body_open = more
            await send({"type": "http.response.body", "body": body, "more_body": more})
        if not started:
            await _respond_error(send, RestError(400, 400, "Request body is empty"))
        elif body_open:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


#: ``produce.batch.maximum.entries``' default in Confluent's proxy
MAX_BATCH_ENTRIES = 10


async def produce_batch(request: Any) -> Any:
    """``POST .../records:batch``: ``{"entries": [{"id", ...record}]}``, each record reported
    under its id in ``successes`` or ``failures``, with status 207 (Confluent's batch)."""
    from starlette.responses import JSONResponse

    proxy = proxy_of(request)
    proxy.urls(request)
    body = await read_json(request)
    entries = body.get("entries") if isinstance(body, dict) else None
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("id"), str) and e["id"] for e in entries):
        raise RestError(400, 400, 'Request body must be {"entries": [{"id": "...", ...}]}, '
                                  "each entry with a non-empty string id")
    if not entries:
        raise RestError(400, 400, "The batch holds no entries")
    if len(entries) > MAX_BATCH_ENTRIES:
        raise RestError(400, 400, f"The batch holds {len(entries)} entries, more than "
                                  f"{MAX_BATCH_ENTRIES}")
    if len({e["id"] for e in entries}) != len(entries):
        raise RestError(400, 400, "The batch's entry ids are not distinct")
    info = await proxy.topic(request.path_params["topic_name"])
    reports = await Producer(proxy, info).produce(
        [{k: v for k, v in e.items() if k != "id"} for e in entries])
    successes, failures = [], []
    for entry, report in zip(entries, reports, strict=True):
        if report["error_code"] == 200:
            successes.append({"id": entry["id"], **{k: v for k, v in report.items()
                                                     if k != "error_code"}})
        else:
            failures.append({"id": entry["id"], "error_code": report["error_code"],
                             "message": report.get("message")})
    return JSONResponse({"successes": successes, "failures": failures}, status_code=207)
