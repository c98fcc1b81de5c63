"""The console in a real headless Chromium, against a broker filled by real clients.

The module's broker is its own (fresh), so each test names its topics and groups plainly: the
screenshots show readable names.

Every page is opened and what it shows is checked against what confluent-kafka reads from the
same broker; writes made from the page are read back with confluent-kafka. The screenshots in
docs/console/ are taken by these tests (written there when ``CONSOLE_SCREENSHOTS=1``).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from playwright.sync_api import Page, expect

from trio_broker.testing import ThreadedBroker

from .conftest import console_url, shoot


def create_topic(bootstrap: str, name: str, partitions: int,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions,
                                            replication_factor=1, config=config or {})])
    futures[name].result(10)


def produce(bootstrap: str, topic: str, records: list[tuple[str | None, bytes]],
            headers: list[tuple[str, bytes]] | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key, value in records:
        producer.produce(topic, key=key, value=value, headers=headers or [])
    assert producer.flush(10) == 0


def watermarks(consumer: Consumer, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in range(partitions)}


@pytest.fixture
def consumer(broker: ThreadedBroker) -> Iterator[Consumer]:
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "console-reader",
                  "enable.auto.commit": False})
    yield c
    c.close()


def cells(page: Page, selector: str) -> list[str]:
    return [text.strip() for text in page.locator(selector).all_inner_texts()]


def number(text: str) -> int:
    return int(text.replace(",", ""))


def test_topic_list_and_topic_offsets(page: Page, broker: ThreadedBroker,
                                      consumer: Consumer) -> None:
    topic = "orders"
    create_topic(broker.bootstrap_servers, topic, 3, {"retention.ms": "3600000"})
    produce(broker.bootstrap_servers, topic,
            [(f"k{i}", json.dumps({"order": i}).encode()) for i in range(40)])
    marks = watermarks(consumer, topic, 3)
    url = console_url(broker)
    page.goto(f"{url}/topics?q={topic}")
    row = page.locator(f'#topics tr[data-topic="{topic}"]')
    expect(row).to_have_count(1)
    assert number(row.locator(".messages").inner_text()) == 40
    assert "1h" in row.inner_text()  # retention.ms override
    page.goto(f"{url}/topics/{topic}")
    logs = broker.broker.state.logs if broker.broker is not None else None
    assert logs is not None
    total = 0
    for partition, (low, high) in marks.items():
        shown = page.locator(f'#partitions tr[data-partition="{partition}"]')
        assert number(shown.locator(".start").inner_text()) == low
        assert number(shown.locator(".end").inner_text()) == high
        size = broker.call(lambda p=partition: logs.get_log(topic, p).size_bytes)
        assert shown.locator(".size").get_attribute("data-bytes") == str(size)  # DescribeLogDirs
        total += size
    assert total > 0
    page.goto(f"{url}/topics?q={topic}")
    assert row.locator(".size").get_attribute("data-bytes") == str(total)
    page.goto(f"{url}/topics/{topic}")
    override = page.locator('#configs tr[data-config="retention.ms"]')
    expect(override.locator(".source")).to_have_text("DYNAMIC_TOPIC_CONFIG")
    expect(page.locator('#configs tr[data-config="cleanup.policy"] .source')).to_have_text(
        "DEFAULT_CONFIG")
    shoot(page, "topic")


def test_message_browser_shows_values(page: Page, broker: ThreadedBroker) -> None:
    topic = "events"
    create_topic(broker.bootstrap_servers, topic, 1)
    produce(broker.bootstrap_servers, topic, [
        ("user-1", json.dumps({"user": 1, "action": "login", "tags": ["web"]}).encode()),
        ("user-2", b"plain text value"),
        (None, bytes(range(8)))], headers=[("source", b"shop")])
    url = f"{console_url(broker)}/topics/{topic}/messages"
    page.goto(url)
    rows = page.locator("#messages tbody tr")
    expect(rows).to_have_count(3)
    newest, text_row, oldest = (rows.nth(i) for i in range(3))
    assert newest.get_attribute("data-offset") == "2"
    assert newest.locator(".value pre").get_attribute("class") == "hex"
    assert newest.locator(".value pre").inner_text() == "00 01 02 03 04 05 06 07"
    assert text_row.locator(".value pre").inner_text() == "plain text value"
    value = oldest.locator(".value pre")
    assert value.get_attribute("class") == "json"
    assert json.loads(value.inner_text()) == {"user": 1, "action": "login", "tags": ["web"]}
    assert '\n  "action": "login"' in value.inner_text()  # pretty, not the raw bytes
    assert oldest.locator(".key pre").inner_text() == "user-1"
    assert "source: shop" in oldest.locator(".headers").inner_text()
    shoot(page, "messages")
    # the format override and the filter
    page.select_option("#format", "hex")
    expect(page.locator("#messages tbody tr").first.locator(".value pre")).to_have_class("hex")
    page.goto(url + "?filter=LOGIN&mode=offset&offset=0")
    expect(page.locator("#messages tbody tr")).to_have_count(1)
    assert page.locator("#messages tbody tr").get_attribute("data-offset") == "0"


def test_browse_from_a_timestamp_or_an_offset(page: Page, broker: ThreadedBroker) -> None:
    topic = "timeline"
    # records stamped in 2023: kept whatever their age, or a retention check could delete them
    create_topic(broker.bootstrap_servers, topic, 2, {"retention.ms": "-1"})
    start_ms = 1_700_000_000_000
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(6):  # partition i % 2, a minute apart
        producer.produce(topic, value=f"minute {i}".encode(), partition=i % 2,
                         timestamp=start_ms + i * 60_000)
    assert producer.flush(10) == 0
    url = f"{console_url(broker)}/topics/{topic}/messages"
    # from 2023-11-14T22:15:20Z (minute 2) on, every partition, oldest first
    page.goto(url + "?mode=timestamp&timestamp=2023-11-14T22:15:20Z")
    values = cells(page, "#messages tbody .value pre")
    assert values == ["minute 2", "minute 3", "minute 4", "minute 5"]
    assert cells(page, "#messages tbody td:nth-child(3)")[0] == "2023-11-14T22:15:20.000Z"
    # one partition, from an offset
    page.goto(url + "?partition=1&mode=offset&offset=1")
    assert cells(page, "#messages tbody .value pre") == ["minute 3", "minute 5"]
    # the newest two of all partitions
    page.goto(url + "?limit=2")
    assert cells(page, "#messages tbody .value pre") == ["minute 5", "minute 4"]


def test_produce_from_the_page(page: Page, broker: ThreadedBroker,
                               caplog: pytest.LogCaptureFixture) -> None:
    topic = "payments"
    create_topic(broker.bootstrap_servers, topic, 2)
    page.goto(f"{console_url(broker)}/topics/{topic}/messages")
    form = page.locator("#produce-form")
    form.locator('select[name="partition"]').select_option("1")
    form.locator('input[name="key"]').fill("order-7")
    form.locator('textarea[name="value"]').fill('{"id": 7, "item": "lamp"}')
    form.locator('textarea[name="headers"]').fill("origin: console")
    with caplog.at_level(logging.INFO, logger="trio_broker.broker.http.audit"):
        form.locator("button").click()
        expect(page.locator("#flash")).to_contain_text(f"produced to {topic}-1 at offset 0")
    assert any("user=(no login)" in r.message and f"produce to '{topic}'" in r.message
               for r in caplog.records)
    expect(page.locator('#messages tbody tr[data-offset="0"] .value pre')).to_have_class("json")
    reader = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused",
                       "enable.auto.commit": False})
    try:
        reader.assign([TopicPartition(topic, 1, 0)])
        message = None
        deadline = time.monotonic() + 10
        while message is None and time.monotonic() < deadline:
            message = reader.poll(0.5)
        assert message is not None
        assert message.error() is None
        assert message.key() == b"order-7"
        assert json.loads(message.value()) == {"id": 7, "item": "lamp"}
        assert message.headers() == [("origin", b"console")]
    finally:
        reader.close()


def test_group_lag_and_reset(page: Page, broker: ThreadedBroker) -> None:
    topic, group = "invoices", "billing"
    create_topic(broker.bootstrap_servers, topic, 2)
    produce(broker.bootstrap_servers, topic, [(f"k{i}", b"x" * 10) for i in range(30)])
    member = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                       "auto.offset.reset": "earliest", "enable.auto.commit": False,
                       "client.id": "billing-app"})
    member.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 20
    while seen < 12 and time.monotonic() < deadline:
        message = member.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
    member.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in member.committed(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)}
    marks = watermarks(member, topic, 2)
    url = console_url(broker)
    try:
        page.goto(f"{url}/groups")
        row = page.locator(f'#groups tr[data-group="{group}"]')
        expect(row.locator(".state")).to_have_text("Stable")
        expect(row.locator(".members")).to_have_text("1")
        shoot(page, "groups")
        page.goto(f"{url}/groups/view?id={group}")
        expect(page.locator("#group-state")).to_have_text("Stable")
        total = 0
        for partition in (0, 1):
            shown = page.locator(f'#lag tr[data-tp="{topic}-{partition}"]')
            end = marks[partition][1]
            assert number(shown.locator(".end").inner_text()) == end
            if committed[partition] >= 0:
                assert number(shown.locator(".committed").inner_text()) == committed[partition]
                assert number(shown.locator(".lag").inner_text()) == end - committed[partition]
                total += end - committed[partition]
        assert number(page.locator("#total-lag").inner_text()) == total > 0
        assert "billing-app" in page.locator("#members").inner_text()
        expect(page.locator("#chart-lag")).to_have_attribute("data-points",
                                                             re.compile(r"^([2-9]|\d\d)$"))
        shoot(page, "group")
        # resetting while the member is there is refused, as kafka-consumer-groups refuses it
        page.locator('#reset-offsets select[name="target"]').select_option("earliest")
        page.locator("#reset-offsets button").click()
        expect(page.locator("#flash")).to_contain_text("can only be reset if the group")
    finally:
        member.close()
    page.goto(f"{url}/groups/view?id={group}")
    expect(page.locator("#group-state")).to_have_text("Empty")
    page.locator('#reset-offsets input[name="topic"]').fill(topic)
    page.locator('#reset-offsets select[name="target"]').select_option("offset")
    page.locator('#reset-offsets input[name="value"]').fill("3")
    page.locator("#reset-offsets button").click()
    expect(page.locator("#flash")).to_contain_text(f"group {group} now starts {topic} at 0:3, 1:3")
    checker = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        after = checker.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)],
                                  timeout=10)
        assert [tp.offset for tp in after] == [3, 3]
    finally:
        checker.close()
    expect(page.locator(f'#lag tr[data-tp="{topic}-0"] .lag')).to_have_text(
        str(marks[0][1] - 3))
    # and the group goes
    page.on("dialog", lambda dialog: dialog.accept())
    page.locator("#delete-group button").click()
    expect(page.locator("#flash")).to_contain_text(f"deleted group {group}")
    assert group not in [g.id for g in AdminClient(
        {"bootstrap.servers": broker.bootstrap_servers}).list_groups(timeout=10)]


def test_topic_writes_from_the_page(page: Page, broker: ThreadedBroker) -> None:
    topic = "made-here"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    url = console_url(broker)
    page.goto(f"{url}/topics")
    page.locator("#create-topic summary").click()
    page.locator('#create-topic input[name="name"]').fill(topic)
    page.locator('#create-topic input[name="partitions"]').fill("2")
    page.locator('#create-topic textarea[name="configs"]').fill("cleanup.policy=compact")
    page.locator("#create-topic button").click()
    expect(page.locator("#flash")).to_have_text(f"created topic {topic}")
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2
    # alter configs (AlterConfigs: the overrides become exactly these)
    page.locator("#alter-configs textarea").fill("retention.ms=60000\nsegment.bytes=1048576")
    page.locator("#alter-configs button").click()
    expect(page.locator("#flash")).to_contain_text("retention.ms=60000")
    described = admin.describe_configs([ConfigResource("topic", topic)])
    configs = next(iter(described.values())).result(10)
    assert configs["retention.ms"].value == "60000"
    assert configs["cleanup.policy"].value == "delete"  # no longer overridden
    expect(page.locator('#configs tr[data-config="segment.bytes"] .source')).to_have_text(
        "DYNAMIC_TOPIC_CONFIG")
    # add partitions
    page.locator('#add-partitions input[name="partitions"]').fill("5")
    page.locator("#add-partitions button").click()
    expect(page.locator("#flash")).to_have_text(f"{topic} now has 5 partitions")
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 5
    # a refused write shows Kafka's error
    page.locator('#add-partitions input[name="partitions"]').fill("2")
    page.locator("#add-partitions button").click()
    expect(page.locator("#flash")).to_contain_text("INVALID_PARTITIONS")
    # delete (after the confirmation dialog)
    page.on("dialog", lambda dialog: dialog.accept())
    page.locator("#delete-topic button").click()
    expect(page.locator("#flash")).to_have_text(f"deleted topic {topic}")
    assert topic not in admin.list_topics(timeout=10).topics


# Last in the module, so the screenshots show the topics the other tests made.
def test_overview_counts_and_live_charts(page: Page, broker: ThreadedBroker) -> None:
    topic = "clicks"
    create_topic(broker.bootstrap_servers, topic, 2)
    produce(broker.bootstrap_servers, topic, [(None, b'{"tick": 0}')] * 20)
    page.goto(console_url(broker) + "/")
    expect(page.locator("#broker-id")).to_have_text("0")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topics = [t for t in admin.list_topics(timeout=10).topics if not t.startswith("__")]
    assert number(page.locator("#topic-count").inner_text()) == len(topics)
    # traffic while the page is open: the charts' produce rate moves off zero
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        producer.produce(topic, value=b'{"tick": 1}')
        producer.flush(5)
        points = int(page.locator("#live").get_attribute("data-points") or 0)
        rate = page.locator("#produce-rate").inner_text()
        if points >= 3 and rate not in ("-", "0"):
            break
        time.sleep(0.2)
    assert points >= 3
    assert float(rate.rstrip("kMG")) > 0
    assert page.locator("#produce-p99").inner_text() != "-"
    assert page.locator("#storage tbody tr").count() == 1
    # keep the traffic going a few seconds more, for a chart worth showing
    while int(page.locator("#live").get_attribute("data-points") or 0) < 8:
        producer.produce(topic, value=b'{"tick": 2}')
        producer.poll(0.05)
    producer.flush(5)
    shoot(page, "overview")
    page.goto(console_url(broker) + "/topics")
    shoot(page, "topics")
