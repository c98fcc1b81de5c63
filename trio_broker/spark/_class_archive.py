"""A class-data-sharing archive of Spark's classes, so that a short job's JVM starts faster.

Why: a fresh driver JVM loads, parses and verifies over 20,000 classes from Spark's jars before
a short export has read a record. Java's class-data sharing (CDS) keeps the classes one run
loaded in an archive file that later JVMs map into memory instead. Later runs use it
(``-XX:SharedArchiveFile``).

The first run that finds no archive does not make it: it starts as without the feature and, as
it exits, starts the archive's writer (``_archive_writer``) in the background, detached, and
returns. Writing an archive costs more than the short job itself (the JVM records every class it
loads and writes them as it exits, over ten seconds even on an idle machine), and a user's first
export should not wait for it (docs/benchmarks.md, "The first export"). The writer runs a short
export of its own, against a broker it starts for the purpose, in a JVM started with
``-XX:ArchiveClassesAtExit``, so the archive holds the classes an export loads.

The archive lives in the user's cache directory (``$XDG_CACHE_HOME/trio-broker``, by default
``~/.cache/trio-broker``), one per Spark version, Java version and installation of each (a
``.jsa`` file of about 150 MB). It is never in the way of a run:

- the JVM checks the archive against its own version and class path, and ignores one that does
  not match (``Unable to use shared archive`` in Spark's log) and starts as without it;
- an archive is published under its final name only after the JVM that wrote it exited
  cleanly, so a run never sees half a file (a truncated archive makes the JVM crash at start);
  should a JVM still fail to start with an archive, the archive is deleted and the JVM started
  again without it;
- while the writer creates the archive (a lock file next to it), runs start without one and
  start no second writer;
- ``TRIOBROKER_SPARK_CLASS_ARCHIVE=off`` turns it off (not ``TRIO_BROKER_...``: that prefix
  is the broker's configuration, which refuses names it does not know).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

#: the environment variable that turns the archive off ("off", "0", "false", "no") or on
SWITCH = "TRIOBROKER_SPARK_CLASS_ARCHIVE"
_OFF = frozenset({"off", "0", "false", "no"})
_ON = frozenset({"", "on", "1", "true", "yes"})
#: a lock older than this was left by a run that died while creating the archive
STALE_LOCK_SECONDS = 600.0
#: how long a run that creates the archive waits for its JVM to write it
WRITE_TIMEOUT_SECONDS = 300.0
#: set (to any value) in the writer's environment: its run records the archive
WRITER = "_TRIOBROKER_SPARK_ARCHIVE_WRITER"


@dataclass
class ClassArchive:
    """The archive of one Spark and Java installation; ``java_options`` says how a JVM uses
    it and must be called once per JVM launch."""

    path: Path
    creating: bool = field(default=False, init=False)
    using: bool = field(default=False, init=False)
    #: no archive yet: this run starts the writer as it exits
    missing: bool = field(default=False, init=False)

    @property
    def lock(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    @property
    def partial(self) -> Path:
        return self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")

    def java_options(self) -> str:
        """Use the archive if it exists. Else, in the writer, record it (unless another writer
        is doing so); in any other run, start without it and start the writer at exit."""
        self.creating = self.using = self.missing = False
        if self.path.is_file():
            self.using = True
            return f"-XX:SharedArchiveFile={self.path}"
        if WRITER not in os.environ:
            self.missing = not self.lock.exists()
            return ""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not _take_lock(self.lock):
                return ""
        except OSError:
            return ""
        for left in self.path.parent.glob(self.path.name + ".*.tmp"):  # of runs that died
            left.unlink(missing_ok=True)
        self.creating = True
        return f"-XX:ArchiveClassesAtExit={self.partial}"

    def launch_failed(self) -> bool:
        """The JVM did not start: True if the archive may be why (it is deleted then, and the
        caller starts the JVM again without it)."""
        if self.creating:
            self._cleanup()
        if not self.using:
            return False
        self.path.unlink(missing_ok=True)
        return True

    def launched(self, jvm: subprocess.Popen[bytes] | None) -> None:
        """The JVM started; if it is creating the archive, wait for it at this process's exit;
        if there is no archive, start the writer at this process's exit."""
        if self.creating:
            if jvm is None:  # not a JVM this process started: it cannot be waited for
                self._cleanup()
            else:
                atexit.register(self._publish, jvm)
        elif self.missing:
            atexit.register(self.start_writer)

    def start_writer(self, command: list[str] | None = None) -> subprocess.Popen[bytes] | None:
        """Start the archive's writer, detached (its own session, no terminal, its output in
        ``writer.log`` next to the archive), unless one holds the lock; None if none started.
        """
        if self.lock.exists():
            return None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path.parent / "writer.log", "ab") as log:
                return subprocess.Popen(
                    command or [sys.executable, "-m", "trio_broker.spark._archive_writer"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                    env={**os.environ, WRITER: "1"})
        except OSError:
            return None

    def _publish(self, jvm: subprocess.Popen[bytes]) -> None:
        """Let the JVM exit (its stdin closing is its signal), wait while it writes the archive,
        then publish the archive under its final name."""
        try:
            if sys.stderr.isatty():
                print("Saving Spark's classes for a faster start next time (once)...",
                      file=sys.stderr, flush=True)
            if jvm.stdin is not None:
                jvm.stdin.close()
            code = jvm.wait(WRITE_TIMEOUT_SECONDS)
            if code == 0 and self.partial.is_file() and self.partial.stat().st_size > 0:
                os.replace(self.partial, self.path)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            self._cleanup()

    def _cleanup(self) -> None:
        self.creating = False
        self.partial.unlink(missing_ok=True)
        self.lock.unlink(missing_ok=True)


def class_archive(cache_dir: Path | None = None) -> ClassArchive | None:
    """The archive for this machine's Java and Spark, or None when it is turned off or the Java
    installation cannot be identified."""
    if not archive_enabled():
        return None
    java_home = _java_home()
    if java_home is None:
        return None
    java_version = _java_version(java_home)
    if java_version is None:
        return None
    import pyspark

    spark_home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent).resolve()
    where = hashlib.sha256(f"{java_home}\0{spark_home}".encode()).hexdigest()[:12]
    directory = cache_dir or _cache_dir()
    return ClassArchive(
        directory / f"spark-{pyspark.__version__}-java-{java_version}-{where}.jsa")


def archive_enabled() -> bool:
    """Whether ``SWITCH`` leaves the archive on; ValueError naming it for a value that is
    neither on nor off (checked before Spark starts)."""
    value = os.environ.get(SWITCH, "").strip().lower()
    if value not in _OFF | _ON:
        raise ValueError(f"environment variable {SWITCH}={os.environ[SWITCH]!r}: "
                         "expected on or off")
    return value not in _OFF


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trio-broker"


def _java_home() -> Path | None:
    """Where the JVM Spark starts is installed: ``JAVA_HOME``, else ``java`` on the PATH (the
    same rule as Spark's launch scripts)."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"]).resolve()
    java = shutil.which("java")
    if java is None:
        return None
    return Path(java).resolve().parent.parent


def _java_version(java_home: Path) -> str | None:
    """``JAVA_VERSION`` of the installation's ``release`` file (no JVM started to ask)."""
    try:
        text = (java_home / "release").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "JAVA_VERSION":
            return value.strip().strip('"') or None
    return None


def _take_lock(lock: Path) -> bool:
    for _ in range(2):
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return True
        except FileExistsError:
            try:
                if time.time() - lock.stat().st_mtime < STALE_LOCK_SECONDS:
                    return False
                lock.unlink()
            except FileNotFoundError:
                pass
    return False
