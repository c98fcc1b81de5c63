"""One client connection's protocol state, without I/O (h11's shape): requests in, bytes out;
bytes in, matched responses out.

Why sans-IO: the Trio client and the blocking client send the same frames and match responses
the same way, so both drive this one object and differ only in how bytes move. Kafka answers a
connection's requests in the order they were sent (``InFlightRequests``), so every request that
expects an answer is remembered in a FIFO with the correlation id it was given; a response whose
correlation id is not the oldest one's means the stream can no longer be trusted.

Feeding it::

    conn = ClientConnection("my-client")
    request, data = conn.send_request(ApiKey.Metadata, 5, body)   # write data to the socket
    conn.receive_data(chunk)                                      # whatever the socket read
    while (response := conn.next_response()) is not NEED_DATA:
        response.request, response.body                            # in send order

A reader that wants a large frame in one preallocated buffer (``recv_into``) reads the 4-byte
size itself, asks ``check_frame_size``, and hands the frame to ``receive_frame``.

Produce with ``acks=0`` is answered by nothing, so it is never put in flight. Limits come first:
a size prefix outside ``0..max_response_bytes`` is refused before a byte of the frame is
buffered. Every failure is an ``InvalidResponseError`` or ``CorrelationIdMismatchError``, both
retriable connection errors: the caller closes the connection and fails what was in flight.
"""

from __future__ import annotations

import struct
from collections import deque
from typing import Any

from ...protocol.errors import RemoteProtocolError
from ...protocol.framing import NEED_DATA, FrameDecoder
from ...protocol.messages import decode_response, encode_request
from .errors import CorrelationIdMismatchError, InvalidResponseError
from .structs import MAX_RESPONSE_BYTES
from .versions import api_name

_I32 = struct.Struct(">i")

__all__ = ["NEED_DATA", "ClientConnection", "InFlight", "Response"]


def _not_kafka(size: int) -> str | None:
    """What a peer that is not a Kafka listener answered, told by the first four bytes its
    "size" is made of: an HTTP server (a metrics or web port) or a TLS listener (a plaintext
    client on an SSL port); ``{}`` stands for the peer."""
    head = (size & 0xFFFFFFFF).to_bytes(4, "big")
    if head == b"HTTP":
        return ("{} answered in HTTP, not the Kafka protocol: is this a web or metrics port "
                "rather than a Kafka listener?")
    if head[0] in (0x15, 0x16) and head[1] == 0x03:
        return ("{} answered with TLS: it is an SSL or SASL_SSL listener "
                "(set security.protocol, or use an SSL:// bootstrap address)")
    return None


class InFlight:
    """A request sent and not yet answered; ``context`` is the caller's (a future, a callback).
    """

    __slots__ = ("api_key", "api_version", "context", "correlation_id", "raw")

    def __init__(self, correlation_id: int, api_key: int, api_version: int, context: Any,
                 raw: bool) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version
        self.context = context
        #: deliver the undecoded frame (ApiVersions negotiation parses its own)
        self.raw = raw

    def __repr__(self) -> str:
        return (f"<InFlight {api_name(self.api_key)} v{self.api_version} "
                f"correlation_id={self.correlation_id}>")


class Response:
    """A response matched to its request: ``body`` is decoded, or the frame for raw requests."""

    __slots__ = ("body", "request")

    def __init__(self, request: InFlight, body: Any) -> None:
        self.request = request
        self.body = body


class ClientConnection:
    """Correlation ids, the in-flight FIFO and response framing of one broker connection."""

    __slots__ = ("_decoder", "_head", "_next_id", "address", "client_id", "in_flight",
                 "max_response_bytes")

    def __init__(self, client_id: str | None, *, address: str = "the broker",
                 max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.client_id = client_id
        self.address = address
        self.max_response_bytes = max_response_bytes
        self.in_flight: deque[InFlight] = deque()
        self._decoder = FrameDecoder(max_response_bytes)
        self._head = b""
        self._next_id = 0

    # --- sending -------------------------------------------------------------------------

    def next_correlation_id(self) -> int:
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        return self._next_id

    def send_request(self, api_key: int, api_version: int, body: Any, *,
                     expect_response: bool = True, context: Any = None, raw: bool = False,
                     correlation_id: int | None = None) -> tuple[InFlight | None, bytes]:
        """Encode one request frame; a request that expects a response is now in flight.

        ``correlation_id`` overrides the next id (tests that probe a broker's matching).
        """
        cid = self.next_correlation_id() if correlation_id is None else correlation_id
        frame = encode_request(api_key, api_version, cid, self.client_id, body)
        if not expect_response:
            return None, frame
        request = InFlight(cid, api_key, api_version, context, raw)
        self.in_flight.append(request)
        return request, frame

    # --- receiving -----------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes the socket returned, any amount."""
        if len(self._head) < 4:  # the first answer's size: tells a peer that is not Kafka
            self._head += bytes(data[:4 - len(self._head)])
        self._decoder.receive_data(data)

    def frame_view(self, min_missing: int) -> memoryview | None:
        """Where the socket may read the rest of a big answer straight into (the decoder's
        ``frame_view``), or None: read with ``receive_data`` then."""
        return self._decoder.frame_view(min_missing)

    def received_into(self, n: int) -> None:
        """Count ``n`` bytes the socket wrote into the last ``frame_view``."""
        self._decoder.received_into(n)

    def next_frame(self) -> bytes | Any:
        """The next whole response frame (size prefix stripped), unmatched, or ``NEED_DATA``;
        a big one read in place (``frame_view``) is the bytearray it was read into."""
        try:
            return self._decoder.next_frame_in_place()
        except RemoteProtocolError as exc:
            other = _not_kafka(int.from_bytes(self._head, "big")) if len(self._head) == 4 else None
            raise InvalidResponseError(other.format(self.address) if other else
                                       f"{self.address} sent a bad frame: {exc}") from None

    def next_response(self) -> Response | Any:
        """The response to the oldest request in flight, or ``NEED_DATA``."""
        frame = self.next_frame()
        if frame is NEED_DATA:
            return NEED_DATA
        return self.receive_frame(frame)

    def check_frame_size(self, size: int) -> None:
        """Refuse a size prefix before its frame is read (for readers that read frames whole).
        """
        if size < 4 or size > self.max_response_bytes:
            other = _not_kafka(size)
            raise InvalidResponseError(
                other.format(self.address) if other else
                f"{self.address} sent a response frame of {size} bytes "
                f"(outside 4..{self.max_response_bytes})")

    def receive_frame(self, frame: bytes | bytearray) -> Response:
        """Match one whole frame to the oldest request in flight and decode it."""
        if len(frame) < 4:
            raise InvalidResponseError(f"{self.address} sent a response shorter than its "
                                       "correlation id")
        (correlation_id,) = _I32.unpack_from(frame, 0)
        if not self.in_flight:
            raise CorrelationIdMismatchError(
                f"{self.address} sent a response with correlation id {correlation_id} but "
                "nothing is in flight")
        head = self.in_flight[0]
        if head.correlation_id != correlation_id:
            raise CorrelationIdMismatchError(
                f"{self.address} answered correlation id {correlation_id}, expected "
                f"{head.correlation_id} ({api_name(head.api_key)})")
        self.in_flight.popleft()
        if head.raw:
            return Response(head, bytes(frame))
        try:
            # decode_response reads through a memoryview: a bytearray serves as well as bytes
            _, body = decode_response(head.api_key, head.api_version, frame)  # type: ignore[arg-type]
        except RemoteProtocolError as exc:
            raise InvalidResponseError(f"{self.address} sent a bad {api_name(head.api_key)} "
                                       f"response: {exc}") from None
        return Response(head, body)

    def fail_all(self) -> list[InFlight]:
        """Remove and return every request in flight (the connection is closing)."""
        requests = list(self.in_flight)
        self.in_flight.clear()
        return requests
