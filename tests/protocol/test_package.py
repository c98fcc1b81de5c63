"""The package speaks Kafka on its own: kafka-python is a test oracle, not a dependency."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# kafka-python made unimportable; warnings are errors (an embedder's test run sees none of ours)
CHECK = """
import sys
sys.modules["kafka"] = None
import trio_broker.broker.lifecycle, trio_broker.cli, trio_broker.client, trio_broker.testing
from trio_broker.broker.apis.registry import advertised_versions
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.messages import (decode_request_body, decode_request_header,
                                           decode_response, encode_request, encode_response,
                                           make_request, make_response)

for key, versions in advertised_versions().items():
    for v in range(versions.min, versions.max + 1):
        frame = encode_request(key, v, 7, "c", make_request(key, v))[4:]
        header = decode_request_header(frame)
        decode_request_body(header, frame)
        response = encode_response(header, make_response(key, v))
        assert decode_response(key, v, response[4:])[0] == 7
assert not [m for m in sys.modules if m.startswith("kafka.")]
print("spoke", len(advertised_versions()), "APIs")
"""


def test_the_package_speaks_every_advertised_api_without_kafka_python() -> None:
    done = subprocess.run([sys.executable, "-W", "error", "-c", CHECK], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("spoke "), done.stdout
