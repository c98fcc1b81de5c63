"""The REST proxy's bounds, with raw sockets: a client that vanishes mid-stream, one that goes
quiet, and a body over the bound."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable

import httpx
import pytest

from trio_broker.broker.rest_proxy import produce
from trio_broker.testing import ThreadedBroker


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _stream_head(path: str, host: str) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n").encode()


def _offsets(rest: httpx.Client, cluster: str, topic: str) -> int:
    """Records in the topic's one partition: the offset one more record gets."""
    answer = rest.post(f"{cluster}/topics/{topic}/records", json={"value": {"data": "probe"}})
    offset: int = answer.json()["offset"]
    return offset


def test_a_vanished_client_holds_nothing(rest: httpx.Client, cluster: str,
                                         kafka_broker: ThreadedBroker,
                                         unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("rest-vanish")
    assert rest.post(f"{cluster}/topics", json={"topic_name": topic}).status_code == 201
    url = kafka_broker.rest_proxy_url
    record = json.dumps({"value": {"type": "STRING", "data": "x"}}).encode()
    sock = _connect(url)
    sock.sendall(_stream_head(f"{cluster}/topics/{topic}/records", url.removeprefix("http://"))
                 + _chunk(record * 3 + record[:10]))
    # the three whole records are answered, then the client goes away mid-record
    answered = b""
    while answered.count(b'"error_code":200') < 3:
        data = sock.recv(65536)
        assert data, answered
        answered += data
    sock.close()
    # the proxy goes on serving, and the three records were written
    assert _offsets(rest, cluster, topic) == 3


def test_a_quiet_stream_is_ended(rest: httpx.Client, cluster: str,
                                 kafka_broker: ThreadedBroker,
                                 unique_topic: Callable[[str], str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(produce, "STREAM_IDLE_TIMEOUT_S", 0.5)
    topic = unique_topic("rest-quiet")
    assert rest.post(f"{cluster}/topics", json={"topic_name": topic}).status_code == 201
    url = kafka_broker.rest_proxy_url
    sock = _connect(url)
    try:
        sock.sendall(_stream_head(f"{cluster}/topics/{topic}/records",
                                  url.removeprefix("http://"))
                     + _chunk(json.dumps({"value": {"data": 1}}).encode()))
        started = time.monotonic()
        answer = b""
        while not answer.endswith(b"0\r\n\r\n"):
            data = sock.recv(65536)
            assert data, answer
            answer += data
        assert time.monotonic() - started < 5
        assert b" 200 " in answer.split(b"\r\n", 1)[0]
        assert b'"error_code":200' in answer
    finally:
        sock.close()


def test_a_body_over_the_bound_is_refused_unread(rest: httpx.Client, cluster: str,
                                                 kafka_broker: ThreadedBroker,
                                                 unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("rest-big")
    assert rest.post(f"{cluster}/topics", json={"topic_name": topic}).status_code == 201
    url = kafka_broker.rest_proxy_url
    for path in (f"{cluster}/topics/{topic}/records", f"{cluster}/topics"):
        sock = _connect(url)
        try:
            sock.sendall((f"POST {path} HTTP/1.1\r\nHost: {url.removeprefix('http://')}\r\n"
                          "Content-Type: application/json\r\n"
                          f"Content-Length: {(8 << 20) + 1}\r\n\r\n").encode())
            answer = b""
            while b"}" not in answer:
                data = sock.recv(65536)
                assert data, answer
                answer += data
            assert answer.startswith(b"HTTP/1.1 413"), answer
            assert b'"error_code":413' in answer
        finally:
            sock.close()


def _read_response(sock: socket.socket) -> bytes:
    """One whole response with a Content-Length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, data
        body += chunk
    return head + b"\r\n\r\n" + body


def test_an_early_error_keeps_the_connection(kafka_broker: ThreadedBroker,
                                             unique_topic: Callable[[str], str]) -> None:
    """An error answered before the body arrived: the connection still carries the next
    request (a keep-alive client reuses it)."""
    url = kafka_broker.rest_proxy_url
    host = url.removeprefix("http://")
    body = json.dumps({"records": [{"value": 1}]}).encode()
    sock = _connect(url)
    try:
        sock.sendall((f"POST /topics/{unique_topic('absent')} HTTP/1.1\r\nHost: {host}\r\n"
                      "Content-Type: application/vnd.kafka.json.v2+json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n").encode())
        time.sleep(0.3)  # the answer is decided before the body is sent
        sock.sendall(body)
        assert _read_response(sock).startswith(b"HTTP/1.1 404")
        sock.sendall(f"GET /topics HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        assert _read_response(sock).startswith(b"HTTP/1.1 200")
    finally:
        sock.close()
