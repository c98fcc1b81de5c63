"""Quix Streams' exactly-once word count against the broker, killed (SIGKILL) mid-way and
restarted: every word's counts in the output are exactly 1..N, read_committed.

Quix Streams pins confluent-kafka below the dev venv's version, so it runs in a virtualenv of
its own, created on first use under ``build/quix-venv`` (pip install, about 20 s) and reused.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
import venv
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin

from tests.broker_process import BrokerProcess
from tests.transactions.test_confluent_transactions import _consume_all

ROOT = Path(__file__).resolve().parents[2]
QUIX_VENV = ROOT / "build" / "quix-venv"
QUIX_VERSION = "3.28.1"
APP = Path(__file__).parent / "apps" / "quix_wordcount.py"
WORDS = 7


def _quix_python() -> Path:
    python = QUIX_VENV / "bin" / "python"
    marker = QUIX_VENV / f".quixstreams-{QUIX_VERSION}"
    if not marker.exists():
        venv.create(QUIX_VENV, with_pip=True, clear=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q",
                        f"quixstreams=={QUIX_VERSION}"], check=True, timeout=600)
        marker.touch()
    return python


def _produce(bootstrap: str, words: list[str]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for w in words:
        producer.produce("words", key=w, value=w)
    assert producer.flush(10) == 0


def _counts(bootstrap: str, expected: int, timeout_s: float) -> list[tuple[str, int]]:
    deadline = time.monotonic() + timeout_s
    seen: list[bytes] = []
    while time.monotonic() < deadline:
        seen = _consume_all(bootstrap, "counts", 2, "read_committed", expected, timeout_s=2)
        if len(seen) >= expected:
            break
    out = []
    for value in seen:
        word, n = value.decode().split(":")
        out.append((word, int(n)))
    return out


def test_quix_exactly_once_word_count_survives_a_kill(tmp_path):
    python = _quix_python()
    broker = BrokerProcess(
        tmp_path / "data", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200"
    ).start()
    apps: list[subprocess.Popen[str]] = []

    def start_app() -> subprocess.Popen[str]:
        app = subprocess.Popen(
            [str(python), str(APP), broker.bootstrap_servers, "words", "counts",
             str(tmp_path / "state")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        apps.append(app)
        return app

    try:
        bootstrap = broker.bootstrap_servers
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
        for topic in ("words", "counts"):
            admin.create_topics([confluent_kafka.admin.NewTopic(topic, 2, 1)])[topic].result(10)
        first = [f"w{i % WORDS}" for i in range(300)]
        _produce(bootstrap, first)
        app = start_app()
        assert len(_counts(bootstrap, 100, 60)) >= 100
        app.send_signal(signal.SIGKILL)  # mid-stream: its open transaction is left behind
        app.wait(10)
        second = [f"w{i % WORDS}" for i in range(300, 600)]
        _produce(bootstrap, second)
        start_app()
        total = collections.Counter(first + second)
        counts = _counts(bootstrap, len(first) + len(second), 90)
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
