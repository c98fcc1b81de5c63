"""A share consumer in a process of its own (so a test can SIGKILL it while it holds records):
``python -m tests.share.share_member BOOTSTRAP GROUP TOPIC`` joins in explicit acknowledgement
mode, prints one JSON line with the offsets of the first records it gets, and then holds them
without acknowledging until it is killed."""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import ShareConsumer


def main(bootstrap: str, group: str, topic: str) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    print(json.dumps({"ev": "joined"}), flush=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        messages = [m for m in consumer.poll(0.5) if m.error() is None]
        if messages:
            print(json.dumps({"ev": "held", "offsets": [m.offset() for m in messages]}),
                  flush=True)
            time.sleep(120)  # holds its acquisition locks until SIGKILL
    sys.exit(1)


if __name__ == "__main__":
    main(*sys.argv[1:4])
