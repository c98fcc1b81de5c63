"""The Schema Registry's latencies and rates, and confluent-kafka's serializers through it
against the same serializers on ``mock://`` in the same run.

One ``trio-broker serve`` subprocess with ``schema.registry.listener`` set; one keep-alive HTTP
connection (httpx) for the REST calls, as a client's ``SchemaRegistryClient`` keeps one:

- ``register``: ``--subjects`` new Avro schemas, each under its own subject (p50 / p99);
- ``lookup``: ``POST /subjects/{s}`` of a registered schema (p50 / p99), ``--lookups`` calls;
- ``schema by id``: ``GET /schemas/ids/{id}`` over the registered ids, ``--by-id`` calls (rate),
  next to ``GET /schemas/types`` (a constant answer: the HTTP stack's own cost);
- ``compatibility``: one subject with ``--history`` versions (each drops the last version's
  optional field and adds one, BACKWARD-compatible), then ``POST /compatibility/...`` under
  BACKWARD_TRANSITIVE (every version) and BACKWARD (the latest), median of 5, and the
  registration of one more version under BACKWARD_TRANSITIVE;
- ``serializers``: ``--records`` records through ``AvroSerializer`` and a Producer to the broker
  (``linger.ms=5``, flushed), with the registry and with ``mock://`` (the client's in-process
  registry), median of ``--rounds`` rounds each, alternating which goes first (after its first
  call, each serializer has its schema id cached: the registry sees two requests per
  serializer, the subject-name association lookup and the registration);
- ``spark formats``: the Spark stage's ``value.format`` avro, protobuf and json_schema encoding
  and decoding (``trio_broker.spark._formats``) of ``--records`` values, one core, no JVM;
- with ``--spark-records N``: N Avro records read by the source into Spark's ``noop`` format
  and written back by the sink, with ``value.format=avro`` and as bytes, on ``local[2]``.

    .venv/bin/python bench/bench_schema_registry.py
    .venv/bin/python bench/bench_schema_registry.py --history 1000 --records 50000
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
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

CONTENT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
USER = {"type": "record", "name": "User", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "score", "type": "double"}]}


@contextlib.contextmanager
def broker_with_registry() -> Iterator[tuple[str, str]]:
    """(bootstrap, registry URL) of a ``trio-broker serve`` subprocess."""
    with tempfile.TemporaryDirectory(prefix="bench-registry-") as data:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trio_broker", "serve",
             "--override", "listeners=PLAINTEXT://127.0.0.1:0",
             "--override", f"log.dirs={data}",
             "--override", "schema.registry.listener=http://127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert proc.stdout is not None
            bootstrap = registry = None
            deadline = time.monotonic() + 30
            while (bootstrap is None or registry is None) and time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line and proc.poll() is not None:
                    raise RuntimeError("trio-broker exited before listening")
                if found := re.search(r"listening on PLAINTEXT://([\d.]+:\d+)", line):
                    bootstrap = found.group(1)
                if found := re.search(r"schema registry on (http://[\d.]+:\d+)/", line):
                    registry = found.group(1)
            if bootstrap is None or registry is None:
                raise RuntimeError("trio-broker did not start within 30 s")
            threading.Thread(target=lambda: [None for _ in proc.stdout or ()],
                             daemon=True).start()
            yield bootstrap, registry
        finally:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()


def timed(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def percentiles_ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = ordered[len(ordered) // 2]
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms"


def post(rest: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = rest.post(path, json=body, headers=CONTENT)
    answer.raise_for_status()
    return answer.json()  # type: ignore[no-any-return]


def schema_of(i: int) -> str:
    return json.dumps({**USER, "name": f"User{i}"})


def bench_rest(rest: httpx.Client, subjects: int, lookups: int, by_id: int) -> list[int]:
    ids: list[int] = []
    latencies = []
    for i in range(subjects):
        start = time.perf_counter()
        ids.append(post(rest, f"/subjects/reg-{i}/versions", {"schema": schema_of(i)})["id"])
        latencies.append(time.perf_counter() - start)
    print(f"register ({subjects} new subjects): {percentiles_ms(latencies)}")
    latencies = [timed(lambda i=i: post(rest, f"/subjects/reg-{i % subjects}",
                                        {"schema": schema_of(i % subjects)}))
                 for i in range(lookups)]
    print(f"lookup ({lookups} calls): {percentiles_ms(latencies)}")
    start = time.perf_counter()
    for i in range(by_id):
        rest.get(f"/schemas/ids/{ids[i % len(ids)]}").raise_for_status()
    elapsed = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(by_id):
        rest.get("/schemas/types").raise_for_status()
    floor = time.perf_counter() - start
    print(f"schema by id ({by_id} calls, one connection): {by_id / elapsed:,.0f} /s "
          f"({elapsed / by_id * 1e6:.0f} µs each); GET /schemas/types, a constant answer: "
          f"{by_id / floor:,.0f} /s")
    return ids


def history_schema(version: int) -> str:
    return json.dumps({"type": "record", "name": "Event", "namespace": "bench", "fields": [
        {"name": "id", "type": "long"},
        {"name": f"f{version}", "type": ["null", "string"], "default": None}]})


def bench_compatibility(rest: httpx.Client, history: int) -> None:
    subject = "history-value"
    start = time.perf_counter()
    for version in range(history):
        post(rest, f"/subjects/{subject}/versions", {"schema": history_schema(version)})
    print(f"{history} versions registered under BACKWARD: {time.perf_counter() - start:.2f} s")
    candidate = {"schema": history_schema(history)}
    rest.put(f"/config/{subject}", json={"compatibility": "BACKWARD_TRANSITIVE"},
             headers=CONTENT).raise_for_status()
    transitive = [timed(lambda: post(rest, f"/compatibility/subjects/{subject}/versions",
                                     candidate)) for _ in range(5)]
    rest.put(f"/config/{subject}", json={"compatibility": "BACKWARD"},
             headers=CONTENT).raise_for_status()
    latest = [timed(lambda: post(rest, f"/compatibility/subjects/{subject}/versions",
                                 candidate)) for _ in range(5)]
    rest.put(f"/config/{subject}", json={"compatibility": "BACKWARD_TRANSITIVE"},
             headers=CONTENT).raise_for_status()
    register = timed(lambda: post(rest, f"/subjects/{subject}/versions", candidate))
    print(f"compatibility check against {history} versions (BACKWARD_TRANSITIVE): "
          f"{statistics.median(transitive) * 1000:.1f} ms; against the latest (BACKWARD): "
          f"{statistics.median(latest) * 1000:.2f} ms; registering version {history + 1} "
          f"under BACKWARD_TRANSITIVE: {register * 1000:.1f} ms")


def serializer_round(bootstrap: str, url: str, topic: str, records: int) -> float:
    serialize = AvroSerializer(SchemaRegistryClient.new_client({"url": url}), json.dumps(USER))
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    ctx = SerializationContext(topic, MessageField.VALUE)
    values = [{"id": i, "name": f"user-{i}", "email": None if i % 3 else f"u{i}@x",
               "score": i / 7} for i in range(records)]
    start = time.perf_counter()
    for value in values:
        while True:
            try:
                producer.produce(topic, serialize(value, ctx))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(60) == 0
    return records / (time.perf_counter() - start)


def bench_serializers(bootstrap: str, registry: str, records: int, rounds: int) -> None:
    rates: dict[str, list[float]] = {"registry": [], "mock://": []}
    for n in range(rounds):
        pair = [("registry", registry), ("mock://", f"mock://bench-{n}")]
        for name, url in pair if n % 2 == 0 else pair[::-1]:  # neither always goes first
            rates[name].append(serializer_round(bootstrap, url, f"ser-{n}-{name[:4]}",
                                                records))
    reg, mock = statistics.median(rates["registry"]), statistics.median(rates["mock://"])
    print(f"AvroSerializer + Producer, {records} records, median of {rounds}: with the "
          f"registry {reg:,.0f} rec/s, mock:// {mock:,.0f} rec/s (ratio {reg / mock:.2f})")


def bench_spark_formats(registry: str, records: int) -> None:
    """Each format's encoding and decoding as a Spark task does it, the same rows in each."""
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from trio_broker.spark._formats import (
        ColumnFormat,
        FormatOption,
        decode_column,
        derive_schema,
        encode_column,
    )
    from trio_broker.spark._registry_client import RegistryClient
    from trio_broker.spark._schema_types import avro_to_spark

    client = RegistryClient(registry)
    spark_type = avro_to_spark(USER)
    assert isinstance(spark_type, StructType)
    rows = None
    for name in ("avro", "protobuf", "json_schema"):
        subject = f"codec-{name}-value"
        derived, message = derive_schema(FormatOption("value", name, registry, subject, None),
                                         spark_type, subject)
        registered = client.schema_by_id(client.register(subject, derived))
        fmt = ColumnFormat("value", name, registry, subject, registered, spark_type, message)
        if rows is None:
            rows = pa.array([{"id": i, "name": f"user-{i}",
                              "email": None if i % 3 else f"u{i}@x", "score": i / 7}
                             for i in range(records)], type=fmt.arrow_type)
        start = time.perf_counter()
        framed = encode_column(fmt, rows)
        encode_s = time.perf_counter() - start
        start = time.perf_counter()
        decoded = decode_column(fmt, framed, str)
        decode_s = time.perf_counter() - start
        assert decoded.equals(rows), name
        print(f"Spark value.format={name}, {records} values, one core: encode "
              f"{records / encode_s:,.0f} /s, decode {records / decode_s:,.0f} /s")


def bench_spark(bootstrap: str, registry: str, records: int, rounds: int) -> None:
    """The source and the sink through Spark (``local[2]``), ``value.format=avro`` against the
    same records as bytes, in the same session, alternating; best of ``rounds``."""
    import os

    import pyarrow as pa
    from confluent_kafka.admin import AdminClient, NewTopic

    from trio_broker.spark import register
    from trio_broker.spark._formats import FormatOption, encode_column, resolve_read
    from trio_broker.spark._session import build_session

    topic = "spark-avro"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [topic] + [f"spark-out-{i}" for i in range(2 * rounds)]
    for future in admin.create_topics([NewTopic(t, 4, 1) for t in names]).values():
        future.result(30)
    post(httpx.Client(base_url=registry), f"/subjects/{topic}-value/versions",
         {"schema": json.dumps(USER)})
    (fmt,) = resolve_read([FormatOption("value", "avro", registry, None, None)], [topic])
    rows = pa.array([{"id": i, "name": f"user-{i}", "email": None if i % 3 else f"u{i}@x",
                      "score": i / 7} for i in range(records)], type=fmt.arrow_type)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in encode_column(fmt, rows).to_pylist():
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0

    spark, _log = build_session(master="local[2]", app_name="bench-schema-registry",
                                log_dir=tempfile.mkdtemp(prefix="bench-registry-spark-"),
                                conf={"spark.ui.enabled": "false"})
    register(spark)
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}
    avro = {"value.format": "avro", "schema.registry.url": registry}
    readers = {"bytes": lambda: spark.read.format("trio_broker").options(**options).load(),
               "avro": lambda: spark.read.format("trio_broker").options(**options, **avro)
               .load()}
    best: dict[str, float] = {}
    for n in range(rounds):
        for name in readers if n % 2 == 0 else list(readers)[::-1]:
            elapsed = timed(lambda name=name: readers[name]().write.format("noop")
                            .mode("overwrite").save())
            best[f"read {name}"] = min(best.get(f"read {name}", elapsed), elapsed)
    frames = {name: readers[name]().select("value").cache() for name in readers}
    for frame in frames.values():
        frame.count()
    outputs = iter(names[1:])
    for n in range(rounds):
        for name in frames if n % 2 == 0 else list(frames)[::-1]:
            writer = (frames[name].write.format("trio_broker").mode("append")
                      .option("kafka.bootstrap.servers", bootstrap)
                      .option("topic", next(outputs)))
            if name == "avro":
                writer = writer.options(**avro)
            elapsed = timed(writer.save)
            best[f"write {name}"] = min(best.get(f"write {name}", elapsed), elapsed)
    spark.stop()
    print(f"Spark local[2], {records} records, best of {rounds} "
          f"(load {os.getloadavg()[0]:.1f}): " + "; ".join(
              f"{name} {records / seconds:,.0f} rec/s" for name, seconds in best.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subjects", type=int, default=500)
    parser.add_argument("--lookups", type=int, default=2000)
    parser.add_argument("--by-id", type=int, default=5000)
    parser.add_argument("--history", type=int, default=1000)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--spark-records", type=int, default=0,
                        help="also read and write this many records through Spark (0: skip)")
    args = parser.parse_args()
    with broker_with_registry() as (bootstrap, registry), \
            httpx.Client(base_url=registry, timeout=60) as rest:
        bench_rest(rest, args.subjects, args.lookups, args.by_id)
        bench_compatibility(rest, args.history)
        bench_serializers(bootstrap, registry, args.records, args.rounds)
        bench_spark_formats(registry, args.records)
        if args.spark_records:
            bench_spark(bootstrap, registry, args.spark_records, 3)


if __name__ == "__main__":
    main()
