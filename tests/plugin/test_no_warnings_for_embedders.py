"""A user's own pytest run with the plugin's fixtures shows no warnings from this package.

Why a subprocess: the project's own pytest configuration ignores some warning classes; a user's
does not. So a small project of its own (a pytest.ini with only ``trio_mode``, the plugin
loaded through its entry point as an installed package is) runs with ``-W error``: any warning
raised while the fixtures start, serve and stop brokers, or while the package's own clients
talk to them, fails that run. The package must not pull in kafka-python either (its schema
loader warned on import once per schema file), so the user's run checks ``sys.modules``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

USER_TESTS = '''
import sys

import trio

from trio_broker.client.blocking import BlockingClient, TopicPartition
from trio_broker.client import open_consumer, open_producer


async def test_trio_fixture_and_client(trio_broker):
    async with open_producer(trio_broker.bootstrap_servers) as producer:
        await producer.send("embedded", b"hello", partition=0)
    async with open_consumer("embedded", bootstrap_servers=trio_broker.bootstrap_servers,
                             group_id="embedders", auto_offset_reset="earliest") as consumer:
        with trio.fail_after(30):
            async for record in consumer:
                assert record.value == b"hello"
                break


def test_threaded_fixture_and_blocking_client(kafka_broker, unique_topic):
    topic = kafka_broker.create_topic(unique_topic("embedded"), 1)
    with BlockingClient(kafka_broker.bootstrap_servers) as client:
        assert client.list_offsets({TopicPartition(topic, 0): -1}) == {
            TopicPartition(topic, 0): 0}


def test_the_package_did_not_import_kafka_python():
    assert "kafka" not in sys.modules
'''


def test_a_users_pytest_run_with_the_fixtures_has_no_warnings(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\ntrio_mode = true\n")
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_ADDOPTS", "PYTHONWARNINGS", "PYTEST_PLUGINS")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-W", "error", "-p", "no:cacheprovider",
         "-rA", "test_user.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "3 passed" in output, output
    assert "warning" not in output.lower(), output
