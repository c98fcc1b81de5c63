"""The event loop's stall detector, read over HTTP from a real broker, and the admin changes
that used to hold the loop (their fsyncs now run in worker threads) staying consistent when
they run at the same time."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from trio_broker.broker.metrics.stalls import DEFAULT_INTERVAL_S, QUIET_INTERVAL_S, LoopStallMeter
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

from .test_metrics import scrape, value

LATENESS = "kafka_server_eventloopmetrics_lateness_seconds"
GC_PAUSE = "kafka_server_eventloopmetrics_gcpause_seconds"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[ThreadedBroker]:
    b = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                          "metrics_listener": "http://127.0.0.1:0"}).start()
    yield b
    b.stop()


def _late(samples: dict, seconds: str) -> float:
    """Wake-ups later than ``seconds`` (a bucket bound)."""
    return (value(samples, f"{LATENESS}_bucket", le="+Inf")
            - value(samples, f"{LATENESS}_bucket", le=seconds))


def test_a_loop_held_for_300_ms_shows_as_one_late_wake_up(broker):
    before = scrape(broker)
    broker.call(time.sleep, 0.3)  # blocks the broker's event loop itself
    time.sleep(0.05)  # the detector wakes, late, and records it
    after = scrape(broker)
    assert _late(after, "0.25") - _late(before, "0.25") >= 1
    assert value(after, f"{LATENESS}_count") > value(before, f"{LATENESS}_count")
    assert value(after, f"{LATENESS}_sum") - value(before, f"{LATENESS}_sum") >= 0.25


def test_garbage_collections_are_timed(broker):
    before = value(scrape(broker), f"{GC_PAUSE}_count")
    broker.call(gc.collect)
    assert value(scrape(broker), f"{GC_PAUSE}_count") >= before + 1


def test_a_quiet_broker_wakes_ten_times_a_second_and_still_sees_a_300_ms_stall(broker):
    """No bytes received for a second: the detector wakes every 100 ms instead of every 5 ms
    (an idle broker cost ~3% of a core), a stall of 300 ms still shows, and the first request
    brings the 5 ms wake-ups back."""
    meter = broker.broker.state.metrics.loop_stalls
    deadline = time.monotonic() + 10
    while meter.current_interval_s != QUIET_INTERVAL_S:
        assert time.monotonic() < deadline, "the detector never went quiet"
        time.sleep(0.05)
    count = broker.call(lambda: meter.lateness.count)
    time.sleep(0.5)
    woke = broker.call(lambda: meter.lateness.count) - count
    assert 2 <= woke <= 7, woke  # ~5 at 100 ms (100 at 5 ms)
    before = scrape(broker)
    broker.call(time.sleep, 0.3)
    time.sleep(0.15)  # the next wake-up, late
    assert _late(scrape(broker), "0.1") - _late(before, "0.1") >= 1
    AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
    deadline = time.monotonic() + 10
    while meter.current_interval_s != DEFAULT_INTERVAL_S:
        assert time.monotonic() < deadline, "a request did not wake the detector up"
        time.sleep(0.02)


def test_the_detector_goes_quiet_only_while_activity_stays_the_same():
    activity = [0]
    meter = LoopStallMeter(activity=lambda: activity[0], quiet_after_s=0.2)

    async def interval_becomes(wanted: float) -> None:
        while True:
            if meter.current_interval_s == wanted:
                return
            await trio.sleep(0.01)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(meter.run)
            with trio.fail_after(5):
                for _ in range(40):  # 0.4 s of activity, twice quiet_after_s: it stays at 5 ms
                    activity[0] += 1
                    await trio.sleep(0.01)
                    assert meter.current_interval_s == DEFAULT_INTERVAL_S
                await interval_becomes(QUIET_INTERVAL_S)
                activity[0] += 1
                await interval_becomes(DEFAULT_INTERVAL_S)
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_blocking_work_timed_on_the_loop_is_counted_by_operation():
    meter = LoopStallMeter()
    with meter.on_loop("fsync"):
        time.sleep(0.01)
    with meter.on_loop("fsync"):
        pass
    families = {f.name: f for f in meter.collect()}
    [count] = families["kafka_server_eventloopmetrics_blocking"].samples
    [seconds] = families["kafka_server_eventloopmetrics_blocking_seconds"].samples
    assert count.labels == {"operation": "fsync"}
    assert count.value == 2
    assert seconds.value >= 0.01


def test_concurrent_admin_changes_and_metadata_stay_consistent(broker):
    """Topic creation runs in worker threads: concurrent creators of the same names, a
    partition increase and Metadata readers meanwhile all see one consistent set of topics."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    names = [f"race-{i}" for i in range(20)]
    outcomes: list[list[str]] = [[], []]
    losses: list[str] = []
    stop_reading = threading.Event()
    read_errors: list[BaseException] = []

    def create(slot: int) -> None:
        client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        futures = client.create_topics([NewTopic(n, 2, 1) for n in names], request_timeout=30)
        for name, future in futures.items():
            try:
                future.result()
                outcomes[slot].append(name)
            except Exception as exc:  # the loser of each race: TOPIC_ALREADY_EXISTS
                losses.append(str(exc))

    def read() -> None:
        try:
            while not stop_reading.is_set():
                listed = admin.list_topics(timeout=10).topics
                for name, topic in listed.items():
                    if name.startswith("race-"):
                        assert len(topic.partitions) >= 2, (name, topic.partitions)
        except BaseException as exc:
            read_errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    creators = [threading.Thread(target=create, args=(i,)) for i in range(2)]
    for t in creators:
        t.start()
    for t in creators:
        t.join(60)
    admin.create_partitions([NewPartitions("race-0", 4)])["race-0"].result(30)
    stop_reading.set()
    reader.join(30)
    assert not read_errors
    assert len(losses) == len(names)
    assert all("TOPIC_ALREADY_EXISTS" in loss for loss in losses), losses
    assert sorted(outcomes[0] + outcomes[1]) == sorted(names)  # each created exactly once
    topics = admin.list_topics(timeout=10).topics
    assert {n: len(topics[n].partitions) for n in names} == {
        n: 4 if n == "race-0" else 2 for n in names}
