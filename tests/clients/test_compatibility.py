"""docs/compatibility.md against the code and against what real clients sent.

Three claims, each checked: (1) no implemented API advertises less than Kafka (3.9's minimum ..
4.1's maximum, the ranges recorded in ``protocol.versions``), in the table and in a live
ApiVersions answer; (2) the table's accepted / Kafka 3.9 / Kafka 4.1 columns are the code's;
(3) every version the "exercised by" column names was sent by that client, measured here: one
broker, one short workload per client (``workloads.py``), a recorder on the handler table.

``python -m tests.clients.test_compatibility`` runs the measurement and prints the table.
"""

from __future__ import annotations

import re
import socket
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.recorder import recording, versions_by_api
from tests.clients.workloads import WORKLOADS, client_id
from tests.security_files import make_users_file
from trio_broker.broker.apis.registry import (
    HANDLERS,
    UNADVERTISED,
    _api_version_entries,
    advertised_versions,
)
from trio_broker.protocol.api_keys import SUPPORTED_VERSIONS
from trio_broker.protocol.messages import decode_response, encode_request, make_request
from trio_broker.protocol.versions import KAFKA_VERSIONS, ApiKey, VersionRange, kafka_range
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"

#: APIs Kafka 3.9 answers to clients that this broker does not implement yet, and why; an API
#: in neither HANDLERS nor here fails the breadth test (nothing is dropped silently)
NOT_IMPLEMENTED = {
    ApiKey.WriteTxnMarkers: "inter-broker: a single node writes its markers itself",
    ApiKey.AlterReplicaLogDirs: "one log dir per broker here: nothing to move between",
    ApiKey.DescribeQuorum: "no KRaft quorum: a single node without a controller quorum",
    ApiKey.UpdateFeatures: "no finalized feature levels to update on one node",
}


#: implemented APIs that advertise less than Kafka's range, and why (the only exceptions)
NARROWER: dict[ApiKey, tuple[VersionRange, str]] = {}


# --- the table ----------------------------------------------------------------------------------

class Row:
    def __init__(self, cells: list[str]) -> None:
        self.name, key, accepted, k39, k41, exercised = cells
        self.key = int(key)
        self.accepted, self.k39, self.k41 = (_range(c) for c in (accepted, k39, k41))
        self.exercised: dict[str, set[int]] = {}
        for entry in filter(None, (e.strip() for e in exercised.split(";"))):
            m = re.fullmatch(r"(\S+) v([\d,]+)", entry)
            assert m, f"{self.name}: cannot read {entry!r}"
            self.exercised[m[1]] = {int(v) for v in m[2].split(",")}


def _range(cell: str) -> VersionRange:
    lo, _, hi = cell.strip("` ").partition("-")
    return VersionRange(int(lo), int(hi or lo))


def table_rows() -> list[Row]:
    rows = []
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[1].isdigit():
            rows.append(Row(cells))
    return rows


def _range_text(r: VersionRange) -> str:
    return f"{r.min}-{r.max}" if r.min != r.max else f"{r.min}"


def render_table(measured: dict[str, dict[str, set[int]]]) -> str:
    """The table as docs/compatibility.md has it, from the code and a measurement."""
    lines = ["| API | key | accepted | Kafka 3.9 | Kafka 4.1 | exercised by (client vVersions) |",
             "|---|---|---|---|---|---|"]
    for key, accepted in sorted(advertised_versions().items()):
        kafka = KAFKA_VERSIONS[key]
        exercised = "; ".join(
            f"{label} v{','.join(map(str, sorted(apis[key.name])))}"
            for label, apis in measured.items() if key.name in apis)
        lines.append(f"| {key.name} | {int(key)} | {_range_text(accepted)} | "
                     f"{_range_text(kafka.kafka_3_9)} | {_range_text(kafka.kafka_4_1)} | "
                     f"{exercised} |")
    return "\n".join(lines)


# --- (1) breadth --------------------------------------------------------------------------------

def test_no_implemented_api_advertises_less_than_kafka() -> None:
    advertised = advertised_versions()
    # every API with a handler is advertised, KIP-714's telemetry APIs included
    assert set(advertised) == {ApiKey(k) for k in HANDLERS} - UNADVERTISED
    assert not UNADVERTISED
    narrower = {key.name: (tuple(got), tuple(kafka_range(key)))
                for key, got in advertised.items()
                if (got.min > kafka_range(key).min or got.max < kafka_range(key).max)
                and NARROWER.get(key, (None,))[0] != got}
    assert not narrower, f"advertised (min, max) vs Kafka 3.9 min .. 4.1 max: {narrower}"
    # every API Kafka 3.9 answers clients is implemented or written down as not yet
    unaccounted = {key.name for key in KAFKA_VERSIONS if key not in advertised
                   and key not in NOT_IMPLEMENTED and key not in UNADVERTISED}
    assert not unaccounted
    assert not {k.name for k in NOT_IMPLEMENTED if k in advertised}


def test_the_live_api_versions_answer_is_kafkas_range(broker: ThreadedBroker) -> None:
    host, port = broker.bootstrap_servers.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(encode_request(ApiKey.ApiVersions, 3, 1, "breadth", make_request(
            ApiKey.ApiVersions, 3, client_software_name="breadth",
            client_software_version="1")))
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
            chunk = sock.recv(1 << 16)
            assert chunk
            buf += chunk
    _, body = decode_response(ApiKey.ApiVersions, 3, buf[4:])
    answered = {e.api_key: (e.min_version, e.max_version) for e in body.api_keys}
    assert answered == {int(k): tuple(NARROWER[k][0] if k in NARROWER else kafka_range(k))
                        for k in advertised_versions()}
    assert len(_api_version_entries()) == len(HANDLERS) - len(UNADVERTISED)


# --- (2) the table and the code -----------------------------------------------------------------

def test_the_table_states_the_codes_ranges() -> None:
    rows = table_rows()
    assert [r.key for r in rows] == sorted(int(k) for k in advertised_versions())
    for row in rows:
        key = ApiKey(row.key)
        assert row.name == key.name
        assert row.accepted == SUPPORTED_VERSIONS[key], row.name
        assert (row.k39, row.k41) == (KAFKA_VERSIONS[key].kafka_3_9,
                                      KAFKA_VERSIONS[key].kafka_4_1), row.name
        for label, versions in row.exercised.items():
            assert label in WORKLOADS, f"{row.name}: unknown client {label!r}"
            assert all(v in row.accepted for v in versions), (row.name, label, versions)
    text = DOC.read_text()
    missing = [key.name for key in NOT_IMPLEMENTED if key.name not in text]
    assert not missing, f"not implemented yet, but not said so in the doc: {missing}"


# --- (3) the exercised-by column was measured ---------------------------------------------------

def measure(broker: ThreadedBroker) -> dict[str, dict[str, set[int]]]:
    """label -> API name -> versions that client sent while its workload succeeded."""
    out = {}
    with recording() as seen:
        for label, workload in WORKLOADS.items():
            topic = broker.create_topic(f"compat-{client_id(label)}", 1)
            workload(broker.bootstrap_servers, sasl_bootstrap(broker), topic)
    for label in WORKLOADS:
        out[label] = versions_by_api(seen, client_id(label))
    return out


def sasl_bootstrap(broker: ThreadedBroker) -> str:
    assert broker.broker is not None
    [address] = [f"{host}:{port}" for name, host, port in broker.broker.listeners
                 if name == "SASL_PLAINTEXT"]
    return address


def start_broker(data: Path) -> ThreadedBroker:
    """A broker that stores SCRAM users (the admin workloads manage one)."""
    return ThreadedBroker(**{
        **TEST_DEFAULTS, "log_dirs": str(data / "logs"),
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl_credentials_file": str(make_users_file(data / "users.json")),
        "sasl_enabled_mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}).start()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedBroker]:
    broker = start_broker(tmp_path_factory.mktemp("compat"))
    yield broker
    broker.stop()


def test_every_exercised_version_was_sent_by_that_client(broker: ThreadedBroker) -> None:
    measured = measure(broker)
    rows = table_rows()
    claimed = {label for row in rows for label in row.exercised}
    assert claimed == set(WORKLOADS), "every client of the matrix has its versions in the table"
    missing = {(row.name, label): sorted(versions - measured[label].get(row.name, set()))
               for row in rows for label, versions in row.exercised.items()
               if versions - measured[label].get(row.name, set())}
    assert not missing, f"claimed but not sent: {missing}\nmeasured:\n{render_table(measured)}"


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as data:
        b = start_broker(Path(data))
        try:
            sys.stdout.write(render_table(measure(b)) + "\n")
        finally:
            b.stop()
