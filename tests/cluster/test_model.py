"""The cluster model on its own: placement, failover, leader moves, coordinator placement."""

from __future__ import annotations

from pathlib import Path

import pytest

from trio_broker.broker.config import build_config
from trio_broker.broker.coordinator.internal_topics import java_string_hash
from trio_broker.broker.server.cluster_model import (
    NO_LEADER,
    OFFSETS_TOPIC,
    ClusterModel,
    Node,
    partition_for_key,
)
from trio_broker.broker.storage import LogManager, log_config_from
from trio_broker.protocol.errors import ErrorCode


@pytest.fixture
def logs(tmp_path: Path):
    cfg = build_config({"log.dirs": str(tmp_path)})
    manager = LogManager(cfg.log_dir_list, log_config_from(cfg))
    manager.load()
    manager.create_topic("t", 3, {})
    yield manager
    manager.close()


def model(logs: LogManager, n: int = 3, **kw: object) -> ClusterModel:
    return ClusterModel([Node(i, "127.0.0.1", 9000 + i) for i in range(n)], logs,
                        default_replication=min(3, n), **kw)  # type: ignore[arg-type]


def test_java_string_hash_matches_java() -> None:
    # values of "...".hashCode() in Java
    assert java_string_hash("") == 0
    assert java_string_hash("abc") == 96354
    assert java_string_hash("polygenelubricants") == -2147483648
    assert partition_for_key("polygenelubricants", 50) == 0  # Kafka's abs(MIN_VALUE) is 0


def test_placement_spreads_leaders_over_every_node(logs: LogManager) -> None:
    m = model(logs)
    states = [m.partition("t", p) for p in range(3)]
    assert sorted(s.leader for s in states) == [0, 1, 2]
    for s in states:
        assert sorted(s.replicas) == [0, 1, 2]
        assert s.isr == s.replicas
        assert s.leader == s.replicas[0]


def test_stopping_a_leader_fails_over_with_a_new_epoch(logs: LogManager) -> None:
    m = model(logs)
    leader = m.partition("t", 0).leader
    epoch = m.leader_epoch("t", 0)
    m.stop_node(leader)
    state = m.partition("t", 0)
    assert state.leader != leader
    assert state.leader in state.isr
    assert leader not in state.isr
    assert leader in state.replicas
    assert m.leader_epoch("t", 0) == epoch + 1
    assert m.leader_error(leader, "t", 0) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert m.leader_error(state.leader, "t", 0) == 0
    m.start_node(leader)
    assert sorted(m.partition("t", 0).isr) == [0, 1, 2]
    assert m.partition("t", 0).leader == state.leader  # no preferred-leader election


def test_without_auto_failover_the_partition_goes_offline_until_its_broker_returns(
        logs: LogManager) -> None:
    m = model(logs, auto_failover=False)
    leader = m.partition("t", 1).leader
    m.stop_node(leader)
    assert m.partition("t", 1).leader == NO_LEADER
    m.start_node(leader)
    assert m.partition("t", 1).leader == leader


def test_move_leader_bumps_the_epoch_and_refuses_a_stopped_node(logs: LogManager) -> None:
    m = model(logs)
    epoch = m.leader_epoch("t", 2)
    target = next(n for n in range(3) if n != m.partition("t", 2).leader)
    assert m.move_leader("t", 2, target) == epoch + 1
    assert m.partition("t", 2).leader == target
    m.stop_node(0 if target != 0 else 1)
    with pytest.raises(ValueError, match="stopped"):
        m.move_leader("t", 2, 0 if target != 0 else 1)
    with pytest.raises(ValueError, match="no broker 7"):
        m.move_leader("t", 2, 7)
    with pytest.raises(ValueError, match="no partition"):
        m.move_leader("t", 9, 0)


def test_in_sync_replicas_shrink_with_stopped_brokers(logs: LogManager) -> None:
    m = model(logs)
    assert m.in_sync("t", 0) == 3
    m.stop_node(0)
    m.stop_node(1)
    assert m.in_sync("t", 0) == 1


def test_coordinator_is_the_leader_of_the_keys_internal_partition(logs: LogManager) -> None:
    m = model(logs)
    p = partition_for_key("g1", 50)
    leader = m.partition(OFFSETS_TOPIC, p).leader
    assert m.coordinator_for(0, "g1") == leader
    m.stop_node(leader)
    assert m.coordinator_for(0, "g1") not in (leader, NO_LEADER)


def test_one_node_answers_every_partition(logs: LogManager) -> None:
    m = ClusterModel([Node(5, "h", 1)], logs)
    assert m.partition("t", 0).replicas == [5]
    assert m.partition("t", 0).isr == [5]
    assert m.leader_error(5, "t", 0) == 0
    assert m.coordinator_for(1, "any") == 5
    assert m.in_sync("t", 0) == 1


def test_node_ports_count_up_from_the_first_listeners() -> None:
    from trio_broker.testing.cluster import _node_configs

    cfg = build_config({"listeners": "PLAINTEXT://127.0.0.1:19092"})
    configs = _node_configs(cfg, 3)
    assert [(k, c.node_id, c.listener_list[0].port) for k, c in configs.items()] == [
        (0, 0, 19092), (1, 1, 19093), (2, 2, 19094)]
    free = _node_configs(build_config({"listeners": "PLAINTEXT://127.0.0.1:0"}), 2)
    assert [c.listener_list[0].port for c in free.values()] == [0, 0]
