"""Writing a response frame in parts: its bytes with ``send``, file regions with ``sendfile``.

Why by hand: Trio's ``SocketStream.send_all`` takes bytes, and a Fetch response's records would
have to be read into memory and copied into the frame first. A ``FileRegion`` instead goes from
the page cache to the socket without passing through Python: ``os.sendfile`` on the connection's
non-blocking socket as far as the socket buffer takes it, then ``wait_writable`` and on (partial
sends, EAGAIN), as Kafka's ``FileRecords.writeTo`` does with ``transferTo``. The socket is corked
(``TCP_CORK``) while the parts are written, so neither the response header before a region nor
the few bytes after it (a flexible version's tagged fields) go in a packet of their own. The
parts are written without a pass of the event loop unless the socket buffer is full: the
connection's task yields at its next receive.

Only a plain socket gets regions (``RequestContext.sendfile``); a region handed to any other
stream is read and sent as bytes, so nothing breaks if one slips through.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence

import trio

from ..log import FileRegion

__all__ = ["send_bytes", "send_parts"]

#: Linux: hold partial packets while the parts are written (0 elsewhere: each part is pushed)
_TCP_CORK: int = getattr(socket, "TCP_CORK", 0)


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
    out = sock.fileno()
    by_sendfile = 0
    # the parts leave in full packets; uncorking pushes the last one (TCP only)
    corked = bool(_TCP_CORK) and sock.family != socket.AF_UNIX
    if corked:
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_CORK, 1)
    try:
        for part in parts:
            if isinstance(part, FileRegion):
                await _sendfile(sock, part)
                by_sendfile += part.size
            elif part:
                await _write(sock, out, part)
    finally:
        if corked:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, _TCP_CORK, 0)
            except OSError:
                pass  # the connection is gone; its error was raised above
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


async def _write(sock: trio.socket.SocketType, out: int, data: bytes) -> None:
    """``data`` on the non-blocking socket, waiting only while its buffer is full: no pass of
    the event loop when the bytes are taken at once (a response's header and tail always),
    where Trio's ``sock.send`` yields after every call."""
    view = memoryview(data)
    while view:
        try:
            sent = os.write(out, view)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        except OSError as exc:  # as SocketStream.send_all reports a peer that went away
            raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc
        view = view[sent:]


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
