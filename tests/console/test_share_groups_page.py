"""The console's share groups page: a group's state, its member and, per share-partition, the
records in flight and acquired and the lag, while confluent-kafka's ``ShareConsumer`` holds
records and after it accepted some."""

from __future__ import annotations

import re
import time
import uuid

import httpx
from confluent_kafka import AcknowledgeType
from playwright.sync_api import Page, expect

from tests.share.test_share_consumer import create_topic, members, produce, share_consumer, wait_for
from trio_broker.testing import ThreadedBroker

from .conftest import console_url, shoot


def _partition_row(html: str, group: str, partition: str) -> dict[str, str]:
    section = html.split(f'data-group="{group}"', 1)[1].split("</section>", 1)[0]
    row = section.split(f'data-partition="{partition}"', 1)[1].split("</tr>", 1)[0]
    cells = dict(re.findall(r'class="num ([a-z-]+)">([^<]*)<', row))
    return {**cells, "state": re.search(r'class="muted small state">(\w+)', section)[1],
            "members": section.split('class="members"', 1)[1].split("</table>", 1)[0]}


def test_the_share_groups_page(page: Page, broker: ThreadedBroker) -> None:
    bootstrap = broker.bootstrap_servers
    topic, group = f"share-page-{uuid.uuid4().hex[:8]}", f"sg-page-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    c = share_consumer(bootstrap, group, **{"share.acknowledgement.mode": "explicit",
                                            "client.id": "page-member"})
    c.subscribe([topic])
    wait_for(lambda: (c.poll(0.2), members(bootstrap, group))[1] == 1, 30, "the member")
    produce(bootstrap, topic, range(5))
    held = []
    deadline = time.monotonic() + 30
    while len(held) < 5 and time.monotonic() < deadline:
        held += [m for m in c.poll(0.5) if m.error() is None]
    assert len(held) == 5
    with httpx.Client(base_url=console_url(broker), timeout=15) as http:
        answer = http.get("/share-groups")
        assert answer.status_code == 200
        row = _partition_row(answer.text, group, f"{topic}-0")
        assert row["state"] == "Stable"
        assert "page-member" in row["members"]
        assert f"{topic}-0" in row["members"]
        assert (row["in-flight"], row["acquired"], row["lag"]) == ("5", "5", "5")
        page.goto(console_url(broker) + "/share-groups")  # and in a browser
        section = page.locator(f"section.share-group[data-group='{group}']")
        expect(section.locator("table.members")).to_contain_text("page-member")
        expect(section.locator(f"tr[data-partition='{topic}-0'] td.acquired")).to_have_text("5")
        expect(page.locator("nav a.here")).to_have_text("Share groups")
        shoot(page, "share-groups")
        for m in held[:3]:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync()
        row = _partition_row(http.get("/share-groups").text, group, f"{topic}-0")
        assert (row["in-flight"], row["acquired"], row["lag"]) == ("2", "2", "2")
        c.close()
        wait_for(lambda: members(bootstrap, group) == 0, 30, "the leave")
        row = _partition_row(http.get("/share-groups").text, group, f"{topic}-0")
        assert row["state"] == "Empty"
        assert "No members." in row["members"]
        # the two held records are available again: in flight, no longer acquired
        assert (row["in-flight"], row["acquired"], row["lag"]) == ("2", "0", "2")
