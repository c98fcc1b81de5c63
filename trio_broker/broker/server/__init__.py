"""The server core: what every API handler shares (Kafka's ``kafka.server`` collaborators).

``state.py`` (``BrokerState``: the broker's parts as handlers see them), ``context.py`` (the
request and handler contexts, the handler contract as a type), ``bodies.py`` (the request and
response body types handlers annotate with), ``cluster_model.py`` (nodes, replicas, leaders and
epochs: one node's or a test cluster's), ``purgatory.py`` (delayed operations), ``authz.py`` and
``authorized_operations.py`` (the authorizer's checks as handlers ask them), ``throttle.py``
(client quotas charged per request), ``telemetry_state.py`` (KIP-714 client instances).

May import the protocol, config, metrics, security, storage and the coordinators; never a
handler (``apis/``) or the network.
"""
