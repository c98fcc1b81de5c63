"""Which version of each API to send: the client's own ranges and the ApiVersions exchange.

Why one place (Kafka's ``NetworkClient`` + ``ApiVersions``): every face talks to brokers of any
age, so each connection first asks ApiVersions and then every request goes out at the highest
version inside both the broker's range and ``CLIENT_VERSIONS``, the versions this package's
builders build and its tests exercise: the hot APIs (produce, fetch, metadata, list offsets,
offset commit/fetch, coordinator lookup, group listings) up to their flexible versions, short of
the ones that name topics by id; group membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
and the older admin calls at the versions their builders were written for; ApiVersions v3,
DescribeLogDirs v2-v4 (whose v4 alone tells a log dir's free space) and the flexible-only or
newest admin calls flexible.

The ApiVersions exchange, with Java's and librdkafka's fallbacks: send v3; a broker that answers
UNSUPPORTED_VERSION lists the ApiVersions versions it knows, so retry at the highest of them
below ours (v0 when it lists none or the answer does not parse, as Java does); INVALID_REQUEST
means an older broker choked on v3's fields, so retry v0 (librdkafka's rule). The exchange also
keeps the broker's finalized feature levels (v3+, KIP-584): a producer speaks transaction
version 2 only where ``transaction.version`` is finalized at 2 (``TRANSACTION_VERSION_2``).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from ...protocol.api_keys import ApiKey, VersionRange
from ...protocol.errors import ErrorCode, RemoteProtocolError
from ...protocol.messages import decode_response, make_request
from .errors import KafkaConnectionError, UnsupportedVersionError, describe_code

CLIENT_SOFTWARE_NAME = "trio-broker"
CLIENT_SOFTWARE_VERSION = "0.1.0"
#: the ApiVersions version tried first
API_VERSIONS_FIRST = 3
_ATTEMPTS = 4

#: (lowest, highest) version of each API the builders in this package can build
CLIENT_VERSIONS: dict[int, VersionRange] = {
    # v12 is sent only by a transaction version 2 producer (TRANSACTION_VERSION_2); v13 topic ids
    ApiKey.Produce: VersionRange(3, 11),
    ApiKey.Fetch: VersionRange(4, 12),  # v13+ name topics by id
    ApiKey.ListOffsets: VersionRange(1, 10),
    ApiKey.Metadata: VersionRange(0, 12),  # v13's top-level error asks for a rebootstrap
    ApiKey.OffsetCommit: VersionRange(2, 9),
    ApiKey.OffsetFetch: VersionRange(1, 9),
    ApiKey.FindCoordinator: VersionRange(0, 6),
    # membership stays pre-flexible: librdkafka's mock cluster (the tests' other Kafka) does
    # not form a group with this client at JoinGroup v6+ / SyncGroup v4+ / LeaveGroup v2+
    ApiKey.JoinGroup: VersionRange(0, 5),
    ApiKey.Heartbeat: VersionRange(0, 3),  # v3: group_instance_id (static members)
    ApiKey.LeaveGroup: VersionRange(0, 1),
    ApiKey.SyncGroup: VersionRange(0, 3),
    ApiKey.DescribeGroups: VersionRange(0, 5),  # v6 answers GROUP_ID_NOT_FOUND, not "Dead"
    ApiKey.ListGroups: VersionRange(0, 5),
    ApiKey.SaslHandshake: VersionRange(1, 1),
    ApiKey.ApiVersions: VersionRange(0, 3),
    ApiKey.CreateTopics: VersionRange(2, 4),
    ApiKey.DeleteTopics: VersionRange(1, 3),
    ApiKey.InitProducerId: VersionRange(0, 1),
    ApiKey.DescribeConfigs: VersionRange(1, 1),
    ApiKey.AlterConfigs: VersionRange(0, 1),
    ApiKey.SaslAuthenticate: VersionRange(0, 1),
    ApiKey.CreatePartitions: VersionRange(0, 1),
    ApiKey.DeleteGroups: VersionRange(0, 1),
    ApiKey.AddPartitionsToTxn: VersionRange(0, 3),
    ApiKey.AddOffsetsToTxn: VersionRange(0, 3),
    ApiKey.EndTxn: VersionRange(0, 3),
    ApiKey.TxnOffsetCommit: VersionRange(0, 3),
    ApiKey.DescribeTransactions: VersionRange(0, 0),
    ApiKey.ListTransactions: VersionRange(0, 1),
    ApiKey.DeleteRecords: VersionRange(0, 2),
    ApiKey.IncrementalAlterConfigs: VersionRange(0, 1),
    ApiKey.ListConfigResources: VersionRange(0, 1),
    ApiKey.OffsetDelete: VersionRange(0, 0),
    ApiKey.DescribeCluster: VersionRange(0, 1),
    ApiKey.ConsumerGroupHeartbeat: VersionRange(0, 1),
    ApiKey.ConsumerGroupDescribe: VersionRange(0, 1),
    ApiKey.DescribeLogDirs: VersionRange(1, 4),
    ApiKey.DescribeAcls: VersionRange(1, 3),  # v1+ know prefixed patterns
    ApiKey.CreateAcls: VersionRange(1, 3),
    ApiKey.DeleteAcls: VersionRange(1, 3),
    ApiKey.ListPartitionReassignments: VersionRange(0, 0),
    # share groups (KIP-932): the share consumer's calls, and kafka-share-groups.sh's
    ApiKey.ShareGroupHeartbeat: VersionRange(1, 1),
    ApiKey.ShareFetch: VersionRange(1, 2),
    ApiKey.ShareAcknowledge: VersionRange(1, 2),
    ApiKey.ShareGroupDescribe: VersionRange(1, 1),
    ApiKey.DescribeShareGroupOffsets: VersionRange(0, 1),  # v1: lag (KIP-1226)
    ApiKey.AlterShareGroupOffsets: VersionRange(0, 0),
    ApiKey.DeleteShareGroupOffsets: VersionRange(0, 0),
}

BrokerVersions = Mapping[int, tuple[int, int]]

#: the first versions of transaction version 2 (KIP-890 part 2), pinned by a producer that
#: speaks it: Produce adds its partitions itself, TxnOffsetCommit its group, and EndTxn bumps
#: the epoch and answers the producer id and epoch to go on with
TRANSACTION_VERSION_2: dict[int, int] = {ApiKey.Produce: 12, ApiKey.TxnOffsetCommit: 5,
                                         ApiKey.EndTxn: 5}


def transaction_version_2(broker: BrokerVersions, finalized: Mapping[str, int]) -> bool:
    """Whether a broker speaks transaction version 2 (Java's ``TransactionManager`` rule: the
    feature finalized at 2 and the versions that carry it advertised)."""
    return finalized.get("transaction.version", 0) >= 2 and all(
        broker.get(k, (0, -1))[1] >= v for k, v in TRANSACTION_VERSION_2.items())


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API {api_key}"


def choose_version(api_key: int, broker: BrokerVersions, where: str) -> int:
    """The highest version of ``api_key`` in both ranges; ``UnsupportedVersionError`` naming
    both when there is none (``where`` names the broker: ``"the broker at h:p"``)."""
    ours = CLIENT_VERSIONS.get(api_key)
    name = api_name(api_key)
    if ours is None:
        raise UnsupportedVersionError(f"this client does not implement {name}")
    theirs = broker.get(api_key)
    if theirs is None:
        raise UnsupportedVersionError(f"{where} does not implement {name}")
    version = min(ours.max, theirs[1])
    if version < max(ours.min, theirs[0]):
        raise UnsupportedVersionError(
            f"{where} speaks {name} v{theirs[0]}-{theirs[1]}; this client needs "
            f"v{ours.min}-{ours.max}")
    return version


def api_versions_request(version: int) -> object:
    """The ApiVersions body at ``version`` (v3+ names this client's software)."""
    return make_request(ApiKey.ApiVersions, version, client_software_name=CLIENT_SOFTWARE_NAME,
                        client_software_version=CLIENT_SOFTWARE_VERSION)


def parse_api_versions(frame: bytes,
                       version: int) -> tuple[int, dict[int, tuple[int, int]] | None]:
    """(error code, {api_key: (min, max)} or None when the body does not parse) from a raw
    response frame; the error code is read by hand, so it survives an unparseable body."""
    if len(frame) < 6:
        return ErrorCode.UNKNOWN_SERVER_ERROR, None
    error, body = _decode(frame, version)
    if body is None:
        return error, None
    return error, {k.api_key: (k.min_version, k.max_version) for k in body.api_keys or ()}


def _decode(frame: bytes, version: int) -> tuple[int, Any]:
    error = struct.unpack_from(">h", frame, 4)[0]
    try:
        _, body = decode_response(ApiKey.ApiVersions, version, frame)
    except RemoteProtocolError:
        return error, None
    return error, body


class ApiVersionsExchange:
    """The ApiVersions exchange as steps: ``version`` to send, then ``receive(frame)``.

    ``receive`` returns the broker's ranges when done, or None when ``version`` changed and the
    request must be sent again; it raises ``KafkaConnectionError`` when the broker refuses.
    """

    def __init__(self, where: str, first: int = API_VERSIONS_FIRST) -> None:
        self.where = where
        self.version = first
        self._attempts = 0
        #: feature name -> finalized level, from the answer that succeeded
        self.finalized_features: dict[str, int] = {}

    def receive(self, frame: bytes) -> dict[int, tuple[int, int]] | None:
        self._attempts += 1
        error, keys = parse_api_versions(frame, self.version)
        if error == ErrorCode.NONE and keys is not None:
            if self.version >= 3:
                _, body = _decode(frame, self.version)
                if body.finalized_features_epoch >= 0:
                    self.finalized_features = {f.name: f.max_version_level
                                               for f in body.finalized_features or ()}
            return keys
        if self._attempts < _ATTEMPTS and self.version > 0:
            if error == ErrorCode.UNSUPPORTED_VERSION:
                listed = (keys or {}).get(ApiKey.ApiVersions)
                self.version = min(listed[1], self.version - 1) if listed else 0
                return None
            if error == ErrorCode.INVALID_REQUEST:
                self.version = 0
                return None
        raise KafkaConnectionError(
            f"ApiVersions v{self.version} to {self.where} failed with {describe_code(error)}")


__all__ = ["CLIENT_VERSIONS", "TRANSACTION_VERSION_2", "ApiVersionsExchange", "BrokerVersions",
           "api_name", "api_versions_request", "choose_version", "parse_api_versions",
           "transaction_version_2"]
