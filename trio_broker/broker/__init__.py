"""The broker stack: everything that serves Kafka's protocol from this process.

Lowest first, each part importing only the ones before it (``tests/test_structure.py``):

- ``config/``, ``metrics/``, ``security/``, ``offload.py``: the broker's configuration (Kafka's
  keys as data), its metrics registry and request timings, TLS, SASL, ACLs and client quotas;
  blocking file work off the event loop.
- ``storage/``: partition logs on disk (segments, indexes, append, read, retention, compaction,
  recovery). Plain synchronous code.
- ``coordinator/``: consumer groups (classic and KIP-848), committed offsets, transactions.
- ``server/``: the core every handler shares: ``BrokerState``, the request and handler contexts,
  the cluster model, the purgatory, authorization and throttling.
- ``apis/``: one handler per Kafka API and the dispatch table.
- ``network/``, ``http/``, ``metrics/collectors/``: Kafka's SocketServer in Trio (acceptors,
  processors, the request channel, the handler pool) and the metrics and health endpoint; the
  web console; the metrics read from the broker's state when scraped.
- ``lifecycle.py``: ``serve`` / ``open_broker`` start the parts in one nursery and stop them in
  Kafka's order.

It may import the protocol and the client stack (the console is a client of the broker's own
listener); never the test double or the faces. This module imports none of them, so importing
one part does not import the others.
"""

import importlib as _importlib
import warnings as _warnings
from typing import Any as _Any


def __getattr__(name: str) -> _Any:
    # ``trio_broker.broker`` was the lifecycle module: its names keep working for one release
    lifecycle = _importlib.import_module(f"{__name__}.lifecycle")
    try:
        value = getattr(lifecycle, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    _warnings.warn(f"trio_broker.broker.{name} moved to trio_broker.broker.lifecycle.{name} "
                   "(or trio_broker.{name}); the old path goes away in the next release",
                   DeprecationWarning, stacklevel=2)
    return value
