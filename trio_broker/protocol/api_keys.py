"""The table of APIs and versions this broker speaks: the single source of what it advertises.

Why these ranges: each client sends the highest version both sides support, so the upper bound of
each range is the smallest maximum among the target clients (librdkafka, kafka-python, aiokafka,
Java). Then every client speaks one well-tested version, all non-flexible except ApiVersions, and
kafka-python infers a coherent broker release (2.3) from the maxima, keeping idempotence on.
The lower bounds keep older and gap-y clients working (aiokafka sends ApiVersions v0, JoinGroup
0/1/2/5, SyncGroup 0/1/3, InitProducerId v0).

A key is advertised only once a handler for it is registered (``apis.registry``): advertise
exactly what is implemented.
"""

from __future__ import annotations

from typing import NamedTuple

from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage

from . import _classes

__all__ = ["SUPPORTED_VERSIONS", "ApiKey", "VersionRange", "is_flexible", "request_class",
           "response_class"]


class VersionRange(NamedTuple):
    min: int
    max: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min <= version <= self.max


SUPPORTED_VERSIONS: dict[ApiKey, VersionRange] = {
    ApiKey.Produce: VersionRange(3, 7),
    ApiKey.Fetch: VersionRange(4, 11),
    ApiKey.ListOffsets: VersionRange(1, 3),
    ApiKey.Metadata: VersionRange(0, 5),
    ApiKey.OffsetCommit: VersionRange(2, 3),
    ApiKey.OffsetFetch: VersionRange(1, 3),
    ApiKey.FindCoordinator: VersionRange(0, 1),
    ApiKey.JoinGroup: VersionRange(0, 5),
    ApiKey.Heartbeat: VersionRange(0, 1),
    ApiKey.LeaveGroup: VersionRange(0, 1),
    ApiKey.SyncGroup: VersionRange(0, 3),
    ApiKey.DescribeGroups: VersionRange(0, 3),
    ApiKey.ListGroups: VersionRange(0, 1),
    ApiKey.SaslHandshake: VersionRange(1, 1),
    ApiKey.ApiVersions: VersionRange(0, 4),
    ApiKey.CreateTopics: VersionRange(2, 4),
    ApiKey.DeleteTopics: VersionRange(1, 3),
    ApiKey.InitProducerId: VersionRange(0, 1),
    ApiKey.DescribeConfigs: VersionRange(1, 1),
    ApiKey.AlterConfigs: VersionRange(0, 1),
    ApiKey.SaslAuthenticate: VersionRange(0, 1),
    ApiKey.CreatePartitions: VersionRange(0, 1),
    ApiKey.DeleteGroups: VersionRange(0, 1),
}


def request_class(api_key: int) -> type[ApiMessage] | None:
    """The schema-driven request message class for ``api_key``, or None if unknown."""
    return _classes.REQUESTS.get(api_key)


def response_class(api_key: int) -> type[ApiMessage] | None:
    """The schema-driven response message class for ``api_key``, or None if unknown."""
    return _classes.RESPONSES.get(api_key)


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether (key, version) uses the flexible encoding (compact types, tagged fields)."""
    flex = _classes.FLEXIBLE_FROM.get(api_key)
    return flex is not None and api_version >= flex
