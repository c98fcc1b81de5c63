"""A loopback TCP proxy that keeps severing Kafka connections, and records what it forwarded.

Why it is built this way: an idempotent producer only proves its worth when a request reached
the broker but its answer never reached the client. Each proxied connection gets a random byte
budget for the client -> broker direction. When it runs out the proxy

1. forwards the request bytes up to the budget and half-closes the broker side, either right
   there (the cut lands inside a request) or after the rest of that request (the broker gets it
   whole and answers it); the broker still answers every whole request it received;
2. forwards part of the next answer to the client and closes the client side (the client sees
   a torn response and retries everything it has in flight);
3. keeps reading the broker's answers without forwarding them, until the broker closes.

Every whole request the broker received is therefore processed, and every answer after the cut
is lost: the client's retries of those batches are real duplicates at the broker. The proxy
parses the frames it forwards (sans-IO, from ``trio_broker.protocol``) into a ``ProduceLedger``:
how often each idempotent batch was sent in full, and every offset the broker answered it with.
"""

from __future__ import annotations

import collections
import random
import struct
from typing import Any

import attrs
import trio

from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.batch import read_batch_header
from trio_broker.protocol.messages import (
    decode_request_body,
    decode_request_header,
    decode_response,
)

_SIZE = struct.Struct(">i")
_REQUEST_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id
_RECEIVE_BYTES = 65536
#: how long a severed connection may keep draining the broker's answers
DRAIN_TIMEOUT_S = 10.0

#: (topic, partition, producer id, epoch, base sequence, last sequence)
BatchKey = tuple[str, int, int, int, int, int]


class FrameSplitter:
    """Splits one direction of a Kafka connection into frames (size prefix included)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        frames = []
        pos = 0
        buf = self._buf
        while len(buf) - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            end = pos + 4 + size
            if end > len(buf):
                break
            frames.append(bytes(buf[pos + 4 : end]))
            pos = end
        del buf[:pos]
        return frames

    @property
    def mid_frame(self) -> bool:
        return bool(self._buf)

    def bytes_to_finish_frame(self, data: bytes) -> int:
        """How many leading bytes of ``data`` complete the frame in progress (may exceed it)."""
        head = bytes(self._buf[:4]) + bytes(data[: max(0, 4 - len(self._buf))])
        if len(head) < 4:
            return len(data) + 1
        (size,) = _SIZE.unpack_from(head, 0)
        return 4 + size - len(self._buf)


@attrs.define
class Answer:
    error_code: int
    base_offset: int
    #: the whole response frame went to the client before it was cut off
    delivered: bool


@attrs.define
class ProduceLedger:
    """What went through the proxy: idempotent batches sent in full and the broker's answers."""

    sent: collections.Counter[BatchKey] = attrs.field(factory=collections.Counter)
    answers: dict[BatchKey, list[Answer]] = attrs.field(factory=dict)
    produce_requests: int = 0

    def on_request(self, frame: bytes, pending: dict[int, tuple[int, int, Any]]) -> None:
        api_key, version, correlation_id = _REQUEST_PREFIX.unpack_from(frame, 0)
        if api_key != ApiKey.Produce:
            pending[correlation_id] = (api_key, version, None)
            return
        header = decode_request_header(frame)
        body = decode_request_body(header, frame)
        self.produce_requests += 1
        keys: dict[tuple[str, int], BatchKey] = {}
        for topic in body.topic_data:
            for part in topic.partition_data:
                batch = read_batch_header(part.records)
                if batch.producer_id < 0:
                    continue
                key = (topic.name, part.index, batch.producer_id, batch.producer_epoch,
                       batch.base_sequence, batch.last_sequence)
                self.sent[key] += 1
                keys[(topic.name, part.index)] = key
        if body.acks != 0:  # acks=0 requests get no answer
            pending[correlation_id] = (api_key, version, keys)

    def on_response(self, frame: bytes, pending: dict[int, tuple[int, int, Any]],
                    delivered: bool) -> None:
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        api_key, version, keys = pending.pop(correlation_id)
        if api_key != ApiKey.Produce or not keys:
            return
        _, body = decode_response(api_key, version, frame)
        for topic in body.responses:
            for part in topic.partition_responses:
                key = keys.get((topic.name, part.index))
                if key is not None:
                    self.answers.setdefault(key, []).append(
                        Answer(part.error_code, part.base_offset, delivered))

    # --- summaries --------------------------------------------------------------------------

    def resent(self) -> list[BatchKey]:
        """Batches the broker was sent in full more than once."""
        return [key for key, n in self.sent.items() if n > 1]

    def answered_more_than_once(self) -> dict[BatchKey, list[Answer]]:
        """Batches the broker accepted (error 0) more than once: each a detected duplicate,
        unless the offsets differ (then it was appended twice)."""
        return {key: ok for key, answers in self.answers.items()
                if len(ok := [a for a in answers if a.error_code == 0]) > 1}

    def lost_answers(self) -> int:
        return sum(not a.delivered for answers in self.answers.values() for a in answers)

    def error_codes(self, *, delivered: bool) -> collections.Counter[int]:
        return collections.Counter(a.error_code for answers in self.answers.values()
                                   for a in answers if a.delivered == delivered)


class CuttingProxy:
    """Forwards 127.0.0.1 connections to ``target`` and severs each one after a random
    ``cut_after_bytes`` (inclusive range) of client -> broker traffic."""

    def __init__(self, target: tuple[str, int], *, cut_after_bytes: tuple[int, int],
                 seed: int) -> None:
        self.target = target
        self.cut_after_bytes = cut_after_bytes
        self.rng = random.Random(seed)
        self.cutting = True
        self.connections = 0
        self.cuts = 0
        self.cuts_mid_request = 0
        self.cuts_after_request = 0
        self.cuts_mid_response = 0
        self.ledger = ProduceLedger()

    async def serve(self, listener: trio.SocketListener, *,
                    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with listener, trio.open_nursery() as nursery:
            task_status.started()
            while True:
                stream = await listener.accept()
                nursery.start_soon(self._relay, stream)

    async def _relay(self, client: trio.SocketStream) -> None:
        self.connections += 1
        try:
            server = await trio.open_tcp_stream(*self.target)
        except OSError:
            await client.aclose()
            return
        conn = _Relay(self, client, server, self.rng.randint(*self.cut_after_bytes),
                      tear_request=self.rng.random() < 0.5)
        async with client, server, trio.open_nursery() as nursery:
            conn.nursery = nursery
            nursery.start_soon(conn.upstream)
            nursery.start_soon(conn.downstream)


_CLOSED = (trio.BrokenResourceError, trio.ClosedResourceError)


class _Relay:
    """One proxied connection: the two pumps and the cut between them."""

    def __init__(self, proxy: CuttingProxy, client: trio.SocketStream,
                 server: trio.SocketStream, budget: int, tear_request: bool) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.budget = budget
        #: cut inside the request the budget runs out in, or right after its last byte
        self.tear_request = tear_request
        self.requests = FrameSplitter()
        self.responses = FrameSplitter()
        #: correlation id -> (api key, version, produce batch keys) of whole forwarded requests
        self.pending: dict[int, tuple[int, int, Any]] = {}
        self.client_open = True
        self.cut = False
        self.nursery: trio.Nursery | None = None

    async def upstream(self) -> None:
        """Client -> broker, until the client closes or the budget runs out."""
        proxy = self.proxy
        while True:
            try:
                data = await self.client.receive_some(_RECEIVE_BYTES)
            except _CLOSED:
                data = b""
            if not data:
                break
            cut_now = False
            if proxy.cutting and len(data) >= self.budget:
                data, cut_now = self._trim_at_budget(data)
            else:
                self.budget -= len(data)
                # parsed before sending: the answer may come back before send_all returns
                self._parse_requests(data)
            if cut_now:
                # marked before the last bytes go out, so no answer to them slips through
                self._mark_cut()
            try:
                await self.server.send_all(data)
            except _CLOSED:
                break
            if cut_now:
                if not self.pending:
                    await self._close_client()  # nothing in flight: no response to tear
                break
        try:
            await self.server.send_eof()
        except _CLOSED:
            pass

    def _parse_requests(self, data: bytes) -> None:
        for frame in self.requests.feed(data):
            self.proxy.ledger.on_request(frame, self.pending)

    def _trim_at_budget(self, data: bytes) -> tuple[bytes, bool]:
        """The part of ``data`` to forward now, and whether to cut after it."""
        head, tail = data[: self.budget], data[self.budget :]
        self._parse_requests(head)
        if self.tear_request or not self.requests.mid_frame:
            return head, True
        # finish the request the budget ran out in, so the broker answers it into the void
        need = self.requests.bytes_to_finish_frame(tail)
        if need <= len(tail):
            self._parse_requests(tail[:need])
            return head + tail[:need], True
        self._parse_requests(tail)
        self.budget = need - len(tail)
        return data, False

    def _mark_cut(self) -> None:
        proxy = self.proxy
        proxy.cuts += 1
        if self.requests.mid_frame:
            proxy.cuts_mid_request += 1
        else:
            proxy.cuts_after_request += 1
        self.cut = True
        assert self.nursery is not None
        self.nursery.cancel_scope.deadline = trio.current_time() + DRAIN_TIMEOUT_S

    async def _close_client(self) -> None:
        self.client_open = False
        await self.client.aclose()

    async def downstream(self) -> None:
        """Broker -> client; after a cut, tear the next response and swallow the rest."""
        ledger = self.proxy.ledger
        while True:
            try:
                data = await self.server.receive_some(_RECEIVE_BYTES)
            except _CLOSED:
                data = b""
            if not data:
                break
            delivered = False
            if self.client_open:
                tear = self.cut  # as it was when these bytes arrived
                forward = data
                if tear:
                    take = min(len(data), self.responses.bytes_to_finish_frame(data) // 2)
                    forward = data[:take]
                try:
                    if forward:
                        await self.client.send_all(forward)
                    delivered = not tear
                except _CLOSED:
                    self.client_open = False
                if self.cut and self.client_open:
                    self.proxy.cuts_mid_response += bool(tear and forward)
                    await self._close_client()
            for frame in self.responses.feed(data):
                ledger.on_response(frame, self.pending, delivered)
        if self.client_open:
            await self._close_client()
