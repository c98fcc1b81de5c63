"""A stream processor's state store recovered from a compacted changelog: Quix Streams and
faust-streaming count words, their changelog topic is compacted by the background cleaner, the
app is stopped, its local state deleted, and the restarted app rebuilds its counts from the
compacted changelog alone.

Each processor runs in a virtualenv of its own (``tests/transactions/test_stream_processors.py``).
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import sys
import time

import confluent_kafka
import confluent_kafka.admin
import pytest

from tests.broker_process import BrokerProcess
from tests.transactions.test_stream_processors import (
    APPS,
    PROCESSORS,
    _counts,
    _produce,
    _python,
    venv_python,
)

WORDS = 7
FAUST_PIN = "faust-streaming==0.15.3"
FAUST_CHANGELOG = "faust-wordcount-word_counts-changelog"


def _changelog_records(bootstrap: str, prefix: str = "changelog__") -> tuple[str, int]:
    """(changelog topic, records read from its start) of the word count's store."""
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    assert len(topics) == 1, topics
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "peek",
                                         "enable.auto.commit": False,
                                         "isolation.level": "read_committed"})
    meta = admin.list_topics(topics[0], timeout=10).topics[topics[0]]
    consumer.assign([confluent_kafka.TopicPartition(topics[0], p,
                                                    confluent_kafka.OFFSET_BEGINNING)
                     for p in meta.partitions])
    seen = 0
    quiet = 0
    while quiet < 3:
        batch = consumer.consume(1000, 0.3)
        seen += sum(1 for m in batch if m.error() is None)
        quiet = 0 if batch else quiet + 1
    consumer.close()
    return topics[0], seen


def test_quix_recovers_its_counts_from_a_compacted_changelog(tmp_path):
    python = _python("quix")
    _, app_path, app_args, *_ = PROCESSORS["quix"]
    broker = BrokerProcess(
        tmp_path / "data", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
        "log.cleaner.backoff.ms=100", "log.cleaner.min.cleanable.ratio=0.01",
        "log.segment.bytes=4096").start()
    apps: list[subprocess.Popen[str]] = []
    state = tmp_path / "state"

    def start_app() -> subprocess.Popen[str]:
        app = subprocess.Popen(
            [str(python), str(app_path), broker.bootstrap_servers, *app_args(state)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        apps.append(app)
        return app

    try:
        bootstrap = broker.bootstrap_servers
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
        for topic in ("words", "counts"):
            admin.create_topics([confluent_kafka.admin.NewTopic(topic, 2, 1)])[topic].result(10)
        first = [f"w{i % WORDS}" for i in range(400)]
        _produce(bootstrap, first)
        app = start_app()
        assert len(_counts("quix", bootstrap, len(first), 90, app)) == len(first)
        app.send_signal(signal.SIGKILL)
        app.wait(10)
        # the cleaner compacts the changelog: 400 updates of 7 keys shrink to a few segments'
        deadline = time.monotonic() + 60
        changelog, kept = _changelog_records(bootstrap)
        while kept >= len(first) // 2 and time.monotonic() < deadline:
            time.sleep(0.5)
            changelog, kept = _changelog_records(bootstrap)
        print(f"\n{changelog}: {kept} records left of {len(first)} updates")
        assert kept < len(first) // 2
        shutil.rmtree(state)  # empty local state: everything comes from the changelog
        second = [f"w{i % WORDS}" for i in range(400, 500)]
        _produce(bootstrap, second)
        app = start_app()
        counts = _counts("quix", bootstrap, len(first) + len(second), 90, app)
        by_word: dict[str, list[int]] = collections.defaultdict(list)
        for word, n in counts:
            by_word[word].append(n)
        for word, expected in collections.Counter(first + second).items():
            assert sorted(by_word[word]) == list(range(1, expected + 1)), word
    finally:
        for app in apps:
            app.kill()
            app.wait(10)
        broker.kill()
        for app in apps:
            assert app.stdout is not None
            sys.stdout.write(app.stdout.read()[-2000:])


def _faust_counts(bootstrap: str, expected: int, timeout_s: float,
                  app: subprocess.Popen[str]) -> dict[str, list[int]]:
    """word -> every count the faust app wrote to ``counts``, read from the start."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "checker",
                                         "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    consumer.assign([confluent_kafka.TopicPartition("counts", p,
                                                    confluent_kafka.OFFSET_BEGINNING)
                     for p in range(2)])
    by_word: dict[str, list[int]] = collections.defaultdict(list)
    seen = 0
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and seen < expected:
            assert app.poll() is None, "the faust app exited"
            for m in consumer.consume(num_messages=1000, timeout=0.2):
                if m.error() is None:
                    word, n = m.value().decode().split(":")
                    by_word[word].append(int(n))
                    seen += 1
        for m in consumer.consume(num_messages=1000, timeout=0.5):  # nothing more may come
            if m.error() is None:
                word, n = m.value().decode().split(":")
                by_word[word].append(int(n))
    finally:
        consumer.close()
    return by_word


@pytest.mark.xfail(strict=False, reason=(
    "open: in 2 of 8 runs since the cluster, authorization and performance work merged, "
    "one word's last count was missing when the checker had read 500 counts (a duplicate count "
    "elsewhere is the likely cause); passed 4 of 4 before those merges"))
def test_faust_recovers_its_table_from_a_compacted_changelog(tmp_path):
    """A faust table (in memory, so every start recovers it from the changelog) survives a
    restart after the cleaner compacted its changelog: the counts go on exactly."""
    python = venv_python("faust", FAUST_PIN)
    # small segments: faust batches its changelog writes, and the active segment (never
    # cleaned) must not hold most of them
    broker = BrokerProcess(
        tmp_path / "data", "log.cleaner.backoff.ms=100", "log.cleaner.min.cleanable.ratio=0.01",
        "log.segment.bytes=1024").start()
    apps: list[subprocess.Popen[str]] = []

    def start_app(data_dir: str) -> subprocess.Popen[str]:
        app = subprocess.Popen(
            [str(python), str(APPS / "faust_wordcount.py"), broker.bootstrap_servers, "words",
             "counts", str(tmp_path / data_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        apps.append(app)
        return app

    try:
        bootstrap = broker.bootstrap_servers
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
        for topic in ("words", "counts"):
            admin.create_topics([confluent_kafka.admin.NewTopic(topic, 2, 1)])[topic].result(10)
        first = [f"w{i % WORDS}" for i in range(400)]
        _produce(bootstrap, first)
        app = start_app("state-1")
        assert sum(map(len, _faust_counts(bootstrap, len(first), 90, app).values())) == 400
        app.send_signal(signal.SIGTERM)  # a clean stop commits the input offsets
        assert app.wait(60) == 0
        deadline = time.monotonic() + 60
        changelog, kept = _changelog_records(bootstrap, FAUST_CHANGELOG)
        while kept >= len(first) // 2 and time.monotonic() < deadline:
            time.sleep(0.5)
            changelog, kept = _changelog_records(bootstrap, FAUST_CHANGELOG)
        print(f"\n{changelog}: {kept} records left of {len(first)} updates")
        assert kept < len(first) // 2
        second = [f"w{i % WORDS}" for i in range(400, 500)]
        _produce(bootstrap, second)
        app = start_app("state-2")  # a fresh data dir; the table is rebuilt from the changelog
        by_word = _faust_counts(bootstrap, len(first) + len(second), 90, app)
        for word, expected in collections.Counter(first + second).items():
            assert sorted(by_word[word]) == list(range(1, expected + 1)), word
    finally:
        for app in apps:
            app.kill()
            app.wait(10)
        broker.kill()
        for app in apps:
            assert app.stdout is not None
            sys.stdout.write(app.stdout.read()[-2000:])
