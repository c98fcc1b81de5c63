"""The console over plain HTTP: missing things, bad input and oversized forms answer with a
page saying so, never a crash; the JSON endpoints and /metrics; the console's start-up line and
its absence when it is off."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import trio

from trio_broker.broker.lifecycle import open_broker
from trio_broker.testing import ThreadedBroker

from .conftest import console_url


def get(url: str, data: bytes | None = None) -> tuple[int, str, dict[str, str]]:
    """(status, body, headers with lower-case names)."""
    request = urllib.request.Request(url, data=data)
    try:
        with urllib.request.urlopen(request, timeout=15) as answer:
            status, body, headers = answer.status, answer.read(), answer.headers
    except urllib.error.HTTPError as error:
        status, body, headers = error.code, error.read(), error.headers
    return status, body.decode(), {k.lower(): v for k, v in headers.items()}


def test_missing_things_and_bad_input(broker: ThreadedBroker) -> None:
    url = console_url(broker)
    broker.create_topic("present", 2)
    status, body, _ = get(f"{url}/topics/absent")
    assert status == 404
    assert "topic &#39;absent&#39; does not exist" in body
    assert get(f"{url}/topics/absent/messages")[0] == 404
    assert get(f"{url}/no/such/page")[0] == 404
    status, body, _ = get(f"{url}/topics/present/messages?mode=timestamp&timestamp=yesterday")
    assert status == 400
    assert "bad browser query" in body
    # numbers that are not numbers fall back to the defaults
    assert get(f"{url}/topics/present/messages?offset=x&limit=-5&format=nope&mode=z")[0] == 200
    assert get(f"{url}/topics?page=999999")[0] == 200
    status, body, _ = get(f"{url}/groups/view?id=never%2Fseen")
    assert status == 200
    assert 'id="group-state">Dead<' in body


def test_oversized_forms_are_refused(broker: ThreadedBroker) -> None:
    status, body, _ = get(f"{console_url(broker)}/topics", data=b"name=" + b"x" * (2 << 20))
    assert status == 413
    assert "form too large" in body


def test_json_endpoints(broker: ThreadedBroker) -> None:
    url = console_url(broker)
    status, body, headers = get(f"{url}/api/live")
    assert status == 200
    assert headers["cache-control"] == "no-store"
    live = json.loads(body)
    assert live["interval_s"] == 1.0
    assert isinstance(live["points"], list)
    status, body, headers = get(f"{url}/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "# TYPE " in body  # the exposition format; the names are metrics.py's
    status, body, _ = get(f"{url}/api/group-lag?id=nobody")
    assert status == 200
    assert json.loads(body) == {"state": "Dead", "lag": 0, "partitions": {}}


async def test_off_when_not_configured_or_disabled(tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    async with open_broker(log_dirs=str(tmp_path / "a")) as broker:
        assert broker.http_address is None
    with caplog.at_level(logging.INFO, logger="trio_broker.broker.http"):
        async with open_broker(log_dirs=str(tmp_path / "b"), http_listener="http://127.0.0.1:0",
                               http_console_enabled=False) as broker:
            assert broker.http_address is None
        async with open_broker(log_dirs=str(tmp_path / "c"),
                               http_listener="http://127.0.0.1:0") as broker:
            assert broker.http_address is not None
            host, port = broker.http_address
            status, body, _ = await trio.to_thread.run_sync(get, f"http://{host}:{port}/")
            assert status == 200
            assert 'id="broker-id">0<' in body
    messages = [r.getMessage() for r in caplog.records if r.name == "trio_broker.broker.http"]
    assert "web console off: http.console.enabled=false" in messages
    assert f"web console on http://127.0.0.1:{port}/ (read-write)" in messages


def test_the_overview_links_the_services_beside_the_broker(tmp_path: Path) -> None:
    """The Schema Registry and the REST proxy, when served, are on the overview with links to
    what they answer (the registry's subjects, the proxy's OpenAPI document)."""
    from .conftest import console_broker

    broker = console_broker(tmp_path, schema_registry_listener="http://127.0.0.1:0",
                            rest_proxy_listener="http://127.0.0.1:0")
    try:
        page = urllib.request.urlopen(console_url(broker) + "/", timeout=10).read().decode()
        registry, proxy = broker.schema_registry_url, broker.rest_proxy_url
        assert f'href="{registry}/subjects"' in page
        assert f'href="{proxy}/v3/openapi.json"' in page
        for target in (f"{registry}/subjects", f"{proxy}/v3/openapi.json"):
            assert urllib.request.urlopen(target, timeout=10).status == 200
    finally:
        broker.stop()
