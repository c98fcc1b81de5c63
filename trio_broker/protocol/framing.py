"""Kafka's framing: every message is a 4-byte signed big-endian size, then that many bytes.

Why sans-IO: the connection feeds whatever the socket returned (``receive_data``) and pulls whole
frames out (``next_frame``), so partial frames across reads and many frames in one read are the
same code path, testable without sockets. The size prefix is checked before anything is buffered
for the frame, so a 2 GB size claim costs nothing but a closed connection.
"""

from __future__ import annotations

import enum
import struct

from .errors import RemoteProtocolError

_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")

#: Kafka's default ``socket.request.max.bytes``
DEFAULT_MAX_FRAME_BYTES = 104_857_600


class _Sentinel(enum.Enum):
    NEED_DATA = enum.auto()


NEED_DATA = _Sentinel.NEED_DATA


#: a big frame is read into a buffer of its size once the peer has sent 1/this of it
#: (``FrameDecoder.frame_view``; the broker's produce requests, the client's fetch answers)
DIRECT_GROWTH = 16


class FrameDecoder:
    """Splits a byte stream into frames, refusing sizes outside ``[0, max_frame_bytes]``."""

    __slots__ = ("_big", "_big_got", "_buf", "_pos", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._pos = 0
        #: a big frame's payload being read straight into it (``frame_view``), and its bytes so far
        self._big: bytearray | None = None
        self._big_got = 0

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the peer."""
        if self._big is not None:
            n = min(len(data), len(self._big) - self._big_got)
            self._big[self._big_got:self._big_got + n] = data[:n]
            self._big_got += n
            data = data[n:]
            if not data:
                return
        if self._pos:
            # Drop consumed bytes lazily, once, rather than on every frame.
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    def frame_view(self, min_missing: int, max_growth: int = DIRECT_GROWTH) -> memoryview | None:
        """A view of the still-missing part of the frame being received, for the socket to read
        into (``recv_into``); None unless more than ``min_missing`` bytes are missing.

        Why: a buffer grown read by read is reallocated as it grows, so the kernel hands out
        fresh pages for every big frame, and the frame is then copied out of it; one buffer of
        the frame's size, filled in place, does neither (docs/benchmarks.md, "Per-request
        cost"). It is allocated only once the peer
        has sent at least 1/``max_growth`` of the frame, so a size claim alone never reserves
        memory (as the module's docstring promises); ``receive_data`` still works while it
        fills.
        """
        big = self._big
        if big is None:
            pos, buf = self._pos, self._buf
            avail = len(buf) - pos - 4
            if avail < 0:
                return None
            (size,) = _SIZE.unpack_from(buf, pos)
            if (size - avail <= min_missing or size > avail * max_growth
                    or size > self.max_frame_bytes):
                return None
            big = self._big = bytearray(size)
            big[:avail] = memoryview(buf)[pos + 4:]
            self._big_got = avail
            buf.clear()
            self._pos = 0
        elif len(big) - self._big_got <= 0:
            return None
        return memoryview(big)[self._big_got:]

    def received_into(self, n: int) -> None:
        """Count ``n`` bytes the socket wrote into the last ``frame_view``."""
        self._big_got += n

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        if self._big is not None:
            return self._big_got + 4 + len(self._buf) - self._pos
        return len(self._buf) - self._pos

    def next_frame(self) -> bytes | _Sentinel:
        """Return the next whole frame's payload (without its size), or ``NEED_DATA``.

        Raises ``RemoteProtocolError`` as soon as a size prefix is out of bounds.
        """
        big = self._big
        if big is not None:
            if self._big_got < len(big):
                return NEED_DATA
            self._big = None
            return bytes(big)
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            return NEED_DATA
        (size,) = _SIZE.unpack_from(buf, pos)
        if size < 0 or size > self.max_frame_bytes:
            raise RemoteProtocolError(
                f"frame of {size} bytes is outside 0..{self.max_frame_bytes} "
                "(socket.request.max.bytes)",
                reason="frame_size",
            )
        end = pos + 4 + size
        if len(buf) < end:
            return NEED_DATA
        # One copy: slicing the bytearray itself would copy once more before bytes() does.
        with memoryview(buf) as view:
            frame = bytes(view[pos + 4 : end])
        self._pos = end
        if end == len(buf):
            buf.clear()
            self._pos = 0
        return frame

    def peek_api_key(self) -> int | None:
        """The API key of the next frame if that frame is whole in the buffer and its size is
        in bounds, without taking it; None otherwise (a big frame read in place included)."""
        if self._big is not None:
            return None
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 6:
            return None
        (size,) = _SIZE.unpack_from(buf, pos)
        if size < 2 or size > self.max_frame_bytes or len(buf) - pos - 4 < size:
            return None
        key: int = _API_KEY.unpack_from(buf, pos + 4)[0]
        return key

    def partial_frame(self, max_missing: int) -> bool:
        """Whether the buffer holds no whole frame, only the start of one whose size (when
        there) is in bounds and that misses at most ``max_missing`` bytes."""
        if self._big is not None:
            return False
        buf, pos = self._buf, self._pos
        avail = len(buf) - pos
        if avail < 4:
            return True
        size: int = _SIZE.unpack_from(buf, pos)[0]
        return 0 <= size <= self.max_frame_bytes and 0 < 4 + size - avail <= max_missing

    def next_frame_in_place(self) -> bytes | bytearray | _Sentinel:
        """``next_frame``, except that a big frame read in place (``frame_view``) comes back as
        the buffer it was read into, not copied to ``bytes``: for a reader that only decodes
        its frames and keeps nothing of them but what the decoder copies out (the broker's
        requests, a produce of 1 MB records among them; the client's ~1 MB fetch answers)."""
        big = self._big
        if big is not None and self._big_got == len(big):
            self._big = None
            return big
        return self.next_frame()

    def missing_bytes(self) -> int:
        """How many more bytes the current partial frame needs (4 if even the size is missing)."""
        if self._big is not None:
            return len(self._big) - self._big_got
        avail = len(self._buf) - self._pos
        if avail < 4:
            return 4 - avail
        size: int = _SIZE.unpack_from(self._buf, self._pos)[0]
        return max(0, 4 + size - avail)


def frame(payload: bytes | bytearray) -> bytes:
    """Prefix ``payload`` with its size."""
    return _SIZE.pack(len(payload)) + payload
