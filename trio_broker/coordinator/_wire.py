"""A small blocking Kafka-protocol connection for command-line tools.

Why blocking sockets and not the Trio client: ``trio-broker groups`` sends a handful of requests,
one at a time, to whatever broker it is pointed at (ours or Kafka); a plain socket keeps the CLI
free of an event loop and of client state such as metadata refresh.
"""

from __future__ import annotations

import itertools
import socket
import struct
from typing import Any

from ..protocol.errors import RemoteProtocolError
from ..protocol.messages import decode_response, encode_request, make_request

_SIZE = struct.Struct(">i")
#: the largest response a CLI request is expected to get back
MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class BrokerUnavailable(Exception):
    """The broker could not be reached or dropped the connection; ``str()`` is one line."""


def parse_address(address: str, default_port: int = 9092) -> tuple[str, int]:
    """``host:port`` (or ``[v6]:port``, or a bare host) -> (host, port)."""
    address = address.strip().split(",")[0]
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest.lstrip(":")
    elif address.count(":") == 1:
        host, port = address.split(":")
    else:
        host, port = address, ""
    try:
        return host or "127.0.0.1", int(port) if port else default_port
    except ValueError:
        raise ValueError(f"bad broker address {address!r}: expected host:port") from None


class BrokerConnection:
    """One connection; ``request`` sends a request and returns the decoded response body."""

    def __init__(self, host: str, port: int, *, timeout_s: float = 10.0,
                 client_id: str = "trio-broker-cli") -> None:
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self._correlation = itertools.count(1)
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise BrokerUnavailable(f"cannot connect to {self.address}: "
                                    f"{exc.strerror or exc}") from exc

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def request(self, api_key: int, api_version: int, **fields: Any) -> Any:
        correlation_id = next(self._correlation)
        frame = encode_request(api_key, api_version, correlation_id, self.client_id,
                               make_request(api_key, api_version, **fields))
        try:
            self._sock.sendall(frame)
            (size,) = _SIZE.unpack(self._read(4))
            if size < 4 or size > MAX_RESPONSE_BYTES:
                raise BrokerUnavailable(f"{self.address} sent a response of {size} bytes")
            got_id, body = decode_response(api_key, api_version, self._read(size))
        except OSError as exc:
            raise BrokerUnavailable(f"connection to {self.address} failed: "
                                    f"{exc.strerror or exc}") from exc
        except RemoteProtocolError as exc:
            raise BrokerUnavailable(f"{self.address} sent a malformed response: {exc}") from exc
        if got_id != correlation_id:
            raise BrokerUnavailable(f"{self.address} answered correlation id {got_id}, "
                                    f"expected {correlation_id}")
        return body

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self._sock.recv(min(n, 1 << 20))
            if not chunk:
                raise BrokerUnavailable(f"{self.address} closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)
