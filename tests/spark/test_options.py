"""Option parsing and offset-range planning: Spark's Kafka-source rules, without Spark."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trio_broker.client.blocking import TopicPartition
from trio_broker.spark._options import (
    OffsetRange,
    SourceOptionError,
    offsets_json,
    parse_options,
)
from trio_broker.spark._planning import rate_limit, split_ranges

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
    ({**BASE, "subscribe": "a", "startingOffsets": "latest"}, False,
     "^starting offset can't be latest for batch queries on Kafka$"),
    ({**BASE, "subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, False,
     "^startingOffsets for a-0 can't be latest for batch queries on Kafka$"),
    ({**BASE, "subscribe": "a", "endingOffsets": "earliest"}, False,
     "^ending offset can't be earliest for batch queries on Kafka$"),
    ({**BASE, "subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, False,
     "^ending offset for a-0 can't be earliest for batch queries on Kafka$"),
    ({**BASE, "subscribe": "a", "endingOffsets": "latest"}, True,
     "^ending offset not valid in streaming queries$"),
    ({**BASE, "subscribe": "a", "endingOffsetsByTimestamp": '{"a":{"0":5}}'}, True,
     "^ending timestamp not valid in streaming queries$"),
    ({**BASE, "subscribe": "a", "endingTimestamp": "5"}, True,
     "^ending timestamp not valid in streaming queries$"),
    ({**BASE, "subscribe": "a", "startingOffsets": "{oops"}, False, "not valid JSON"),
    ({**BASE, "subscribe": "a", "startingOffsets": "[1]"}, False,
     r'^Expected e\.g\. \{"topicA":\{"0":23,"1":-1\},"topicB":\{"0":-2\}\}, got \[1\]'),
    ({**BASE, "subscribe": "a", "startingOffsetsByTimestamp": '{"a": 5}'}, False,
     r'^Expected e\.g\. \{"topicA": \{"0": 123456789'),
    ({**BASE, "subscribe": "a", "startingTimestamp": "soon"}, False,
     "^Expected a single long value, got soon"),
    ({**BASE, "subscribe": "a", "startingOffsetsByTimestampStrategy": "maybe"}, False,
     "must be 'error' or 'latest'"),
    ({**BASE, "subscribe": "a", "minPartitions": "0"}, False, "^minPartitions must be positive$"),
    ({**BASE, "subscribe": "a", "maxRecordsPerPartition": "-3"}, False,
     "^maxRecordsPerPartition must be positive$"),
    ({**BASE, "subscribe": "a", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
     True, r"^The value of minOffsetPerTrigger\(10\) is higher than the "
           r"maxOffsetsPerTrigger\(5\)\.$"),
    ({**BASE, "subscribe": "a", "maxTriggerDelay": "soon"}, True,
     "must be a duration like 30s"),
    ({**BASE, "subscribe": "a", "startingOffsets": '{"a":{"0":1}}',
      "endingOffsets": '{"a":{"0":9},"b":{"0":9}}'}, False,
     "should include the same topic partitions in the start offsets and the end offsets"),
    ({**BASE, "subscribe": "a", "startingOffsets": '{"a":{"0":10}}',
      "endingOffsets": '{"a":{"0":9}}'}, False,
     "^The start offset 10 for a-0 can't be greater than the end offset 9 in a batch query$"),
    ({**BASE, "subscribe": "a", "startingOffsetsByTimestamp": '{"a":{"0":10}}',
      "endingOffsetsByTimestamp": '{"a":{"0":9}}'}, False,
     "^The start timestamp 10 for a-0 can't be greater than the end timestamp 9"),
    ({**BASE, "subscribe": "a", "kafka.auto.offset.reset": "earliest"}, False,
     "^Kafka option 'auto.offset.reset' is not supported"),
    ({**BASE, "subscribe": "a", "failOnDataLoss": "maybe"}, False, "true or false"),
    ({**BASE, "subscribePattern": "("}, False, "not a regular expression"),
])
def test_invalid_options_say_what_is_wrong(options: dict, streaming: bool, message: str) -> None:
    with pytest.raises(SourceOptionError, match=message):
        parse_options(options, streaming=streaming)


def test_split_ranges_as_sparks_range_calculator() -> None:
    even = [OffsetRange("t", p, 0, 900) for p in range(3)] + [OffsetRange("t", 3, 5, 5)]
    assert split_ranges(even, min_partitions=None, max_records=None) == even[:3]
    # minPartitions is a hint: ranges of even size that would become ~1.3 tasks each stay whole
    assert split_ranges(even, min_partitions=4, max_records=None) == even[:3]
    skewed = [OffsetRange("t", 0, 0, 3000), OffsetRange("t", 1, 0, 100),
              OffsetRange("t", 2, 7, 107)]
    split = split_ranges(skewed, min_partitions=6, max_records=None)
    assert [(r.partition, r.start, r.end) for r in split] == [
        (0, 0, 750), (0, 750, 1500), (0, 1500, 2250), (0, 2250, 3000), (1, 0, 100),
        (2, 7, 107)]
    capped = split_ranges(even[:1], min_partitions=None, max_records=400)
    assert [(r.start, r.end) for r in capped] == [(0, 300), (300, 600), (600, 900)]
    both = split_ranges(skewed, min_partitions=6, max_records=500)
    assert [r.size for r in both] == [500] * 6 + [100, 100]
    both = split_ranges(even[:1], min_partitions=6, max_records=500)
    assert [(r.start, r.end) for r in both] == [(0, 150), (150, 300), (300, 450),
                                                (450, 600), (600, 750), (750, 900)]
    tiny = split_ranges([OffsetRange("t", 0, 0, 2)], min_partitions=8, max_records=None)
    assert [(r.start, r.end) for r in tiny] == [(0, 1), (1, 2)]


def test_starting_and_ending_options_follow_sparks_precedence() -> None:
    tp = TopicPartition("a", 0)
    everything = {**BASE, "subscribe": "a", "startingTimestamp": "1000",
                  "startingOffsetsByTimestamp": "not even JSON",
                  "startingOffsets": "latest", "endingOffsetsByTimestamp": '{"a":{"0":2000}}',
                  "endingOffsets": "earliest"}
    opts = parse_options(everything, streaming=False)  # only the winning options are read
    assert (opts.starting_timestamp, opts.starting_by_timestamp) == (1000, None)
    assert (opts.ending_timestamp, opts.ending_by_timestamp) == (None, {tp: 2000})
    by_ts = parse_options({**BASE, "subscribe": "a", "startingOffsetsByTimestamp":
                           '{"a":{"0":-2}}', "startingOffsets": "latest",
                           "startingOffsetsByTimestampStrategy": "LATEST"}, streaming=True)
    assert (by_ts.starting_by_timestamp, by_ts.starting_timestamp_strategy) == (
        {tp: -2}, "latest")
    stream = parse_options({**BASE, "subscribe": "a", "minOffsetsPerTrigger": "10",
                            "maxTriggerDelay": "2s"}, streaming=True)
    assert (stream.min_offsets_per_trigger, stream.max_trigger_delay_ms) == (10, 2000)
    assert parse_options({**BASE, "subscribe": "a"}, streaming=True).max_trigger_delay_ms == (
        15 * 60 * 1000)


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
