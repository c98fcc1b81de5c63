import json
import logging
import uuid
from pathlib import Path

import pytest

from tests.log.log_helpers import SMALL, TS, append
from trio_broker.broker.storage import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    LogConfig,
    LogManager,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    validate_topic_name,
)
from trio_broker.broker.storage.topic_metadata import parse_topic_id, topic_id_str
from trio_broker.protocol.errors import ErrorCode


def _manager(dirs: list[Path], config: LogConfig = SMALL) -> LogManager:
    manager = LogManager(dirs, config)
    manager.load()
    return manager


def test_create_topic_places_partitions_in_least_used_dir(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    manager = _manager(dirs)
    manager.create_topic("orders", 4, {})
    manager.create_topic("events", 2, {})
    counts = {d.name: len([p for p in d.iterdir() if p.name[0] in "oe"]) for d in dirs}
    assert counts == {"a": 2, "b": 2, "c": 2}
    assert manager.topics() == {"orders": 4, "events": 2}
    assert manager.log_dir_of("orders", 0) == dirs[0]
    assert manager.log_dir_of("orders", 1) == dirs[1]
    manager.close()


def test_topics_and_configs_survive_restart(tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    manager.create_topic("t", 2, {"retention.ms": "-1", "cleanup.policy": "compact"})
    log = manager.get_log("t", 1)
    assert log is not None
    append(log, 3)
    manager.close()
    doc = json.loads((tmp_path / "topic-configs" / "t.json").read_text())
    assert doc == {
        "version": 1,
        "topic": "t",
        "topic_id": topic_id_str(manager.topic_id("t")),
        "partitions": 2,
        "configs": {"cleanup.policy": "compact", "retention.ms": "-1"},
        "leader_epochs": [0, 0],
    }
    again = _manager([tmp_path])
    assert again.topics() == {"t": 2}
    assert again.topic_overrides("t") == {"retention.ms": "-1", "cleanup.policy": "compact"}
    assert again.topic_config("t").retention_ms == -1
    log = again.get_log("t", 1)
    assert log is not None
    assert log.log_end_offset == 3
    again.close()


def test_create_topic_errors(tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    manager.create_topic("a.b", 1, {})
    with pytest.raises(TopicAlreadyExistsError) as exists:
        manager.create_topic("a.b", 1, {})
    assert exists.value.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(InvalidTopicError, match="collides"):
        manager.create_topic("a_b", 1, {})
    with pytest.raises(InvalidTopicError, match="illegal"):
        manager.create_topic("bad/name", 1, {})
    with pytest.raises(InvalidPartitionsError):
        manager.create_topic("zero", 0, {})
    with pytest.raises(InvalidConfigError, match=r"retention\.ms") as bad:
        manager.create_topic("cfg", 1, {"retention.ms": "soon"})
    assert bad.value.error_code == ErrorCode.INVALID_CONFIG
    with pytest.raises(InvalidConfigError, match="Unknown topic config name"):
        manager.create_topic("cfg", 1, {"no.such.key": "1"})
    manager.create_topic("dry", 1, {}, validate_only=True)
    assert manager.topics() == {"a.b": 1}
    manager.close()


def test_add_partitions(tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    manager.create_topic("t", 1, {})
    manager.add_partitions("t", 3)
    assert manager.topics() == {"t": 3}
    assert manager.get_log("t", 2) is not None
    with pytest.raises(InvalidPartitionsError, match="currently has 3"):
        manager.add_partitions("t", 2)
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.add_partitions("missing", 2)
    manager.close()
    assert _manager([tmp_path]).topics() == {"t": 3}


def test_delete_topic_removes_data(tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    manager.create_topic("gone", 2, {})
    manager.create_topic("kept", 1, {})
    log = manager.get_log("gone", 0)
    assert log is not None
    append(log, 5)
    manager.delete_topic("gone")
    assert manager.topics() == {"kept": 1}
    assert manager.get_log("gone", 0) is None
    assert not list(tmp_path.glob("gone-*"))
    assert not (tmp_path / "topic-configs" / "gone.json").exists()
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.delete_topic("gone")
    # Re-creating starts from offset 0.
    manager.create_topic("gone", 1, {})
    log = manager.get_log("gone", 0)
    assert log is not None
    assert log.log_end_offset == 0
    manager.close()


def test_a_topic_of_the_longest_valid_name_is_created_kept_and_deleted(tmp_path: Path) -> None:
    """249 characters is valid in Kafka; its config's temporary file and its partitions'
    deletion names (topic plus a suffix) must still fit a file name (found by the fuzzer)."""
    name = "a" * 249
    manager = _manager([tmp_path])
    manager.create_topic(name, 11, {})
    manager.alter_topic_config(name, {"retention.ms": "1000"})
    manager.close()
    manager = _manager([tmp_path])
    assert manager.topics() == {name: 11}
    log = manager.get_log(name, 10)
    assert log is not None
    append(log, 3)
    manager.delete_topic(name)
    assert manager.topics() == {}
    assert not list(tmp_path.glob("a*"))
    manager.close()


def test_interrupted_deletion_is_finished_on_load(tmp_path: Path) -> None:
    leftover = tmp_path / "old-0.0123abcd-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"junk")
    manager = _manager([tmp_path])
    assert not leftover.exists()
    assert manager.topics() == {}
    manager.close()


def test_alter_topic_config(tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    manager.create_topic("t", 1, {"retention.ms": "1000"})
    config = manager.alter_topic_config(
        "t", {"message.timestamp.type": "LogAppendTime"}, incremental=True
    )
    assert config.log_append_time
    assert config.retention_ms == 1000
    log = manager.get_log("t", 0)
    assert log is not None
    assert append(log, now_ms=TS + 7).log_append_time_ms == TS + 7  # applied to the live log
    manager.alter_topic_config("t", {"retention.ms": None}, incremental=True)
    assert manager.topic_overrides("t") == {"message.timestamp.type": "LogAppendTime"}
    manager.alter_topic_config("t", {"segment.bytes": "2048"})  # full replacement
    assert manager.topic_overrides("t") == {"segment.bytes": "2048"}
    with pytest.raises(InvalidConfigError):
        manager.alter_topic_config("t", {"message.timestamp.type": "Never"})
    assert manager.topic_overrides("t") == {"segment.bytes": "2048"}
    manager.close()
    assert _manager([tmp_path]).topic_config("t").segment_bytes == 2048


def test_unreadable_partition_goes_offline_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager = _manager([tmp_path])
    manager.create_topic("t", 3, {})
    manager.close()
    # Garbage where partition 1 should be: a file instead of a directory.
    broken = tmp_path / "t-1"
    for child in broken.iterdir():
        child.unlink()
    broken.rmdir()
    broken.write_bytes(b"garbage")
    # And a segment of partition 2 that cannot be opened (a directory named like a segment).
    (tmp_path / "t-2" / "00000000000000000000.log").unlink()
    (tmp_path / "t-2" / "00000000000000000000.log").mkdir()
    caplog.set_level(logging.ERROR, logger="trio_broker.broker.storage")
    again = _manager([tmp_path])
    assert set(again.offline_partitions) == {("t", 1), ("t", 2)}
    assert ("t", 1) in again.offline_partitions  # membership, as Metadata uses it
    assert again.get_log("t", 0) is not None
    assert again.get_log("t", 1) is None
    assert again.topics() == {"t": 3}
    assert any("Partition t-1 is offline" in r.getMessage() for r in caplog.records)
    again.close()


def test_unreadable_topic_config_keeps_topic_offline(tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    manager.create_topic("t", 2, {"retention.ms": "-1"})
    manager.create_topic("u", 1, {})
    manager.close()
    (tmp_path / "topic-configs" / "t.json").write_text("{broken")
    again = _manager([tmp_path])
    assert set(again.offline_partitions) == {("t", 0), ("t", 1)}
    assert again.get_log("u", 0) is not None
    again.close()


def test_partition_dirs_without_config_are_adopted(tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    manager.create_topic("t", 2, {})
    manager.close()
    (tmp_path / "topic-configs" / "t.json").unlink()
    again = _manager([tmp_path])
    assert again.topics() == {"t": 2}
    assert (tmp_path / "topic-configs" / "t.json").exists()
    again.close()


def test_flush_dirty_and_recovery_point_checkpoint(tmp_path: Path) -> None:
    manager = _manager([tmp_path], LogConfig(flush_interval_messages=5))
    manager.create_topic("t", 2, {})
    log = manager.get_log("t", 0)
    assert log is not None
    append(log, 6)
    assert manager.logs_needing_flush() == [log]
    assert manager.flush_dirty() == 1
    assert log.recovery_point == 6
    lines = (tmp_path / "recovery-point-offset-checkpoint").read_text().split("\n")
    assert lines[:2] == ["0", "2"]
    assert "t 0 6" in lines
    manager.close()


def test_run_retention(tmp_path: Path) -> None:
    manager = _manager([tmp_path], LogConfig(segment_bytes=300, retention_ms=1000))
    manager.create_topic("t", 1, {})
    manager.create_topic("forever", 1, {"retention.ms": "-1"})
    for name in ("t", "forever"):
        log = manager.get_log(name, 0)
        assert log is not None
        for _ in range(5):
            append(log, 1, value=b"x" * 200, ts=TS)
    assert manager.run_retention(TS + 10_000) == 5
    kept = manager.get_log("forever", 0)
    assert kept is not None
    assert kept.log_start_offset == 0
    manager.close()


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("ok-Topic_1.x", None),
        ("", "can't be empty"),
        (".", 'cannot be "." or ".."'),
        ("..", 'cannot be "." or ".."'),
        ("a" * 249, None),
        ("a" * 250, "longer than 249"),
        ("sp ace", "illegal"),
        ("ü", "illegal"),
    ],
)
def test_validate_topic_name(name: str, error: str | None) -> None:
    message = validate_topic_name(name)
    if error is None:
        assert message is None
    else:
        assert message is not None
        assert error in message


def test_topic_ids_are_made_with_the_topic_kept_across_restarts_and_new_after_recreate(
        tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    created = manager.create_topic("t", 2, {})
    other = manager.create_topic("u", 1, {})
    assert isinstance(created, uuid.UUID)
    assert created != other
    assert created.int not in (0, 1)  # Kafka's reserved ids
    assert manager.topic_id("t") == created
    assert manager.topic_name(created) == "t"
    assert manager.topic_ids() == {"t": created, "u": other}
    assert manager.topic_id("missing") is None
    assert manager.topic_name(uuid.uuid4()) is None
    assert manager.create_topic("v", 1, {}, validate_only=True) is None
    assert manager.topic_id("v") is None
    manager.close()

    again = _manager([tmp_path])
    assert again.topic_id("t") == created
    assert again.topic_name(created) == "t"
    again.delete_topic("t")
    assert again.topic_id("t") is None
    assert again.topic_name(created) is None
    recreated = again.create_topic("t", 1, {})
    assert recreated is not None
    assert recreated != created
    assert again.topic_name(recreated) == "t"
    again.close()
    assert _manager([tmp_path]).topic_id("t") == recreated


def test_topic_id_text_form_is_kafkas() -> None:
    topic_id = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
    # Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding
    assert topic_id_str(topic_id) == "a6e4EJ2tEdGAtADAT9QwyA"
    assert parse_topic_id("a6e4EJ2tEdGAtADAT9QwyA") == topic_id
    with pytest.raises(ValueError, match="16 bytes"):
        parse_topic_id("AAAA")


def test_a_topic_file_without_an_id_gets_one_that_then_stays(tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    manager.create_topic("old", 1, {})
    manager.close()
    path = tmp_path / "topic-configs" / "old.json"
    doc = json.loads(path.read_text())
    del doc["topic_id"]  # as written before topic ids existed
    path.write_text(json.dumps(doc))
    first = _manager([tmp_path])
    given = first.topic_id("old")
    assert given is not None
    assert json.loads(path.read_text())["topic_id"] == topic_id_str(given)
    first.close()
    assert _manager([tmp_path]).topic_id("old") == given


def test_an_adopted_topic_gets_a_persistent_id(tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    manager.create_topic("orphan", 1, {})
    manager.close()
    (tmp_path / "topic-configs" / "orphan.json").unlink()
    adopted = _manager([tmp_path])
    topic_id = adopted.topic_id("orphan")
    assert topic_id is not None
    adopted.close()
    assert _manager([tmp_path]).topic_id("orphan") == topic_id
