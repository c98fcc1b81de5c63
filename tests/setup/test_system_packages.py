"""tools/ensure-system-packages, which `make test` runs first: it finds what is missing, installs
it as root, and otherwise stops with one line saying what to run. The checks run for real (a PATH
without the commands); only the apt-get call is printed instead of run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "tools" / "ensure-system-packages"
ALL = ["python3-venv", "gcc", "python3-dev", "openjdk-17-jre-headless", "kcat", "chromium",
       "fonts-liberation", "curl", "jq"]
BASH = shutil.which("bash") or "/bin/bash"


def run(*args: str, path: str | None = None, as_nobody: bool = False,
        **env: str) -> subprocess.CompletedProcess[str]:
    command = [BASH, str(SCRIPT), *args]
    if as_nobody and os.geteuid() == 0:
        command = [shutil.which("setpriv") or "setpriv", "--reuid=nobody", "--regid=nogroup",
                   "--clear-groups", *command]
    environment = {"PATH": os.environ["PATH"] if path is None else path, **env}
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=60)


def test_a_set_up_machine_calls_no_apt() -> None:
    done = run(ENSURE_PACKAGES_DRY_RUN="1")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_without_the_commands_on_path_every_package_is_installed(tmp_path: Path) -> None:
    done = run(path=str(tmp_path), ENSURE_PACKAGES_DRY_RUN="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "apt-get update -qq",
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq " + " ".join(ALL)]


def test_only_the_missing_packages_are_installed() -> None:
    done = run(ENSURE_PACKAGES_DRY_RUN="1", ENSURE_PACKAGES_PRETEND_MISSING="kcat chromium")
    assert done.stdout.splitlines()[-1] == (
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat chromium")


def test_only_the_named_packages_are_checked(tmp_path: Path) -> None:
    done = run("python3-venv", path=str(tmp_path), ENSURE_PACKAGES_DRY_RUN="1")
    assert done.stdout.splitlines()[-1] == (
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv")


def test_a_user_gets_one_line_with_the_command_to_run() -> None:
    done = run(ENSURE_PACKAGES_AS_USER="1", ENSURE_PACKAGES_PRETEND_MISSING="kcat")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        "missing system packages: kcat; run: sudo apt-get update -qq && "
        "sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat\n")


def test_a_real_non_root_user_is_stopped(tmp_path: Path) -> None:
    done = run(path=str(tmp_path), as_nobody=True)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("missing system packages: " + " ".join(ALL) + "; run: sudo ")
