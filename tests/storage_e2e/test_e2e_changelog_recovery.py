"""A stream processor's state store recovered from a compacted changelog: Quix Streams and
faust-streaming count words, their changelog topic is compacted by the background cleaner, the
app is stopped, its local state deleted, and the restarted app rebuilds its counts from the
compacted changelog alone.

Each processor runs in a virtualenv of its own (``tests/transactions/test_stream_processors.py``).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading
import time

import confluent_kafka
import confluent_kafka.admin

from tests.broker_process import BrokerProcess
from tests.transactions.test_stream_processors import (
    APPS,
    PROCESSORS,
    WORDS,
    _counts,
    _produce,
    _python,
    assert_counts_are_exact,
    create_word_topics,
    read_counts,
    start_stream_app,
    venv_python,
)

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


def _wait_until_compacted(bootstrap: str, updates: int, prefix: str = "changelog__") -> None:
    """Wait (at most 60 s) until the cleaner has left fewer than half of ``updates`` in the
    changelog; print what is left."""
    deadline = time.monotonic() + 60
    changelog, kept = _changelog_records(bootstrap, prefix)
    while kept >= updates // 2 and time.monotonic() < deadline:
        time.sleep(0.5)
        changelog, kept = _changelog_records(bootstrap, prefix)
    print(f"\n{changelog}: {kept} records left of {updates} updates")
    assert kept < updates // 2


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
        return start_stream_app(python, [str(app_path), broker.bootstrap_servers,
                                         *app_args(state)], tmp_path, apps)

    try:
        bootstrap = broker.bootstrap_servers
        create_word_topics(bootstrap)
        first = [f"w{i % WORDS}" for i in range(400)]
        _produce(bootstrap, first)
        app = start_app()
        assert len(_counts("quix", bootstrap, len(first), 90, app)) == len(first)
        app.send_signal(signal.SIGKILL)
        app.wait(10)
        # the cleaner compacts the changelog: 400 updates of 7 keys shrink to a few segments'
        _wait_until_compacted(bootstrap, len(first))
        shutil.rmtree(state)  # empty local state: everything comes from the changelog
        second = [f"w{i % WORDS}" for i in range(400, 500)]
        _produce(bootstrap, second)
        app = start_app()
        assert_counts_are_exact(
            _counts("quix", bootstrap, len(first) + len(second), 90, app), first + second)
    finally:
        for app in apps:
            app.kill()
            app.wait(10)
        broker.kill()
        for app in apps:
            assert app.stdout is not None
            sys.stdout.write(app.stdout.read()[-2000:])


class _AppOutput:
    """A stream app's output, read as it comes so the test can wait for one of its lines; the
    tail is shown when the test ends."""

    def __init__(self, app: subprocess.Popen[str], ready_line: str) -> None:
        self.lines: list[str] = []
        self._ready_line = ready_line
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._pump, args=(app,), daemon=True)
        self._reader.start()

    def _pump(self, app: subprocess.Popen[str]) -> None:
        assert app.stdout is not None
        for line in app.stdout:
            self.lines.append(line)
            if self._ready_line in line:
                self._ready.set()

    def wait_ready(self, timeout_s: float) -> None:
        assert self._ready.wait(timeout_s), f"no {self._ready_line!r} within {timeout_s} s"

    def tail(self) -> str:
        self._reader.join(10)
        return "".join(self.lines)[-2000:]


#: what faust logs once its recovery has finished and its streams are running
FAUST_READY = "Worker ready"


def test_faust_recovers_its_table_from_a_compacted_changelog(tmp_path):
    """A faust table (in memory, so every start recovers it from the changelog) survives a
    restart after the cleaner compacted its changelog: the counts go on exactly.

    Each batch of words is produced once the app has logged its recovery done: faust 0.15.3
    loses and repeats input that is already waiting when it starts, whatever the broker. It
    pauses its stream partitions only in its own bookkeeping, so aiokafka fetches them during
    the recovery; at the recovery's end faust resumes them, hands the fetched records to the
    agent while it reads the committed offsets, then clears the agent's queue (its flow control
    clears every queue on resume): the records queued at that moment are never processed.
    After seeking back to the committed offsets it fetches the same records again and delivers
    the last one a second time (it drops offsets below the last one delivered, not up to it).
    Kafka answers those fetches as this broker does.
    """
    python = venv_python("faust", FAUST_PIN)
    # small segments: faust batches its changelog writes, and the active segment (never
    # cleaned) must not hold most of them
    broker = BrokerProcess(
        tmp_path / "data", "log.cleaner.backoff.ms=100", "log.cleaner.min.cleanable.ratio=0.01",
        "log.segment.bytes=1024").start()
    apps: list[subprocess.Popen[str]] = []
    outputs: list[_AppOutput] = []

    def start_app(data_dir: str) -> subprocess.Popen[str]:
        app = start_stream_app(python, [str(APPS / "faust_wordcount.py"),
                                        broker.bootstrap_servers, "words", "counts",
                                        str(tmp_path / data_dir)], tmp_path, apps)
        outputs.append(_AppOutput(app, FAUST_READY))
        outputs[-1].wait_ready(60)
        return app

    try:
        bootstrap = broker.bootstrap_servers
        create_word_topics(bootstrap)
        first = [f"w{i % WORDS}" for i in range(400)]
        app = start_app("state-1")
        _produce(bootstrap, first)
        assert len(read_counts(bootstrap, len(first), 90, app)) == len(first)
        app.send_signal(signal.SIGTERM)  # a clean stop commits the input offsets
        assert app.wait(60) == 0
        _wait_until_compacted(bootstrap, len(first), FAUST_CHANGELOG)
        app = start_app("state-2")  # a fresh data dir; the table is rebuilt from the changelog
        second = [f"w{i % WORDS}" for i in range(400, 500)]
        _produce(bootstrap, second)
        assert_counts_are_exact(read_counts(bootstrap, len(first) + len(second), 90, app),
                                first + second)
    finally:
        for app in apps:
            app.kill()
            app.wait(10)
        broker.kill()
        for output in outputs:
            sys.stdout.write(output.tail())
