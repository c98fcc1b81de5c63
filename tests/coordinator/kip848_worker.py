"""One confluent-kafka consumer in its own process, for tests that must kill a member.

``python -m tests.coordinator.kip848_worker BOOTSTRAP GROUP TOPIC NAME PROTOCOL [INSTANCE]``
consumes until SIGTERM (then closes: commit, leave) or SIGKILL, and writes one JSON line per
event to stdout, stamped with ``time.monotonic()`` (one clock for every process of the host, so
the parent can order events of different members):

    {"t": ..., "ev": "assign" | "revoke" | "lost", "parts": [...]}   from the callbacks
    {"t": ..., "ev": "records", "values": [...]}                     consumed, then committed
    {"t": ..., "ev": "committed", "offsets": {"partition": offset}}  what the commit stored
    {"t": ..., "ev": "commit_failed", "error": "..."}
    {"t": ..., "ev": "closed"}
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

import confluent_kafka


def emit(event: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"t": time.monotonic(), "ev": event, **fields}) + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    bootstrap, group, topic, name, protocol = argv[:5]
    instance = argv[5] if len(argv) > 5 else None
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "group.protocol": protocol, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
            "fetch.queue.backoff.ms": 1}
    if protocol == "classic":
        # librdkafka's default assignors (range, roundrobin) are eager: any rebalance revokes
        # everything, so the callbacks show every one. The session outlasts a broker restart
        # on a loaded machine (librdkafka rejoins when its own session clock runs out).
        conf.update({"session.timeout.ms": 30000, "heartbeat.interval.ms": 1000})
    if instance is not None:
        conf["group.instance.id"] = instance
    c = confluent_kafka.Consumer(conf)

    def on_assign(_c: object, parts: list) -> None:
        emit("assign", parts=sorted(p.partition for p in parts))

    def on_revoke(_c: object, parts: list) -> None:
        emit("revoke", parts=sorted(p.partition for p in parts))

    def on_lost(_c: object, parts: list) -> None:
        emit("lost", parts=sorted(p.partition for p in parts))

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    try:
        while not stopping.is_set():
            msgs = c.consume(num_messages=2000, timeout=0.1)
            good = [m for m in msgs if m.error() is None]
            if not good:
                continue
            emit("records", values=[m.value().decode() for m in good])
            try:
                stored = c.commit(asynchronous=False) or []
            except confluent_kafka.KafkaException as exc:
                emit("commit_failed", error=str(exc))
            else:
                emit("committed", offsets={str(tp.partition): tp.offset for tp in stored
                                           if tp.error is None and tp.offset >= 0})
    finally:
        c.close()
        emit("closed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
