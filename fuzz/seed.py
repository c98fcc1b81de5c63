"""Write the seed inputs of every fuzz target into ``fuzz/corpus/<target>/``: valid inputs made
by the project's own encoders (requests through the codec, batches through the producer's batch
builder, payloads through the consumer protocol's encoders), so fuzzing starts from bytes the
parsers accept and mutates its way outwards. ``python fuzz/seed.py`` (idempotent: a seed is
named by its content's hash)."""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import targets

from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.compression import Compression, compress
from trio_broker.protocol.consumer_protocol import (
    encode_assignment,
    encode_subscription,
)
from trio_broker.protocol.legacy import build_message_set
from trio_broker.protocol.messages import encode_request, make_request
from trio_broker.protocol.records import build_batch
from trio_broker.protocol.schema import StructSchema, message_schema

CORPUS = Path(__file__).resolve().parent / "corpus"


def _batches() -> list[bytes]:
    records: list[Any] = [(b"key", b"value"), (None, b"v" * 100, [("h", b"x"), ("n", None)]),
                          (b"k2", None)]
    out = []
    for codec in Compression:
        out.append(build_batch(records, compression=codec, base_timestamp_ms=1_700_000_000_000))
    out.append(build_batch(records[:1], producer_id=7, producer_epoch=1, base_sequence=0,
                           is_transactional=True, base_timestamp_ms=1_700_000_000_000))
    return out


def _message_sets() -> list[bytes]:
    rows = [(0, 1_700_000_000_000, b"key", b"value"), (1, 1_700_000_000_001, None, b"v")]
    out = []
    for magic in (0, 1):
        for codec in (Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4):
            out.append(build_message_set(magic, rows, compression=codec))
    return out


def _filled(schema: StructSchema, version: int, batch: bytes) -> Any:
    """An instance with one element in every array and a short value in every string, so the
    seed walks every nested struct of the version."""
    obj = schema.cls()
    for field in schema.fields_in(version):
        element: Any
        if field.struct is not None:
            element = _filled(field.struct, version, batch)
        elif field.element == "string":
            element = "t"
        elif field.element in ("bytes", "records"):
            element = batch if field.element == "records" else b"x"
        elif field.element == "uuid":
            element = uuid.UUID(int=1)
        elif field.element == "bool":
            element = True
        elif field.element == "bitfield":
            element = {1}
        else:
            element = 1
        setattr(obj, field.name, [element] if field.is_array else element)
    return obj


def _request_bodies() -> list[bytes]:
    batch = _batches()[0]
    out = []
    for key, version in sorted(targets.REQUEST_VERSIONS):
        schema = message_schema(key, "request")
        if schema is None:
            continue
        for body in (make_request(key, version), _filled(schema.root, version, batch)):
            try:
                frame = encode_request(key, version, 1, "seed", body)
            except ValueError:
                continue
            # size prefix and request header dropped: the body follows the target's two bytes
            header_end = 4 + 10 + len("seed") + (1 if frame_is_flexible(key, version) else 0)
            out.append(bytes([key, version]) + frame[header_end:])
            if len(out) % 7 == 0:  # a few whole frames for the frame target too
                _write("request_frames", bytes([0]) + frame)
    return out


def frame_is_flexible(key: int, version: int) -> bool:
    from trio_broker.protocol.api_keys import is_flexible

    return is_flexible(key, version)


def _jws(claims: dict[str, Any]) -> str:
    def part(doc: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}."


def _sasl() -> list[bytes]:
    sep = b"\x00\x00\x00"
    user, password = targets.USER.encode(), targets.PASSWORD.encode()
    scram_first = b"n,,n=" + user + b",r=clientnonce"
    scram_final = b"c=biws,r=" + targets.NONCE_MARK + b",p=" + base64.b64encode(
        b"\x00" * 32)
    token = _jws({"sub": "alice", "exp": 4_000_000_000, "iat": 1_700_000_000, "aud": "kafka",
                  "iss": "issuer"})
    return [
        bytes([0]) + b"\x00" + user + b"\x00" + password,
        bytes([0]) + user + b"\x00" + user + b"\x00wrong",
        bytes([1]) + scram_first + sep + scram_final,
        bytes([2]) + scram_first + sep + scram_final,
        bytes([3]) + b"n,,\x01auth=Bearer " + token.encode() + b"\x01\x01",
        bytes([7]) + b"n,a=alice,\x01auth=Bearer " + token.encode() + b"\x01\x01",
        bytes([15]) + json.dumps({"alg": "none"}).encode() + sep + json.dumps(
            {"sub": "alice", "exp": 4_000_000_000, "aud": ["kafka"], "iss": "issuer"}).encode(),
    ]


def _share_ops() -> list[bytes]:
    """Members acquiring, acknowledging (accept, release, reject, gap; one type per offset),
    the clock running past the locks and a member leaving, in the target's byte encoding."""
    acquire = [0, 0, 5, 0, 1, 5, 0, 2, 5]  # six records each: 0-5, 6-11, 12-17
    def ack(member: int, first: int, last: int, types: list[int]) -> list[int]:
        return [1, member, 1, first + 8, last - first + 1, 1 if len(types) > 1 else 0, *types]
    return [
        bytes(acquire + ack(0, 0, 5, [1]) + ack(1, 6, 11, [2]) + ack(2, 12, 17, [1, 3, 2, 0, 1, 1])
              + acquire + [2, 35, 3, 1] + acquire),
        bytes(acquire + ack(0, 0, 5, [1]) + ack(0, 0, 5, [1]) + ack(1, 20, 22, [7])
              + [1, 0, 2, 8, 3, 0, 1, 9, 3, 0, 1]),
        bytes([*acquire, 1, 1, 1, 14, 6, 0, 2, 2, 39] * 4),
    ]


def _write(target: str, data: bytes) -> None:
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"seed-{hashlib.sha1(data).hexdigest()[:16]}").write_bytes(data)


def main() -> None:
    for body in _request_bodies():
        _write("request_body", body)
    api_versions = encode_request(ApiKey.ApiVersions, 3, 1, "seed",
                                  make_request(ApiKey.ApiVersions, 3, client_software_name="s",
                                               client_software_version="1"))
    _write("request_frames", bytes([3]) + api_versions + api_versions)
    for i, batch in enumerate(_batches()):
        _write("record_batches", bytes([0x04 | (i % 6) << 3]) + batch)  # produce, CRCs fixed
        _write("record_batches", bytes([0x80]) + batch)  # produce to a compacted topic
        _write("record_batches", bytes([1]) + batch + batch)  # a consumer's fetch
        _write("record_batches", bytes([2]) + batch)
    for message_set in _message_sets():
        _write("record_batches", bytes([0]) + message_set)
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        _write("record_batches", bytes([3 | codec << 2]) + compress(codec, b"payload " * 40))
    _write("consumer_protocol", b"\x00" + encode_subscription(["a", "b"], b"user"))
    _write("consumer_protocol", b"\x00" + encode_subscription(
        ["a"], None, owned_partitions={"a": [0, 1]}, generation_id=3))
    _write("consumer_protocol", b"\x01" + encode_assignment({"a": [0, 1], "b": [2]}, b"u"))
    for token in _sasl():
        _write("sasl_tokens", token)
    for ops in _share_ops():
        _write("share_acknowledgements", ops)
    for body in ({"api": "Produce", "errors": ["NOT_LEADER_OR_FOLLOWER", 6], "node_id": 1},
                 {"api": 1, "disconnect": True, "count": 2}):
        _write("control_body", b"\x00" + json.dumps(body).encode())
    _write("control_body", b"\x01" + json.dumps({"ms": 250}).encode())
    # nested JSON, valid and a hundred levels deep: what a peer can nest, the parser must bear
    nested = "[" * 100 + "]" * 100
    _write("control_body", b"\x00" + f'{{"api": "Produce", "errors": {nested}}}'.encode())
    _write("console_form", f'{{"format": "json", "v": {nested}}}'.encode())
    _write("sasl_tokens", bytes([15]) + b'{"alg": "none"}' + b"\x00\x00\x00" +
           f'{{"sub": "alice", "exp": 4000000000, "aud": {nested}}}'.encode())
    for form in (b"csrf=x&name=t&partitions=3&configs=retention.ms%3D1000%0A%23c&next=/topics",
                 b"parse_headers=a%3A1%0Ab%3D2&parse_time=2024-01-01T00%3A00%3A00Z",
                 b"mode=offset&offset=5&limit=20&format=json&timestamp=1700000000000"
                 b"&partition=0&int_or_none=7&parse_configs=a%3Db"):
        _write("console_form", form)
    _write("config_file", b"\x00" + b"# broker\nlog.dirs=/tmp/x\nnum.partitions = 3\n"
           b"listeners=PLAINTEXT://127.0.0.1:9092\\\n\nauto.create.topics.enable:true\n")
    _write("config_file", b"\x01" + b'[log]\ndirs = "/tmp/x"\n[num]\npartitions = 3\n')
    # every honoured key with its default, a dozen keys a file: each key's parser is reached
    from trio_broker.broker.config.keys import HONOURED_KEYS

    lines = [f"{key.name}={'' if key.default is None else key.render(key.default)}"
             for key in HONOURED_KEYS.values()]
    for i in range(0, len(lines), 12):
        _write("config_file", b"\x00" + "\n".join(lines[i:i + 12]).encode())


#: JSON's tokens, Python's extensions to it included (json.loads reads NaN and Infinity)
_JSON_WORDS = ("{", "}", "[", "]", ":", ",", '"', "true", "false", "null", "NaN", "Infinity",
               "-Infinity", "1e999", "-1", "0", "1.5", "4294967296", "99999999999999999999")


def _dict(target: str, words: list[str]) -> None:
    """A libFuzzer dictionary (``-dict=``): the words a mutation inserts whole, which byte
    flips would take long to build (JSON keys, config key names)."""
    folder = CORPUS.parent / "dicts"
    folder.mkdir(exist_ok=True)
    lines = ['"' + "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else f"\\x{ord(c):02x}"
                           for c in word) + '"' for word in dict.fromkeys(words)]
    (folder / f"{target}.dict").write_text("\n".join(lines) + "\n")


def dictionaries() -> None:
    from trio_broker.broker.config.keys import BROKER_KEYS
    from trio_broker.protocol.errors import ErrorCode

    _dict("control_body", [*_JSON_WORDS, '"api"', '"errors"', '"node_id"', '"disconnect"',
                           '"count"', '"ms"', '"Produce"', '"Fetch"',
                           *(f'"{e.name}"' for e in list(ErrorCode)[:8])])
    _dict("sasl_tokens", [*_JSON_WORDS, '"alg"', '"none"', '"kid"', '"sub"', '"exp"', '"iat"',
                          '"aud"', '"iss"', '"kafka"', '"issuer"', "auth=Bearer ", "\x01",
                          "n,,", "n=", "r=", "c=biws", "p=", "a=", "=2C", "=3D",
                          targets.NONCE_MARK.decode(), "\x00\x00\x00"])
    _dict("console_form", ["&", "=", "%", "%0A", "%3D", "%3A", "+", "timestamp", "format",
                           "mode", "partition", "offset", "limit", "filter", "json", "hex",
                           "text", "auto", "parse_configs", "parse_headers", "parse_time",
                           "int_or_none", "T", "Z", "+00:00", "-", ":", "[", "{", "NaN",
                           "Infinity", "next", "/", "//", "\\\\", "%09", "%5C"])
    _dict("config_file", [*BROKER_KEYS, "=", ":", "\\", "\n", "#", "!", "[", "]", '"', "true",
                          "false", "-1", "9223372036854775808", "PLAINTEXT://", "SASL_SSL://",
                          "127.0.0.1:9092", ",", "{", "}", "1e999", "nan", "inf"])


if __name__ == "__main__":
    dictionaries()
    main()
