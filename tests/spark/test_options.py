"""Option parsing and offset-range planning: Spark's Kafka-source rules, without Spark."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trio_broker.blocking_client import TopicPartition
from trio_broker.spark._options import (
    OffsetRange,
    SourceOptionError,
    offsets_json,
    parse_options,
    rate_limit,
    split_ranges,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_follow_spark() -> None:
    batch = parse_options({**BASE, "subscribe": "a, b"}, streaming=False)
    assert batch.subscribe == ("a", "b")
    assert (batch.starting, batch.ending) == ("earliest", "latest")
    assert batch.fail_on_data_loss
    assert not batch.include_headers
    stream = parse_options({**BASE, "subscribe": "a"}, streaming=True)
    assert stream.starting == "latest"


def test_option_names_are_case_insensitive_and_json_offsets_parse() -> None:
    opts = parse_options({**BASE, "SUBSCRIBEPATTERN": "ev.*", "startingoffsets":
                          '{"ev":{"0":23,"1":-2}}', "includeHeaders": "TRUE",
                          "maxOffsetsPerTrigger": "10"}, streaming=True)
    assert opts.subscribe_pattern == "ev.*"
    assert opts.starting == {TopicPartition("ev", 0): 23, TopicPartition("ev", 1): -2}
    assert opts.include_headers
    assert opts.max_offsets_per_trigger == 10


@pytest.mark.parametrize(("options", "streaming", "message"), [
    ({"subscribe": "a"}, False, "kafka.bootstrap.servers' must be specified"),
    (BASE, False, "One of the following options must be specified"),
    ({**BASE, "subscribe": "a", "assign": '{"a":[0]}'}, False, "Only one of"),
    ({**BASE, "assign": '{"a":"0"}'}, False, "must be JSON like"),
    ({**BASE, "subscribe": "a", "startingOffsets": "latest"}, False, "can't be latest"),
    ({**BASE, "subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, False, "can't be earliest"),
    ({**BASE, "subscribe": "a", "endingOffsets": "latest"}, True, "not valid for streaming"),
    ({**BASE, "subscribe": "a", "startingOffsets": "{oops"}, False, "not valid JSON"),
    ({**BASE, "subscribe": "a", "minPartitions": "0"}, False, "at least 1"),
    ({**BASE, "subscribe": "a", "failOnDataLoss": "maybe"}, False, "true or false"),
    ({**BASE, "subscribePattern": "("}, False, "not a regular expression"),
])
def test_invalid_options_say_what_is_wrong(options: dict, streaming: bool, message: str) -> None:
    with pytest.raises(SourceOptionError, match=message):
        parse_options(options, streaming=streaming)


def test_split_ranges_balances_tasks() -> None:
    ranges = [OffsetRange("t", p, 0, 900) for p in range(3)] + [OffsetRange("t", 3, 5, 5)]
    assert split_ranges(ranges, min_partitions=None, max_records=None) == ranges[:3]
    split = split_ranges(ranges, min_partitions=4, max_records=None)
    assert len(split) == 6
    assert {r.size for r in split} == {450}
    capped = split_ranges(ranges[:1], min_partitions=None, max_records=400)
    assert [(r.start, r.end) for r in capped] == [(0, 300), (300, 600), (600, 900)]
    tiny = split_ranges([OffsetRange("t", 0, 0, 2)], min_partitions=8, max_records=None)
    assert [(r.start, r.end) for r in tiny] == [(0, 1), (1, 2)]


def test_rate_limit_shares_by_backlog_without_starving() -> None:
    a, b, c = (TopicPartition("t", p) for p in range(3))
    ends = rate_limit({a: 0, b: 100, c: 7}, {a: 1000, b: 110, c: 8}, limit=100)
    assert ends[a] - 0 <= 100
    assert ends[b] > 100
    assert ends[c] == 8
    assert sum(ends[tp] - s for tp, s in ((a, 0), (b, 100), (c, 7))) <= 102
    assert rate_limit({a: 0}, {a: 50}, limit=100) == {a: 50}


def test_offsets_json_is_sparks_format() -> None:
    text = offsets_json({TopicPartition("b", 1): 5, TopicPartition("a", 10): 7,
                         TopicPartition("a", 2): 3})
    assert text == '{"a": {"10": 7, "2": 3}, "b": {"1": 5}}'


def test_import_without_pyspark_says_how_to_install() -> None:
    code = ("import sys; sys.modules['pyspark'] = None\n"
            "try:\n    import trio_broker.spark\nexcept ImportError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "pip install 'trio-broker[spark]'" in out
