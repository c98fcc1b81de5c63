"""Debian's kcat (librdkafka 2.0.x) with each codec: what it stores, group commit, restart.

Why this client: librdkafka 2.0 decides whether it may compress from the Produce/Fetch versions
a broker advertises; against narrow ranges it sent gzip, snappy and lz4 batches uncompressed
without a word. So the test reads the stored batches' attributes (the codec bits) from the
partition log, not only the records kcat reads back. Then a group consumer commits part of each
topic, the broker restarts on the same data, and the group resumes exactly where it committed.

kcat comes from the apt package ``kcat`` (``make test`` installs it); a machine without it fails
this test rather than skipping it, since the claim in docs/compatibility.md rests on it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

from tests.clients.recorder import recording, versions_by_api
from trio_broker.protocol.batch import iter_batches
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
RECORDS = 60
FIRST = 25  # records the first group consumer reads (and commits) per topic
CLIENT_ID = "kcat-compat"


def _kcat(*args: str, stdin: bytes | None = None) -> bytes:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is missing: install the apt package kcat (make test does)"
    done = subprocess.run([kcat, "-X", f"client.id={CLIENT_ID}", *args], input=stdin,
                          capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _codecs_stored(broker: ThreadedBroker, topic: str) -> list[int]:
    """The codec bits of every stored batch of partition 0, in offset order."""
    def read() -> list[int]:
        assert broker.broker is not None
        log = broker.broker.state.logs.get_log(topic, 0)
        codecs, offset = [], 0
        while offset < log.log_end_offset:
            for _, header in iter_batches(log.read(offset, 1 << 20).records):
                codecs.append(header.attributes & 0x07)
                offset = header.next_offset
        return codecs

    return broker.call(read)


def _consume_group(bootstrap: str, group: str, topic: str, *extra: str) -> list[bytes]:
    out = _kcat("-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-e",
                "-f", "%s\n", "-u", *extra, topic)
    return out.splitlines()


def test_kcat_compresses_every_codec_commits_and_resumes_after_restart(tmp_path: Path) -> None:
    port = _free_port()
    settings = {**TEST_DEFAULTS, "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "log_dirs": str(tmp_path / "data")}
    bootstrap = f"127.0.0.1:{port}"
    values = {codec: [b"%s record %d %s" % (codec.encode(), i, b"x" * (i % 40))
                      for i in range(RECORDS)] for codec in CODECS}
    broker = ThreadedBroker(**settings).start()
    try:
        with recording() as seen:
            for codec in CODECS:
                topic = f"kcat-{codec}"
                broker.create_topic(topic, 1)
                _kcat("-b", bootstrap, "-P", "-t", topic, "-p", "0", "-z", codec,
                      "-X", "linger.ms=50", stdin=b"\n".join(values[codec]) + b"\n")
                stored = _codecs_stored(broker, topic)
                assert stored, codec
                assert set(stored) == {CODECS[codec]}, (codec, stored)
                # consumed back whole by a plain consumer
                assert _kcat("-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning",
                             "-e", "-f", "%s\n").splitlines() == values[codec]
                # a group consumer reads part of the topic; closing commits what it read
                got = _consume_group(bootstrap, f"kcat-group-{codec}", topic, "-c", str(FIRST))
                assert got == values[codec][:FIRST]
        sent = versions_by_api(seen, CLIENT_ID)  # librdkafka 2.0's newest
        assert sent["Produce"] == {7}
        assert sent["Fetch"] == {11}
        assert sent["OffsetCommit"] == {7}
    finally:
        broker.stop()

    broker = ThreadedBroker(**settings).start()  # the commits must have survived
    try:
        for codec in CODECS:
            got = _consume_group(bootstrap, f"kcat-group-{codec}", f"kcat-{codec}")
            assert got == values[codec][FIRST:], codec
    finally:
        broker.stop()
