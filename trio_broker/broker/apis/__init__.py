"""One handler per Kafka API (Kafka's ``KafkaApis``) and the table of them (``registry``).

What it owns: a module per API or family of APIs (``produce``, ``fetch``, ``metadata``,
``list_offsets``, ``groups``, ``offsets``, ``consumer_groups``, ``transactions``, ``admin``,
``configs``, ``acls``, ``quotas``, ``sasl``, ``scram``, ...), each turning a decoded request into
calls on the storage and the coordinators and building the response; ``registry.HANDLERS``, the
one table from API key to handler, which is also what ApiVersions advertises.

May import the server core (``broker.server``: ``BrokerState``, the contexts, the cluster model,
the purgatory, authorization, throttling), the coordinators, storage, config, security and the
protocol; never the network, the lifecycle or the test double.
"""
