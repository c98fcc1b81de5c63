"""A small blocking Kafka-protocol client for the console tools (``topics``, ``produce``,
``consume``).

Why blocking sockets: a console tool sends a handful of requests in a row, so plain sockets keep
it free of an event loop and start it fast. Why it negotiates versions and routes by leader: the
tools talk to any Kafka-protocol broker, ours or Kafka or a multi-broker cluster, so each
connection asks ApiVersions (v0, which every broker answers) and sends the highest version both
sides know, and Produce, ListOffsets and Fetch go to each partition's leader from Metadata.
Every failure becomes a ``ClientError`` whose text is one line fit for a user.
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from .protocol.api_keys import ApiKey, request_class
from .protocol.errors import ErrorCode, RemoteProtocolError
from .protocol.messages import decode_response, encode_request, make_request

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
_SIZE = struct.Struct(">i")
#: the largest response accepted (a Fetch is bounded by its max_bytes, far below this)
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
#: (lowest, highest) version of each API this client sends; the fields it sets exist in all
_OUR_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.Produce: (3, 7),
    ApiKey.Fetch: (4, 11),
    ApiKey.ListOffsets: (1, 3),
    ApiKey.Metadata: (1, 5),
    ApiKey.CreateTopics: (2, 4),
    ApiKey.DeleteTopics: (1, 3),
    ApiKey.DescribeConfigs: (1, 1),
}
LATEST = -1
EARLIEST = -2
#: DescribeConfigs config_source -> Kafka's name for it
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
                  5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}


class ClientError(Exception):
    """A failure described in one line for the user."""


class BrokerUnavailableError(ClientError):
    """No connection to the broker, or it dropped the connection."""


class KafkaResponseError(ClientError):
    """The broker answered with a Kafka error code."""

    def __init__(self, code: int, what: str, message: str | None = None) -> None:
        self.code = code
        super().__init__(f"{what}: {error_name(code)}" + (f": {message}" if message else ""))


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """``"h1:9092,[::1]:9093"`` -> [(host, port), ...]; ValueError with a one-line reason."""
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else ""
        else:
            host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad bootstrap server {item!r}: expected HOST:PORT")
        out.append((host, int(port)))
    if not out:
        raise ValueError("no bootstrap server given")
    return out


def parse_address(address: str, default_port: int = 9092) -> tuple[str, int]:
    """The first of ``host:port`` (or ``[v6]:port``, or a bare host) -> (host, port)."""
    address = address.strip().split(",")[0]
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest.lstrip(":")
    elif address.count(":") == 1:
        host, port = address.split(":")
    else:
        host, port = address, ""
    try:
        return host or "127.0.0.1", int(port) if port else default_port
    except ValueError:
        raise ValueError(f"bad broker address {address!r}: expected host:port") from None


class BrokerConnection:
    """One connection to one broker; requests are answered in order, one at a time."""

    def __init__(self, host: str, port: int, *, timeout_s: float = 10.0,
                 client_id: str = "trio-broker-console") -> None:
        self.address = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
        self.timeout_s = timeout_s
        self.client_id = client_id
        self._correlation = itertools.count(1)
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise BrokerUnavailableError(
                f"cannot connect to {self.address}: {exc.strerror or exc}") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.versions = self._api_versions()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        """One request at a fixed version; returns the response body."""
        return self.roundtrip(api_key, version, make_request(api_key, version, **fields))

    def _api_versions(self) -> dict[int, tuple[int, int]]:
        body = self.roundtrip(ApiKey.ApiVersions, 0, make_request(ApiKey.ApiVersions, 0))
        if body.error_code:
            raise KafkaResponseError(body.error_code, f"ApiVersions on {self.address}")
        return {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}

    def version_for(self, api_key: int) -> int:
        """The highest version of ``api_key`` both this client and the broker speak."""
        lo, hi = _OUR_VERSIONS[api_key]
        theirs = self.versions.get(api_key)
        name = ApiKey(api_key).name
        if theirs is None:
            raise ClientError(f"the broker at {self.address} does not implement {name}")
        version = min(hi, theirs[1])
        if version < max(lo, theirs[0]):
            raise ClientError(f"the broker at {self.address} speaks {name} "
                              f"v{theirs[0]}-{theirs[1]}; this tool needs v{lo}-{hi}")
        return version

    def request(self, api_key: int, *, timeout_s: float | None = None,
                **fields: Any) -> tuple[int, Any]:
        """Send a request at the negotiated version; return (version, response body)."""
        version = self.version_for(api_key)
        body = self.roundtrip(api_key, version, make_request(api_key, version, **fields),
                              timeout_s=timeout_s)
        return version, body

    def send(self, api_key: int, version: int, body: Any) -> int:
        """Send without waiting (Produce with acks=0, or pipelining); returns correlation id."""
        cid = next(self._correlation)
        data = encode_request(api_key, version, cid, self.client_id, body)
        try:
            self._sock.settimeout(self.timeout_s)
            self._sock.sendall(data)
        except OSError as exc:
            raise BrokerUnavailableError(
                f"lost the connection to {self.address}: {exc.strerror or exc}") from None
        return cid

    def receive(self, api_key: int, version: int, correlation_id: int, *,
                timeout_s: float | None = None) -> Any:
        self._sock.settimeout(self.timeout_s if timeout_s is None else timeout_s)
        try:
            (size,) = _SIZE.unpack(self._read_exactly(4))
            if not 0 <= size <= MAX_RESPONSE_BYTES:
                raise BrokerUnavailableError(f"{self.address} sent a frame of {size} bytes")
            frame = self._read_exactly(size)
        except TimeoutError:
            raise BrokerUnavailableError(
                f"no answer from {self.address} to {ApiKey(api_key).name} in time") from None
        except OSError as exc:
            raise BrokerUnavailableError(
                f"lost the connection to {self.address}: {exc.strerror or exc}") from None
        try:
            got, body = decode_response(api_key, version, frame)
        except RemoteProtocolError as exc:
            raise BrokerUnavailableError(f"{self.address} sent a bad response: {exc}") from None
        if got != correlation_id:
            raise BrokerUnavailableError(f"{self.address} answered correlation id {got}, "
                                         f"expected {correlation_id}")
        return body

    def roundtrip(self, api_key: int, version: int, body: Any, *,
                  timeout_s: float | None = None) -> Any:
        cid = self.send(api_key, version, body)
        return self.receive(api_key, version, cid, timeout_s=timeout_s)

    def _read_exactly(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:])
            if k == 0:
                raise BrokerUnavailableError(f"{self.address} closed the connection")
            got += k
        return bytes(buf)


@attrs.frozen
class PartitionInfo:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: int = 0


@attrs.frozen
class TopicInfo:
    name: str
    error_code: int
    partitions: dict[int, PartitionInfo]
    is_internal: bool = False


@attrs.frozen
class ClusterInfo:
    brokers: dict[int, tuple[str, int]]
    controller_id: int
    topics: dict[str, TopicInfo]


@attrs.frozen
class FetchedPartition:
    partition: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes


class BlockingClient:
    """Connections to a cluster, found through its bootstrap servers."""

    def __init__(self, bootstrap_servers: str = DEFAULT_BOOTSTRAP, *, timeout_s: float = 10.0,
                 client_id: str = "trio-broker-console") -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.timeout_s = timeout_s
        self.client_id = client_id
        self._bootstrap_conn: BrokerConnection | None = None
        self._conns: dict[int, BrokerConnection] = {}
        self._brokers: dict[int, tuple[str, int]] = {}

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in {id(c): c for c in [self._bootstrap_conn, *self._conns.values()]
                     if c is not None}.values():
            conn.close()
        self._conns.clear()
        self._bootstrap_conn = None

    # --- connections ---------------------------------------------------------------------

    def any_connection(self) -> BrokerConnection:
        """A connection to the first bootstrap server that answers."""
        if self._bootstrap_conn is None:
            errors = []
            for host, port in self.bootstrap:
                try:
                    self._bootstrap_conn = BrokerConnection(
                        host, port, timeout_s=self.timeout_s, client_id=self.client_id)
                    break
                except BrokerUnavailableError as exc:
                    errors.append(str(exc))
            else:
                raise BrokerUnavailableError("; ".join(errors))
        return self._bootstrap_conn

    def connection(self, node_id: int) -> BrokerConnection:
        """A connection to broker ``node_id`` (as Metadata advertised it)."""
        conn = self._conns.get(node_id)
        if conn is None:
            if node_id not in self._brokers:
                self.metadata([])
            if node_id not in self._brokers:
                raise ClientError(f"broker {node_id} is not in the cluster metadata")
            host, port = self._brokers[node_id]
            boot = self._bootstrap_conn
            if boot is not None and boot.address in (f"{host}:{port}", f"[{host}]:{port}"):
                conn = boot
            else:
                conn = BrokerConnection(host, port, timeout_s=self.timeout_s,
                                        client_id=self.client_id)
            self._conns[node_id] = conn
        return conn

    # --- metadata and admin --------------------------------------------------------------

    def metadata(self, topics: Sequence[str] | None, *,
                 allow_auto_create: bool = False) -> ClusterInfo:
        """Brokers and topics (``None``: all topics; ``[]``: brokers only)."""
        conn = self.any_connection()
        cls = request_class(ApiKey.Metadata)
        assert cls is not None
        wanted = None if topics is None else [cls.MetadataRequestTopic(name=t) for t in topics]
        _, body = conn.request(ApiKey.Metadata, topics=wanted,
                               allow_auto_topic_creation=allow_auto_create)
        brokers = {b.node_id: (b.host, b.port) for b in body.brokers}
        self._brokers.update(brokers)
        out = {}
        for t in body.topics:
            parts = {p.partition_index: PartitionInfo(
                p.partition_index, p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes),
                p.error_code) for p in t.partitions}
            out[t.name] = TopicInfo(t.name, t.error_code, parts,
                                    bool(getattr(t, "is_internal", False)))
        return ClusterInfo(brokers, getattr(body, "controller_id", -1), out)

    def topic(self, name: str, *, allow_auto_create: bool = False,
              wait_s: float = 5.0) -> TopicInfo:
        """One topic's metadata, waiting out transient errors (a topic being created)."""
        deadline = time.monotonic() + wait_s
        while True:
            info = self.metadata([name], allow_auto_create=allow_auto_create).topics.get(name)
            code = info.error_code if info is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            leaderless = info is not None and any(p.leader < 0 for p in info.partitions.values())
            if code == 0 and info is not None and info.partitions and not leaderless:
                return info
            retriable = code in (ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 ErrorCode.REQUEST_TIMED_OUT) or (code == 0 and info is not None)
            if not retriable or time.monotonic() >= deadline:
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise KafkaResponseError(code, f"topic {name!r} does not exist")
                if code == 0:
                    raise ClientError(f"topic {name!r} has partitions without a leader")
                raise KafkaResponseError(code, f"topic {name!r}")
            time.sleep(0.1)

    def controller(self) -> BrokerConnection:
        cluster = self.metadata([])
        if cluster.controller_id >= 0 and cluster.controller_id in cluster.brokers:
            return self.connection(cluster.controller_id)
        return self.any_connection()

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     configs: Mapping[str, str]) -> None:
        cls = request_class(ApiKey.CreateTopics)
        assert cls is not None
        topic = cls.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=replication_factor,
            assignments=[],
            configs=[cls.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                     for k, v in configs.items()])
        _, body = self.controller().request(
            ApiKey.CreateTopics, topics=[topic], timeout_ms=int(self.timeout_s * 1000),
            validate_only=False)
        result = body.topics[0]
        if result.error_code:
            raise KafkaResponseError(result.error_code, f"cannot create topic {name!r}",
                                     getattr(result, "error_message", None))

    def delete_topic(self, name: str) -> None:
        _, body = self.controller().request(ApiKey.DeleteTopics, topic_names=[name],
                                            timeout_ms=int(self.timeout_s * 1000))
        result = body.responses[0]
        if result.error_code:
            raise KafkaResponseError(result.error_code, f"cannot delete topic {name!r}",
                                     getattr(result, "error_message", None))

    def describe_topic_configs(self, name: str) -> list[tuple[str, str | None, str]]:
        """[(config name, value, source name)] of a topic, sorted by name."""
        cls = request_class(ApiKey.DescribeConfigs)
        assert cls is not None
        resource = cls.DescribeConfigsResource(resource_type=2, resource_name=name,
                                               configuration_keys=None)
        _, body = self.any_connection().request(ApiKey.DescribeConfigs, resources=[resource],
                                                include_synonyms=False)
        result = body.results[0]
        if result.error_code:
            raise KafkaResponseError(result.error_code, f"cannot describe topic {name!r}",
                                     result.error_message)
        return sorted((c.name, c.value, CONFIG_SOURCES.get(c.config_source, "UNKNOWN"))
                      for c in result.configs)

    # --- data ----------------------------------------------------------------------------

    def _by_leader(self, topic: TopicInfo, partitions: Iterable[int]) -> dict[int, list[int]]:
        groups: dict[int, list[int]] = {}
        for p in partitions:
            info = topic.partitions.get(p)
            if info is None:
                raise ClientError(f"topic {topic.name!r} has no partition {p} "
                                  f"(it has {len(topic.partitions)})")
            groups.setdefault(info.leader, []).append(p)
        return groups

    def produce(self, topic: TopicInfo, batches: Mapping[int, bytes], *, acks: int,
                timeout_ms: int = 30_000,
                needs_version: int = 3) -> dict[int, tuple[int, int]]:
        """Send one batch per partition to its leader; {partition: (error code, base offset)}.

        With ``acks=0`` nothing is answered and every partition reports (0, -1).
        """
        cls = request_class(ApiKey.Produce)
        assert cls is not None
        out: dict[int, tuple[int, int]] = {}
        pending = []
        for leader, parts in self._by_leader(topic, batches).items():
            conn = self.connection(leader)
            version = conn.version_for(ApiKey.Produce)
            if version < needs_version:
                raise ClientError(f"the broker at {conn.address} speaks Produce up to "
                                  f"v{version}; this codec needs v{needs_version}")
            body = make_request(ApiKey.Produce, version, transactional_id=None, acks=acks,
                                     timeout_ms=timeout_ms, topic_data=[cls.TopicProduceData(
                                         name=topic.name, partition_data=[
                                             cls.TopicProduceData.PartitionProduceData(
                                                 index=p, records=batches[p]) for p in parts])])
            cid = conn.send(ApiKey.Produce, version, body)
            pending.append((conn, version, cid, parts))
        for conn, version, cid, parts in pending:
            if acks == 0:
                out.update({p: (0, -1) for p in parts})
                continue
            resp = conn.receive(ApiKey.Produce, version, cid,
                                timeout_s=self.timeout_s + timeout_ms / 1000)
            for t in resp.responses:
                for p in t.partition_responses:
                    out[p.index] = (p.error_code, p.base_offset)
        return out

    def list_offsets(self, topic: TopicInfo, partitions: Iterable[int],
                     timestamp: int) -> dict[int, int]:
        """{partition: offset} for LATEST (-1), EARLIEST (-2) or a timestamp (-1 if none)."""
        cls = request_class(ApiKey.ListOffsets)
        assert cls is not None
        out: dict[int, int] = {}
        for leader, parts in self._by_leader(topic, partitions).items():
            _, body = self.connection(leader).request(
                ApiKey.ListOffsets, replica_id=-1, isolation_level=0,
                topics=[cls.ListOffsetsTopic(name=topic.name, partitions=[
                    cls.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=p, timestamp=timestamp) for p in parts])])
            for t in body.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise KafkaResponseError(
                            p.error_code, f"ListOffsets of {topic.name}-{p.partition_index}")
                    out[p.partition_index] = p.offset
        return out

    def fetch(self, topic: TopicInfo, positions: Mapping[int, int], *, max_wait_ms: int,
              min_bytes: int = 1, max_bytes: int = 52_428_800,
              partition_max_bytes: int = 1_048_576) -> list[FetchedPartition]:
        """Fetch from every leader at once (one request each, answers read in turn)."""
        cls = request_class(ApiKey.Fetch)
        assert cls is not None
        sent = []
        for leader, parts in self._by_leader(topic, positions).items():
            conn = self.connection(leader)
            version = conn.version_for(ApiKey.Fetch)
            body = make_request(
                ApiKey.Fetch, version, replica_id=-1, max_wait_ms=max_wait_ms,
                min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0, session_id=0,
                session_epoch=-1, topics=[cls.FetchTopic(topic=topic.name, partitions=[
                    cls.FetchTopic.FetchPartition(
                        partition=p, current_leader_epoch=-1, fetch_offset=positions[p],
                        log_start_offset=-1, partition_max_bytes=partition_max_bytes)
                    for p in parts])],
                forgotten_topics_data=[], rack_id="")
            sent.append((conn, version, conn.send(ApiKey.Fetch, version, body)))
        out = []
        for conn, version, cid in sent:
            body = conn.receive(ApiKey.Fetch, version, cid,
                                timeout_s=self.timeout_s + max_wait_ms / 1000)
            if getattr(body, "error_code", 0):
                raise KafkaResponseError(body.error_code, f"Fetch from {conn.address}")
            for t in body.responses:
                for p in t.partitions:
                    out.append(FetchedPartition(p.partition_index, p.error_code,
                                                p.high_watermark, p.log_start_offset,
                                                bytes(p.records or b"")))
        return out



def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (``Utils.murmur2``), so keys land where Java clients put them."""
    m = 0x5BD1E995
    mask = 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    end = length - length % 4
    for i in range(0, end, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Kafka's default partitioner for keyed records: positive murmur2 modulo the count."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


__all__ = ["CONFIG_SOURCES", "DEFAULT_BOOTSTRAP", "EARLIEST", "LATEST", "BlockingClient",
           "BrokerConnection", "BrokerUnavailableError", "ClientError", "ClusterInfo",
           "FetchedPartition", "KafkaResponseError", "PartitionInfo", "TopicInfo",
           "error_name", "murmur2", "parse_bootstrap", "partition_for_key"]
