"""The class-data-sharing archive of a short job's driver JVM: where it lives, when it is
created, used or ignored, and that a damaged one never stops a run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyspark
import pytest

from trio_broker.spark._class_archive import (
    SWITCH,
    WRITER,
    ClassArchive,
    archive_enabled,
    class_archive,
)


def _archive(cache: Path) -> ClassArchive:
    archive = class_archive(cache / "trio-broker")
    assert archive is not None  # Java is installed where the Spark tests run
    return archive


def test_the_archive_is_named_by_the_spark_and_java_versions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    archive = class_archive()
    assert archive is not None
    assert archive.path.parent == tmp_path / "trio-broker"
    assert archive.path.name.startswith(f"spark-{pyspark.__version__}-java-")
    assert archive.path.suffix == ".jsa"
    for off in ("off", "0", "false"):
        monkeypatch.setenv(SWITCH, off)
        assert class_archive() is None


def test_a_switch_neither_on_nor_off_is_a_usage_error_before_spark_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from trio_broker.cli import main as cli_main

    for on in ("on", "1", "yes", ""):
        monkeypatch.setenv(SWITCH, on)
        assert archive_enabled()
    monkeypatch.setenv(SWITCH, "maybe")
    with pytest.raises(ValueError, match=f"{SWITCH}='maybe': expected on or off"):
        class_archive(tmp_path)
    # the broker address is never contacted: the switch is checked with the other settings
    assert cli_main(["export", "--bootstrap-server", "127.0.0.1:9", "--topic", "t", "--out",
                     str(tmp_path / "out")]) == 2
    assert f"{SWITCH}='maybe': expected on or off" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_java_installation_without_a_version_has_no_archive(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))  # no "release" file
    assert class_archive(tmp_path) is None


def test_a_run_without_an_archive_starts_the_writer_and_does_not_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WRITER, raising=False)
    first = _archive(tmp_path)
    assert first.java_options() == ""  # the user's run starts as without the feature
    assert first.missing
    assert not first.creating
    started = time.monotonic()
    writer = first.start_writer([sys.executable, "-c", textwrap.dedent("""
        import os, sys, time
        print(os.environ["_TRIOBROKER_SPARK_ARCHIVE_WRITER"], os.getsid(0) == os.getpid())
        time.sleep(5)
    """)])
    assert writer is not None
    assert time.monotonic() - started < 2  # the run does not wait for the writer
    writer.wait(30)
    # detached (a session of its own) and told to record; its output kept beside the archive
    assert (first.path.parent / "writer.log").read_text().split() == ["1", "True"]
    # while a writer holds the lock, runs start without an archive and start no other writer
    first.lock.touch()
    second = _archive(tmp_path)
    assert second.java_options() == ""
    assert not second.missing
    assert second.start_writer([sys.executable, "-c", "pass"]) is None


def test_the_writer_creates_it_and_later_runs_use_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WRITER, "1")
    first = _archive(tmp_path)
    assert first.java_options() == f"-XX:ArchiveClassesAtExit={first.partial}"
    # while the writer creates it, another starts without an archive
    assert _archive(tmp_path).java_options() == ""
    first.partial.write_bytes(b"archive")
    jvm = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                           stdin=subprocess.PIPE)
    first._publish(jvm)  # what runs at exit: the JVM's stdin closed, its exit waited for
    assert first.path.read_bytes() == b"archive"
    assert not first.partial.exists()
    assert not first.lock.exists()
    later = _archive(tmp_path)
    assert later.java_options() == f"-XX:SharedArchiveFile={later.path}"


def test_an_archive_is_not_published_when_its_jvm_failed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WRITER, "1")
    archive = _archive(tmp_path)
    archive.java_options()
    archive.partial.write_bytes(b"half an arch")
    jvm = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit(1)"],
                           stdin=subprocess.PIPE)
    archive._publish(jvm)
    assert list(archive.path.parent.iterdir()) == []


def test_a_cache_directory_that_cannot_be_made_means_no_archive(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WRITER, "1")
    (tmp_path / "cache").write_text("a file where the cache directory would be")
    archive = _archive(tmp_path / "cache")
    assert archive.java_options() == ""  # the JVM starts as it would without the feature
    assert not archive.creating
    assert not archive.using


def test_a_lock_left_by_a_dead_writer_expires(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WRITER, "1")
    archive = _archive(tmp_path)
    archive.path.parent.mkdir(parents=True)
    archive.lock.touch()
    assert archive.java_options() == ""
    old = time.time() - 3600
    os.utime(archive.lock, (old, old))
    left = archive.path.with_name(archive.path.name + ".12345.tmp")  # the dead writer's
    left.write_bytes(b"half")
    assert archive.java_options().startswith("-XX:ArchiveClassesAtExit=")
    assert not left.exists()


def test_a_jvm_that_fails_to_start_with_the_archive_loses_it(tmp_path: Path) -> None:
    archive = _archive(tmp_path)
    archive.path.parent.mkdir(parents=True)
    archive.path.write_bytes(b"not an archive")
    archive.java_options()
    assert archive.launch_failed()  # the caller retries without it
    assert not archive.path.exists()
    assert not _archive(tmp_path).launch_failed()  # no archive: nothing to retry without


_SESSION = """
import json, os, sys
from trio_broker.spark._session import build_session
spark, log = build_session(master="local[1]", app_name="t", short_job=True, log_dir=sys.argv[1])
jvm = spark.sparkContext._gateway.proc.pid
with open(f"/proc/{jvm}/maps") as f:
    mapped = sorted({line.split()[-1] for line in f if line.rstrip().endswith(".jsa")})
spark.stop()
print(json.dumps(mapped))
"""


def _run_session(tmp_path: Path, name: str) -> list[str]:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop(SWITCH, None)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_SESSION),
                           str(tmp_path / name)], env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    mapped: list[str] = json.loads(done.stdout.splitlines()[-1])
    return mapped


@pytest.mark.slow
def test_real_jvms_use_the_archive_and_survive_a_damaged_one(tmp_path: Path) -> None:
    """The suite stands the JDK's own archive in for one a first run wrote (writing one costs
    a minute or more on a busy 2-core machine); ``make class-archive`` sets CLASS_ARCHIVE_CYCLE
    and runs the whole cycle: a first run starts the writer, which writes it in the background,
    a second run maps it, a truncated one makes the JVM crash and the session starts without
    it."""
    cycle = bool(os.environ.get("CLASS_ARCHIVE_CYCLE"))
    if cycle:
        assert not [p for p in _run_session(tmp_path, "creating") if "trio-broker" in p]
        directory = tmp_path / "cache" / "trio-broker"
        deadline = time.monotonic() + 300  # the writer, in the background, runs an export
        while not list(directory.glob("*.jsa")) or list(directory.glob("*.lock")):
            assert time.monotonic() < deadline, (directory / "writer.log").read_text()[-3000:]
            time.sleep(0.5)
        [archive] = directory.glob("*.jsa")
        assert not list(archive.parent.glob("*.tmp"))
        assert not list(archive.parent.glob("*.lock"))
    else:
        archive = _archive(tmp_path / "cache").path
        archive.parent.mkdir(parents=True)
        java_home = Path(os.environ.get("JAVA_HOME") or Path(shutil.which("java") or "java")
                         .resolve().parent.parent)
        shutil.copy(java_home / "lib" / "server" / "classes.jsa", archive)
    assert str(archive) in _run_session(tmp_path, "using")  # the JVM mapped it
    with open(archive, "r+b") as f:
        f.truncate(archive.stat().st_size // 2)
    assert str(archive) not in _run_session(tmp_path, "damaged")  # the session started
    if cycle:  # a truncated archive of classes made the JVM crash: it was started again
        assert not archive.exists()  # without it, and started the writer again
        # the crash report is written next to the log
        assert list((tmp_path / "damaged").glob("hs_err_pid*.log"))
