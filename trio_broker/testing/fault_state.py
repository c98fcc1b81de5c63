"""The faults of a test cluster as data: injected errors and disconnects per API, latency per
node, and the bounded request log (``faults.py`` applies them to requests).

Why apart from ``faults.py``: the ``Cluster`` owns one ``Faults`` and its controls change it
from any thread's call, so this module needs no handler context.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any, NamedTuple

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode

#: requests kept for ``requests()``: the oldest are dropped beyond this
REQUEST_LOG_SIZE = 10_000
#: faults one ``inject`` may queue: each is an object held until a request takes it
MAX_INJECTED = 10_000


class RequestRecord(NamedTuple):
    """One request a node received: what ``Cluster.requests()`` lists."""

    node_id: int
    api: str
    api_key: int
    version: int
    client_id: str
    #: wall-clock seconds (``time.time()``) when the node took it from its queue
    time: float

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


class Fault(NamedTuple):
    node_id: int | None
    error: int | None = None
    disconnect: bool = False


def api_key_of(api: str | int) -> ApiKey:
    """``"Produce"``, ``0`` or ``ApiKey.Produce`` -> ``ApiKey.Produce``."""
    if isinstance(api, str):
        try:
            return ApiKey[api]
        except KeyError:
            raise ValueError(f"unknown API {api!r}") from None
    return ApiKey(api)


def error_code_of(error: str | int) -> int:
    """``"NOT_LEADER_OR_FOLLOWER"`` or ``6`` -> 6."""
    if isinstance(error, str):
        try:
            return int(ErrorCode[error.upper()])
        except KeyError:
            raise ValueError(f"unknown error {error!r}") from None
    return int(ErrorCode(error))


class Faults:
    """Injected errors and disconnects per API, latency per node, and the request log."""

    def __init__(self) -> None:
        self._queues: dict[int, deque[Fault]] = {}
        self.latency_s: dict[int, float] = {}
        self.log: deque[RequestRecord] = deque(maxlen=REQUEST_LOG_SIZE)

    def inject(self, api: str | int, errors: Iterable[str | int] = (), *,
               node_id: int | None = None, disconnect: bool = False, count: int = 1) -> None:
        """The next requests of ``api`` (on ``node_id``, or any node) answer with ``errors`` in
        order; or, with ``disconnect=True``, the next ``count`` ones close their connection."""
        key = api_key_of(api)
        if not 0 <= count <= MAX_INJECTED:
            raise ValueError(f"count={count}: expected 0..{MAX_INJECTED}")
        codes = [error_code_of(e) for e in errors]
        if disconnect == bool(codes):
            raise ValueError("give either errors or disconnect=True")
        if codes and key not in ERROR_APIS:
            raise ValueError(f"errors cannot be injected into {key.name} responses; "
                             "use disconnect=True")
        queue = self._queues.setdefault(int(key), deque())
        if disconnect:
            queue.extend(Fault(node_id, disconnect=True) for _ in range(count))
        else:
            queue.extend(Fault(node_id, error=code) for code in codes)

    def set_latency(self, node_id: int, ms: float) -> None:
        if ms <= 0:
            self.latency_s.pop(node_id, None)
        else:
            self.latency_s[node_id] = ms / 1000

    def clear(self) -> None:
        """Forget every injected fault and latency (the request log stays)."""
        self._queues.clear()
        self.latency_s.clear()

    def pending(self) -> dict[str, int]:
        return {ApiKey(k).name: len(q) for k, q in self._queues.items() if q}

    def take(self, api_key: int, node_id: int) -> Fault | None:
        queue = self._queues.get(api_key)
        if not queue:
            return None
        for i, fault in enumerate(queue):
            if fault.node_id is None or fault.node_id == node_id:
                del queue[i]
                return fault
        return None

    def requests(self) -> list[RequestRecord]:
        return list(self.log)



#: APIs whose responses can carry an injected error (``fault_responses.py`` writes them)
ERROR_APIS = frozenset({
    ApiKey.Produce, ApiKey.Fetch, ApiKey.ListOffsets, ApiKey.OffsetCommit,
    ApiKey.TxnOffsetCommit, ApiKey.OffsetForLeaderEpoch, ApiKey.FindCoordinator,
    ApiKey.OffsetFetch, ApiKey.AddPartitionsToTxn,
    # one top-level error code in every version
    ApiKey.JoinGroup, ApiKey.SyncGroup, ApiKey.Heartbeat, ApiKey.LeaveGroup,
    ApiKey.InitProducerId, ApiKey.AddOffsetsToTxn, ApiKey.EndTxn, ApiKey.ListGroups,
    ApiKey.ConsumerGroupHeartbeat, ApiKey.DescribeCluster, ApiKey.SaslHandshake,
    ApiKey.OffsetDelete,
    # share groups: Kafka's getErrorResponse puts the error at the top level of these three
    ApiKey.ShareGroupHeartbeat, ApiKey.ShareFetch, ApiKey.ShareAcknowledge})
