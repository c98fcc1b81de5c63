"""A small blocking Kafka-protocol client: Metadata, ListOffsets and Fetch, nothing else.

Why blocking sockets: Spark calls a Python data source from plain worker processes (the driver's
planner and one per executor task), with no event loop; a socket per broker with a timeout on
every call is the simplest thing that is correct there.

Why these versions (all non-flexible, so no tagged fields): Metadata v5, ListOffsets v2 and
Fetch v11 are the highest versions that trio-broker, every Kafka broker from 2.3 to 4.x and
librdkafka's mock cluster all accept, so no ApiVersions round trip is needed.

Leader awareness: partition leaders come from Metadata; requests go to the leader's advertised
address over one connection per broker. A leadership error (or a dropped connection) refreshes
the metadata and retries, a bounded number of times, ``retry_backoff_ms`` apart.

Every failure a user can cause or meet (unreachable broker, unknown topic, offsets gone to
retention, a broker error code) is a ``KafkaSourceError`` whose message says what happened and
what to change; nothing else escapes except bugs.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from trio_broker.protocol import messages
from trio_broker.protocol.api_keys import request_class
from trio_broker.protocol.errors import ErrorCode, RemoteProtocolError

LOGGER = logging.getLogger(__name__)

METADATA_VERSION = 5
LIST_OFFSETS_VERSION = 2
FETCH_VERSION = 11

_METADATA = 3
_LIST_OFFSETS = 2
_FETCH = 1

#: ListOffsets timestamps with a special meaning (and Spark's JSON offsets -2 / -1)
EARLIEST = -2
LATEST = -1

#: Largest response frame accepted; a fetch answer is bounded by the request's max_bytes plus
#: one oversized batch (KIP-74), so this only guards against garbage.
MAX_RESPONSE_BYTES = 1 << 30

_RETRIABLE_LEADER_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION,
})


class KafkaSourceError(Exception):
    """A failure reading Kafka-protocol data; the message is written for the job's user."""


class BrokerUnreachableError(KafkaSourceError):
    """No broker answered at the configured or advertised address."""


class UnknownTopicError(KafkaSourceError):
    """A subscribed or assigned topic or partition does not exist."""


class OffsetOutOfRangeError(KafkaSourceError):
    """Requested offsets are no longer (or not yet) in the log: retention deleted them."""


class BrokerError(KafkaSourceError):
    """The broker answered with an error code that retrying did not clear."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class ClusterMetadata(NamedTuple):
    brokers: dict[int, tuple[str, int]]
    #: topic -> partition -> leader node id (-1 while no leader)
    leaders: dict[str, dict[int, int]]
    #: topics the broker answered with an error code for (unknown, invalid, unauthorized)
    topic_errors: dict[str, int]
    #: Kafka's internal topics (``__consumer_offsets``, ...), which patterns never match
    internal_topics: frozenset[str] = frozenset()


class FetchedPartition(NamedTuple):
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes


def parse_bootstrap_servers(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"host:port,host2:port"`` (Kafka's ``bootstrap.servers``) as (host, port) pairs."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise KafkaSourceError(
                f"bootstrap server {item!r} is not HOST:PORT (kafka.bootstrap.servers)")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise KafkaSourceError("kafka.bootstrap.servers is empty: give at least one HOST:PORT")
    return out


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


class _Connection:
    """One socket to one broker; requests are sent in order and answered in order."""

    def __init__(self, address: tuple[str, int], *, timeout_s: float, client_id: str) -> None:
        self.address = address
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._next_correlation_id = 1
        #: (correlation id, api key, version) of requests sent and not yet answered
        self._in_flight: list[tuple[int, int, int]] = []
        try:
            self._sock = socket.create_connection(address, timeout=timeout_s)
        except OSError as exc:
            raise BrokerUnreachableError(
                f"cannot reach Kafka broker at {address[0]}:{address[1]}: {_reason(exc)}"
            ) from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)

    def send(self, api_key: int, version: int, body: Any) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        frame = messages.encode_request(api_key, version, correlation_id, self._client_id, body)
        try:
            self._sock.sendall(frame)
        except OSError as exc:
            raise self._lost(exc) from None
        self._in_flight.append((correlation_id, api_key, version))
        return correlation_id

    def receive(self) -> Any:
        """The response to the oldest request in flight."""
        correlation_id, api_key, version = self._in_flight.pop(0)
        deadline = time.monotonic() + self._timeout_s
        try:
            frame = self._receive_frame(deadline)
        except OSError as exc:
            raise self._lost(exc) from None
        try:
            # decode_response reads through a memoryview: a bytearray serves as well as bytes
            got, body = messages.decode_response(api_key, version, frame)  # type: ignore[arg-type]
        except RemoteProtocolError as exc:
            raise KafkaSourceError(
                f"broker at {self._where()} sent an invalid response: {exc}") from None
        if got != correlation_id:
            raise KafkaSourceError(
                f"broker at {self._where()} answered correlation id {got}, "
                f"expected {correlation_id}")
        return body

    def _receive_frame(self, deadline: float) -> bytearray:
        """One response frame, read straight into a buffer of its announced size.

        Unlike ``FrameDecoder`` (which suits a server reading many small requests), a fetch
        response is megabytes: reading it with ``recv_into`` into one preallocated buffer saves
        two copies of every fetched byte.
        """
        header = self._receive_into(bytearray(4), deadline)
        size = int.from_bytes(header, "big", signed=True)
        if size < 4 or size > MAX_RESPONSE_BYTES:
            raise KafkaSourceError(f"broker at {self._where()} sent a response frame of {size} "
                                   f"bytes (outside 4..{MAX_RESPONSE_BYTES})")
        return self._receive_into(bytearray(size), deadline)

    def _receive_into(self, buf: bytearray, deadline: float) -> bytearray:
        view = memoryview(buf)
        got = 0
        while got < len(buf):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("timed out")
            self._sock.settimeout(remaining)
            n = self._sock.recv_into(view[got:], min(len(buf) - got, 4 << 20))
            if not n:
                raise ConnectionResetError("connection closed by the broker")
            got += n
        return buf

    def request(self, api_key: int, version: int, body: Any) -> Any:
        self.send(api_key, version, body)
        return self.receive()

    def close(self) -> None:
        self._sock.close()

    def _where(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def _lost(self, exc: OSError) -> BrokerUnreachableError:
        self.close()
        return BrokerUnreachableError(
            f"lost the connection to Kafka broker at {self._where()}: {_reason(exc)}")


def _reason(exc: OSError) -> str:
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    return exc.strerror or str(exc) or type(exc).__name__


class KafkaWireClient:
    """Blocking, leader-aware Metadata / ListOffsets / Fetch client (driver and executors)."""

    def __init__(self, bootstrap_servers: str | Sequence[str], *, timeout_s: float = 30.0,
                 client_id: str = "trio-broker-spark", retries: int = 5,
                 retry_backoff_ms: int = 100) -> None:
        self._bootstrap = parse_bootstrap_servers(bootstrap_servers)
        self._timeout_s = timeout_s
        self._client_id = client_id
        self._retries = retries
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._connections: dict[tuple[str, int], _Connection] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[str, dict[int, int]] = {}

    def __enter__(self) -> KafkaWireClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    # --- connections ------------------------------------------------------------------------

    def _connection(self, address: tuple[str, int]) -> _Connection:
        conn = self._connections.get(address)
        if conn is None:
            conn = _Connection(address, timeout_s=self._timeout_s, client_id=self._client_id)
            self._connections[address] = conn
        return conn

    def _drop(self, address: tuple[str, int]) -> None:
        conn = self._connections.pop(address, None)
        if conn is not None:
            conn.close()

    def _any_connection(self) -> _Connection:
        """A connection to a known broker, or else to the first bootstrap server that answers."""
        for address in self._connections:
            return self._connections[address]
        errors = []
        for address in [*self._brokers.values(), *self._bootstrap]:
            try:
                return self._connection(address)
            except BrokerUnreachableError as exc:
                errors.append(str(exc))
        raise BrokerUnreachableError("; ".join(errors))

    def _bootstrap_text(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self._bootstrap)

    def _leader_connection(self, tp: TopicPartition) -> _Connection:
        leader = self._leaders.get(tp.topic, {}).get(tp.partition)
        if leader is None or leader < 0 or leader not in self._brokers:
            self.metadata([tp.topic])
            leader = self._leaders.get(tp.topic, {}).get(tp.partition)
        if leader is None:
            raise UnknownTopicError(f"partition {tp} does not exist")
        if leader < 0 or leader not in self._brokers:
            raise BrokerError(f"partition {tp} has no leader", ErrorCode.LEADER_NOT_AVAILABLE)
        return self._connection(self._brokers[leader])

    def _retrying(self, what: str, attempt: int, exc: Exception) -> None:
        if attempt >= self._retries:
            raise exc
        LOGGER.info("%s failed (%s); refreshing metadata and retrying", what, exc)
        time.sleep(self._retry_backoff_s * (attempt + 1))
        self._leaders.clear()

    # --- Metadata ---------------------------------------------------------------------------

    def metadata(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Brokers and partition leaders for ``topics`` (None: every topic). Never auto-creates."""
        wanted = None if topics is None else sorted(set(topics))
        topic_cls = request_class(_METADATA).MetadataRequestTopic  # type: ignore[union-attr]
        body = messages.make_request(
            _METADATA, METADATA_VERSION,
            topics=None if wanted is None else [topic_cls(name=t) for t in wanted],
            allow_auto_topic_creation=False)
        attempt = 0
        while True:
            conn = None
            try:
                conn = self._any_connection()
                response = conn.request(_METADATA, METADATA_VERSION, body)
                break
            except BrokerUnreachableError as exc:
                if conn is not None:
                    self._drop(conn.address)
                self._brokers.clear()
                if attempt >= self._retries:
                    raise BrokerUnreachableError(
                        f"no Kafka broker reachable at kafka.bootstrap.servers="
                        f"{self._bootstrap_text()}: {exc}") from None
                self._retrying("Metadata", attempt, exc)
                attempt += 1
        brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        leaders: dict[str, dict[int, int]] = {}
        topic_errors: dict[str, int] = {}
        internal = frozenset(t.name for t in response.topics if t.is_internal)
        for topic in response.topics:
            if topic.error_code and topic.error_code != ErrorCode.LEADER_NOT_AVAILABLE:
                topic_errors[topic.name] = topic.error_code
                continue
            leaders[topic.name] = {p.partition_index: p.leader_id for p in topic.partitions}
        self._brokers = brokers
        self._leaders.update(leaders)
        return ClusterMetadata(brokers, leaders, topic_errors, internal)

    def partitions_for(self, topics: Iterable[str]) -> list[TopicPartition]:
        """Every partition of ``topics``; an unknown topic raises ``UnknownTopicError``."""
        wanted = sorted(set(topics))
        md = self.metadata(wanted)
        out: list[TopicPartition] = []
        for topic in wanted:
            code = md.topic_errors.get(topic)
            if code is not None or topic not in md.leaders:
                raise _topic_error(topic, code)
            out.extend(TopicPartition(topic, p) for p in sorted(md.leaders[topic]))
        return out

    # --- ListOffsets ------------------------------------------------------------------------

    def list_offsets(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """For each partition: EARLIEST (-2), LATEST (-1), or the first offset whose timestamp
        is at or after the given one (-1 when there is none), asked of each partition's leader."""
        result: dict[TopicPartition, int] = {}
        pending = dict(timestamps)
        attempt = 0
        while pending:
            by_leader: dict[tuple[str, int], dict[TopicPartition, int]] = {}
            for tp, ts in pending.items():
                conn = self._leader_connection(tp)
                by_leader.setdefault(conn.address, {})[tp] = ts
            failed: list[tuple[TopicPartition, Exception]] = []
            for address, group in by_leader.items():
                try:
                    answers = self._list_offsets_one(self._connection(address), group)
                except BrokerUnreachableError as exc:
                    self._drop(address)
                    failed.extend((tp, exc) for tp in group)
                    continue
                for tp, (code, offset) in answers.items():
                    if code == ErrorCode.NONE:
                        result[tp] = offset
                        del pending[tp]
                    elif code in _RETRIABLE_LEADER_ERRORS:
                        failed.append((tp, BrokerError(
                            f"ListOffsets for {tp}: {error_name(code)}", code)))
                    elif code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        raise UnknownTopicError(f"partition {tp} does not exist")
                    else:
                        raise BrokerError(f"ListOffsets for {tp} failed: {error_name(code)}",
                                          code)
            if failed:
                self._retrying("ListOffsets", attempt, failed[0][1])
                attempt += 1
        return result

    def _list_offsets_one(self, conn: _Connection, group: Mapping[TopicPartition, int]
                          ) -> dict[TopicPartition, tuple[int, int]]:
        topic_cls = request_class(_LIST_OFFSETS).ListOffsetsTopic  # type: ignore[union-attr]
        part_cls = topic_cls.ListOffsetsPartition
        by_topic: dict[str, list[Any]] = {}
        for tp, ts in group.items():
            by_topic.setdefault(tp.topic, []).append(
                part_cls(partition_index=tp.partition, timestamp=ts))
        body = messages.make_request(
            _LIST_OFFSETS, LIST_OFFSETS_VERSION, replica_id=-1, isolation_level=0,
            topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()])
        response = conn.request(_LIST_OFFSETS, LIST_OFFSETS_VERSION, body)
        out: dict[TopicPartition, tuple[int, int]] = {}
        for topic in response.topics:
            for p in topic.partitions:
                out[TopicPartition(topic.name, p.partition_index)] = (p.error_code, p.offset)
        missing = set(group) - set(out)
        for tp in missing:
            out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
        return out

    # --- Fetch ------------------------------------------------------------------------------

    def send_fetch(self, tp: TopicPartition, offset: int, *, max_bytes: int,
                   max_wait_ms: int = 0) -> tuple[tuple[str, int], TopicPartition]:
        """Send a Fetch for one partition to its leader; ``receive_fetch`` collects the answer.

        Split in two so a reader can ask for the next chunk before decoding the current one.
        """
        topic_cls = request_class(_FETCH).FetchTopic  # type: ignore[union-attr]
        body = messages.make_request(
            _FETCH, FETCH_VERSION, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1,
            max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[topic_cls(topic=tp.topic, partitions=[topic_cls.FetchPartition(
                partition=tp.partition, current_leader_epoch=-1, fetch_offset=offset,
                log_start_offset=-1, partition_max_bytes=max_bytes)])],
            forgotten_topics_data=[], rack_id="")
        conn = self._leader_connection(tp)
        try:
            conn.send(_FETCH, FETCH_VERSION, body)
        except BrokerUnreachableError:
            self._drop(conn.address)
            raise
        return conn.address, tp

    def receive_fetch(self, handle: tuple[tuple[str, int], TopicPartition]) -> FetchedPartition:
        address, tp = handle
        conn = self._connections.get(address)
        if conn is None:
            raise BrokerUnreachableError(f"connection to {address[0]}:{address[1]} was closed")
        try:
            response = conn.receive()
        except BrokerUnreachableError:
            self._drop(address)
            raise
        if response.error_code:
            raise BrokerError(f"Fetch for {tp} failed: {error_name(response.error_code)}",
                              response.error_code)
        for topic in response.responses:
            for p in topic.partitions:
                if topic.topic == tp.topic and p.partition_index == tp.partition:
                    return FetchedPartition(p.error_code, p.high_watermark, p.log_start_offset,
                                            p.records or b"")
        raise KafkaSourceError(f"Fetch response from {address[0]}:{address[1]} lacks {tp}")

    def fetch(self, tp: TopicPartition, offset: int, *, max_bytes: int,
              max_wait_ms: int = 0) -> FetchedPartition:
        """Fetch from ``offset``, retrying leadership errors and lost connections."""
        attempt = 0
        while True:
            try:
                result = self.receive_fetch(
                    self.send_fetch(tp, offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms))
            except BrokerUnreachableError as exc:
                self._retrying(f"Fetch for {tp}", attempt, exc)
                attempt += 1
                continue
            if result.error_code in _RETRIABLE_LEADER_ERRORS:
                self._retrying(f"Fetch for {tp}", attempt, BrokerError(
                    f"Fetch for {tp}: {error_name(result.error_code)}", result.error_code))
                attempt += 1
                continue
            return result


def _topic_error(topic: str, code: int | None) -> KafkaSourceError:
    if code is None or code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return UnknownTopicError(f"topic {topic!r} does not exist")
    if code == ErrorCode.INVALID_TOPIC_EXCEPTION:
        return UnknownTopicError(f"{topic!r} is not a valid topic name")
    return BrokerError(f"Metadata for topic {topic!r} failed: {error_name(code)}", code)
