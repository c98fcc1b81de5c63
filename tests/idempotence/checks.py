"""The exactly-once checks shared by the real-client tests."""

from __future__ import annotations

import itertools

import attrs

from tests.idempotence.harness import ProxiedBroker, StoredBatch
from tests.idempotence.proxy import ProduceLedger

VALUE_PAD = b"." * 24


def value_of(seq: int) -> bytes:
    """A small value carrying its unique sequence number."""
    return b"%08d:" % seq + VALUE_PAD


def seq_of(value: bytes | None) -> int:
    assert value is not None
    return int(value.split(b":", 1)[0])


@attrs.define
class Outcome:
    records: int
    batches: int
    producer_ids: set[int]
    cuts: int
    cuts_mid_request: int
    cuts_after_request: int
    cuts_mid_response: int
    connections: int
    produce_requests: int
    batches_resent: int
    duplicates_answered: int
    answers_lost: int
    #: error codes of the answers the client never got (45: a late copy from a severed
    #: connection, arriving after the batch had left the five-batch window)
    lost_answer_errors: dict[int, int]

    def summary(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in attrs.asdict(self).items())


def check_exactly_once(harness: ProxiedBroker, topic: str, partitions: int, total: int,
                       delivered: list[tuple[int, int, bytes]]) -> Outcome:
    """Each record exactly once, in order per partition, every delivery report matching the log,
    and every duplicate the broker answered given its original offset."""
    assert len(delivered) == total, f"only {len(delivered)} of {total} reported delivered"
    stored: dict[int, list[StoredBatch]] = {
        p: harness.read_partition(topic, p) for p in range(partitions)}
    at: dict[tuple[int, int], bytes | None] = {}
    seen: list[int] = []
    pids: set[int] = set()
    for p, batches in stored.items():
        seqs = []
        for batch in batches:
            pids.add(batch.producer_id)
            for record in batch.records:
                at[(p, record.offset)] = record.value
                seqs.append(seq_of(record.value))
        assert all(a < b for a, b in itertools.pairwise(seqs)), \
            f"partition {p}: sequence numbers not strictly increasing"
        seen.extend(seqs)
    assert len(seen) == len(set(seen)), f"{len(seen) - len(set(seen))} records stored twice"
    assert sorted(seen) == list(range(total)), "records missing from or foreign to the log"
    for partition, offset, value in delivered:
        assert at.get((partition, offset)) == value, \
            f"delivery report {partition}@{offset} does not match the log"

    proxy = harness.proxy
    assert proxy is not None
    ledger: ProduceLedger = harness.call(lambda: proxy.ledger)
    by_position = {(p, b.producer_id, b.producer_epoch, b.base_sequence): b.base_offset
                   for p, batches in stored.items() for b in batches}
    twice = harness.call(ledger.answered_more_than_once)
    for key, answers in twice.items():
        offsets = {a.base_offset for a in answers}
        assert len(offsets) == 1, f"batch {key} was accepted at offsets {sorted(offsets)}"
    for key, answers in harness.call(lambda: dict(ledger.answers)).items():
        _topic, p, pid, epoch, base_seq, _last = key
        for answer in answers:
            if answer.error_code == 0:
                assert by_position[(p, pid, epoch, base_seq)] == answer.base_offset, \
                    f"batch {key} answered with offset {answer.base_offset}, stored elsewhere"
    bad = harness.call(lambda: ledger.error_codes(delivered=True))
    assert set(bad) <= {0}, f"the client was answered with errors {dict(bad)}"
    return Outcome(
        records=len(seen),
        batches=sum(map(len, stored.values())),
        producer_ids=pids,
        cuts=proxy.cuts,
        cuts_mid_request=proxy.cuts_mid_request,
        cuts_after_request=proxy.cuts_after_request,
        cuts_mid_response=proxy.cuts_mid_response,
        connections=proxy.connections,
        produce_requests=ledger.produce_requests,
        batches_resent=len(harness.call(ledger.resent)),
        duplicates_answered=len(twice),
        answers_lost=harness.call(ledger.lost_answers),
        lost_answer_errors=dict(harness.call(lambda: ledger.error_codes(delivered=False))),
    )
