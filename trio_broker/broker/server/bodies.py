"""The message bodies handlers take and return, named in one place.

Why one module: bodies come from the protocol codec (``protocol.messages``), whose message
classes are not yet typed per API. Every handler annotates its request with its API's alias
here, so when the codec gives each API a typed class only these lines change, and mypy then
checks every field a handler reads or sets.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from ...protocol.messages import ApiMessage

#: A response body, as ``protocol.messages.make_response`` builds it.
ResponseBody: TypeAlias = ApiMessage
#: A decoded request body of any API (``protocol.messages.decode_request_body``).
RequestBody: TypeAlias = Any

ProduceRequest: TypeAlias = RequestBody
FetchRequest: TypeAlias = RequestBody
ListOffsetsRequest: TypeAlias = RequestBody
MetadataRequest: TypeAlias = RequestBody
OffsetCommitRequest: TypeAlias = RequestBody
OffsetFetchRequest: TypeAlias = RequestBody
FindCoordinatorRequest: TypeAlias = RequestBody
JoinGroupRequest: TypeAlias = RequestBody
HeartbeatRequest: TypeAlias = RequestBody
LeaveGroupRequest: TypeAlias = RequestBody
SyncGroupRequest: TypeAlias = RequestBody
DescribeGroupsRequest: TypeAlias = RequestBody
ListGroupsRequest: TypeAlias = RequestBody
SaslHandshakeRequest: TypeAlias = RequestBody
ApiVersionsRequest: TypeAlias = RequestBody
CreateTopicsRequest: TypeAlias = RequestBody
DeleteTopicsRequest: TypeAlias = RequestBody
InitProducerIdRequest: TypeAlias = RequestBody
DescribeConfigsRequest: TypeAlias = RequestBody
AlterConfigsRequest: TypeAlias = RequestBody
SaslAuthenticateRequest: TypeAlias = RequestBody
CreatePartitionsRequest: TypeAlias = RequestBody
DeleteGroupsRequest: TypeAlias = RequestBody
OffsetDeleteRequest: TypeAlias = RequestBody
DescribeClusterRequest: TypeAlias = RequestBody
DescribeUserScramCredentialsRequest: TypeAlias = RequestBody
AlterUserScramCredentialsRequest: TypeAlias = RequestBody
ElectLeadersRequest: TypeAlias = RequestBody
AlterPartitionReassignmentsRequest: TypeAlias = RequestBody
ListPartitionReassignmentsRequest: TypeAlias = RequestBody
OffsetForLeaderEpochRequest: TypeAlias = RequestBody
DescribeLogDirsRequest: TypeAlias = RequestBody
DescribeProducersRequest: TypeAlias = RequestBody
GetTelemetrySubscriptionsRequest: TypeAlias = RequestBody
PushTelemetryRequest: TypeAlias = RequestBody
DescribeTopicPartitionsRequest: TypeAlias = RequestBody

#: An element of a request or response array (a topic, a partition, a member): the codec's
#: nested struct classes, built through ``protocol.messages.response_type``.
Struct: TypeAlias = Any
