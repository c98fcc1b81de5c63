"""The cluster as clients see it: broker nodes, and per partition its replicas, ISR and leader.

Why a model and not replication: every node of a test cluster shares one storage (one
``LogManager``, one group coordinator, one transaction coordinator), so there is nothing to copy.
What a client can observe of a real cluster is modelled faithfully instead: which nodes are up,
which node leads each partition under which leader epoch, which replicas are in sync, and which
node coordinates each group and transactional id. The handlers ask this model how the node that
received a request would answer (``leader_error``, ``coordinator_for``), so a client meets the
errors a Kafka cluster gives (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, NOT_COORDINATOR,
NOT_ENOUGH_REPLICAS) and has to follow leaders as it would against Kafka.

Placement is Kafka's: replicas of partition p of a topic are ``replication.factor`` consecutive
nodes starting at ``(hash(topic) + p) % N`` (Kafka starts at a random node; a stable hash keeps a
test repeatable), the leader is the first in-sync replica, and a group's (a transactional id's)
coordinator is the leader of the ``__consumer_offsets`` (``__transaction_state``) partition its
key hashes to (Java's ``String.hashCode``), as in Kafka. Before the internal topics exist
(``coordinator/internal_topics.py`` makes them on first use) their partitions' leader epochs
live in the model. A partition's leader epoch is its log's
(``Log.become_leader``, durable in ``leader-epoch-checkpoint``), so it survives restarts.

A single broker is the one-node case: every partition has the replicas ``[node]``, the ISR
``[node]`` and the leader ``node``, and every check answers "no error".
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

import attrs

from ...protocol.errors import ErrorCode
from ..coordinator.internal_topics import OFFSETS_TOPIC, TRANSACTION_TOPIC, partition_for_key
from ..storage import LogManager

#: FindCoordinator's key types (``key_type``)
GROUP_KEY, TRANSACTION_KEY = 0, 1

NO_LEADER = -1
#: ``replica.selector.class`` that sends a consumer to a replica in its own rack (KIP-392)
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@attrs.define
class Node:
    """One broker of the cluster and its endpoints: ``host``/``port`` are its first listener's,
    ``endpoints`` every listener's, by name."""

    node_id: int
    host: str
    port: int
    alive: bool = True
    #: listener name -> the (host, port) advertised to a client connected to that listener
    endpoints: dict[str, tuple[str, int]] = attrs.field(factory=dict)
    #: ``broker.rack``: Metadata and DescribeCluster name it, rack-aware placement reads it
    rack: str | None = None

    def endpoint(self, listener: str) -> tuple[str, int]:
        """(host, port) this node is named by to a client whose request arrived on ``listener``:
        Kafka answers with the advertised endpoint of the request's own listener, so a client
        bootstrapped on a SASL port is never sent to the PLAINTEXT one. A name the node does not
        listen on (a hand-built request context) gets the first listener's."""
        return self.endpoints.get(listener, (self.host, self.port))


@attrs.define
class PartitionState:
    """Kafka's ``PartitionRegistration``, without the parts a client cannot see."""

    replicas: list[int]
    isr: list[int]
    leader: int
    #: the leader epoch of an internal partition (a partition with a log uses the log's)
    epoch: int = 0


class ClusterModel:
    """Nodes, partition leadership and coordinator placement of one (possibly one-node) cluster.

    Partition states are made on first use from the placement rule and kept from then on, so a
    leader moved or failed over stays where it went. Every method runs in the broker's Trio
    thread (the cluster's blocking controls call in through ``trio.from_thread``).
    """

    def __init__(self, nodes: Iterable[Node], logs: LogManager, *, default_replication: int = 1,
                 offsets_partitions: int = 50, offsets_replication: int = 3,
                 transaction_partitions: int = 50, transaction_replication: int = 3,
                 auto_failover: bool = True) -> None:
        self.nodes: dict[int, Node] = {n.node_id: n for n in nodes}
        self.logs = logs
        self.auto_failover = auto_failover
        self.default_replication = default_replication
        self._internal = {OFFSETS_TOPIC: (offsets_partitions, offsets_replication),
                          TRANSACTION_TOPIC: (transaction_partitions, transaction_replication)}
        self._replication: dict[str, int] = {}
        self._partitions: dict[tuple[str, int], PartitionState] = {}
        #: whether this is a test cluster's model (a cluster of more than one node, or one
        #: opened as a cluster): its nodes check leadership and write each answer on its own
        self.intercepting = False

    @property
    def single(self) -> bool:
        return len(self.nodes) == 1

    @property
    def size(self) -> int:
        return len(self.nodes)

    def controller_id(self, asking: int) -> int:
        """The node named as controller: the lowest live one (``asking`` when it is alone)."""
        live = [n.node_id for n in self.nodes.values() if n.alive]
        return min(live) if live else asking

    def live_nodes(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.alive]

    def live_endpoints(self, listener: str) -> list[tuple[int, str, int]]:
        """(node id, host, port) of every live node, as named on ``listener``."""
        return [(n.node_id, *n.endpoint(listener)) for n in self.nodes.values() if n.alive]

    def live_brokers(self, listener: str) -> tuple[tuple[int, str, int, str | None], ...]:
        """(node id, host, port, rack) of every live node, as named on ``listener``."""
        return tuple((n.node_id, *n.endpoint(listener), n.rack)
                     for n in self.nodes.values() if n.alive)

    @property
    def racked(self) -> bool:
        """Whether every node has a rack: replicas are then placed rack-aware (Kafka refuses a
        rack-aware placement over brokers of which only some have a rack)."""
        return len(self.nodes) > 1 and all(n.rack for n in self.nodes.values())

    def rack_of(self, node_id: int) -> str | None:
        """The node's ``broker.rack`` (None: unset, or no such node)."""
        node = self.nodes.get(node_id)
        return None if node is None else node.rack

    def node(self, node_id: int) -> Node:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise ValueError(f"no broker {node_id} in this cluster "
                             f"(nodes {sorted(self.nodes)})") from None

    # -- topics ----------------------------------------------------------------------------
    def set_replication(self, topic: str, factor: int) -> None:
        """A topic was created with ``factor`` replicas per partition (CreateTopics)."""
        self._replication[topic] = max(1, min(factor, self.size))
        for key in [k for k in self._partitions if k[0] == topic]:
            del self._partitions[key]

    def topic_changed(self, topic: str, partitions: int) -> None:
        """A topic now has ``partitions`` partitions (0: deleted): forget the states of the
        others, so a topic created again under that name is placed afresh."""
        for key in [k for k in self._partitions if k[0] == topic and k[1] >= partitions]:
            del self._partitions[key]
        if not partitions:
            self._replication.pop(topic, None)

    def replication_of(self, topic: str) -> int:
        if topic in self._internal:
            return min(self._internal[topic][1], self.size)
        return self._replication.get(topic, max(1, min(self.default_replication, self.size)))

    def partition(self, topic: str, partition: int) -> PartitionState:
        """The partition's replicas, ISR and leader (made from the placement rule on first use)."""
        key = (topic, partition)
        state = self._partitions.get(key)
        if state is None:
            state = self._partitions[key] = self._place(topic, partition)
        return state

    def _place(self, topic: str, partition: int) -> PartitionState:
        ids = sorted(self.nodes)
        n = len(ids)
        start = (zlib.crc32(topic.encode()) + partition) % n
        replicas = [ids[(start + i) % n] for i in range(self.replication_of(topic))]
        if self.racked:
            replicas = rack_aware_replicas({i: self.nodes[i].rack or "" for i in ids},
                                           zlib.crc32(topic.encode()), partition,
                                           self.replication_of(topic))
        isr = [r for r in replicas if self.nodes[r].alive]
        return PartitionState(replicas, isr, isr[0] if isr else NO_LEADER)

    def assign(self, topic: str, partition: int, replicas: list[int]) -> None:
        """A new partition with an explicit assignment (CreateTopics, CreatePartitions): those
        replicas, the live ones in sync, the first live one leading, as Kafka's controller
        registers it."""
        isr = [r for r in replicas if self.nodes[r].alive]
        self._partitions[(topic, partition)] = PartitionState(list(replicas), isr,
                                                              isr[0] if isr else NO_LEADER)

    def reassign(self, topic: str, partition: int, replicas: list[int]) -> None:
        """A reassignment, complete at once (the storage is shared: nothing to copy): the
        replicas become ``replicas``; a leader that is not one of them gives way to the first
        live one (leader epoch + 1)."""
        state = self.partition(topic, partition)
        state.replicas = list(replicas)
        state.isr = [r for r in replicas if self.nodes[r].alive]
        if state.leader not in state.isr:
            state.leader = state.isr[0] if state.isr else NO_LEADER
            self._bump_epoch(topic, partition, state)

    def leader_epoch(self, topic: str, partition: int) -> int:
        log = self.logs.get_log(topic, partition)
        return self.partition(topic, partition).epoch if log is None else log.leader_epoch

    def _bump_epoch(self, topic: str, partition: int, state: PartitionState) -> None:
        log = self.logs.get_log(topic, partition)
        if log is None:
            state.epoch += 1
        else:
            log.become_leader(log.leader_epoch + 1)

    def _all_partitions(self) -> list[tuple[str, int]]:
        keys = [(t, p) for t, n in self.logs.topics().items() for p in range(n)]
        keys += [(t, p) for t, (n, _) in self._internal.items() for p in range(n)]
        return list(dict.fromkeys(keys))

    # -- what a node answers ---------------------------------------------------------------
    def leader_error(self, node_id: int, topic: str, partition: int) -> int:
        """NOT_LEADER_OR_FOLLOWER when ``node_id`` does not lead the partition, else 0."""
        if self.single:
            return 0
        leader = self.partition(topic, partition).leader
        return 0 if leader == node_id else ErrorCode.NOT_LEADER_OR_FOLLOWER

    def leader_of(self, topic: str, partition: int) -> tuple[int, int]:
        """(leader node id or -1, leader epoch): the current-leader hint of KIP-951."""
        return self.partition(topic, partition).leader, self.leader_epoch(topic, partition)

    def in_sync(self, topic: str, partition: int) -> int:
        """How many replicas are in sync (``min.insync.replicas`` is checked against this)."""
        return len(self.partition(topic, partition).isr)

    def serves_reads(self, node_id: int, topic: str, partition: int) -> bool:
        """Whether ``node_id`` is an in-sync replica of the partition: a follower answers a
        consumer's fetch (KIP-392) from the shared storage, up to the high watermark."""
        return node_id in self.partition(topic, partition).isr

    def preferred_read_replica(self, node_id: int, topic: str, partition: int,
                               rack: str) -> int:
        """Kafka's ``RackAwareReplicaSelector`` as the leader ``node_id`` runs it: a live
        in-sync replica in the consumer's ``rack`` when the leader is not in it, else -1 (the
        leader itself). Kafka picks the most caught-up of them; here all are equally so."""
        state = self.partition(topic, partition)
        if not rack or state.leader != node_id or self.rack_of(node_id) == rack:
            return -1
        near = [r for r in state.isr if self.nodes[r].alive and self.nodes[r].rack == rack]
        return near[0] if near else -1

    def coordinator_for(self, key_type: int, key: str) -> int:
        """The node coordinating a group (key type 0) or a transactional id (1), or -1."""
        if self.single:
            return next(iter(self.nodes))
        topic = OFFSETS_TOPIC if key_type == GROUP_KEY else TRANSACTION_TOPIC
        return self.partition(topic, partition_for_key(key, self._internal[topic][0])).leader

    # -- controls --------------------------------------------------------------------------
    def stop_node(self, node_id: int) -> None:
        """A broker went down: out of every ISR; partitions it led fail over to the next
        in-sync replica (epoch bumped), or go offline without ``auto_failover``."""
        self.node(node_id).alive = False
        for topic, p in self._all_partitions():
            state = self.partition(topic, p)
            if node_id in state.isr:
                state.isr.remove(node_id)
            if state.leader == node_id:
                state.leader = state.isr[0] if state.isr and self.auto_failover else NO_LEADER
                self._bump_epoch(topic, p, state)

    def start_node(self, node_id: int) -> None:
        """A broker came back: in sync again at once (the storage is shared), and the leader of
        every partition of its that had none."""
        self.node(node_id).alive = True
        for topic, p in self._all_partitions():
            state = self.partition(topic, p)
            if node_id in state.replicas and node_id not in state.isr:
                state.isr.append(node_id)
                state.isr.sort(key=state.replicas.index)
            if state.leader == NO_LEADER and state.isr:
                state.leader = state.isr[0]
                self._bump_epoch(topic, p, state)

    def move_leader(self, topic: str, partition: int, node_id: int) -> int:
        """Make ``node_id`` the leader (a reassignment and election in one); returns the new
        leader epoch. The node must be up; it joins the replicas if it was not one."""
        if self.logs.get_log(topic, partition) is None and topic not in self._internal:
            raise ValueError(f"no partition {topic}-{partition}")
        if not self.node(node_id).alive:
            raise ValueError(f"broker {node_id} is stopped")
        state = self.partition(topic, partition)
        if node_id not in state.replicas:
            state.replicas.append(node_id)
        if node_id not in state.isr:
            state.isr.append(node_id)
        state.leader = node_id
        self._bump_epoch(topic, partition, state)
        return self.leader_epoch(topic, partition)


def rack_alternated(racks: dict[int, str]) -> list[int]:
    """Kafka's ``getRackAlternatedBrokerList``: the first broker of each rack (racks in name
    order, brokers in id order), then the second of each, and so on."""
    by_rack: dict[str, list[int]] = {}
    for node_id in sorted(racks):
        by_rack.setdefault(racks[node_id], []).append(node_id)
    columns = [by_rack[r] for r in sorted(by_rack)]
    return [col[i] for i in range(max(map(len, columns))) for col in columns if i < len(col)]


def rack_aware_replicas(racks: dict[int, str], seed: int, partition: int,
                        replication: int) -> list[int]:
    """The replicas of ``partition`` by Kafka's ``assignReplicasToBrokersRackAware``: leaders
    go round the rack-alternated broker list, and each further replica is the next broker (at
    a shift that grows every N partitions) on a rack without one, until every rack has one.
    Kafka draws the start index and the first shift at random; ``seed`` (the topic's hash)
    fixes both, so a test is repeatable."""
    arranged = rack_alternated(racks)
    n, num_racks = len(arranged), len(set(racks.values()))
    first = (seed + partition) % n
    shift = seed % n + partition // n
    leader = arranged[first]
    replicas, used_racks, used = [leader], {racks[leader]}, {leader}
    k = 0
    while len(replicas) < min(replication, n):
        step = 1 + (shift * num_racks + k) % (n - 1)
        broker = arranged[(first + step) % n]
        k += 1
        if ((racks[broker] not in used_racks or len(used_racks) == num_racks)
                and (broker not in used or len(used) == n)):
            replicas.append(broker)
            used_racks.add(racks[broker])
            used.add(broker)
    return replicas


def leader_endpoints(cluster: ClusterModel, endpoint_cls: Any, topics: Iterable[Any],
                     listener: str) -> list[Any]:
    """The ``node_endpoints`` of a response (KIP-951): every live leader named in a
    ``current_leader`` hint of ``topics``' partitions, as named on ``listener``."""
    named: set[int] = set()
    for t in topics:
        for p in getattr(t, "partition_responses", None) or getattr(t, "partitions", []):
            hint = getattr(p, "current_leader", None)
            if hint is not None and hint.leader_id >= 0:
                named.add(hint.leader_id)
    return [endpoint_cls(node_id=i, host=host, port=port, rack=cluster.rack_of(i))
            for i, host, port in cluster.live_endpoints(listener) if i in named]


def coordinator_address(cluster: ClusterModel, key_type: int, key: str, listener: str,
                        ) -> tuple[int, str, int, int]:
    """(node id, host, port, error) that FindCoordinator answers on ``listener`` for a key: its
    coordinator, or COORDINATOR_NOT_AVAILABLE while the coordinator's partition has no leader."""
    node_id = cluster.coordinator_for(key_type, key)
    if node_id < 0:
        return -1, "", -1, ErrorCode.COORDINATOR_NOT_AVAILABLE
    host, port = cluster.nodes[node_id].endpoint(listener)
    return node_id, host, port, ErrorCode.NONE
