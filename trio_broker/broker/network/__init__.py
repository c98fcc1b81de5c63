"""Kafka's SocketServer in Trio: acceptors, processors, the request channel, the handler pool.

What it owns: ``socket_server`` (``SocketServer``: listeners, processors, the request channel),
``processor`` (``Processor``: a task per connection that reads a frame, stays muted while its
request is in flight and writes the answer), ``selector`` (a processor's idle plain
connections, read and answered by one task), ``acceptor`` (``Acceptor``), ``connection`` (one
connection's state), ``request_channel`` (``Request``, the response family, the bounded request
queue), ``request_handler`` (``RequestHandlerPool``: decode, dispatch through ``apis.registry``,
encode), ``quotas`` (``ConnectionQuotas``), ``sasl_session`` (one connection's SASL state and
steps), ``send_file`` (writes, and ``sendfile`` for zero-copy fetch) and ``metrics_http`` (the
metrics and health endpoint). See docs/architecture.md, "The request pipeline".

May import the handlers (``broker.apis``), the server core, storage, config, metrics, security
and the protocol; never the lifecycle, the console or the test double.
"""
