"""What creating a topic fsyncs before it is answered, and what waits for the first flush.

Kafka's rule: the topic's record is made durable (here its config file and that file's
directory entry) and the new partition's leader epoch checkpoint is written with an fsync (the
file, then its directory); the log dir's entry for the new partition directory is not synced by
Kafka's ``createLogDirectory``. Here that entry is synced by the partition's first flush (or
clean close), so records made durable by a flush are always findable after a crash.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.log.log_helpers import SMALL, append
from trio_broker.log import LogManager


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths every real fsync of this process syncs, in order (the fsync itself runs)."""
    paths: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    return paths


def _manager(log_dir: Path) -> LogManager:
    manager = LogManager([log_dir], SMALL)
    manager.load()
    return manager


def test_creating_a_topic_syncs_its_record_and_leader_epochs_not_the_log_dir(
        tmp_path: Path, fsynced: list[str]) -> None:
    manager = _manager(tmp_path)
    fsynced.clear()
    manager.create_topic("first", 2, {})
    log_dir = str(tmp_path)
    assert log_dir not in fsynced
    # the topic's record first (before a partition directory exists: a directory found
    # without its topic's file at the next start is adopted with default configs) ...
    configs = tmp_path / "topic-configs"
    assert fsynced[:2] == [str(configs / "first.json.tmp"), str(configs)]
    # ... then each partition's leader epoch checkpoint (the partitions in parallel): 6 in all
    assert sorted(fsynced[2:]) == sorted(
        str(tmp_path / f"first-{p}" / name)
        for p in (0, 1) for name in ("leader-epoch-checkpoint.tmp", ""))

    log = manager.get_log("first", 0)
    assert log is not None
    append(log, 3)
    fsynced.clear()
    log.flush()
    assert log_dir in fsynced  # the new directory's entry, with the first records made durable
    fsynced.clear()
    append(log, 1)
    log.flush()
    assert log_dir not in fsynced  # once is enough
    manager.close()


def test_a_clean_close_syncs_the_entry_of_a_partition_never_flushed(
        tmp_path: Path, fsynced: list[str]) -> None:
    manager = _manager(tmp_path)
    manager.create_topic("quiet", 1, {})
    log = manager.get_log("quiet", 0)
    assert log is not None
    fsynced.clear()
    log.close()
    assert str(tmp_path) in fsynced
    manager.close()


def test_a_partition_directory_lost_before_its_first_flush_comes_back_empty(
        tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    manager.create_topic("lost", 2, {})
    for log in manager.all_logs():
        log.close(flush=False)
    # what a crash could leave when the log dir's entry was never synced: no directory
    shutil.rmtree(tmp_path / "lost-1")
    again = _manager(tmp_path)
    assert again.topics() == {"lost": 2}
    log = again.get_log("lost", 1)
    assert log is not None
    assert log.log_end_offset == 0
    append(log, 2)
    assert log.log_end_offset == 2
    again.close()
