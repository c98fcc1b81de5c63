"""ListTransactions v2's transactional id pattern: a whole-id match with RE2, so a hostile
expression answers at once and leaves the other connections alone; a pattern RE2 refuses, or
one over the length bound, is INVALID_REGULAR_EXPRESSION, as in Kafka 4.1."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from tests.wire import RawClient
from trio_broker.broker.security.patterns import MAX_PATTERN_LENGTH
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.errors import ErrorCode as E

#: with Python's backtracking ``re``, ``(a|a)+`` against one of these takes 2**40 steps
HOSTILE_IDS = ["a" * 40 + "!", "a" * 41 + "!", "a" * 42 + "!"]
MATCHING = "a" * 40
OTHERS = ["b", "aa-b"]


async def _with_transactions(broker) -> RawClient:
    client = await RawClient.connect(broker.host, broker.port)
    for tid in [*HOSTILE_IDS, MATCHING, *OTHERS]:
        r = await client.request(ApiKey.InitProducerId, 4, transactional_id=tid,
                                 transaction_timeout_ms=60_000, producer_id=-1,
                                 producer_epoch=-1)
        assert r.error_code == 0, tid
    return client


def _list_fields(pattern: str | None) -> dict[str, Any]:
    return {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
            "transactional_id_pattern": pattern}


async def _listed(client: RawClient, pattern: str | None) -> tuple[int, list[str]]:
    r = await client.request(ApiKey.ListTransactions, 2, **_list_fields(pattern))
    return r.error_code, sorted(s.transactional_id for s in r.transaction_states)


# The old backtracking matcher held the event loop (and with it this test) for hours: the
# timeout makes that a failure instead of a hang. The bound on the answer is generous, for a
# loaded machine; a backtracking matcher misses it by orders of magnitude.
@pytest.mark.timeout(60)
async def test_a_catastrophic_pattern_answers_at_once_and_stalls_no_one(trio_broker):
    client = await _with_transactions(trio_broker)
    other = await RawClient.connect(trio_broker.host, trio_broker.port)
    answers: dict[str, Any] = {}
    sent = trio.Event()
    start = time.monotonic()

    async def list_them() -> None:
        await client.send(ApiKey.ListTransactions, 2, **_list_fields("(a|a)+"))
        sent.set()
        answers["list"] = (await client.receive(ApiKey.ListTransactions, 2))[1]

    async def metadata() -> None:
        await sent.wait()  # the listing is on its way first
        answers["metadata"] = await other.request(ApiKey.Metadata, 1, topics=[])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(list_them)
        nursery.start_soon(metadata)
    assert time.monotonic() - start < 5
    listing = answers["list"]
    assert listing.error_code == 0
    assert [s.transactional_id for s in listing.transaction_states] == [MATCHING]
    assert answers["metadata"].brokers  # answered, on the other connection
    await other.aclose()
    await client.aclose()


async def test_the_pattern_matches_whole_ids(trio_broker):
    client = await _with_transactions(trio_broker)
    everything = sorted([*HOSTILE_IDS, MATCHING, *OTHERS])
    assert await _listed(client, None) == (0, everything)
    assert await _listed(client, "") == (0, everything)  # empty: no filter, as Kafka
    assert await _listed(client, "a+") == (0, [MATCHING])
    assert await _listed(client, "a") == (0, [])  # no partial matches
    assert await _listed(client, "b|aa-.*") == (0, sorted(OTHERS))
    assert await _listed(client, "a{40}!") == (0, [HOSTILE_IDS[0]])
    await client.aclose()


@pytest.mark.parametrize("pattern", [
    "(unclosed", "t[z-a]",
    "(?=a).*",  # lookahead: Java's regex has it, RE2 (and Kafka's RE2/J) does not
    r"(a)\1",  # a backreference: likewise
    "a" * (MAX_PATTERN_LENGTH + 1),  # over the length bound, though valid
], ids=["unclosed", "bad range", "lookahead", "backreference", "too long"])
async def test_a_refused_pattern_is_invalid_regular_expression(trio_broker, pattern):
    client = await _with_transactions(trio_broker)
    r = await client.request(ApiKey.ListTransactions, 2, **_list_fields(pattern))
    assert r.error_code == E.INVALID_REGULAR_EXPRESSION
    assert r.transaction_states == []
    # the longest accepted expression still compiles and filters
    assert await _listed(client, "a" * MAX_PATTERN_LENGTH) == (0, [])
    await client.aclose()
