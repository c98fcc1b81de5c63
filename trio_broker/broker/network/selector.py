"""A processor's selector: its idle plain connections, served by one task (Kafka's ``Selector``).

Why: a connection task that waits for its next request costs a pass of Trio's scheduler per
request (its ``wait_readable``, an ``epoll_ctl``, its wake-up and the step back into its
coroutine): with many connections each sending small requests one at a time, that is more than
the request's own work (docs/benchmarks.md, "Scale"). Kafka's processor thread instead polls one
``Selector`` for all its connections and reads every ready one in a single pass. Here a
connection's task *parks* its connection with its processor's selector when the socket has no
more bytes (``park``); one task, the selector's leader, waits for the selector's own epoll to be
readable (one Trio wait for all the parked connections), then, in one pass, reads each ready
connection and answers its requests itself (``Selector.serve``: the inline APIs that
answer at once, written with one ``write``). Anything else wakes the connection's task with
what it needs to go on (``wake``): bytes for a request the selector does not answer, the end
of the stream, an error, an answer that could not be written at once, a request that waits for
its answer. The task does that as it always did, and parks again once its socket is drained
(unless it is alone in its processor: then it waits on its own socket, one wait either way).

Why edge-triggered: a connection stays registered from its first park to its close, and an
edge reports bytes that arrived after the last read, so neither side pays an ``epoll_ctl`` per
request. The rule that makes it safe: a connection is only ever parked after a read found its
socket empty, and the selector leaves it parked only after a read returned less than it asked
for (the socket was empty then; anything later raises a new edge).

Why a leader that can hand over: a request the selector answers almost always answers without
waiting, but one may wait after all (a produce to a log with ``flush.messages``, a metadata
request creating a topic). Its handler's coroutine has then parked the leader's own task, so it
must be finished in that task (``finish_in_this_task``); before that, a new leader takes over
the selector (``hand_over``), so the other parked connections are not held up, and the old
leader ends once it has handed that request's answer to its connection's task.
"""

from __future__ import annotations

import os
import select
import time
import types
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, cast

import outcome
import trio

from .request_channel import NoOpResponse, Request, RequestChannel, Response, SendResponse

if TYPE_CHECKING:
    from ..metrics import BrokerMetrics
    from .connection import Connection

#: whether this platform has an edge-triggered epoll (Linux); elsewhere tasks read as before
AVAILABLE = hasattr(select, "epoll") and hasattr(select, "EPOLLET")
#: the events that say the peer closed its side or the socket failed: the read that found
#: bytes may have come before the end, which raises no new edge, so the task reads on
_CLOSING = (select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR) if AVAILABLE else 0
#: ready connections taken from the epoll per wait; served before the next wait, in batches of
#: ``_PASS`` with a pass of Trio's loop between batches (other tasks run in between)
_MAX_EVENTS, _PASS = 1024, 64
#: bytes asked of a socket per read (a read that fills it leaves the rest to the task)
RECEIVE_SIZE = 65536
#: pipelined frames answered on one connection per pass; the rest is left to its task (which
#: has its own batching and yields)
_SELECT_FRAMES = 16
#: what the selector wakes a connection's task with when it has nothing new for it (the
#: processor stops reading; answers the socket did not take wait in ``unsent``)
GO_ON = -1


class Handover:
    """A request the selector started and the connection's task finishes: its response is
    there to be written (``response``), or will come (``None``: queued or parked)."""

    __slots__ = ("request", "response")

    def __init__(self, request: Request, response: Response | None) -> None:
        self.request = request
        self.response = response


class Selector:
    """The parked connections of one processor, and the leader task that serves them."""

    def __init__(self, *, request_channel: RequestChannel, metrics: BrokerMetrics,
                 parse: Callable[[Connection, bytes], Request],
                 unmute: Callable[[Connection], None]) -> None:
        self._epoll = select.epoll()
        self._channel = request_channel
        self._metrics = metrics
        #: the processor's: a frame's ``Request``, and an answered connection's unmuting
        self._parse = parse
        self._unmute = unmute
        #: set by ``stop_reading``: every parked task woken, nothing more answered here
        self._stopped = False
        #: fd -> (connection, its parked task)
        self._parked: dict[int, tuple[Connection, trio.lowlevel.Task]] = {}
        #: fds whose request a handed-over leader is finishing: their edges are ignored (their
        #: tasks read their sockets once woken)
        self._held: set[int] = set()
        #: (fd, events) reported by the epoll, not yet served
        self._ready: deque[tuple[int, int]] = deque()
        self._registered: set[int] = set()
        self._leader: object | None = None
        self._nursery: trio.Nursery | None = None

    def start(self, nursery: trio.Nursery) -> None:
        """Serve from now on, the leaders in ``nursery``."""
        self._nursery = nursery
        nursery.start_soon(self._lead)

    def close(self) -> None:
        self._epoll.close()

    # -- the connection's task's side -----------------------------------------------------------
    async def park(self, conn: Connection) -> Any:
        """Wait, in the connection's task, until the selector wakes it (its socket was just
        found empty); returns what ``wake`` gave (or raises it)."""
        fd = conn.fd
        if fd not in self._registered:
            self._epoll.register(fd, select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLET)
            self._registered.add(fd)
        self._parked[fd] = (conn, trio.lowlevel.current_task())

        def abort(_: Callable[[], Any]) -> trio.lowlevel.Abort:
            # Cancelled (idle expiry, shutdown): the connection closes, even while a leader
            # finishes its request (whose answer is then dropped, as a parked request's is)
            del self._parked[fd]
            self._held.discard(fd)
            return trio.lowlevel.Abort.SUCCEEDED

        return await trio.lowlevel.wait_task_rescheduled(abort)

    def forget(self, conn: Connection) -> None:
        """The connection closes: stop watching its socket (before the socket is closed)."""
        fd = conn.fd
        if fd in self._registered:
            self._registered.discard(fd)
            try:
                self._epoll.unregister(fd)
            except OSError:  # the socket was closed already
                pass

    # -- the leader's side --------------------------------------------------------------------
    def wake(self, conn: Connection, value: Any) -> None:
        """Hand ``conn`` back to its task with ``value`` (an ``outcome.Error``: raised there);
        nothing if its task is no longer parked (cancelled meanwhile)."""
        entry = self._parked.pop(conn.fd, None)
        self._held.discard(conn.fd)
        if entry is not None:
            trio.lowlevel.reschedule(
                entry[1], value if isinstance(value, outcome.Error) else outcome.Value(value))

    def stop_reading(self) -> None:
        """The processor stops reading: every parked connection goes back to its task (but
        one whose request a leader finishes: that one's task gets its answer first)."""
        self._stopped = True
        for conn, _ in list(self._parked.values()):
            if conn.fd not in self._held:
                self.wake(conn, GO_ON)

    def hand_over(self, conn: Connection) -> None:
        """The current leader is about to wait for ``conn``'s request: a new leader takes the
        selector (``conn``'s edges ignored until the old leader's ``wake``)."""
        self._held.add(conn.fd)
        self._leader = None
        assert self._nursery is not None
        self._nursery.start_soon(self._lead)

    async def _lead(self) -> None:
        me = self._leader = object()
        epoll, ready, parked, held = self._epoll, self._ready, self._parked, self._held
        while True:
            if ready:
                await trio.lowlevel.checkpoint()  # the rest of the last batch: others first
            else:
                await trio.lowlevel.wait_readable(epoll.fileno())
                ready.extend(epoll.poll(0, _MAX_EVENTS))
            for _ in range(min(len(ready), _PASS)):
                fd, events = ready.popleft()
                entry = parked.get(fd)
                if entry is None or fd in held:
                    continue  # its task reads it (to the end, before it parks again)
                await self.serve(entry[0], events)
                if self._leader is not me:  # it waited, and another leader took over
                    return

    async def serve(self, conn: Connection, events: int) -> None:
        """The selector's work on a parked connection whose socket reported ``events``: read
        it, answer the whole requests of the APIs answered without waiting (``batched_keys``,
        with one write), and wake the connection's task for anything else."""
        fd = conn.fd
        try:
            data = os.read(fd, RECEIVE_SIZE)
        except BlockingIOError:
            return  # an edge whose bytes were read before
        except OSError as exc:
            self.wake(conn, outcome.Error(
                trio.BrokenResourceError(f"socket connection broken: {exc}")))
            return
        if not data:
            self.wake(conn, 0)
            return
        self._metrics.bytes_in.inc(len(data))
        decoder = conn.decoder
        # the idle deadline moves once a pass: when a frame starts (within the idle time:
        # slowloris), else with the first answer; the pass's other moves would be to the same
        # moment
        moved = not decoder.buffered
        if moved:
            self._unmute(conn)
        decoder.receive_data(data)
        if len(data) == RECEIVE_SIZE or self._stopped:  # more to read: the task's reads
            self.wake(conn, len(data))
            return
        answered: list[Request] = []
        out: list[bytes] = []
        batched = self._channel.batched_keys
        wake: object = None
        try:
            while len(answered) < _SELECT_FRAMES and decoder.peek_api_key() in batched:
                request = self._parse(conn, cast(bytes, decoder.next_frame()))
                conn.in_flight = request
                coro = self._channel.answer_inline(request)
                try:
                    trap = coro.send(None)
                except StopIteration as done:
                    response = done.value
                else:  # it waits after all: another task leads, this one finishes it
                    if answered:  # written now: the connection may close while it waits
                        self._write(conn, answered, out)
                        answered = []
                    self.hand_over(conn)
                    try:
                        response = await finish_in_this_task(coro, trap)
                    except BaseException as exc:
                        if not isinstance(exc, Exception):  # cancelled: its task goes on,
                            self.wake(conn, GO_ON)  # to meet the same cancellation
                        raise
                    # its task writes the answer, if the connection is still there
                    wake = Handover(request, response)
                    break
                if request.throttle_ms or not isinstance(response, SendResponse | NoOpResponse):
                    wake = Handover(request, response)
                    break
                conn.in_flight = None
                answered.append(request)
                # acks=0: no answer, the request's timings all the same
                out.append(response.data if isinstance(response, SendResponse) else b"")
                if not moved:
                    self._unmute(conn)
                    moved = True
        except Exception as exc:  # raised in the connection's task, as there
            wake = outcome.Error(exc)
        if answered and not self._write(conn, answered, out) and wake is None:
            wake = GO_ON
        if wake is None and (events & _CLOSING or (decoder.buffered
                             and not decoder.partial_frame(RECEIVE_SIZE))):
            wake = GO_ON  # the end of the stream, or a frame the task answers, reads or refuses
        if wake is not None:
            self.wake(conn, wake)

    def _write(self, conn: Connection, requests: list[Request], answers: list[bytes]) -> bool:
        """Write the selector's answers with one ``write``; False when the socket did not
        take them all (the rest is held in ``unsent`` for the connection's task)."""
        data = answers[0] if len(answers) == 1 else b"".join(answers)
        try:
            sent = os.write(conn.fd, data) if data else 0
        except OSError:  # full (BlockingIOError), or the peer is gone: its task finds out
            sent = 0
        metrics = self._metrics
        metrics.bytes_out.inc(sent)
        if sent < len(data):
            conn.unsent.hold(requests, data[sent:])
            return False
        now = time.monotonic_ns()
        record = metrics.request_metrics.record_timings
        for request in requests:
            record(request.header.api_key, request, now)
        return True


@types.coroutine
def finish_in_this_task(coro: Coroutine[Any, Any, Any],
                        trap: Any) -> Generator[Any, Any, Any]:
    """Run on ``coro``, which yielded ``trap`` to the current task's scheduler, as ``await``
    would have: its traps are yielded from this task (whose wake-up they wait for), and what
    the scheduler sends or throws goes to it; returns its result."""
    while True:
        try:
            sent = yield trap
        except BaseException as exc:
            try:
                trap = coro.throw(exc)
            except StopIteration as done:
                return done.value
            continue
        try:
            trap = coro.send(sent)
        except StopIteration as done:
            return done.value


__all__ = ["AVAILABLE", "GO_ON", "RECEIVE_SIZE", "Handover", "Selector", "finish_in_this_task"]
