"""The dispatch table from API key to handler, and the ApiVersions answer it implies.

Why a table written out: the set of handlers *is* what the broker implements, so ApiVersions
advertises exactly the keys found here (intersected with ``SUPPORTED_VERSIONS``). Every handler
module is imported by name and every entry is checked by mypy against ``Handler``; nothing
registers itself on import and nothing is optional. ApiVersions lives here because its answer is
this table (Kafka's ``ApiVersionManager``).

Why most entries are loaders: importing a handler module (and what only it uses) is a
noticeable part of a broker's start, and a broker answers nothing before it listens. Only what
every client sends first is imported with the table: ApiVersions, Metadata and Produce (a
producer's first requests, and the embedded start's first produce). Every other entry is an
``OnFirstUse``: its loader imports the module on the first request of the API (the consumer's
Fetch, offsets and group APIs, transactions, admin, configs, ACLs, quotas, cluster, SASL, SCRAM,
telemetry, KIP-848) and returns the module's handlers in a table that mypy checks against
``Handler``; from then on the entry calls the handler directly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...protocol.api_keys import SUPPORTED_VERSIONS, ApiKey, VersionRange
from ...protocol.errors import ErrorCode
from ...protocol.messages import Encoded, response_type
from ..server.bodies import ApiVersionsRequest, RequestBody, Struct
from ..server.context import HandlerContext, HandlerResult
from . import metadata, produce

Handler = Callable[[HandlerContext, RequestBody], Awaitable[HandlerResult]]


Loader = Callable[[], dict[int, Handler]]


class OnFirstUse:
    """``key``'s handler, from the table ``load`` imports when ``key`` is first requested."""

    def __init__(self, key: ApiKey, load: Loader) -> None:
        self.key = key
        self._load = load
        self._handler: Handler | None = None

    def resolve(self) -> Handler:
        if self._handler is None:
            self._handler = self._load()[self.key]
        return self._handler

    def __call__(self, ctx: HandlerContext, request: RequestBody) -> Awaitable[HandlerResult]:
        # The handler's own coroutine, not one around it: after the first request an entry
        # costs a call, no extra frame per request.
        return (self._handler or self.resolve())(ctx, request)

    def __repr__(self) -> str:
        return f"OnFirstUse({self.key.name})"


def _fetch() -> dict[int, Handler]:
    from . import fetch

    return {ApiKey.Fetch: fetch.handle_fetch}


def _offsets() -> dict[int, Handler]:
    from . import list_offsets, offsets

    return {ApiKey.ListOffsets: list_offsets.handle_list_offsets,
            ApiKey.OffsetCommit: offsets.offset_commit,
            ApiKey.OffsetFetch: offsets.offset_fetch,
            ApiKey.OffsetDelete: offsets.offset_delete}


def _leader_epochs() -> dict[int, Handler]:
    from . import leader_epochs

    return {ApiKey.OffsetForLeaderEpoch: leader_epochs.handle_offset_for_leader_epoch}


def _groups() -> dict[int, Handler]:
    from . import groups

    return {ApiKey.FindCoordinator: groups.find_coordinator,
            ApiKey.JoinGroup: groups.join_group,
            ApiKey.Heartbeat: groups.heartbeat,
            ApiKey.LeaveGroup: groups.leave_group,
            ApiKey.SyncGroup: groups.sync_group,
            ApiKey.DescribeGroups: groups.describe_groups,
            ApiKey.ListGroups: groups.list_groups,
            ApiKey.DeleteGroups: groups.delete_groups}


def _transactions() -> dict[int, Handler]:
    from . import init_producer_id, transactions

    return {ApiKey.InitProducerId: init_producer_id.handle_init_producer_id,
            ApiKey.AddPartitionsToTxn: transactions.add_partitions_to_txn,
            ApiKey.AddOffsetsToTxn: transactions.add_offsets_to_txn,
            ApiKey.EndTxn: transactions.end_txn,
            ApiKey.TxnOffsetCommit: transactions.txn_offset_commit,
            ApiKey.DescribeTransactions: transactions.describe_transactions,
            ApiKey.ListTransactions: transactions.list_transactions}


def _admin() -> dict[int, Handler]:
    from . import admin

    return {ApiKey.CreateTopics: admin.handle_create_topics,
            ApiKey.DeleteTopics: admin.handle_delete_topics,
            ApiKey.CreatePartitions: admin.handle_create_partitions}


def _sasl() -> dict[int, Handler]:
    from . import sasl

    return {ApiKey.SaslHandshake: sasl.handle_sasl_handshake,
            ApiKey.SaslAuthenticate: sasl.handle_sasl_authenticate}


def _configs() -> dict[int, Handler]:
    from . import configs

    return {ApiKey.DescribeConfigs: configs.handle_describe_configs,
            ApiKey.AlterConfigs: configs.handle_alter_configs,
            ApiKey.IncrementalAlterConfigs: configs.handle_incremental_alter_configs}


def _cluster() -> dict[int, Handler]:
    from . import cluster_admin as cluster

    return {ApiKey.ElectLeaders: cluster.handle_elect_leaders,
            ApiKey.AlterPartitionReassignments: cluster.handle_alter_partition_reassignments,
            ApiKey.ListPartitionReassignments: cluster.handle_list_partition_reassignments,
            ApiKey.DescribeCluster: cluster.handle_describe_cluster}


def _acls() -> dict[int, Handler]:
    from . import acls

    return {ApiKey.DescribeAcls: acls.handle_describe_acls,
            ApiKey.CreateAcls: acls.handle_create_acls,
            ApiKey.DeleteAcls: acls.handle_delete_acls}


def _quotas() -> dict[int, Handler]:
    from . import quotas

    return {ApiKey.DescribeClientQuotas: quotas.handle_describe_client_quotas,
            ApiKey.AlterClientQuotas: quotas.handle_alter_client_quotas}


def _scram() -> dict[int, Handler]:
    from . import scram

    return {ApiKey.DescribeUserScramCredentials: scram.handle_describe_user_scram_credentials,
            ApiKey.AlterUserScramCredentials: scram.handle_alter_user_scram_credentials}


def _describe() -> dict[int, Handler]:
    from . import describe

    return {ApiKey.DescribeLogDirs: describe.handle_describe_log_dirs,
            ApiKey.DescribeProducers: describe.handle_describe_producers,
            ApiKey.DescribeTopicPartitions: describe.handle_describe_topic_partitions}


def _telemetry() -> dict[int, Handler]:
    from . import telemetry

    return {ApiKey.GetTelemetrySubscriptions: telemetry.handle_get_telemetry_subscriptions,
            ApiKey.PushTelemetry: telemetry.handle_push_telemetry}


def _client_metrics() -> dict[int, Handler]:
    from . import client_metrics

    return {ApiKey.ListConfigResources: client_metrics.handle_list_config_resources}


def _records() -> dict[int, Handler]:
    from . import delete_records as records

    return {ApiKey.DeleteRecords: records.handle_delete_records}


def _consumer_groups() -> dict[int, Handler]:
    from . import consumer_groups

    return {ApiKey.ConsumerGroupHeartbeat: consumer_groups.handle_consumer_group_heartbeat,
            ApiKey.ConsumerGroupDescribe: consumer_groups.handle_consumer_group_describe}


def _share() -> dict[int, Handler]:
    from . import share

    return {ApiKey.ShareGroupHeartbeat: share.handle_share_group_heartbeat,
            ApiKey.ShareGroupDescribe: share.handle_share_group_describe,
            ApiKey.ShareFetch: share.handle_share_fetch,
            ApiKey.ShareAcknowledge: share.handle_share_acknowledge}


def _share_offsets() -> dict[int, Handler]:
    from . import share_offsets as offsets

    return {ApiKey.DescribeShareGroupOffsets: offsets.handle_describe_share_group_offsets,
            ApiKey.AlterShareGroupOffsets: offsets.handle_alter_share_group_offsets,
            ApiKey.DeleteShareGroupOffsets: offsets.handle_delete_share_group_offsets}


async def handle_api_versions(ctx: HandlerContext, request: ApiVersionsRequest) -> HandlerResult:
    """ApiVersions v0-v4 (an unknown version is answered by the handler pool, in v0's layout).

    v3+ names the client software (KIP-511); v4 is v3's layout, for clients that understand an
    UNSUPPORTED_VERSION answer listing the ApiVersions range."""
    if ctx.version >= 3:
        # Kafka validates the software name/version (KIP-511); a bad one is INVALID_REQUEST.
        for value in (request.client_software_name, request.client_software_version):
            if value is not None and not _valid_software_field(value):
                return ctx.response(error_code=ErrorCode.INVALID_REQUEST,
                                    api_keys=_api_version_entries(), throttle_time_ms=0)
        # KIP-714's client_software_name/version labels and match selectors
        ctx.broker.telemetry.remember_software(ctx.connection_id,
                                               request.client_software_name or "",
                                               request.client_software_version or "")
    answer = _answers.get(ctx.version)
    if answer is None:  # the same every time: encoded once per version
        answer = _answers[ctx.version] = Encoded(ctx.response(
            error_code=0, api_keys=_api_version_entries(), throttle_time_ms=0,
            **_features()), ctx.version)
    return answer


#: Kafka's features (KIP-584) this broker implements: name -> (min, max) level it supports.
#: ``transaction.version`` 2 is KIP-890 part 2 (EndTxn v5, Produce v12, TxnOffsetCommit v5);
#: ``group.version`` 1 is KIP-848's consumer group protocol; ``share.version`` 1 is KIP-932's
#: share groups; ``eligible.leader.replicas.version`` 1 is KIP-966 (its min.insync.replicas
#: rules: ``apis.configs``).
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    "transaction.version": (0, 2), "group.version": (0, 1), "share.version": (0, 1),
    "eligible.leader.replicas.version": (0, 1)}
#: the levels finalized in the cluster, as a new Kafka 4.2 cluster finalizes them: Kafka's Java
#: producer speaks transaction version 2 only where ``transaction.version`` is finalized at 2,
#: and tools read ``group.version`` / ``share.version`` to tell whether those groups are served
FINALIZED_FEATURES: dict[str, int] = {
    "transaction.version": 2, "group.version": 1, "share.version": 1,
    "eligible.leader.replicas.version": 1}
#: Kafka's is the metadata offset of the last feature change; the levels never change here,
#: and a client keeps the finalized features of the highest epoch it saw (-1: none)
FINALIZED_FEATURES_EPOCH = 0


def _features() -> dict[str, object]:
    r = response_type(ApiKey.ApiVersions)
    return {
        "supported_features": [r.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                               for n, (lo, hi) in SUPPORTED_FEATURES.items()],
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": [r.FinalizedFeatureKey(name=n, max_version_level=level,
                                                     min_version_level=level)
                               for n, level in FINALIZED_FEATURES.items()]}


#: version -> the ApiVersions answer, encoded (no quota throttles ApiVersions)
_answers: dict[int, Encoded] = {}


def _valid_software_field(value: str) -> bool:
    return bool(value) and all(c.isalnum() or c in ".-" for c in value) and (
        value[0].isalnum() and value[-1].isalnum())


#: API key -> handler. Keyed by int so the pool's lookup by a header's key is one dict get.
HANDLERS: dict[int, Handler] = {
    ApiKey.Produce: produce.handle_produce,
    ApiKey.Fetch: OnFirstUse(ApiKey.Fetch, _fetch),
    ApiKey.ListOffsets: OnFirstUse(ApiKey.ListOffsets, _offsets),
    ApiKey.Metadata: metadata.handle_metadata,
    ApiKey.OffsetCommit: OnFirstUse(ApiKey.OffsetCommit, _offsets),
    ApiKey.OffsetFetch: OnFirstUse(ApiKey.OffsetFetch, _offsets),
    ApiKey.FindCoordinator: OnFirstUse(ApiKey.FindCoordinator, _groups),
    ApiKey.JoinGroup: OnFirstUse(ApiKey.JoinGroup, _groups),
    ApiKey.Heartbeat: OnFirstUse(ApiKey.Heartbeat, _groups),
    ApiKey.LeaveGroup: OnFirstUse(ApiKey.LeaveGroup, _groups),
    ApiKey.SyncGroup: OnFirstUse(ApiKey.SyncGroup, _groups),
    ApiKey.DescribeGroups: OnFirstUse(ApiKey.DescribeGroups, _groups),
    ApiKey.ListGroups: OnFirstUse(ApiKey.ListGroups, _groups),
    ApiKey.SaslHandshake: OnFirstUse(ApiKey.SaslHandshake, _sasl),
    ApiKey.ApiVersions: handle_api_versions,
    ApiKey.CreateTopics: OnFirstUse(ApiKey.CreateTopics, _admin),
    ApiKey.DeleteTopics: OnFirstUse(ApiKey.DeleteTopics, _admin),
    ApiKey.InitProducerId: OnFirstUse(ApiKey.InitProducerId, _transactions),
    ApiKey.DescribeConfigs: OnFirstUse(ApiKey.DescribeConfigs, _configs),
    ApiKey.AlterConfigs: OnFirstUse(ApiKey.AlterConfigs, _configs),
    ApiKey.SaslAuthenticate: OnFirstUse(ApiKey.SaslAuthenticate, _sasl),
    ApiKey.CreatePartitions: OnFirstUse(ApiKey.CreatePartitions, _admin),
    ApiKey.DeleteGroups: OnFirstUse(ApiKey.DeleteGroups, _groups),
    ApiKey.OffsetDelete: OnFirstUse(ApiKey.OffsetDelete, _offsets),
    ApiKey.ElectLeaders: OnFirstUse(ApiKey.ElectLeaders, _cluster),
    ApiKey.AlterPartitionReassignments: OnFirstUse(ApiKey.AlterPartitionReassignments, _cluster),
    ApiKey.ListPartitionReassignments: OnFirstUse(ApiKey.ListPartitionReassignments, _cluster),
    ApiKey.DescribeAcls: OnFirstUse(ApiKey.DescribeAcls, _acls),
    ApiKey.DescribeClientQuotas: OnFirstUse(ApiKey.DescribeClientQuotas, _quotas),
    ApiKey.AlterClientQuotas: OnFirstUse(ApiKey.AlterClientQuotas, _quotas),
    ApiKey.CreateAcls: OnFirstUse(ApiKey.CreateAcls, _acls),
    ApiKey.DeleteAcls: OnFirstUse(ApiKey.DeleteAcls, _acls),
    ApiKey.DescribeUserScramCredentials: OnFirstUse(ApiKey.DescribeUserScramCredentials, _scram),
    ApiKey.AlterUserScramCredentials: OnFirstUse(ApiKey.AlterUserScramCredentials, _scram),
    ApiKey.DescribeCluster: OnFirstUse(ApiKey.DescribeCluster, _cluster),
    ApiKey.OffsetForLeaderEpoch: OnFirstUse(ApiKey.OffsetForLeaderEpoch, _leader_epochs),
    ApiKey.DescribeLogDirs: OnFirstUse(ApiKey.DescribeLogDirs, _describe),
    ApiKey.DescribeProducers: OnFirstUse(ApiKey.DescribeProducers, _describe),
    ApiKey.GetTelemetrySubscriptions: OnFirstUse(ApiKey.GetTelemetrySubscriptions, _telemetry),
    ApiKey.PushTelemetry: OnFirstUse(ApiKey.PushTelemetry, _telemetry),
    ApiKey.ListConfigResources: OnFirstUse(ApiKey.ListConfigResources, _client_metrics),
    ApiKey.DescribeTopicPartitions: OnFirstUse(ApiKey.DescribeTopicPartitions, _describe),
    ApiKey.IncrementalAlterConfigs: OnFirstUse(ApiKey.IncrementalAlterConfigs, _configs),
    ApiKey.AddPartitionsToTxn: OnFirstUse(ApiKey.AddPartitionsToTxn, _transactions),
    ApiKey.AddOffsetsToTxn: OnFirstUse(ApiKey.AddOffsetsToTxn, _transactions),
    ApiKey.EndTxn: OnFirstUse(ApiKey.EndTxn, _transactions),
    ApiKey.TxnOffsetCommit: OnFirstUse(ApiKey.TxnOffsetCommit, _transactions),
    ApiKey.DescribeTransactions: OnFirstUse(ApiKey.DescribeTransactions, _transactions),
    ApiKey.ListTransactions: OnFirstUse(ApiKey.ListTransactions, _transactions),
    ApiKey.DeleteRecords: OnFirstUse(ApiKey.DeleteRecords, _records),
    ApiKey.ConsumerGroupHeartbeat: OnFirstUse(ApiKey.ConsumerGroupHeartbeat, _consumer_groups),
    ApiKey.ConsumerGroupDescribe: OnFirstUse(ApiKey.ConsumerGroupDescribe, _consumer_groups),
    ApiKey.ShareGroupHeartbeat: OnFirstUse(ApiKey.ShareGroupHeartbeat, _share),
    ApiKey.ShareGroupDescribe: OnFirstUse(ApiKey.ShareGroupDescribe, _share),
    ApiKey.ShareFetch: OnFirstUse(ApiKey.ShareFetch, _share),
    ApiKey.ShareAcknowledge: OnFirstUse(ApiKey.ShareAcknowledge, _share),
    ApiKey.DescribeShareGroupOffsets: OnFirstUse(ApiKey.DescribeShareGroupOffsets,
                                                 _share_offsets),
    ApiKey.AlterShareGroupOffsets: OnFirstUse(ApiKey.AlterShareGroupOffsets, _share_offsets),
    ApiKey.DeleteShareGroupOffsets: OnFirstUse(ApiKey.DeleteShareGroupOffsets, _share_offsets),
}


def _check_versions(table: dict[int, Handler]) -> None:
    missing = [ApiKey(k).name for k in table if ApiKey(k) not in SUPPORTED_VERSIONS]
    if missing:
        raise ValueError(f"handlers without an entry in SUPPORTED_VERSIONS: {missing}")


_check_versions(HANDLERS)


#: APIs answered when asked but not advertised (none today: the KIP-714 telemetry APIs, which
#: Kafka advertises only with a client telemetry receiver, are advertised since this broker is
#: its own receiver)
UNADVERTISED: frozenset[ApiKey] = frozenset()


def advertised_versions() -> dict[ApiKey, VersionRange]:
    """What ApiVersions advertises: supported versions of every API that has a handler, except
    the ``UNADVERTISED`` ones."""
    return {k: v for k, v in SUPPORTED_VERSIONS.items()
            if int(k) in HANDLERS and k not in UNADVERTISED}


_entries: list[Struct] | None = None


def _api_version_entries() -> list[Struct]:
    global _entries
    if _entries is None:
        entry = response_type(ApiKey.ApiVersions).ApiVersion
        _entries = [entry(api_key=int(k), min_version=v.min, max_version=v.max)
                    for k, v in sorted(advertised_versions().items())]
    return _entries
