"""The log cleaner's metrics, read at scrape time, named as the JMX exporter's Kafka rules name
Kafka's (``kafka.log:type=LogCleaner,...`` and ``type=LogCleanerManager``):

- ``kafka_log_logcleanermanager_max_dirty_percent``: the largest dirty ratio of a compacted log
  (percent), as of the cleaner's last look;
- ``kafka_log_logcleaner_max_compaction_delay_secs``: how far past ``max.compaction.lag.ms`` the
  most overdue log is;
- ``kafka_log_logcleaner_cleaner_recopy_percent`` (bytes written / read by the last cleaning) and
  ``kafka_log_logcleaner_max_clean_time_secs`` (the last cleaning's duration);
- ``kafka_log_logcleanermanager_time_since_last_run_ms``;
- counters Kafka has no JMX name for, in the same style: ``kafka_log_logcleaner_runs_total``,
  ``kafka_log_logcleaner_bytes_read_total``, ``kafka_log_logcleaner_bytes_written_total``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...storage.cleaner_manager import LogCleaner

if TYPE_CHECKING:  # prometheus-client is imported by the first scrape
    from prometheus_client.core import Metric


def cleaner_metrics(cleaner: LogCleaner) -> Iterator[Metric]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    m = cleaner.metrics
    yield GaugeMetricFamily("kafka_log_logcleanermanager_max_dirty_percent",
                            "Largest dirty ratio of a compacted log, percent.",
                            value=100 * m.max_dirty_ratio)
    yield GaugeMetricFamily("kafka_log_logcleaner_max_compaction_delay_secs",
                            "How far past max.compaction.lag.ms the most overdue log is.",
                            value=m.max_compaction_delay_ms / 1000)
    yield GaugeMetricFamily("kafka_log_logcleaner_cleaner_recopy_percent",
                            "Bytes written / bytes read by the last cleaning, percent.",
                            value=m.last_recopy_percent)
    yield GaugeMetricFamily("kafka_log_logcleaner_max_clean_time_secs",
                            "Duration of the last cleaning.", value=m.last_clean_secs)
    since = (time.monotonic() - m.last_run_monotonic) * 1000 if m.last_run_monotonic else 0
    yield GaugeMetricFamily("kafka_log_logcleanermanager_time_since_last_run_ms",
                            "Milliseconds since the last cleaning (0: none yet).", value=since)
    yield CounterMetricFamily("kafka_log_logcleaner_runs", "Cleanings done.", value=m.runs)
    yield CounterMetricFamily("kafka_log_logcleaner_bytes_read", "Bytes the cleaner read.",
                              value=m.bytes_read)
    yield CounterMetricFamily("kafka_log_logcleaner_bytes_written",
                              "Bytes the cleaner wrote.", value=m.bytes_written)


__all__ = ["cleaner_metrics"]
