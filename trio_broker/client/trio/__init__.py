"""The client core driven by Trio: ``Producer``, ``Consumer``, ``Admin`` and their connections.

What it owns: ``producer/`` and ``consumer/`` (each in parts, as Kafka's and aiokafka's are),
``admin`` (the admin client), ``connection`` (one broker connection: reader and writer tasks
around the core's state machine), ``network`` (connections on demand, the metadata cache),
``offsets`` (ListOffsets routed to leaders), ``config`` (the clients' settings) and ``errors``.
The public names are re-exported by ``trio_broker.client``, which is where users import them.

May import the protocol and the client core; nothing of the broker, nor the blocking client.
"""
