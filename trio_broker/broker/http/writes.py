"""The console's writes, each one Kafka request through the console's client, each logged.

Why through the protocol: a topic created from the page goes through CreateTopics with the
same validation (Kafka's names, configs and messages) as one created by any client, and a
later authorizer sees the user who logged in. Every write leaves one INFO line on the
``trio_broker.broker.http.audit`` logger: who (the SASL user, or "(no login)"), from where,
what, and how it ended.

Offsets are reset the way ``kafka-consumer-groups --reset-offsets`` does it: only while the
group has no members (Kafka's message otherwise), with the target offset clamped to the
partition's range, committed by OffsetCommit outside any generation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ...client.core.admin import NewTopic
from ...client.core.errors import describe_code, error_for
from ...client.core.metadata import TopicInfo
from ...client.core.offsets import offset_commit_request, parse_offset_commit
from ...client.core.structs import OffsetAndMetadata, TopicPartition
from ...client.trio.consumer.coordinator_lookup import CoordinatorLookup
from ...protocol.api_keys import ApiKey
from .reads import KafkaView

AUDIT = logging.getLogger("trio_broker.broker.http.audit")

RESET_TARGETS = ("earliest", "latest", "offset", "timestamp", "shift")


def audit(who: str, address: str, action: str, outcome: str) -> None:
    AUDIT.info("console write: user=%s from=%s %s: %s", who, address, action, outcome)


def parse_configs(text: str) -> dict[str, str]:
    """``key=value`` lines (blank lines and ``#`` comments skipped) -> configs."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, equals, value = line.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"config line {line!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


async def create_topic(view: KafkaView, name: str, partitions: int | None,
                       configs: Mapping[str, str]) -> None:
    await view.admin.create_topics([NewTopic(name, partitions or -1, -1, dict(configs))])


async def delete_topic(view: KafkaView, name: str) -> None:
    await view.admin.delete_topics([name])


async def alter_configs(view: KafkaView, name: str, configs: Mapping[str, str]) -> None:
    """AlterConfigs: the topic's overrides become exactly ``configs``."""
    await view.admin.alter_topic_configs(name, dict(configs))


async def add_partitions(view: KafkaView, name: str, total: int) -> None:
    await view.admin.create_partitions({name: total})


async def delete_group(view: KafkaView, group_id: str) -> None:
    await view.admin.delete_groups([group_id])


async def reset_offsets(view: KafkaView, group_id: str, info: TopicInfo,
                        partition: int | None, target: str, value: int = 0,
                        ) -> dict[TopicPartition, int]:
    """Commit new offsets for ``info``'s partitions (or one); returns them."""
    description = await view.describe_group(group_id)
    if description.state not in ("Empty", "Dead"):
        raise ValueError(f"Assignments can only be reset if the group '{group_id}' is "
                         f"inactive, but the current state is {description.state}.")
    if target not in RESET_TARGETS:
        raise ValueError(f"unknown reset target {target!r}")
    if partition is not None and partition not in info.partitions:
        raise ValueError(f"topic {info.name!r} has no partition {partition}")
    numbers = sorted(info.partitions) if partition is None else [partition]
    chosen = TopicInfo(info.name, info.error, info.internal,
                       [info.partitions[n] for n in numbers])
    bounds = await view.start_end([chosen])
    wanted: dict[TopicPartition, int] = {}
    if target == "timestamp":
        by_time = await view.offsets([chosen], value)
    if target == "shift":
        committed = await view.admin.list_consumer_group_offsets(group_id)
    for tp, found in sorted(bounds.items()):
        if found.error:
            raise error_for(found.error, f"offsets of {tp}: {describe_code(found.error)}")
        if target == "earliest":
            offset = found.start
        elif target == "latest":
            offset = found.end
        elif target == "offset":
            offset = value
        elif target == "timestamp":
            code, offset = by_time[tp]
            offset = found.end if code or offset < 0 else offset
        else:
            current = committed.get(tp)
            offset = (current.offset if current is not None else found.end) + value
        wanted[tp] = min(max(offset, found.start), found.end)
    lookup = CoordinatorLookup(view.client, group_id)
    response = await lookup.request(ApiKey.OffsetCommit, lambda v: offset_commit_request(
        v, group_id, {tp: OffsetAndMetadata(offset, "") for tp, offset in wanted.items()}))
    for tp, code in parse_offset_commit(response).items():
        if code:
            raise error_for(code, f"committing {tp} for group {group_id!r}: "
                            f"{describe_code(code)}")
    return wanted
