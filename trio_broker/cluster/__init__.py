"""A whole test cluster in one process: N broker endpoints, leader moves, fault injection.

``open_cluster`` (Trio), ``serve_cluster`` (a Trio task like ``serve``), ``Cluster`` (its
controls); ``trio_broker.testing.ThreadedCluster`` runs one for synchronous code.
"""

from .runtime import BrokerAddress, Cluster, open_cluster, serve_cluster

__all__ = ["BrokerAddress", "Cluster", "open_cluster", "serve_cluster"]
