"""The web console's budgets: page render times with 1,000 topics and 100 groups, and the
produce latency of a real client while the console is in use, compared in the same run.

One ``trio-broker serve`` subprocess (its own interpreter) with ``http.listener`` set is filled
by confluent-kafka: ``--topics`` topics of one partition with ``--messages`` records each, and
``--groups`` consumer groups that each committed offsets on ten topics.

1. Render times: every page is fetched ``--repeat`` times over one keep-alive connection
   (after three warm-up fetches); median, 95th percentile and maximum in ms, as the browser's
   HTTP client sees them (Kafka requests, rendering and HTTP included).
2. Produce latency: confluent-kafka produces ``--rate`` records/s (acks=all, linger.ms=0,
   100 bytes) to its own topic; latency is send to delivery report. Phases alternate, each
   ``--phase`` seconds, for ``--rounds`` rounds:
   ``idle`` - a headless Chromium shows about:blank;
   ``charts`` - the same Chromium shows the overview, whose live charts poll every second;
   ``browsing`` - the charts, and a separate process loading a page of the console every
   second (topics list, a topic, its newest messages, the groups list, a group);
   ``listing`` - no console; a separate process lists the topics with confluent-kafka's
   ``AdminClient.list_topics()`` every second (a Metadata request for every topic, as
   ``kafka-topics --list`` sends and as the console's topic list sends): what any client that
   lists a thousand topics costs the broker, to read ``browsing`` against.

    .venv/bin/python bench/bench_console.py
    .venv/bin/python bench/bench_console.py --rounds 2 --phase 5     # quicker, noisier
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


@contextlib.contextmanager
def broker_with_console() -> Iterator[tuple[str, str]]:
    """(bootstrap, console base URL) of a ``trio-broker serve`` subprocess."""
    with tempfile.TemporaryDirectory(prefix="bench-console-") as data:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trio_broker", "serve",
             "--override", "listeners=PLAINTEXT://127.0.0.1:0",
             "--override", f"log.dirs={data}",
             "--override", "http.listener=http://127.0.0.1:0",
             "--override", "group.initial.rebalance.delay.ms=0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert proc.stdout is not None
            bootstrap = console = None
            deadline = time.monotonic() + 30
            while (bootstrap is None or console is None) and time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line and proc.poll() is not None:
                    raise RuntimeError("trio-broker exited before listening")
                if found := re.search(r"listening on PLAINTEXT://([\d.]+:\d+)", line):
                    bootstrap = found.group(1)
                if found := re.search(r"web console on (http://[\d.]+:\d+)/", line):
                    console = found.group(1)
            if bootstrap is None or console is None:
                raise RuntimeError("trio-broker did not start within 30 s")
            # keep reading its log so the pipe never fills
            threading.Thread(target=lambda: [None for _ in proc.stdout or ()],
                             daemon=True).start()
            yield bootstrap, console
        finally:
            proc.terminate()
            stopping = time.monotonic()
            try:
                proc.wait(60)
                print(f"\nbroker stopped {time.monotonic() - stopping:.1f} s after SIGTERM")
            except subprocess.TimeoutExpired:
                print("\nbroker still running 60 s after SIGTERM: killed")
                proc.kill()
                proc.wait()


def fill(bootstrap: str, topics: int, messages: int, groups: int) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"topic-{i:04d}" for i in range(topics)]
    for start in range(0, topics, 100):
        futures = admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=1)
                                       for n in names[start:start + 100]])
        for future in futures.values():
            future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = json.dumps({"id": 1, "payload": "x" * 60}).encode()
    for name in names:
        for i in range(messages):
            producer.produce(name, key=str(i), value=value)
        producer.poll(0)
    assert producer.flush(60) == 0
    for g in range(groups):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"group-{g:03d}",
                             "enable.auto.commit": False})
        offsets = [TopicPartition(names[(g * 10 + i) % topics], 0, messages // 2)
                   for i in range(10)]
        consumer.commit(offsets=offsets, asynchronous=False)
        consumer.close()


def pages(topics: int, groups: int) -> list[str]:
    topic, group = f"topic-{topics // 2:04d}", f"group-{groups // 2:03d}"
    last = -(-topics // 100)
    return ["/", "/topics", f"/topics?page={last}", "/topics?q=topic-00", f"/topics/{topic}",
            f"/topics/{topic}/messages", f"/topics/{topic}/messages?limit=500&format=hex",
            "/groups", f"/groups/view?id={group}", "/api/live"]


def render_times(console: str, paths: list[str], repeat: int,
                 ) -> list[tuple[str, float, float, float]]:
    host, port = console.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    rows = []
    for path in paths:
        times = []
        for i in range(3 + repeat):
            start = time.perf_counter()
            conn.request("GET", path)
            answer = conn.getresponse()
            body = answer.read()
            elapsed = (time.perf_counter() - start) * 1000
            if answer.status != 200:
                raise RuntimeError(f"{path}: {answer.status} {body[:200]!r}")
            if i >= 3:
                times.append(elapsed)
        times.sort()
        rows.append((path, statistics.median(times), times[int(0.95 * (len(times) - 1))],
                     times[-1]))
    conn.close()
    return rows


BROWSING = """
import http.client, sys, time
host, port = sys.argv[1], int(sys.argv[2])
pages = ["/topics", "/topics/topic-0123", "/topics/topic-0123/messages", "/groups",
         "/groups/view?id=group-007"]
conn = http.client.HTTPConnection(host, port, timeout=30)
i = 0
while True:
    conn.request("GET", pages[i % len(pages)])
    conn.getresponse().read()
    i += 1
    time.sleep(1)
"""

LISTING = """
import sys, time
from confluent_kafka.admin import AdminClient
admin = AdminClient({"bootstrap.servers": sys.argv[1]})
while True:
    admin.list_topics(timeout=30)
    time.sleep(1)
"""


def produce_phase(producer: object, topic: str, rate: int, seconds: float) -> list[float]:
    latencies: list[float] = []
    value = b"v" * 100
    interval = 1 / rate

    def delivered(error: object, _message: object, sent: float = 0.0) -> None:
        if error is None:
            latencies.append((time.perf_counter() - sent) * 1000)

    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < seconds:
        due = start + n * interval
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)
        sent = time.perf_counter()
        producer.produce(topic, value=value,  # type: ignore[attr-defined]
                         on_delivery=lambda e, m, s=sent: delivered(e, m, s))
        producer.poll(0)  # type: ignore[attr-defined]
        n += 1
    producer.flush(30)  # type: ignore[attr-defined]
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency_comparison(bootstrap: str, console: str, rounds: int, phase_s: float,
                       rate: int) -> dict[str, list[list[float]]]:
    import tempfile as _tempfile

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from playwright.sync_api import sync_playwright

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("latency", num_partitions=1,
                                  replication_factor=1)])["latency"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    produce_phase(producer, "latency", rate, 1.0)  # connections and metadata warm
    results: dict[str, list[list[float]]] = {"idle": [], "charts": [], "browsing": [],
                                             "listing": []}
    host, port = console.removeprefix("http://").split(":")
    with sync_playwright() as playwright, _tempfile.TemporaryDirectory() as profile:
        browser = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page()
        try:
            for _ in range(rounds):
                for mode in results:
                    page.goto(console + "/" if mode in ("charts", "browsing")
                              else "about:blank")
                    browsing = None
                    if mode == "browsing":
                        browsing = subprocess.Popen([sys.executable, "-c", BROWSING, host, port])
                    elif mode == "listing":
                        browsing = subprocess.Popen([sys.executable, "-c", LISTING, bootstrap])
                    time.sleep(1.0)
                    try:
                        results[mode].append(produce_phase(producer, "latency", rate, phase_s))
                    finally:
                        if browsing is not None:
                            browsing.terminate()
                            browsing.wait(10)
                    if mode in ("charts", "browsing"):
                        points = page.locator("#live").get_attribute("data-points")
                        if not points or int(points) < 2:
                            raise RuntimeError("the overview's charts did not refresh")
        finally:
            browser.close()
    return results


# --- the HTTP stack itself ------------------------------------------------------------------

STACK = """
import sys, time, socket, trio
which, count = sys.argv[1], int(sys.argv[2])
BODY = b"x" * 200


async def main():
    async with trio.open_nursery() as nursery:
        if which == "starlette":
            from hypercorn.config import Config
            from hypercorn.trio import serve
            from starlette.applications import Starlette
            from starlette.responses import Response
            from starlette.routing import Route

            async def hello(request):
                return Response(BODY, media_type="text/plain")

            config = Config()
            config.bind, config.accesslog, config.errorlog = ["127.0.0.1:0"], None, None
            config.keep_alive_max_requests = count + 10
            binds = await nursery.start(serve, Starlette(routes=[Route("/", hello)]), config)
            port = int(binds[0].rsplit(":", 1)[1])
        else:
            import h11

            async def handler(stream):
                conn = h11.Connection(h11.SERVER)
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        data = await stream.receive_some(65536)
                        if not data:
                            return
                        conn.receive_data(data)
                    elif isinstance(event, h11.EndOfMessage):
                        head = h11.Response(status_code=200, headers=[
                            ("content-length", str(len(BODY))), ("content-type", "text/plain")])
                        await stream.send_all(conn.send(head) + conn.send(h11.Data(data=BODY))
                                              + conn.send(h11.EndOfMessage()))
                        conn.start_next_cycle()
                    elif isinstance(event, h11.ConnectionClosed):
                        return

            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listeners[0].socket.getsockname()[1]
            nursery.start_soon(trio.serve_listeners, handler, listeners)

        def client():
            sock = socket.create_connection(("127.0.0.1", port))
            request = b"GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"
            times = []
            for _ in range(count):
                start = time.perf_counter()
                sock.sendall(request)
                data = b""
                while not data.endswith(BODY):
                    data += sock.recv(65536)
                times.append((time.perf_counter() - start) * 1e6)
            sock.close()
            times.sort()
            print(times[len(times) // 2], times[int(len(times) * 0.99)])

        await trio.to_thread.run_sync(client)
        nursery.cancel_scope.cancel()


trio.run(main)
"""

IMPORTS = """
import time
start = time.perf_counter()
import trio_broker.broker.lifecycle
middle = time.perf_counter()
import trio_broker.broker.http.server
print((middle - start) * 1000, (time.perf_counter() - middle) * 1000)
"""


def http_stack(count: int) -> None:
    """Per-request time of Starlette on Hypercorn against a bare h11 loop, same run, and the
    import cost of the console's stack on top of the broker's."""
    print("\n| HTTP stack (one connection, 200-byte answers) | p50 us | p99 us |\n|---|---:|---:|")
    for which in ("starlette", "h11"):
        out = subprocess.run([sys.executable, "-c", STACK, which, str(count)], check=True,
                             capture_output=True, text=True).stdout.split()
        print(f"| {which} | {float(out[0]):.0f} | {float(out[1]):.0f} |")
    runs = [subprocess.run([sys.executable, "-c", IMPORTS], check=True, capture_output=True,
                           text=True).stdout.split() for _ in range(5)]
    broker = statistics.median(float(r[0]) for r in runs)
    console = statistics.median(float(r[1]) for r in runs)
    print("\nimports (median of 5 fresh interpreters): "
          f"trio_broker.broker.lifecycle {broker:.0f} ms, "
          f"then the console's stack {console:.0f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--phase", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=500)
    args = parser.parse_args()
    http_stack(3000)
    with broker_with_console() as (bootstrap, console):
        started = time.perf_counter()
        fill(bootstrap, args.topics, args.messages, args.groups)
        print(f"filled {args.topics} topics x {args.messages} records and {args.groups} "
              f"groups in {time.perf_counter() - started:.1f} s")
        print("\n| page | median ms | p95 ms | max ms |\n|---|---:|---:|---:|")
        paths = pages(args.topics, args.groups)
        for path, median, p95, top in render_times(console, paths, args.repeat):
            print(f"| `{path}` | {median:.1f} | {p95:.1f} | {top:.1f} |")
        results = latency_comparison(bootstrap, console, args.rounds, args.phase, args.rate)
        print(f"\nproduce latency, ms ({args.rate} records/s, {args.phase:.0f} s phases, "
              f"{args.rounds} rounds)\n")
        print("| phase | records | p50 | p99 | median of the rounds' p99 | p99 per round |\n"
              "|---|---:|---:|---:|---:|---|")
        for mode, rounds in results.items():
            every = [v for r in rounds for v in r]
            p99s = [percentile(r, 0.99) for r in rounds]
            print(f"| {mode} | {len(every)} | {percentile(every, 0.5):.2f} | "
                  f"{percentile(every, 0.99):.2f} | {statistics.median(p99s):.2f} | "
                  + ", ".join(f"{v:.2f}" for v in p99s) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
