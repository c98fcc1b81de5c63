"""The Trio ShareConsumer's delivery rate against a broker in the same Trio loop.

Run: ``.venv/bin/python bench/bench_share_consumer.py [--records 50000] [--rounds 2]``. Not
part of the test suite. Each round: a fresh broker (``open_broker``, the test defaults) in a
temporary directory, one topic of one partition holding ``--records`` records of 100 bytes, a
group whose share-partitions start at the earliest offset, and one ``ShareConsumer`` reading
every record, in implicit acknowledgement mode and then in explicit mode (each record accepted
with ``acknowledge``). The time runs from entering the consumer's block (joining included) to
leaving it (the last acknowledgements and the leave included); the share-partition's start
offset is checked to have reached the end (every record accepted). Figures go to
docs/benchmarks.md ("Share groups").
"""

from __future__ import annotations

import argparse
import tempfile
import time

import trio

from trio_broker.broker.lifecycle import open_broker
from trio_broker.client import AcknowledgeType, ShareConsumer, open_producer
from trio_broker.testing import TEST_DEFAULTS


async def one_run(records: int, mode: str) -> float:
    with tempfile.TemporaryDirectory() as data:
        async with open_broker(**{**TEST_DEFAULTS, "log_dirs": data}) as broker:
            broker.state.logs.create_topic("t", 1, {})
            broker.state.shares.group_configs.alter(
                "g", [("share.auto.offset.reset", "earliest")], validate_only=False)
            async with open_producer(broker.bootstrap_servers) as producer:
                for _ in range(records):
                    await producer.send_soon("t", b"x" * 100)
            started = time.perf_counter()
            seen = 0
            async with ShareConsumer(broker.bootstrap_servers, group_id="g", topics=["t"],
                                     share_acknowledgement_mode=mode) as consumer:
                async for record in consumer:
                    seen += 1
                    if mode == "explicit":
                        await consumer.acknowledge(record, AcknowledgeType.ACCEPT)
                    if seen == records:
                        break
            elapsed = time.perf_counter() - started
            [sp] = broker.state.shares.partitions.values()
            assert sp.start_offset == records, (sp.start_offset, records)
            return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for round_no in range(1, args.rounds + 1):
        for mode in ("implicit", "explicit"):
            elapsed = trio.run(one_run, args.records, mode)
            print(f"round {round_no} {mode:8}: {args.records} records in {elapsed:.2f} s, "
                  f"{args.records / elapsed:,.0f} records/s")


if __name__ == "__main__":
    main()
