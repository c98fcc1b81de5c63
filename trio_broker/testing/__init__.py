"""The test double: a Kafka cluster for clients, in one process, with faults on command.

What it owns: ``open_cluster`` / ``serve_cluster`` / ``Cluster`` (N broker endpoints over one
storage, leader moves, broker stops; ``cluster.py``), the fault injection every node's requests
pass (``faults.py`` over ``fault_state.py``, answers written by ``fault_responses.py``), a failing
disk under the broker's own writes (``disk_faults.py``), the HTTP control API for other
processes (``control.py``), and ``ThreadedBroker`` / ``ThreadedCluster``,
which run a broker or a cluster in a thread of its own for synchronous code (``threaded.py``
over ``loop_thread.py``).

What it may import: the broker stack (``trio_broker.broker``), the client stack and the
protocol; nothing above it (the pytest plugin, the CLI and Spark use it, not the reverse).
"""

from .cluster import BrokerAddress, Cluster, open_cluster, serve_cluster
from .threaded import TEST_DEFAULTS, ThreadedBroker, ThreadedCluster

__all__ = ["TEST_DEFAULTS", "BrokerAddress", "Cluster", "ThreadedBroker", "ThreadedCluster",
           "open_cluster", "serve_cluster"]
