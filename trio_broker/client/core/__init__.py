"""The sans-IO client core: everything a Kafka client does except moving bytes.

Both I/O drivers drive it: the Trio client (``trio_broker.client.trio``, whose names
``trio_broker.client`` re-exports) and the blocking client (``trio_broker.client.blocking``,
for the console tools, the Spark source and tests). It imports the protocol layer and nothing
that does I/O (no trio, no sockets), and nothing of the broker::

    bootstrap    bootstrap.servers parsing, security-protocol prefixes
    versions     the client's API versions, the ApiVersions exchange, version choice
    connection   one connection's state machine: correlation ids, in-flight FIFO, framing
    security     TLS context and SASL settings from Kafka's config keys
    sasl         PLAIN, SCRAM-SHA-256/512 as steps over SaslHandshake + SaslAuthenticate
    metadata, produce, fetch, offsets, groups, admin
                 request builders and response parsers, by family
    structs      TopicPartition, offsets, broker and partition info, ListOffsets specials
    errors       one exception class per Kafka error code, with ``retriable``
    partitioner  Kafka's murmur2 and the default partitioner
    backoff      exponential backoff with jitter
"""
