"""The blocking client's administrative calls beyond topics: config changes, record deletion,
group and offset deletion, the cluster's description.

Why a class of its own under ``BlockingClient``: these are the calls the operator's tools make
(``configs``, ``delete-records``, ``groups delete``, ``cluster``) and nothing on a data path
needs them; ``client.py`` keeps the data path's calls. Where each request goes follows Kafka's
admin client: configs of a broker to that broker, topic configs to any broker, DeleteRecords to
each partition's leader, group calls to the group's coordinator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..core import admin as admin_requests
from ..core import groups as group_requests
from ..core import share_groups as share_requests
from ..core.admin import BROKER_RESOURCE, ClusterDescription
from ..core.errors import KafkaError, error_for, error_name
from ..core.share_groups import SharePartitionOffset
from ..core.structs import TopicPartition
from .cluster import COORDINATOR_ERRORS, LEADER_ERRORS, Cluster


class AdminCalls(Cluster):
    """Config changes, DeleteRecords, DeleteGroups, OffsetDelete, DescribeCluster, share
    groups (ShareGroupDescribe and the share group offset APIs)."""

    # --- configs -------------------------------------------------------------------------

    def incremental_alter_configs(self, resource_type: int, name: str,
                                  changes: Sequence[tuple[str, int, str | None]], *,
                                  validate_only: bool = False) -> None:
        """Set, delete, append to or subtract from config values (``ConfigOperation``); a
        broker's configs go to that broker (``name`` is its id; ``""`` is the cluster-wide
        default, answered by any broker)."""
        if resource_type == BROKER_RESOURCE and name:
            conn = self.connection(int(name))
        else:
            conn = self.any_connection()
        body = conn.request(ApiKey.IncrementalAlterConfigs, lambda v: (
            admin_requests.incremental_alter_configs_request(v, resource_type, name, changes,
                                                             validate_only=validate_only)))
        for resource, code, message in admin_requests.parse_incremental_alter_configs(body):
            if code:
                what = f"broker {resource}" if resource_type == BROKER_RESOURCE else (
                    f"topic {resource!r}")
                raise error_for(code, f"cannot alter the configs of {what}: {error_name(code)}"
                                + (f": {message}" if message else ""))

    # --- records -------------------------------------------------------------------------

    def delete_records(self, offsets: Mapping[TopicPartition, int], *, timeout_ms: int = 30_000,
                       ) -> dict[TopicPartition, tuple[int, int]]:
        """Delete the records below each offset (-1: all of them), one request per leader:
        {partition: (error code, new log start offset)}, as Kafka's admin client reports each
        partition on its own. Leadership errors and lost connections are retried."""
        pending = {TopicPartition(*tp): offset for tp, offset in offsets.items()}
        result: dict[TopicPartition, tuple[int, int]] = {}

        def attempt() -> None:
            retry: KafkaError | None = None
            for conn, tps in self.by_leader(pending).values():
                asked = {(tp.topic, tp.partition): pending[tp] for tp in tps}

                def build(version: int, asked: dict[tuple[str, int], int] = asked) -> Any:
                    return admin_requests.delete_records_request(version, asked,
                                                                 timeout_ms=timeout_ms)

                body = conn.request(ApiKey.DeleteRecords, build,
                                    timeout_s=self.timeout_s + timeout_ms / 1000)
                answers = admin_requests.parse_delete_records(body)
                for tp in tps:
                    code, low = answers.get((tp.topic, tp.partition),
                                            (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1))
                    if code in LEADER_ERRORS:
                        retry = error_for(code, f"DeleteRecords for {tp}: {error_name(code)}")
                        continue
                    result[tp] = (code, low)
                    del pending[tp]
            if retry is not None:
                raise retry

        if pending:
            self.retrying("DeleteRecords", attempt)
        return result

    # --- groups --------------------------------------------------------------------------

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        """DeleteGroups at each group's coordinator: {group: error code} (0 when deleted;
        NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND when there is none)."""
        out: dict[str, int] = {}
        for group_id in group_ids:
            def attempt(group_id: str = group_id) -> int:
                body = self.coordinator(group_id).request(
                    ApiKey.DeleteGroups,
                    lambda v: group_requests.delete_groups_request(v, [group_id]))
                code = group_requests.parse_delete_groups(body).get(
                    group_id, ErrorCode.UNKNOWN_SERVER_ERROR)
                if code in COORDINATOR_ERRORS:
                    raise error_for(code, f"group {group_id!r}: {error_name(code)}")
                return code

            def forget(_: KafkaError, group_id: str = group_id) -> None:
                self.forget_coordinator(group_id)

            out[group_id] = self.retrying(f"DeleteGroups {group_id!r}", attempt,
                                          on_retry=forget)
        return out

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition],
                       ) -> dict[TopicPartition, int]:
        """OffsetDelete: {partition: error code} (GROUP_SUBSCRIBED_TO_TOPIC for a partition of
        a topic the group's members still read); a group-level error (GROUP_ID_NOT_FOUND)
        is raised."""
        wanted = [TopicPartition(*tp) for tp in partitions]

        def build(version: int) -> Any:
            return group_requests.offset_delete_request(version, group_id, wanted)

        body = self._group_request(group_id, ApiKey.OffsetDelete, build,
                                   lambda b: b.error_code)
        code, codes = group_requests.parse_offset_delete(body)
        if code:
            raise error_for(code, f"cannot delete offsets of group {group_id!r}: "
                            f"{error_name(code)}")
        return codes

    def _group_request(self, group_id: str, api_key: int, build: Any, code_of: Any) -> Any:
        def attempt() -> Any:
            body = self.coordinator(group_id).request(api_key, build)
            code = code_of(body)
            if code in COORDINATOR_ERRORS:
                raise error_for(code, f"group {group_id!r}: {error_name(code)}")
            return body

        return self.retrying(f"group {group_id!r}", attempt,
                             on_retry=lambda _: self.forget_coordinator(group_id))

    # --- the cluster ---------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        """Cluster id, controller and brokers: DescribeCluster where the broker speaks it,
        else Metadata (which names the same three since v2)."""
        conn = self.any_connection()
        if conn.supports(ApiKey.DescribeCluster):
            found = admin_requests.parse_describe_cluster(
                conn.request(ApiKey.DescribeCluster, admin_requests.describe_cluster_request))
            if found.error:
                raise error_for(found.error, f"DescribeCluster: {error_name(found.error)}"
                                + (f": {found.error_message}" if found.error_message else ""))
            return found
        md = self.metadata([])
        return ClusterDescription(0, None, md.cluster_id, md.controller_id, [
            (b.node_id, b.host, b.port, b.rack) for b in sorted(md.brokers.values())])

    def api_versions(self, node_id: int) -> dict[int, tuple[int, int]]:
        """The API versions broker ``node_id`` advertised: {api key: (min, max)}."""
        return dict(self.connection(node_id).versions)


    # --- share groups (KIP-932) ----------------------------------------------------------

    def _share_group_call(self, group_id: str, api_key: int, build: Any,
                          code_of: Any) -> tuple[Any, int]:
        """A request to the share group's coordinator: (answer, the version it was sent at)."""
        def attempt() -> tuple[Any, int]:
            conn = self.coordinator(group_id)
            version = conn.version_for(api_key)
            body = conn.request(api_key, build(version), version=version)
            code = code_of(body)
            if code in COORDINATOR_ERRORS:
                raise error_for(code, f"group {group_id!r}: {error_name(code)}")
            return body, version

        return self.retrying(f"group {group_id!r}", attempt,
                             on_retry=lambda _: self.forget_coordinator(group_id))

    def describe_share_group(self, group_id: str) -> Any | None:
        """ShareGroupDescribe's group (state, epochs, members with their assignments), or None
        for a group that does not exist or is not a share group."""
        body, _ = self._share_group_call(
            group_id, ApiKey.ShareGroupDescribe,
            lambda v: share_requests.share_group_describe_request(v, [group_id]),
            lambda b: b.groups[0].error_code)
        [described] = body.groups
        if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return None
        if described.error_code:
            raise error_for(described.error_code, f"ShareGroupDescribe {group_id!r}: "
                            f"{error_name(described.error_code)}"
                            + (f" ({described.error_message})" if described.error_message
                               else ""))
        return described

    def share_group_offsets(self, group_id: str,
                            partitions: Iterable[TopicPartition] | None = None,
                            ) -> dict[TopicPartition, SharePartitionOffset]:
        """Each share-partition's start offset and lag (None: every one the group has
        initialized)."""
        body, version = self._share_group_call(
            group_id, ApiKey.DescribeShareGroupOffsets,
            lambda v: share_requests.describe_share_group_offsets_request(v, group_id,
                                                                          partitions),
            lambda b: b.groups[0].error_code)
        code, message, offsets = share_requests.parse_describe_share_group_offsets(body,
                                                                                 version)
        if code:
            raise error_for(code, f"DescribeShareGroupOffsets {group_id!r}: {error_name(code)}"
                            + (f" ({message})" if message else ""))
        return offsets

    def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int],
                                  ) -> dict[TopicPartition, int]:
        """Set share-partition start offsets of an empty share group: an error code by
        partition; a refusal of the whole request (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, ...)
        raises."""
        body, _ = self._share_group_call(
            group_id, ApiKey.AlterShareGroupOffsets,
            lambda v: share_requests.alter_share_group_offsets_request(v, group_id, offsets),
            lambda b: b.error_code)
        code, message, codes = share_requests.parse_alter_share_group_offsets(body)
        if code:
            raise error_for(code, message or f"AlterShareGroupOffsets {group_id!r}: "
                            f"{error_name(code)}")
        return codes

    def delete_share_group_offsets(self, group_id: str, topics: Iterable[str],
                                   ) -> dict[str, tuple[int, str | None]]:
        """Forget an empty share group's state of whole topics: (error code, message) by
        topic; a refusal of the whole request raises."""
        body, _ = self._share_group_call(
            group_id, ApiKey.DeleteShareGroupOffsets,
            lambda v: share_requests.delete_share_group_offsets_request(v, group_id, topics),
            lambda b: b.error_code)
        code, message, results = share_requests.parse_delete_share_group_offsets(body)
        if code:
            raise error_for(code, message or f"DeleteShareGroupOffsets {group_id!r}: "
                            f"{error_name(code)}")
        return results


__all__ = ["AdminCalls"]
