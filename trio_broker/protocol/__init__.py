"""The Kafka wire protocol, sans-IO: framing, headers, message bodies, record batches.

Nothing here imports trio or touches a socket. Message bodies are defined as data
(``schema``, ``schemas/``) and compiled into codecs on first use (``codec``); the facade the rest
of the broker calls is ``messages`` and ``api_keys``.
"""
