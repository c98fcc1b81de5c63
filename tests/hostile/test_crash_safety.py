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


#: one fixed seed per policy draws the kill moments, so a failure replays exactly
SEEDS = {"flush-every-message": 9101, "default-flush": 9102}


@pytest.mark.parametrize("policy", sorted(SEEDS))
def test_kill_9_loses_and_duplicates_nothing_acknowledged(tmp_path, policy):
    """Each cycle also commits consumer-group offsets just before its kill and reads them back
    after the restart."""
    report = run(tmp_path, cycles=CYCLES, flush_every_message=policy == "flush-every-message",
                 seed=SEEDS[policy], min_run_s=0.2, max_run_s=0.8, check_groups=True)
    where = f"seed {SEEDS[policy]}: {report.summary()}"
    assert report.problems == [], where
    assert report.cycles == CYCLES
    assert report.acknowledged > CYCLES * 100
    assert min(report.acked_per_cycle) > 0  # every kill interrupted a producing broker
    assert report.failed_deliveries == 0
    # committed group offsets survived every kill
    assert report.group_checks == CYCLES, where
