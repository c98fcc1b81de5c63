"""The console's pure parts: percentiles from histogram buckets, the live sampler over a real
metrics object, value rendering, and the forms' small parsers."""

from __future__ import annotations

import gc
import json
import random

import pytest

from trio_broker.broker.http.live import LiveSampler, quantile
from trio_broker.broker.http.messages import MAX_SHOWN_BYTES, parse_headers, parse_time, show
from trio_broker.broker.http.web import duration, gc_paused, human_bytes, size_config
from trio_broker.broker.http.writes import parse_configs
from trio_broker.broker.metrics import BrokerMetrics, RequestMetrics, RequestTimes
from trio_broker.protocol.api_keys import ApiKey


def test_quantile_interpolates_inside_the_bucket() -> None:
    bounds = (1.0, 2.0, 4.0)
    # 10 requests in (0, 1], 10 in (1, 2], none above
    assert quantile(0.5, bounds, [10, 10, 0, 0]) == pytest.approx(1.0)
    assert quantile(0.75, bounds, [10, 10, 0, 0]) == pytest.approx(1.5)
    assert quantile(0.99, bounds, [0, 0, 100, 0]) == pytest.approx(2 + 2 * 0.99)
    assert quantile(0.99, bounds, [0, 0, 0, 5]) == 4.0  # +Inf bucket: the largest bound
    assert quantile(0.5, bounds, [0, 0, 0, 0]) is None


def test_quantile_brackets_the_true_value() -> None:
    """Against samples drawn here: the estimate lies in the true value's bucket."""
    rng = random.Random(7)
    bounds = RequestMetrics.BOUNDS_MS
    samples = [rng.lognormvariate(0, 1.2) for _ in range(5000)]
    metrics = RequestMetrics()
    for value in samples:
        metrics.record(ApiKey.Produce, (0, 0, 0, 0, 0, value))
    counts = metrics.buckets(ApiKey.Produce)
    for q in (0.5, 0.9, 0.99):
        true = sorted(samples)[int(q * len(samples)) - 1]
        estimate = quantile(q, bounds, counts)
        assert estimate is not None
        bucket = next(i for i, b in enumerate(bounds) if true <= b)
        low = bounds[bucket - 1] if bucket else 0.0
        assert low <= estimate <= bounds[bucket]


def test_sampler_turns_counters_into_rates() -> None:
    metrics = BrokerMetrics()
    sampler = LiveSampler(metrics)
    for _ in range(30):
        times = RequestTimes()
        metrics.request_metrics.record_timings(ApiKey.Produce, times, times.received_ns + 2_000_000)
    metrics.bytes_in.inc(3000)
    metrics.connections.set(4)
    sampler.sample()
    [point] = sampler.snapshot()["points"]
    span = point["produce_rate"] and 30 / point["produce_rate"]
    assert 0 < span < 5
    assert point["bytes_in_rate"] == pytest.approx(3000 / span)
    assert point["fetch_rate"] == 0
    assert point["fetch_p99"] is None
    assert 1.0 <= point["produce_p50"] <= 2.5  # 2 ms lands in the (1, 2.5] bucket
    assert sampler.snapshot()["connections"] == 4
    assert metrics.bytes_in.get() == 3000


def test_values_are_shown_as_json_text_or_hex() -> None:
    doc = {"id": 7, "name": "caf\u00e9", "tags": ["a"]}
    shown = show(json.dumps(doc).encode())
    assert shown.fmt == "json"
    assert json.loads(shown.text) == doc
    assert "\n  " in shown.text
    assert show(b"plain words").fmt == "text"
    assert show(b"\x00\x01\xff").fmt == "hex"
    assert show(b"\x00\x01\xff").text == "00 01 ff"
    assert show(b"a\x02b").fmt == "hex"  # control characters are not text
    assert show(None)[:4] == ("null", "null", 0, False)
    assert (show(None).schema, show(None).note) == ("", "")
    assert show(b"{not json").fmt == "text"
    assert show(b'{"a": 1}', "hex").text == "7b 22 61 22 3a 20 31 7d"
    assert show(b'{"a": 1}', "text").text == '{"a": 1}'
    assert show(b"\xff", "text").text == "\ufffd"
    big = show(b"x" * (MAX_SHOWN_BYTES + 10))
    assert big.cut
    assert big.size == MAX_SHOWN_BYTES + 10
    assert len(big.text) == MAX_SHOWN_BYTES


def test_form_parsers() -> None:
    assert parse_headers("source: shop\ntrace=abc\n\n") == [("source", b"shop"),
                                                             ("trace", b"abc")]
    with pytest.raises(ValueError, match="no name"):
        parse_headers(": x")
    assert parse_configs("# comment\nretention.ms = 1000\n\ncleanup.policy=compact") == {
        "retention.ms": "1000", "cleanup.policy": "compact"}
    with pytest.raises(ValueError, match="key=value"):
        parse_configs("retention.ms")
    assert parse_time("1700000000000") == 1_700_000_000_000
    assert parse_time("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert parse_time("2023-11-14T22:13:20") == 1_700_000_000_000
    assert parse_time("2023-11-14T23:13:20+01:00") == 1_700_000_000_000


def test_display_filters() -> None:
    assert (human_bytes(512), human_bytes(1536), human_bytes(None)) == ("512 B", "1.5 KiB", "-")
    assert [duration(v) for v in ("604800000", "-1", "90000", "1500", None)] == [
        "7d", "forever", "90s", "1500 ms", "-"]
    assert (size_config("-1"), size_config("1048576")) == ("unlimited", "1.0 MiB")


def test_gc_paused_nests_and_restores() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer page is still being built
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # paused by someone else: left to them
    finally:
        gc.enable()
    with pytest.raises(KeyError), gc_paused():
        raise KeyError("a failing page")
    assert gc.isenabled()
