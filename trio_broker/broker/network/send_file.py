"""Writing a response frame in parts: its bytes with ``send``, file regions with ``sendfile``.

Why by hand: Trio's ``SocketStream.send_all`` takes bytes, and a Fetch response's records would
have to be read into memory and copied into the frame first. A ``FileRegion`` instead goes from
the page cache to the socket without passing through Python: ``os.sendfile`` on the connection's
non-blocking socket as far as the socket buffer takes it, then ``wait_writable`` and on (partial
sends, EAGAIN), as Kafka's ``FileRecords.writeTo`` does with ``transferTo``. The bytes before a
region go with ``MSG_MORE``, so a response header is not pushed in a packet of its own.

Only a plain socket gets regions (``RequestContext.sendfile``); a region handed to any other
stream is read and sent as bytes, so nothing breaks if one slips through.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence

import trio

from ..storage import FileRegion

__all__ = ["send_bytes", "send_parts"]

_MSG_MORE = getattr(socket, "MSG_MORE", 0)


async def send_parts(stream: trio.abc.Stream, parts: Sequence[bytes | FileRegion]) -> int:
    """Send ``parts`` in order on ``stream``; return how many bytes went by ``sendfile``.

    A region whose file ends before its last byte (the log was truncated under it) raises
    ``OSError``: the frame cannot be finished, so the connection must be closed.
    """
    if not isinstance(stream, trio.SocketStream):
        for part in parts:
            await stream.send_all(part.read() if isinstance(part, FileRegion) else part)
        return 0
    sock = stream.socket
    by_sendfile = 0
    last = len(parts) - 1
    for i, part in enumerate(parts):
        if isinstance(part, FileRegion):
            await _sendfile(sock, part)
            by_sendfile += part.size
        elif part:
            await _send(sock, part, _MSG_MORE if i < last and parts[i + 1] else 0)
    return by_sendfile


async def send_bytes(stream: trio.abc.Stream, data: bytes) -> None:
    """``stream.send_all(data)``, without a pass of the event loop when a plain socket takes
    the whole frame at once (a small response nearly always): Trio's ``send_all`` yields after
    every successful ``send``, and per small request that pass costs as much as the request.
    The caller yields elsewhere (its next ``receive_some``, or between pipelined requests)."""
    if type(stream) is trio.SocketStream:
        try:
            sent = os.write(stream.socket.fileno(), data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:  # as SocketStream.send_all reports a peer that went away
            raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc
        if sent == len(data):
            return
        if sent:
            await stream.send_all(memoryview(data)[sent:])
            return
    await stream.send_all(data)


async def _send(sock: trio.socket.SocketType, data: bytes, flags: int) -> None:
    view = memoryview(data)
    try:
        while view:
            sent = await sock.send(view, flags)
            view = view[sent:]
    except OSError as exc:  # as SocketStream.send_all reports a peer that went away
        raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc


async def _sendfile(sock: trio.socket.SocketType, region: FileRegion) -> None:
    await trio.lowlevel.checkpoint_if_cancelled()
    out = sock.fileno()
    offset, left = region.position, region.size
    while left:
        try:
            sent = os.sendfile(out, region.fd, offset, left)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc
        if not sent:
            raise OSError(f"{region!r}: the file ended {left} bytes early (truncated)")
        offset += sent
        left -= sent
