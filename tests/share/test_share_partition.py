"""A share-partition's delivery state (``coordinator.share.partition``) over a log of real record
batches, without Trio: acquisition, the four acknowledgement types, lock expiry, the delivery
count limit, the in-flight cap and the all-or-nothing checks of acknowledgement batches."""

from __future__ import annotations

from trio_broker.broker.coordinator.share import RecordState, SharePartition
from trio_broker.protocol.batch import iter_batches
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.records import build_batch

ACCEPT, RELEASE, REJECT, GAP = 1, 2, 3, 0


class FakeLog:
    """Batches of ``batch`` records each, offsets 0..n-1, read as whole batches."""

    def __init__(self, n: int, batch: int = 5) -> None:
        self.data = b"".join(
            build_batch([(None, b"v%d" % o) for o in range(base, min(base + batch, n))],
                        base_offset=base)
            for base in range(0, n, batch))

    def read(self, offset: int, max_bytes: int) -> bytes:
        out = bytearray()
        for pos, h in iter_batches(self.data):
            if h.base_offset + h.last_offset_delta >= offset:
                if out and len(out) + h.size > max_bytes:
                    break
                out += self.data[pos:pos + h.size]
        return bytes(out)


def partition(limit: int = 3, locks: int = 200) -> SharePartition:
    return SharePartition(0, 0, limit, locks)


def test_new_records_are_acquired_once_up_to_max_records() -> None:
    log, sp = FakeLog(12), partition()
    a = sp.acquire("m1", log.read, max_records=7, max_bytes=1 << 20, now=0, lock_s=30)
    # 7 asked: the second batch of five is cut, both batches are sent whole
    assert [tuple(r) for r in a.ranges] == [(0, 6, 1)]
    assert [h.base_offset for _, h in iter_batches(a.records)] == [0, 5]
    b = sp.acquire("m2", log.read, max_records=100, max_bytes=1 << 20, now=0, lock_s=30)
    assert [tuple(r) for r in b.ranges] == [(7, 11, 1)]
    assert not sp.acquire("m3", log.read, max_records=100, max_bytes=1 << 20, now=0,
                          lock_s=30).ranges


def test_accepted_and_rejected_never_come_back_released_do_with_a_higher_count() -> None:
    log, sp = FakeLog(5, batch=5), partition()
    sp.acquire("m1", log.read, max_records=10, max_bytes=1 << 20, now=0, lock_s=30)
    assert sp.acknowledge("m1", [(0, 4, [ACCEPT, RELEASE, REJECT, RELEASE, ACCEPT])]) is None
    again = sp.acquire("m2", log.read, max_records=10, max_bytes=1 << 20, now=1, lock_s=30)
    assert [tuple(r) for r in again.ranges] == [(1, 1, 2), (3, 3, 2)]
    assert sp.start_offset == 1  # 0 accepted; 1 in flight again
    assert sp.acknowledge("m2", [(1, 1, [ACCEPT]), (3, 3, [ACCEPT])]) is None
    assert sp.start_offset == sp.end_offset == 5
    assert not sp.in_flight


def test_released_past_the_delivery_count_limit_is_archived() -> None:
    log, sp = FakeLog(1, batch=1), partition(limit=2)
    for n in (1, 2):
        got = sp.acquire("m", log.read, max_records=1, max_bytes=1 << 20, now=0, lock_s=30)
        assert [tuple(r) for r in got.ranges] == [(0, 0, n)]
        assert sp.acknowledge("m", [(0, 0, [RELEASE])]) is None
    assert not sp.acquire("m", log.read, max_records=1, max_bytes=1 << 20, now=0,
                          lock_s=30).ranges
    assert sp.start_offset == 1


def test_an_expired_lock_releases_the_records_and_fences_the_late_acknowledgement() -> None:
    log, sp = FakeLog(3, batch=3), partition()
    sp.acquire("dead", log.read, max_records=10, max_bytes=1 << 20, now=0, lock_s=2)
    assert not sp.acquire("live", log.read, max_records=10, max_bytes=1 << 20, now=1,
                          lock_s=2).ranges
    got = sp.acquire("live", log.read, max_records=10, max_bytes=1 << 20, now=2, lock_s=2)
    assert [tuple(r) for r in got.ranges] == [(0, 2, 2)]
    assert sp.acknowledge("dead", [(0, 2, [ACCEPT])]) == ErrorCode.INVALID_RECORD_STATE
    assert all(r.member_id == "live" for r in sp.in_flight.values())


def test_bad_acknowledgements_change_nothing() -> None:
    log, sp = FakeLog(10), partition()
    sp.acquire("m", log.read, max_records=5, max_bytes=1 << 20, now=0, lock_s=30)
    before = {o: (r.state, r.delivery_count) for o, r in sp.in_flight.items()}
    cases = {
        "overlapping": ([(0, 2, [ACCEPT]), (2, 3, [ACCEPT])], ErrorCode.INVALID_REQUEST),
        "descending": ([(3, 4, [ACCEPT]), (0, 1, [ACCEPT])], ErrorCode.INVALID_REQUEST),
        "last before first": ([(3, 2, [ACCEPT])], ErrorCode.INVALID_REQUEST),
        "types count": ([(0, 2, [ACCEPT, ACCEPT])], ErrorCode.INVALID_REQUEST),
        "unknown type": ([(0, 0, [9])], ErrorCode.INVALID_REQUEST),
        "not acquired": ([(0, 1, [ACCEPT]), (5, 5, [ACCEPT])], ErrorCode.INVALID_RECORD_STATE),
        "never fetched": ([(50, 60, [ACCEPT])], ErrorCode.INVALID_RECORD_STATE),
    }
    for name, (batches, error) in cases.items():
        assert sp.acknowledge("m", batches) == error, name
        assert sp.acknowledge("other", [(0, 0, [ACCEPT])]) == ErrorCode.INVALID_RECORD_STATE
    assert {o: (r.state, r.delivery_count) for o, r in sp.in_flight.items()} == before


def test_gaps_are_archived_and_a_member_leaving_releases_its_records() -> None:
    log, sp = FakeLog(4, batch=4), partition()
    sp.acquire("m", log.read, max_records=4, max_bytes=1 << 20, now=0, lock_s=30)
    assert sp.acknowledge("m", [(0, 1, [GAP])]) is None
    assert sp.release_member("m") == 2
    assert {o: r.state for o, r in sp.in_flight.items()} == {2: RecordState.AVAILABLE,
                                                              3: RecordState.AVAILABLE}


def test_acquisition_stops_at_the_in_flight_cap() -> None:
    log, sp = FakeLog(20, batch=5), partition(locks=10)
    assert sp.acquire("m", log.read, max_records=100, max_bytes=1 << 20, now=0,
                      lock_s=30).record_count == 10
    assert not sp.acquire("m", log.read, max_records=100, max_bytes=1 << 20, now=0,
                          lock_s=30).ranges
    sp.acknowledge("m", [(0, 4, [ACCEPT])])
    assert sp.acquire("m", log.read, max_records=100, max_bytes=1 << 20, now=0,
                      lock_s=30).record_count == 5


def test_skipped_batches_are_archived_and_acquisition_reads_on() -> None:
    """read_committed: batches the skip predicate names (aborted, control) are archived when
    first reached, never acquired; an acquisition reads past them to the next records."""
    log, sp = FakeLog(15), partition()
    skipped = {0, 5}
    got = sp.acquire("m", log.read, max_records=100, max_bytes=1, now=0, lock_s=30,
                     skip=lambda h: h.base_offset in skipped)
    assert [tuple(r) for r in got.ranges] == [(10, 14, 1)]
    assert [h.base_offset for _, h in iter_batches(got.records)] == [10]
    # 0-9 archived and forgotten: the start offset moved over them
    assert (sp.start_offset, sp.end_offset, sorted(sp.in_flight)) == (10, 15, list(range(10, 15)))


def test_released_records_under_read_committed() -> None:
    """Records acquired before the group turned read_committed and released: past the last
    stable offset they wait (not archived as if the log had lost them); in a batch that is
    skipped now (its transaction aborted) they are archived, the others redelivered."""
    log, sp = FakeLog(10), partition()
    sp.acquire("m", log.read, max_records=100, max_bytes=1 << 20, now=0, lock_s=30)
    assert sp.acknowledge("m", [(0, 9, [RELEASE])]) is None
    waiting = sp.acquire("m", lambda o, b: b"", max_records=100, max_bytes=1 << 20, now=1,
                         lock_s=30, skip=lambda h: False)
    assert waiting.ranges == []
    assert {r.state for r in sp.in_flight.values()} == {RecordState.AVAILABLE}
    again = sp.acquire("m", log.read, max_records=100, max_bytes=1 << 20, now=2, lock_s=30,
                       skip=lambda h: h.base_offset == 0)
    assert [tuple(r) for r in again.ranges] == [(5, 9, 2)]
    assert (sp.start_offset, sorted(sp.in_flight)) == (5, list(range(5, 10)))
