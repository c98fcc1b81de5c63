"""What creating a topic fsyncs before it is answered, and what waits for the first flush.

The topic's record is made durable before the answer (its config file and that file's directory
entry), as a KRaft controller commits it; the log dir's entry for the new partition directory is
not synced by Kafka's ``createLogDirectory`` either. Here that entry, the new partition's first
leader epoch checkpoint (the file and its directory) are synced by the partition's first flush
(or clean close), so records made durable by a flush are always findable after a crash, with
their epoch. Syncing the checkpoint earlier would buy nothing: until then the directory holding
it may itself be lost, and a partition that loses it comes back in the same state
(``test_a_lost_first_epoch_checkpoint_gives_the_same_epochs``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.log.log_helpers import SMALL, append
from trio_broker.broker.storage import LogManager


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


def test_creating_a_topic_syncs_its_record_only(
        tmp_path: Path, fsynced: list[str]) -> None:
    manager = _manager(tmp_path)
    fsynced.clear()
    manager.create_topic("first", 2, {})
    # the topic's record, before a partition directory exists (a directory found without its
    # topic's file at the next start is adopted with default configs): two fsyncs in all
    configs = tmp_path / "topic-configs"
    assert fsynced == [str(configs / "first.json.tmp"), str(configs)]
    for p in (0, 1):  # the first epoch is written, for a process crash to keep
        assert (tmp_path / f"first-{p}" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"

    log = manager.get_log("first", 0)
    assert log is not None
    append(log, 3)
    fsynced.clear()
    log.flush()
    partition = tmp_path / "first-0"
    # with the first records made durable: the epoch checkpoint before its directory, and the
    # new directory's entry in the log dir
    checkpoint = fsynced.index(str(partition / "leader-epoch-checkpoint"))
    assert checkpoint < fsynced.index(str(partition)) < fsynced.index(str(tmp_path))
    fsynced.clear()
    append(log, 1)
    log.flush()
    assert not {str(tmp_path), str(partition), str(partition / "leader-epoch-checkpoint")} & set(
        fsynced)  # once is enough
    manager.close()


def test_a_lost_first_epoch_checkpoint_gives_the_same_epoch_answers(tmp_path: Path) -> None:
    """A machine crash before a new partition's first flush may lose its checkpoint (with or
    without its directory): the next start answers OffsetForLeaderEpoch as when it is kept."""
    kept, lost = tmp_path / "kept", tmp_path / "lost"
    for log_dir in (kept, lost):
        manager = _manager(log_dir)
        manager.create_topic("t", 1, {})
        log = manager.get_log("t", 0)
        assert log is not None
        append(log, 3)  # records the OS wrote back without a flush
        log.close(flush=False)  # a crash: no clean shutdown
    (lost / "t-0" / "leader-epoch-checkpoint").unlink()
    answers, entries = [], []
    for log_dir in (kept, lost):
        again = _manager(log_dir)
        log = again.get_log("t", 0)
        assert log is not None
        assert log.leader_epoch == 1
        answers.append([log.end_offset_for_epoch(e) for e in (0, 1, 2)])
        entries.append([tuple(e) for e in log.epochs.entries])
        again.close()
    assert answers[0] == answers[1] == [(0, 3), (1, 3), (-1, -1)]
    # only the ``0 0`` entry is gone (ListOffsets' earliest epoch is then -1, "unknown")
    assert entries == [[(0, 0), (1, 3)], [(1, 3)]]


def test_a_clean_close_syncs_the_entry_of_a_partition_never_flushed(
        tmp_path: Path, fsynced: list[str]) -> None:
    manager = _manager(tmp_path)
    manager.create_topic("quiet", 1, {})
    log = manager.get_log("quiet", 0)
    assert log is not None
    fsynced.clear()
    log.close()
    assert str(tmp_path) in fsynced
    assert str(tmp_path / "quiet-0" / "leader-epoch-checkpoint") in fsynced
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


def test_a_new_partition_is_its_segment_files_and_its_epoch_checkpoint(tmp_path: Path) -> None:
    """Before the creation is answered: the directory, the segment's files (Kafka's layout:
    the indexes exist from the start) and the epoch checkpoint, written whole in place (no temp
    file); a partition crashed before any flush loads as before."""
    manager = _manager(tmp_path)
    manager.create_topic("t", 2, {})
    for p in (0, 1):
        assert sorted(os.listdir(tmp_path / f"t-{p}")) == [
            "00000000000000000000.index", "00000000000000000000.log",
            "00000000000000000000.timeindex", "leader-epoch-checkpoint"]
    log = manager.get_log("t", 0)
    assert log is not None
    append(log, 3)
    log.close(flush=False)  # never flushed: a crash
    again = _manager(tmp_path)
    reopened = again.get_log("t", 0)
    assert reopened is not None
    assert reopened.log_end_offset == 3
    assert reopened.epochs.entries == [(0, 0), (1, 3)]
    again.close()
