"""The REST proxy's produce throughput, against confluent-kafka's in the same run.

One ``trio-broker serve`` subprocess with ``rest.proxy.listener`` set. Each round produces
``--records`` records of ``--size`` bytes (JSON string values, STRING keys) to a topic of four
partitions:

- ``v3 body``: one POST holding every record back to back (Content-Length);
- ``v3 stream``: one chunked POST, 64 KiB chunks, reports read as they come;
- ``v2``: POSTs of ``--v2-batch`` records each (``application/vnd.kafka.json.v2+json``);
- ``v3 single``: ``--single`` POSTs of one record each, one after the other, on one
  keep-alive connection (what a script or a web hook does);
- ``confluent-kafka``: a Producer (acks=all, linger.ms=5) and ``flush()``;

and then reads ``--records`` records from the beginning of the topic:

- ``v2 consume``: a consumer instance (``binary`` format) assigned every partition, records
  requests (default ``max_bytes``, ``timeout=1000``) until it has them all;
- ``confluent-kafka consume``: a Consumer assigned every partition, ``consume()`` until it has
  them all.

Each line is the median of ``--rounds`` rounds, in records/s from the first byte sent to the
last report read (or the flush's return, or the last record read).

    .venv/bin/python bench/bench_rest_proxy.py
    .venv/bin/python bench/bench_rest_proxy.py --records 20000 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

import httpx
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition


@contextlib.contextmanager
def broker_with_proxy() -> Iterator[tuple[str, str]]:
    """(bootstrap, REST proxy base URL) of a ``trio-broker serve`` subprocess."""
    with tempfile.TemporaryDirectory(prefix="bench-rest-") as data:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trio_broker", "serve",
             "--override", "listeners=PLAINTEXT://127.0.0.1:0",
             "--override", f"log.dirs={data}",
             "--override", "rest.proxy.listener=http://127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert proc.stdout is not None
            bootstrap = proxy = None
            deadline = time.monotonic() + 30
            while (bootstrap is None or proxy is None) and time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line and proc.poll() is not None:
                    raise RuntimeError("trio-broker exited before listening")
                if found := re.search(r"listening on PLAINTEXT://([\d.]+:\d+)", line):
                    bootstrap = found.group(1)
                if found := re.search(r"REST proxy on (http://[\d.]+:\d+)/", line):
                    proxy = found.group(1)
            if bootstrap is None or proxy is None:
                raise RuntimeError("trio-broker did not start within 30 s")
            threading.Thread(target=lambda: [None for _ in proc.stdout or ()],
                             daemon=True).start()
            yield bootstrap, proxy
        finally:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()


Record = dict[str, dict[str, str]]


def records(count: int, size: int) -> list[Record]:
    return [{"key": {"type": "STRING", "data": f"key-{i}"},
             "value": {"type": "STRING", "data": f"{i:0{size}d}"}} for i in range(count)]


def v3_body(rest: httpx.Client, url: str, batch: list[Record]) -> float:
    body = "".join(json.dumps(r) for r in batch).encode()
    started = time.perf_counter()
    answer = rest.post(url, content=body, headers={"content-type": "application/json"})
    elapsed = time.perf_counter() - started
    assert answer.status_code == 200
    assert answer.text.count('"error_code":200') == len(batch)
    return len(batch) / elapsed


def v3_stream(rest: httpx.Client, url: str, batch: list[Record]) -> float:
    body = "".join(json.dumps(r) for r in batch).encode()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 65536):
            yield body[start:start + 65536]

    started = time.perf_counter()
    answer = rest.post(url, content=chunks(), headers={"content-type": "application/json"})
    elapsed = time.perf_counter() - started
    assert answer.text.count('"error_code":200') == len(batch)
    return len(batch) / elapsed


def v2(rest: httpx.Client, url: str, batch: list[Record], per_request: int,
       ) -> float:
    bodies = [json.dumps({"records": [{"key": r["key"]["data"], "value": r["value"]["data"]}
                                      for r in batch[i:i + per_request]]})
              for i in range(0, len(batch), per_request)]
    started = time.perf_counter()
    for body in bodies:
        answer = rest.post(url, content=body,
                           headers={"content-type": "application/vnd.kafka.json.v2+json"})
        assert answer.status_code == 200
    return len(batch) / (time.perf_counter() - started)


def v3_single(rest: httpx.Client, url: str, batch: list[Record]) -> float:
    bodies = [json.dumps(r).encode() for r in batch]
    started = time.perf_counter()
    for body in bodies:
        answer = rest.post(url, content=body, headers={"content-type": "application/json"})
        assert answer.status_code == 200
    return len(batch) / (time.perf_counter() - started)


def v2_consume(rest: httpx.Client, topic: str, partitions: int, count: int,
               round_: int) -> float:
    v2 = {"content-type": "application/vnd.kafka.v2+json"}
    group = f"bench-v2-{round_}"
    assert rest.post(f"/consumers/{group}", headers=v2, content=json.dumps(
        {"name": "reader", "format": "binary"})).status_code == 200
    base = f"/consumers/{group}/instances/reader"
    try:
        assert rest.post(f"{base}/assignments", headers=v2, content=json.dumps({
            "partitions": [{"topic": topic, "partition": p} for p in range(partitions)]}),
        ).status_code == 204
        assert rest.post(f"{base}/positions/beginning", headers=v2, content=json.dumps({
            "partitions": [{"topic": topic, "partition": p} for p in range(partitions)]}),
        ).status_code == 204
        got = 0
        started = time.perf_counter()
        while got < count:
            answer = rest.get(f"{base}/records", params={"timeout": 1000},
                              headers={"accept": "application/vnd.kafka.binary.v2+json"})
            assert answer.status_code == 200, answer.text
            got += len(answer.json())
        return got / (time.perf_counter() - started)
    finally:
        rest.delete(base, headers=v2)


def native_consume(bootstrap: str, topic: str, partitions: int, count: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-native",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got = 0
        started = time.perf_counter()
        while got < count:
            got += sum(1 for m in consumer.consume(1000, timeout=1) if not m.error())
        return got / (time.perf_counter() - started)
    finally:
        consumer.close()


def native(bootstrap: str, topic: str, batch: list[Record]) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    started = time.perf_counter()
    for r in batch:
        producer.produce(topic, r["value"]["data"].encode(), r["key"]["data"].encode())
    assert producer.flush(60) == 0
    return len(batch) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--v2-batch", type=int, default=100)
    parser.add_argument("--single", type=int, default=1000)
    args = parser.parse_args(argv)
    batch = records(args.records, args.size)
    results: dict[str, list[float]] = {
        "v3 body": [], "v3 stream": [], "v2": [], "v3 single": [], "confluent-kafka": [],
        "v2 consume": [], "confluent-kafka consume": []}
    with broker_with_proxy() as (bootstrap, proxy), httpx.Client(base_url=proxy,
                                                                 timeout=120) as rest:
        cluster = rest.get("/v3/clusters").json()["data"][0]["cluster_id"]
        base = f"/v3/clusters/{cluster}"
        assert rest.post(f"{base}/topics", json={"topic_name": "bench",
                                                 "partitions_count": 4}).status_code == 201
        url = f"{base}/topics/bench/records"
        v3_body(rest, url, batch[:100])  # warm-up: connections, imports
        for _ in range(args.rounds):
            results["v3 body"].append(v3_body(rest, url, batch))
            results["v3 stream"].append(v3_stream(rest, url, batch))
            results["v2"].append(v2(rest, "/topics/bench", batch, args.v2_batch))
            results["v3 single"].append(v3_single(rest, url, batch[:args.single]))
            results["confluent-kafka"].append(native(bootstrap, "bench", batch))
        for round_ in range(args.rounds):
            results["v2 consume"].append(v2_consume(rest, "bench", 4, args.records, round_))
            results["confluent-kafka consume"].append(
                native_consume(bootstrap, "bench", 4, args.records))
    print(f"{args.records} records of {args.size} bytes, median of {args.rounds} rounds")
    for name, rates in results.items():
        print(f"  {name:24} {statistics.median(rates):>10,.0f} records/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
