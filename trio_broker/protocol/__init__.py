"""The Kafka wire protocol, sans-IO: framing, headers, message bodies, record batches.

What it owns: framing (``framing``: size-prefixed frames, the size checked before anything is
buffered); request and response headers and bodies (``messages`` and ``api_keys``, the facade
the rest of the package calls; bodies defined as data in ``schema`` and ``schemas/``, compiled
per API version by ``codec`` over ``decoder`` and ``encoder``, typed by the generated
``message_types``); record batches (``batch``, ``records``, ``control`` for transaction
markers, ``compression``, ``crc``; the v0/v1 formats in ``legacy`` and ``conversion``); the
consumer protocol's payloads (``consumer_protocol``); error codes and the protocol's exceptions
(``errors``); Kafka's version ranges (``versions``).

What it may import: nothing else of trio_broker, and never trio, sockets or ssl
(``tests/test_structure.py``): the broker, both clients and the tools all stand on it.
"""
