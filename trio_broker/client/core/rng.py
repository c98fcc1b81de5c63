"""The client's own random generator.

Why not the global ``random``: its state is the application's (a seeded simulation, a Hypothesis
run, which fails a draw when that state moves under it), and the client draws in the background:
a keyless record's partition, the broker to ask for metadata, a backoff's jitter. The broker's
REST proxy and console draw through the client's partitioner too.
"""

from __future__ import annotations

import random

__all__ = ["CLIENT_RANDOM"]

CLIENT_RANDOM = random.Random()
