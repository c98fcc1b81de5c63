"""Stream processors' exactly-once word counts against the broker (Quix Streams on
confluent-kafka), killed (SIGKILL) mid-way and restarted: every word's counts in the output are
exactly 1..N, read_committed.

Quix Streams pins confluent-kafka below the dev venv's version, so each processor runs in a
virtualenv of its own, created on first use under ``build/`` (pip install, about 20 s) and
reused.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
import venv
from collections.abc import Callable
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import pytest
from confluent_kafka import TopicPartition

from tests.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
APPS = Path(__file__).parent / "apps"
#: processor -> (package pin, its app, the app's arguments after the bootstrap servers, the
#: topic holding the counts, and how to read (word, count) from one of its records)
PROCESSORS = {
    "quix": ("quixstreams==3.28.1", APPS / "quix_wordcount.py",
             lambda state: ["words", "counts", str(state)], "counts",
             lambda key, value: (value.decode().split(":")[0],
                                 int(value.decode().split(":")[1]))),
}
WORDS = 7


def _python(name: str) -> Path:
    return venv_python(name, PROCESSORS[name][0])


def venv_python(name: str, pin: str) -> Path:
    """The python of ``build/<name>-venv`` holding ``pin``, created on first use."""
    home = ROOT / "build" / f"{name}-venv"
    python = home / "bin" / "python"
    marker = home / f".installed-{pin}"
    if not marker.exists():
        # the dev venv's pip installs into it (--python): a pip of the virtualenv's own would
        # first have to be installed itself, and then installs more slowly
        venv.create(home, with_pip=False, clear=True)
        subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                        "--disable-pip-version-check", pin], check=True, timeout=600)
        marker.touch()
    return python


def start_stream_app(python: Path, argv: list[str], cwd: Path,
                     apps: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    """A stream-processing app in its own virtualenv, this checkout kept off its path; kept in
    ``apps`` so the test can kill it and show its output."""
    app = subprocess.Popen([str(python), *argv], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, cwd=cwd,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    apps.append(app)
    return app


def create_word_topics(bootstrap: str) -> None:
    """The word-count apps' input and output topics, two partitions each."""
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    for topic in ("words", "counts"):
        admin.create_topics([confluent_kafka.admin.NewTopic(topic, 2, 1)])[topic].result(10)


def _produce(bootstrap: str, words: list[str]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for w in words:
        producer.produce("words", key=w, value=w)
    assert producer.flush(10) == 0


def parse_word_count(key: bytes | None, value: bytes) -> tuple[str, int]:
    """A ``word:count`` record of the word-count apps."""
    word, n = value.decode().split(":")
    return word, int(n)


def read_counts(bootstrap: str, expected: int, timeout_s: float, app: subprocess.Popen[str],
                topic: str = "counts", parse: Callable[[bytes | None, bytes], tuple[str, int]]
                = parse_word_count) -> list[tuple[str, int]]:
    """(word, count) of every committed record of ``topic`` (read_committed), until
    ``expected`` were read or ``timeout_s`` passed, and what else comes within 0.5 s."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False,
        "isolation.level": "read_committed", "fetch.wait.max.ms": 50})
    consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(2)])
    out: list[tuple[str, int]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and len(out) < expected:
            assert app.poll() is None, "the stream processor exited"
            for m in consumer.consume(num_messages=1000, timeout=0.2):
                if m.error() is None:
                    out.append(parse(m.key(), m.value()))
        for m in consumer.consume(num_messages=1000, timeout=0.5):  # nothing more may come
            if m.error() is None:
                out.append(parse(m.key(), m.value()))
    finally:
        consumer.close()
    return out


def _counts(processor: str, bootstrap: str, expected: int, timeout_s: float,
            app: subprocess.Popen[str]) -> list[tuple[str, int]]:
    """(word, count) of every record the processor committed."""
    *_, topic, parse = PROCESSORS[processor]
    return read_counts(bootstrap, expected, timeout_s, app, topic, parse)


def assert_counts_are_exact(counts: list[tuple[str, int]], words: list[str]) -> None:
    """Every word's counts are exactly 1..(its occurrences in ``words``)."""
    by_word: dict[str, list[int]] = collections.defaultdict(list)
    for word, n in counts:
        by_word[word].append(n)
    for word, expected in collections.Counter(words).items():
        assert sorted(by_word[word]) == list(range(1, expected + 1)), word


@pytest.mark.parametrize("processor", sorted(PROCESSORS))
def test_exactly_once_word_count_survives_a_kill(tmp_path, processor):
    python = _python(processor)
    _, app_path, app_args, *_ = PROCESSORS[processor]
    broker = BrokerProcess(
        tmp_path / "data", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200"
    ).start()
    apps: list[subprocess.Popen[str]] = []

    def start_app() -> subprocess.Popen[str]:
        return start_stream_app(python, [str(app_path), broker.bootstrap_servers,
                                         *app_args(tmp_path / "state")], tmp_path, apps)

    try:
        bootstrap = broker.bootstrap_servers
        create_word_topics(bootstrap)
        first = [f"w{i % WORDS}" for i in range(300)]
        _produce(bootstrap, first)
        app = start_app()
        assert len(_counts(processor, bootstrap, 100, 60, app)) >= 100
        app.send_signal(signal.SIGKILL)  # mid-stream: its open transaction is left behind
        app.wait(10)
        second = [f"w{i % WORDS}" for i in range(300, 600)]
        _produce(bootstrap, second)
        app = start_app()
        total = collections.Counter(first + second)
        counts = _counts(processor, bootstrap, len(first) + len(second), 90, app)
        by_word: dict[str, list[int]] = collections.defaultdict(list)
        for word, n in counts:
            by_word[word].append(n)
        for word, expected in total.items():
            assert sorted(by_word[word]) == list(range(1, expected + 1)), word
    finally:
        for app in apps:
            app.kill()
            app.wait(10)
        broker.kill()
        for app in apps:
            assert app.stdout is not None
            sys.stdout.write(app.stdout.read()[-2000:])
