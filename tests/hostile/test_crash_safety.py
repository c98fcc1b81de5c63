"""kill -9 at a random moment, five times: no acknowledged record lost or duplicated.

A real ``trio-broker serve`` process, a real idempotent confluent-kafka producer that keeps
producing across the kills, checks through a consumer and through the segment files. Runs with
``log.flush.interval.messages=1`` (fsync before every acknowledgement) and with Kafka's default
flush policy, which leaves data in the page cache: a process kill does not lose that, only an
OS crash could (docs/reliability.md). ``bench/crash_soak.py`` runs 50 cycles.
"""

from __future__ import annotations

import pytest

from tests.hostile.crash import run

CYCLES = 5
#: the seed of each policy's kill timings: a failure names it, and the same seed replays it
SEEDS = {"flush-every-message": 0x5EED1, "default-flush": 0x5EED2}


@pytest.mark.parametrize("policy", sorted(SEEDS))
def test_kill_9_loses_and_duplicates_nothing_acknowledged(tmp_path, policy):
    """Each cycle also commits consumer-group offsets just before its kill and reads them back
    after the restart."""
    seed = SEEDS[policy]
    report = run(tmp_path, cycles=CYCLES, flush_every_message=policy == "flush-every-message",
                 seed=seed, min_run_s=0.2, max_run_s=0.8, check_groups=True)
    replay = f"(seed {seed:#x}) {report.summary()}"
    assert report.problems == [], replay
    assert report.cycles == CYCLES, replay
    assert report.acknowledged > CYCLES * 100, replay
    assert min(report.acked_per_cycle) > 0, replay  # every kill interrupted a producing broker
    assert report.failed_deliveries == 0, replay
    # committed group offsets survived every kill
    assert report.group_checks == CYCLES, replay
